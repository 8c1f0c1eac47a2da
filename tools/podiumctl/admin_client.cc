#include "admin_client.h"

#include <chrono>

#include "absl/strings/str_cat.h"

namespace podium::ctl {
namespace {

std::chrono::system_clock::time_point Deadline(absl::Duration timeout) {
  return std::chrono::system_clock::now() + absl::ToChronoMilliseconds(timeout);
}

}  // namespace

AdminClient::AdminClient(Options options) : options_(std::move(options)) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(64 << 20);
  channel_ = grpc::CreateCustomChannel(options_.address, grpc::InsecureChannelCredentials(), args);
  stub_ = v1::Admin::NewStub(channel_);
}

std::unique_ptr<grpc::ClientContext> AdminClient::NewContext() const {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->set_deadline(Deadline(options_.timeout));
  return ctx;
}

absl::Status AdminClient::Translate(const grpc::Status& status, const std::string& rpc) const {
  const std::string& addr = options_.address;
  const std::string method = absl::StrCat("podium.v1.Admin/", rpc);
  const std::string detail = status.error_message();
  switch (status.error_code()) {
    case grpc::StatusCode::OK: return absl::OkStatus();
    case grpc::StatusCode::UNAVAILABLE:
      return absl::UnavailableError(absl::StrCat("cannot reach the scheduler at ", addr, ": ", detail));
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return absl::DeadlineExceededError(absl::StrCat("cannot reach the scheduler at ", addr, ": no answer to ",
                                                      method, " within ", absl::FormatDuration(options_.timeout),
                                                      " (--timeout)"));
    case grpc::StatusCode::NOT_FOUND: return absl::NotFoundError(detail);
    case grpc::StatusCode::UNIMPLEMENTED:
      return absl::UnimplementedError(absl::StrCat("the server at ", addr, " does not serve ", method,
                                                   " (not a podium-scheduler, or an older one)"));
    case grpc::StatusCode::UNAUTHENTICATED:
      return absl::UnauthenticatedError(absl::StrCat("the scheduler at ", addr, " refused ", method, ": ", detail));
    case grpc::StatusCode::PERMISSION_DENIED:
      return absl::PermissionDeniedError(absl::StrCat("the scheduler at ", addr, " refused ", method, ": ", detail));
    case grpc::StatusCode::INVALID_ARGUMENT:
      return absl::InvalidArgumentError(absl::StrCat(method, ": ", detail));
    default:
      return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                          absl::StrCat(method, " failed at ", addr, ": ", detail));
  }
}

template <typename Response, typename Call>
absl::StatusOr<Response> AdminClient::Unary(const std::string& rpc, Call call) {
  auto ctx = NewContext();
  Response response;
  grpc::Status status = call(ctx.get(), &response);
  if (!status.ok()) return Translate(status, rpc);
  return response;
}

absl::StatusOr<v1::ListQueuedPodsResponse> AdminClient::ListQueuedPods(const v1::ListQueuedPodsRequest& request) {
  return Unary<v1::ListQueuedPodsResponse>(
      "ListQueuedPods", [&](grpc::ClientContext* c, auto* r) { return stub_->ListQueuedPods(c, request, r); });
}

absl::StatusOr<v1::ExplainPodResponse> AdminClient::ExplainPod(const v1::ExplainPodRequest& request) {
  return Unary<v1::ExplainPodResponse>(
      "ExplainPod", [&](grpc::ClientContext* c, auto* r) { return stub_->ExplainPod(c, request, r); });
}

absl::StatusOr<v1::DumpCacheResponse> AdminClient::DumpCache(const v1::DumpCacheRequest& request) {
  return Unary<v1::DumpCacheResponse>(
      "DumpCache", [&](grpc::ClientContext* c, auto* r) { return stub_->DumpCache(c, request, r); });
}

absl::StatusOr<v1::ListPluginsResponse> AdminClient::ListPlugins() {
  v1::ListPluginsRequest request;
  return Unary<v1::ListPluginsResponse>(
      "ListPlugins", [&](grpc::ClientContext* c, auto* r) { return stub_->ListPlugins(c, request, r); });
}

absl::StatusOr<v1::SetSchedulingPausedResponse> AdminClient::SetSchedulingPaused(bool paused) {
  v1::SetSchedulingPausedRequest request;
  request.set_paused(paused);
  return Unary<v1::SetSchedulingPausedResponse>(
      "SetSchedulingPaused", [&](grpc::ClientContext* c, auto* r) { return stub_->SetSchedulingPaused(c, request, r); });
}

absl::StatusOr<v1::MovePodsToActiveQueueResponse> AdminClient::MovePodsToActiveQueue(
    const v1::MovePodsToActiveQueueRequest& request) {
  return Unary<v1::MovePodsToActiveQueueResponse>("MovePodsToActiveQueue", [&](grpc::ClientContext* c, auto* r) {
    return stub_->MovePodsToActiveQueue(c, request, r);
  });
}

absl::StatusOr<std::unique_ptr<grpc::ClientReaderInterface<v1::SchedulingDecision>>> AdminClient::WatchDecisions(
    grpc::ClientContext& context) {
  // Connect first, failing fast on a refused connection as a unary call does.
  const auto deadline = Deadline(options_.timeout);
  for (grpc_connectivity_state state = channel_->GetState(true); state != GRPC_CHANNEL_READY;
       state = channel_->GetState(true)) {
    if (state == GRPC_CHANNEL_TRANSIENT_FAILURE || state == GRPC_CHANNEL_SHUTDOWN) {
      return absl::UnavailableError(
          absl::StrCat("cannot reach the scheduler at ", options_.address, ": connection failed"));
    }
    if (!channel_->WaitForStateChange(state, deadline)) {
      return absl::UnavailableError(absl::StrCat("cannot reach the scheduler at ", options_.address,
                                                 ": not connected within ", absl::FormatDuration(options_.timeout),
                                                 " (--timeout)"));
    }
  }
  v1::WatchDecisionsRequest request;
  return std::unique_ptr<grpc::ClientReaderInterface<v1::SchedulingDecision>>(
      stub_->WatchDecisions(&context, request));
}

}  // namespace podium::ctl
