#include "admin_client.h"

#include <chrono>
#include <fstream>
#include <tuple>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "cli.h"

namespace podium::ctl {
namespace {

std::chrono::system_clock::time_point Deadline(absl::Duration timeout) {
  return std::chrono::system_clock::now() + absl::ToChronoMilliseconds(timeout);
}

absl::StatusOr<std::string> ReadFile(const std::string& flag, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::InvalidArgumentError(absl::StrCat(flag, ": cannot read ", path));
  std::ostringstream content;
  content << in.rdbuf();
  if (content.str().size() > (1 << 20)) return absl::InvalidArgumentError(absl::StrCat(flag, ": ", path, " is over 1 MiB"));
  return content.str();
}

}  // namespace

absl::StatusOr<AdminClient::Options> AdminClient::OptionsFrom(const Invocation& inv) {
  Options options{.address = inv.address, .timeout = inv.timeout};
  if (!inv.token_file.empty()) {
    auto token = ReadFile(absl::StrCat("--token-file (or $", kTokenFileEnv, ")"), inv.token_file);
    if (!token.ok()) return token.status();
    options.bearer_token = std::string(absl::StripAsciiWhitespace(*token));
    if (options.bearer_token.empty() || options.bearer_token.find_first_of(" \t\r\n") != std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat("--token-file: ", inv.token_file, " must hold one token"));
    }
  }
  // gRPC reads a file that is not PEM as no credentials at all, and the call
  // then fails as if the scheduler were unreachable: check the kind here.
  for (const auto& [flag, path, pem, kind, marker] :
       {std::tuple{"--tls-ca-file", &inv.tls_ca_file, &options.tls_ca_pem, "certificate", "CERTIFICATE-----"},
        std::tuple{"--tls-cert-file", &inv.tls_cert_file, &options.tls_cert_pem, "certificate", "CERTIFICATE-----"},
        std::tuple{"--tls-key-file", &inv.tls_key_file, &options.tls_key_pem, "private key", "PRIVATE KEY-----"}}) {
    if (path->empty()) continue;
    auto content = ReadFile(flag, *path);
    if (!content.ok()) return content.status();
    if (!absl::StrContains(*content, "-----BEGIN ") || !absl::StrContains(*content, marker)) {
      return absl::InvalidArgumentError(
          absl::StrCat(flag, ": ", *path, " is not a PEM ", kind, " (no \"-----BEGIN ...", marker, "\" block)"));
    }
    *pem = std::move(*content);
  }
  if (options.tls_ca_pem.empty() && (!options.tls_cert_pem.empty() || !inv.tls_server_name.empty())) {
    return absl::InvalidArgumentError("--tls-cert-file and --tls-server-name need --tls-ca-file (TLS)");
  }
  options.tls_server_name = inv.tls_server_name;
  return options;
}

AdminClient::AdminClient(Options options) : options_(std::move(options)) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(64 << 20);
  std::shared_ptr<grpc::ChannelCredentials> creds = grpc::InsecureChannelCredentials();
  if (!options_.tls_ca_pem.empty()) {
    creds = grpc::SslCredentials(grpc::SslCredentialsOptions{.pem_root_certs = options_.tls_ca_pem,
                                                             .pem_private_key = options_.tls_key_pem,
                                                             .pem_cert_chain = options_.tls_cert_pem});
    if (!options_.tls_server_name.empty()) args.SetSslTargetNameOverride(options_.tls_server_name);
  }
  channel_ = grpc::CreateCustomChannel(options_.address, creds, args);
  stub_ = v1::Admin::NewStub(channel_);
}

std::unique_ptr<grpc::ClientContext> AdminClient::NewContext() const {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->set_deadline(Deadline(options_.timeout));
  AddCredentials(*ctx);
  return ctx;
}

void AdminClient::AddCredentials(grpc::ClientContext& ctx) const {
  // Plain metadata rather than call credentials: gRPC sends call credentials
  // only over TLS, and a unix socket is plaintext.
  if (!options_.bearer_token.empty()) ctx.AddMetadata("authorization", absl::StrCat("Bearer ", options_.bearer_token));
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
      return absl::UnauthenticatedError(absl::StrCat(
          "the scheduler at ", addr, " refused ", method, ": ", detail,
          options_.bearer_token.empty() ? " (give --token-file or $PODIUM_TOKEN_FILE, or a client certificate)" : ""));
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

absl::StatusOr<v1::SchedulerStatus> AdminClient::GetStatus() {
  v1::GetStatusRequest request;
  return Unary<v1::SchedulerStatus>(
      "GetStatus", [&](grpc::ClientContext* c, auto* r) { return stub_->GetStatus(c, request, r); });
}

absl::StatusOr<v1::SetLogVerbosityResponse> AdminClient::SetLogVerbosity(int verbosity) {
  v1::SetLogVerbosityRequest request;
  request.set_verbosity(verbosity);
  return Unary<v1::SetLogVerbosityResponse>(
      "SetLogVerbosity", [&](grpc::ClientContext* c, auto* r) { return stub_->SetLogVerbosity(c, request, r); });
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

absl::StatusOr<std::unique_ptr<grpc::ClientReaderInterface<v1::DecisionBatch>>> AdminClient::WatchDecisionBatches(
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
  AddCredentials(context);
  return std::unique_ptr<grpc::ClientReaderInterface<v1::DecisionBatch>>(
      stub_->WatchDecisionBatches(&context, request));
}

}  // namespace podium::ctl
