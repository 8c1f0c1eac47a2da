#pragma once

// grpc.health.v1.Health on an AsyncDriver's server queue, for servers that
// keep every call on that one queue (podium-scheduler, the SDK's plugin
// server). gRPC's default health service (EnableDefaultHealthCheckService)
// uses the callback API, whose two polling threads would poll the same
// sockets and take the poller role from the driver (a futex wake and a
// context switch per event).
//
// Served through an AsyncGenericService, so it also answers every method no
// registered service knows, with UNIMPLEMENTED.
//
// Check answers SERVING for the server as a whole (service ""), NOT_FOUND for
// a named service, as gRPC's default health service does when no service
// status was set; Watch sends the same status once (as SERVICE_UNKNOWN for a
// named service) and keeps the stream open until the client cancels or the
// server shuts down.
//
// Life cycle: Register before BuildAndStart; Start after it (the driver may
// already run); at the end Stop before the queue shuts down (after the
// server's Shutdown, which cancels the open Watch streams), and destroy the
// service only once the driver has drained the queue.

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/wire_format_lite.h"
#include "grpc_support/async_driver.h"
#include "grpcpp/generic/async_generic_service.h"
#include "grpcpp/grpcpp.h"

namespace podium::grpc_support {

class HealthService final {
 public:
  // `server` names the process in the UNIMPLEMENTED answer to unknown methods
  // ("METHOD: not served by SERVER").
  explicit HealthService(std::string server) : server_(std::move(server)) {}
  HealthService(const HealthService&) = delete;
  HealthService& operator=(const HealthService&) = delete;

  void Register(grpc::ServerBuilder& builder) { builder.RegisterAsyncGenericService(&generic_); }

  // After BuildAndStart: asks for the first call on `queue`.
  void Start(grpc::ServerCompletionQueue* queue) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    queue_ = queue;
    AcceptLocked();
  }

  // Starts no more operations; those in flight complete (failed) while the
  // driver drains the queue.
  void Stop() ABSL_LOCKS_EXCLUDED(mu_);

  // Calls requested or open (for tests).
  size_t calls() const ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    return calls_.size();
  }

 private:
  class Call;

  void AcceptLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void OnAccepted() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    AcceptLocked();
  }
  void Forget(Call* call) ABSL_LOCKS_EXCLUDED(mu_);

  const std::string server_;
  grpc::AsyncGenericService generic_;
  mutable absl::Mutex mu_;
  grpc::ServerCompletionQueue* queue_ ABSL_GUARDED_BY(mu_) = nullptr;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  // Every call requested or open, until all its operations have completed.
  absl::flat_hash_map<Call*, std::unique_ptr<Call>> calls_ ABSL_GUARDED_BY(mu_);
};

class HealthService::Call final {
 public:
  explicit Call(HealthService* service) : service_(service) { context_.AsyncNotifyWhenDone(&call_done_); }
  grpc::GenericServerContext* context() { return &context_; }
  grpc::GenericServerAsyncReaderWriter* stream() { return &stream_; }
  Completion* accepted_tag() { return &accepted_; }

