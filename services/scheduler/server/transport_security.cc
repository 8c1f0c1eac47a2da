#include "server/transport_security.h"

#include <grpcpp/security/tls_certificate_provider.h>
#include <grpcpp/security/tls_credentials_options.h>

#include "common/tls/pem_file.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "server/listener.h"

namespace podium::scheduler {
namespace {

absl::Status CheckFiles(const TlsFiles& tls, bool server) {
  if (server && (tls.cert_file.empty() || tls.key_file.empty())) {
    return absl::InvalidArgumentError("TLS on a listener needs both a certificate and a key file");
  }
  if (tls.cert_file.empty() != tls.key_file.empty()) {
    return absl::InvalidArgumentError("a TLS certificate file needs its key file, and the other way round");
  }
  if (tls.reload_interval_seconds < 1) {
    return absl::InvalidArgumentError("the TLS reload interval must be at least 1 second");
  }
  for (const auto& [what, path] : {std::pair{"certificate", &tls.cert_file}, std::pair{"key", &tls.key_file},
                                   std::pair{"CA", &tls.ca_file}}) {
    if (absl::Status s = tls::CheckPemFile(absl::StrCat("TLS ", what, " file"), *path); !s.ok()) return s;
  }
  return absl::OkStatus();
}

std::shared_ptr<grpc::experimental::CertificateProviderInterface> Provider(const TlsFiles& tls) {
  const auto interval = static_cast<unsigned int>(tls.reload_interval_seconds);
  if (tls.cert_file.empty()) {
    return std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(tls.ca_file, interval);
  }
  if (tls.ca_file.empty()) {
    return std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(tls.key_file, tls.cert_file,
                                                                                interval);
  }
  return std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(tls.key_file, tls.cert_file,
                                                                              tls.ca_file, interval);
}

}  // namespace

bool IsLoopbackAddress(const std::string& address) {
  std::string host = address;
  if (absl::StartsWith(host, "dns:///")) host = host.substr(7);
  if (absl::StartsWith(host, "ipv4:")) host = host.substr(5);
  if (absl::StartsWith(host, "ipv6:")) host = host.substr(5);
  if (absl::StartsWith(host, "[")) {
    const size_t end = host.find(']');
    return end != std::string::npos && host.substr(1, end - 1) == "::1";
  }
  host = host.substr(0, host.rfind(':'));
  return host == "localhost" || absl::StartsWith(host, "127.");
}

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> ServerCredentialsFor(const std::string& address,
                                                                              const ListenerSecurity& security) {
  const bool unix_socket = !UnixSocketPath(address).empty();
  std::shared_ptr<grpc::ServerCredentials> creds;
  if (security.tls) {
    if (absl::Status s = CheckFiles(*security.tls, /*server=*/true); !s.ok()) {
      return absl::Status(s.code(), absl::StrCat(address, ": ", s.message()));
    }
    grpc::experimental::TlsServerCredentialsOptions options(Provider(*security.tls));
    options.watch_identity_key_cert_pairs();
    if (!security.tls->ca_file.empty()) {
      options.watch_root_certs();
      // Verified when presented; a caller may come with a token instead, and
      // the interceptor refuses what needs an identity.
      options.set_cert_request_type(GRPC_SSL_REQUEST_CLIENT_CERTIFICATE_AND_VERIFY);
    } else {
      options.set_cert_request_type(GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
    }
    creds = grpc::experimental::TlsServerCredentials(options);
  } else if (!security.access) {
    return grpc::InsecureServerCredentials();
  } else if (unix_socket) {
    creds = grpc::experimental::LocalServerCredentials(UDS);
  } else if (IsLoopbackAddress(address)) {
    creds = grpc::experimental::LocalServerCredentials(LOCAL_TCP);
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "cannot listen on ", address,
        " with access control but without TLS: tokens would cross the network in the clear "
        "(give a certificate and key, or listen on loopback or a unix socket)"));
  }
  if (creds == nullptr) return absl::InternalError(absl::StrCat(address, ": gRPC refused the credentials"));
  if (security.access) {
    creds->SetAuthMetadataProcessor(std::make_shared<AccessControl>(*security.access, unix_socket));
  }
  return creds;
}

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> ChannelCredentialsFor(const std::optional<TlsFiles>& tls) {
  if (!tls) return grpc::InsecureChannelCredentials();
  if (absl::Status s = CheckFiles(*tls, /*server=*/false); !s.ok()) return s;
  grpc::experimental::TlsChannelCredentialsOptions options;
  if (!tls->cert_file.empty() || !tls->ca_file.empty()) {
    options.set_certificate_provider(Provider(*tls));
  }
  if (!tls->ca_file.empty()) options.watch_root_certs();
  if (!tls->cert_file.empty()) options.watch_identity_key_cert_pairs();
  auto creds = grpc::experimental::TlsCredentials(options);
  if (creds == nullptr) return absl::InternalError("gRPC refused the TLS channel credentials");
  return creds;
}

}  // namespace podium::scheduler
