#include "common/dial/scheduler_dial.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include <grpcpp/security/tls_certificate_provider.h>
#include <grpcpp/security/tls_certificate_verifier.h>
#include <grpcpp/security/tls_credentials_options.h>
#include <grpcpp/support/client_interceptor.h>

#include "common/tls/pem_file.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace podium::adapter {
namespace {

constexpr size_t kMaxTokenBytes = 64 << 10;

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> TlsCredentialsFor(const SchedulerDialOptions& o) {
  if (!o.tls()) {
    if (!o.tls_cert_file.empty() || !o.tls_key_file.empty() || !o.tls_server_name.empty()) {
      return absl::InvalidArgumentError(
          "--scheduler-tls-cert-file, --scheduler-tls-key-file and --scheduler-tls-server-name need "
          "--scheduler-tls-ca-file (TLS)");
    }
    return grpc::InsecureChannelCredentials();
  }
  if (o.tls_cert_file.empty() != o.tls_key_file.empty()) {
    return absl::InvalidArgumentError("--scheduler-tls-cert-file and --scheduler-tls-key-file go together");
  }
  if (o.tls_reload_seconds < 1) {
    return absl::InvalidArgumentError("--scheduler-tls-reload-seconds: at least 1");
  }
  for (const auto& [flag, path] : {std::pair{"--scheduler-tls-ca-file", &o.tls_ca_file},
                                   std::pair{"--scheduler-tls-cert-file", &o.tls_cert_file},
                                   std::pair{"--scheduler-tls-key-file", &o.tls_key_file}}) {
    if (absl::Status s = tls::CheckPemFile(flag, *path); !s.ok()) return s;
  }
  const auto interval = static_cast<unsigned int>(o.tls_reload_seconds);
  std::shared_ptr<grpc::experimental::CertificateProviderInterface> provider;
  if (o.tls_cert_file.empty()) {
    provider = std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(o.tls_ca_file, interval);
  } else {
    provider = std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(o.tls_key_file, o.tls_cert_file,
                                                                                    o.tls_ca_file, interval);
  }
  grpc::experimental::TlsChannelCredentialsOptions options;
  options.set_certificate_provider(provider);
  options.watch_root_certs();
  if (!o.tls_cert_file.empty()) options.watch_identity_key_cert_pairs();
  options.set_verify_server_certs(true);
  options.set_certificate_verifier(std::make_shared<grpc::experimental::HostNameCertificateVerifier>());
  auto creds = grpc::experimental::TlsCredentials(options);
  if (creds == nullptr) return absl::InternalError("gRPC refused the TLS channel credentials");
  return creds;
}

// Adds the bearer token to every call's initial metadata. Plain metadata, not
// call credentials: gRPC sends call credentials only over TLS, and the
// scheduler's default listener is a (plaintext) unix socket.
class BearerTokenInterceptor final : public grpc::experimental::Interceptor {
 public:
  explicit BearerTokenInterceptor(std::shared_ptr<TokenSource> tokens) : tokens_(std::move(tokens)) {}
  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(grpc::experimental::InterceptionHookPoints::PRE_SEND_INITIAL_METADATA)) {
      methods->GetSendInitialMetadata()->emplace("authorization", absl::StrCat("Bearer ", tokens_->Get()));
    }
    methods->Proceed();
  }

 private:
  std::shared_ptr<TokenSource> tokens_;
};

class BearerTokenFactory final : public grpc::experimental::ClientInterceptorFactoryInterface {
 public:
  explicit BearerTokenFactory(std::shared_ptr<TokenSource> tokens) : tokens_(std::move(tokens)) {}
  grpc::experimental::Interceptor* CreateClientInterceptor(grpc::experimental::ClientRpcInfo*) override {
    return new BearerTokenInterceptor(tokens_);
  }

 private:
  std::shared_ptr<TokenSource> tokens_;
};

}  // namespace

const char kSchedulerDialUsage[] =
    R"(  --scheduler-token-file PATH   bearer token for the scheduler (one token; re-read
                                when the file changes)
  --scheduler-tls-ca-file PATH  dial the scheduler with TLS, verifying it against
                                this CA
  --scheduler-tls-cert-file PATH, --scheduler-tls-key-file PATH
                                client certificate and key (mTLS; the scheduler
                                takes its CN as the caller)
  --scheduler-tls-server-name NAME
                                the name the scheduler's certificate carries
                                (default: the host of the address)
  --scheduler-tls-reload-seconds N
                                how often the certificate files are re-read (60)
)";

