// A client call made through grpc::GenericStub (raw bytes, any method),
// driven one operation at a time on a completion queue of its own: for tests
// of servers whose methods have no generated stub at hand (grpc.health.v1 in
// the scheduler's and the plugin SDK's servers). Tests that link gRPC only.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"

namespace podium::test_support {

class GenericStreamCall {
 public:
  GenericStreamCall(const std::string& address, const std::string& method,
                    std::chrono::seconds deadline = std::chrono::seconds(20))
      : stub_(grpc::CreateChannel(address, grpc::InsecureChannelCredentials())) {
    context_.set_deadline(std::chrono::system_clock::now() + deadline);
    call_ = stub_.PrepareCall(&context_, method, &cq_);
    call_->StartCall(this);
    started_ = Step();
  }
  ~GenericStreamCall() {
    if (!finished_) {
      context_.TryCancel();
      (void)Finish();
    }
    cq_.Shutdown();
    void* tag = nullptr;
    bool ok = false;
    while (cq_.Next(&tag, &ok)) {
    }
  }
  GenericStreamCall(const GenericStreamCall&) = delete;
  GenericStreamCall& operator=(const GenericStreamCall&) = delete;

  bool started() const { return started_; }
  // The request, then the client's half-close.
  bool WriteLast(const std::string& request) {
    grpc::Slice slice(request);
    call_->WriteLast(grpc::ByteBuffer(&slice, 1), grpc::WriteOptions(), this);
    return Step();
  }
  bool Write(const std::string& request) {
    grpc::Slice slice(request);
    call_->Write(grpc::ByteBuffer(&slice, 1), this);
    return Step();
  }
  bool WritesDone() {
    call_->WritesDone(this);
    return Step();
  }
  // The next answer's bytes; nullopt once the stream ended.
  std::optional<std::string> Read() {
    grpc::ByteBuffer answer;
    call_->Read(&answer, this);
    if (!Step()) return std::nullopt;
    std::vector<grpc::Slice> slices;
    if (!answer.Dump(&slices).ok()) return std::nullopt;
    std::string out;
    for (const grpc::Slice& s : slices) out.append(reinterpret_cast<const char*>(s.begin()), s.size());
    return out;
  }
  void Cancel() { context_.TryCancel(); }
  grpc::Status Finish() {
    grpc::Status status;
    call_->Finish(&status, this);
    (void)Step();
    finished_ = true;
    return status;
  }

 private:
  // One operation is outstanding at a time: its completion, and whether it succeeded.
  bool Step() {
    void* tag = nullptr;
    bool ok = false;
    return cq_.Next(&tag, &ok) && ok;
  }

  grpc::GenericStub stub_;
  grpc::CompletionQueue cq_;
  grpc::ClientContext context_;
  std::unique_ptr<grpc::GenericClientAsyncReaderWriter> call_;
  bool started_ = false;
  bool finished_ = false;
};

}  // namespace podium::test_support
