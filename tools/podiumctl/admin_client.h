// The Admin API as podiumctl sees it: one channel, a deadline per call, and
// gRPC failures turned into absl::Status messages an operator can act on
// ("cannot reach the scheduler at ADDRESS: ...").
#pragma once

#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "podium/v1/admin.grpc.pb.h"

namespace podium::ctl {

struct Invocation;

class AdminClient {
 public:
  struct Options {
    std::string address;  // A gRPC target: unix:///path, host:port.
    absl::Duration timeout = absl::Seconds(5);
    std::string bearer_token;  // Sent as "authorization: Bearer ..." on every call; empty = none.
    // TLS when tls_ca_pem is set: the server's CA, a client certificate (mTLS)
    // and the name the server certificate must carry (empty: the host).
    std::string tls_ca_pem;
    std::string tls_cert_pem;
    std::string tls_key_pem;
    std::string tls_server_name;
  };

  explicit AdminClient(Options options);
  // Options from the command line: reads the token and TLS files. A file that
  // cannot be read, or an empty token, is an InvalidArgument naming it.
  static absl::StatusOr<Options> OptionsFrom(const Invocation& invocation);

  const std::string& address() const { return options_.address; }
  absl::Duration timeout() const { return options_.timeout; }

  absl::StatusOr<v1::ListQueuedPodsResponse> ListQueuedPods(const v1::ListQueuedPodsRequest& request);
  absl::StatusOr<v1::ExplainPodResponse> ExplainPod(const v1::ExplainPodRequest& request);
  absl::StatusOr<v1::DumpCacheResponse> DumpCache(const v1::DumpCacheRequest& request);
  absl::StatusOr<v1::ListPluginsResponse> ListPlugins();
  absl::StatusOr<v1::SetSchedulingPausedResponse> SetSchedulingPaused(bool paused);
  absl::StatusOr<v1::SchedulerStatus> GetStatus();
  absl::StatusOr<v1::SetLogVerbosityResponse> SetLogVerbosity(int verbosity);
  absl::StatusOr<v1::MovePodsToActiveQueueResponse> MovePodsToActiveQueue(
      const v1::MovePodsToActiveQueueRequest& request);

  // The decision stream (WatchDecisionBatches: the decisions made while the
  // scheduler wrote the previous message come together) has no deadline (it
  // runs until cancelled); the connection must come up within the timeout.
  // `context` stays owned by the caller, who may TryCancel it from another
  // thread.
  absl::StatusOr<std::unique_ptr<grpc::ClientReaderInterface<v1::DecisionBatch>>> WatchDecisionBatches(
      grpc::ClientContext& context);

  // The status a call ended with, in an operator's words. Public for the stream's end.
  absl::Status Translate(const grpc::Status& status, const std::string& rpc) const;

 private:
  std::unique_ptr<grpc::ClientContext> NewContext() const;
  void AddCredentials(grpc::ClientContext& ctx) const;
  template <typename Response, typename Call>
  absl::StatusOr<Response> Unary(const std::string& rpc, Call call);

  Options options_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Admin::Stub> stub_;
};

}  // namespace podium::ctl