  void Stop() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    stopped_ = true;
  }

 private:
  enum class Method { kCheck, kWatch, kOther };

  void OnAccepted(bool ok) ABSL_LOCKS_EXCLUDED(mu_) {
    if (!ok) return Forget();  // The server is shutting down; the call never started.
    service_->OnAccepted();
    bool done = false;
    {
      absl::MutexLock lock(&mu_);
      call_pending_ = true;
      if (!stopped_) {
        if (context_.method() == "/grpc.health.v1.Health/Check") {
          method_ = Method::kCheck;
        } else if (context_.method() == "/grpc.health.v1.Health/Watch") {
          method_ = Method::kWatch;
        }
        if (method_ == Method::kOther) {
          Finish(grpc::Status(grpc::StatusCode::UNIMPLEMENTED,
                              absl::StrCat(context_.method(), ": not served by ", service_->server_)));
        } else {
          pending_ += 1;
          stream_.Read(&request_, &read_);
        }
      }
      done = DoneLocked();
    }
    if (done) Forget();
  }

  void OnRead(bool ok) ABSL_LOCKS_EXCLUDED(mu_) {
    bool done = false;
    {
      absl::MutexLock lock(&mu_);
      pending_ -= 1;
      if (!stopped_) {
        std::string service_name;
        if (!ok || !ParseService(&service_name)) {
          Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                              "grpc.health.v1.HealthCheckRequest: cannot parse"));
        } else if (method_ == Method::kCheck && !service_name.empty()) {
          Finish(grpc::Status(grpc::StatusCode::NOT_FOUND,
                              absl::StrCat("grpc.health.v1.HealthCheckRequest.service: ", service_name,
                                           " is not known (only \"\", the whole server)")));
        } else {
          // HealthCheckResponse{status: SERVING (1) or SERVICE_UNKNOWN (3)}.
          const char answer[] = {0x08, static_cast<char>(service_name.empty() ? 1 : 3)};
          grpc::Slice slice(answer, sizeof answer);
          answer_ = grpc::ByteBuffer(&slice, 1);
          pending_ += 1;
          if (method_ == Method::kCheck) {
            stream_.WriteAndFinish(answer_, grpc::WriteOptions(), grpc::Status::OK, &finished_);
          } else {
            stream_.Write(answer_, &finished_);
          }
        }
      }
      done = DoneLocked();
    }
    if (done) Forget();
  }

  void OnFinished(bool /*ok*/) ABSL_LOCKS_EXCLUDED(mu_) {
    bool done = false;
    {
      absl::MutexLock lock(&mu_);
      pending_ -= 1;
      done = DoneLocked();
    }
    if (done) Forget();
  }

  void OnCallDone(bool /*ok*/) ABSL_LOCKS_EXCLUDED(mu_) {
    bool done = false;
    {
      absl::MutexLock lock(&mu_);
      call_pending_ = false;
      done = DoneLocked();
    }
    if (done) Forget();
  }

  void Finish(const grpc::Status& status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    pending_ += 1;
    stream_.Finish(status, &finished_);
  }

  // HealthCheckRequest.service (field 1); other fields are skipped.
  bool ParseService(std::string* service) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    std::vector<grpc::Slice> slices;
    if (!request_.Dump(&slices).ok()) return false;
    std::string bytes;
    for (const grpc::Slice& slice : slices) {
      bytes.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
    }
    google::protobuf::io::CodedInputStream in(reinterpret_cast<const uint8_t*>(bytes.data()),
                                              static_cast<int>(bytes.size()));
    using google::protobuf::internal::WireFormatLite;
    while (uint32_t tag = in.ReadTag()) {
      if (tag == WireFormatLite::MakeTag(1, WireFormatLite::WIRETYPE_LENGTH_DELIMITED)) {
        if (!WireFormatLite::ReadString(&in, service)) return false;
      } else if (!WireFormatLite::SkipField(&in, tag)) {
        return false;
      }
    }
    return in.ConsumedEntireMessage();
  }

  bool DoneLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (pending_ > 0 || call_pending_ || forgotten_) return false;
    forgotten_ = true;
    return true;
  }

  void Forget() { service_->Forget(this); }

  HealthService* const service_;
  grpc::GenericServerContext context_;
  grpc::GenericServerAsyncReaderWriter stream_{&context_};
  CompletionOf<Call> accepted_{this, &Call::OnAccepted};
  CompletionOf<Call> read_{this, &Call::OnRead};
  CompletionOf<Call> finished_{this, &Call::OnFinished};
  CompletionOf<Call> call_done_{this, &Call::OnCallDone};
  absl::Mutex mu_;
  Method method_ ABSL_GUARDED_BY(mu_) = Method::kOther;
  int pending_ ABSL_GUARDED_BY(mu_) = 0;  // Operations started, not completed.
  bool call_pending_ ABSL_GUARDED_BY(mu_) = false;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  bool forgotten_ ABSL_GUARDED_BY(mu_) = false;
  grpc::ByteBuffer request_ ABSL_GUARDED_BY(mu_);
  grpc::ByteBuffer answer_ ABSL_GUARDED_BY(mu_);
};

inline void HealthService::Stop() {
  absl::MutexLock lock(&mu_);
  stopped_ = true;
  // Lock order: mu_, then a call's. A call is forgotten under mu_ only.
  for (auto& [raw, call] : calls_) call->Stop();
}

inline void HealthService::AcceptLocked() {
  if (stopped_ || queue_ == nullptr) return;
  auto call = std::make_unique<Call>(this);
  Call* raw = call.get();
  calls_.emplace(raw, std::move(call));
  generic_.RequestCall(raw->context(), raw->stream(), queue_, queue_, raw->accepted_tag());
}

inline void HealthService::Forget(Call* call) {
  std::unique_ptr<Call> gone;  // Destroyed after the lock is released.
  absl::MutexLock lock(&mu_);
  auto it = calls_.find(call);
  gone = std::move(it->second);
  calls_.erase(it);
}

}  // namespace podium::grpc_support