bool IsSchedulerDialFlag(const std::string& flag) {
  return flag == "--scheduler-token-file" || flag == "--scheduler-tls-ca-file" ||
         flag == "--scheduler-tls-cert-file" || flag == "--scheduler-tls-key-file" ||
         flag == "--scheduler-tls-server-name" || flag == "--scheduler-tls-reload-seconds";
}

bool ParseSchedulerDialFlag(const std::string& flag, const std::string& value, SchedulerDialOptions& options,
                            absl::Status& error) {
  if (!IsSchedulerDialFlag(flag)) return false;
  error = absl::OkStatus();
  if (flag == "--scheduler-tls-reload-seconds") {
    if (!absl::SimpleAtoi(value, &options.tls_reload_seconds) || options.tls_reload_seconds < 1) {
      error = absl::InvalidArgumentError(absl::StrCat(flag, ": want a number of seconds >= 1, got \"", value, "\""));
    }
    return true;
  }
  if (value.empty()) {
    error = absl::InvalidArgumentError(absl::StrCat(flag, ": empty"));
    return true;
  }
  std::string* target = flag == "--scheduler-token-file"    ? &options.token_file
                        : flag == "--scheduler-tls-ca-file" ? &options.tls_ca_file
                        : flag == "--scheduler-tls-cert-file" ? &options.tls_cert_file
                        : flag == "--scheduler-tls-key-file"  ? &options.tls_key_file
                                                              : &options.tls_server_name;
  *target = value;
  return true;
}

// --- TokenSource ---------------------------------------------------------------

absl::StatusOr<std::shared_ptr<TokenSource>> TokenSource::Load(const std::string& path) {
  std::shared_ptr<TokenSource> source(new TokenSource(path));
  absl::MutexLock lock(&source->mu_);
  if (absl::Status s = source->Reload(); !s.ok()) return s;
  return source;
}

absl::Status TokenSource::Reload() {
  struct stat st {};
  if (::stat(path_.c_str(), &st) != 0) {
    return absl::NotFoundError(absl::StrCat("--scheduler-token-file: ", path_, ": ", std::strerror(errno)));
  }
  const Version version{st.st_ino, st.st_size, st.st_mtim};
  if (version == version_ && !token_.empty()) return absl::OkStatus();
  if (static_cast<size_t>(st.st_size) > kMaxTokenBytes) {
    return absl::InvalidArgumentError(absl::StrCat("--scheduler-token-file: ", path_, ": larger than 64 KiB"));
  }
  std::ifstream in(path_, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("--scheduler-token-file: cannot read ", path_));
  std::ostringstream content;
  content << in.rdbuf();
  const std::string token(absl::StripAsciiWhitespace(content.str()));
  if (token.empty()) return absl::InvalidArgumentError(absl::StrCat("--scheduler-token-file: ", path_, " is empty"));
  for (char c : token) {
    if (absl::ascii_isspace(static_cast<unsigned char>(c)) || !absl::ascii_isprint(static_cast<unsigned char>(c))) {
      return absl::InvalidArgumentError(
          absl::StrCat("--scheduler-token-file: ", path_, " must hold one token (printable, no spaces)"));
    }
  }
  version_ = version;
  token_ = token;
  return absl::OkStatus();
}

std::string TokenSource::Get() {
  absl::MutexLock lock(&mu_);
  // A file being rewritten may be empty for a moment: keep the last token.
  (void)Reload();
  return token_;
}

// --- DialScheduler -------------------------------------------------------------

absl::StatusOr<std::shared_ptr<grpc::Channel>> DialScheduler(const std::string& target,
                                                             const SchedulerDialOptions& options,
                                                             grpc::ChannelArguments args) {
  auto creds = TlsCredentialsFor(options);
  if (!creds.ok()) return creds.status();
  if (options.tls() && !options.tls_server_name.empty()) args.SetSslTargetNameOverride(options.tls_server_name);
  if (options.token_file.empty()) return grpc::CreateCustomChannel(target, *creds, args);
  auto tokens = TokenSource::Load(options.token_file);
  if (!tokens.ok()) return tokens.status();
  std::vector<std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>> interceptors;
  interceptors.push_back(std::make_unique<BearerTokenFactory>(*std::move(tokens)));
  return grpc::experimental::CreateCustomChannelWithInterceptors(target, *creds, args, std::move(interceptors));
}

}  // namespace podium::adapter
