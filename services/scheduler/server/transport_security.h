// The credentials of the scheduler's listeners and of its dials to plugins:
// TLS and mTLS with certificates read from files and re-read when they change
// (gRPC's FileWatcherCertificateProvider), and the access-control interceptor
// attached to each listener.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include <grpcpp/security/credentials.h>
#include <grpcpp/security/server_credentials.h>

#include "absl/status/statusor.h"
#include "server/access_control.h"

namespace podium::scheduler {

struct TlsFiles {
  std::string cert_file;  // PEM certificate (chain) this side presents; empty = none (a client without mTLS).
  std::string key_file;   // Its PEM private key.
  // Server: the CA that signs client certificates (mTLS; a client may still
  // come without one and use a token). Client: the CA that signs the server's.
  std::string ca_file;
  // How often the files are checked for a change.
  int reload_interval_seconds = 60;
};

struct ListenerSecurity {
  std::optional<TlsFiles> tls;  // nullopt: plaintext.
  // nullopt: no access control (whoever reaches the listener may call anything).
  std::optional<AccessPolicy> access;
};

// The credentials for a listener at `address`. With access control but no
// TLS, a unix socket and a loopback TCP address use gRPC's local credentials
// (plaintext on the wire, so existing plaintext clients still connect, but the
// interceptor can run); any other TCP address is refused: a token must not
// cross a network in the clear. Files that cannot be read are an error naming
// the file.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> ServerCredentialsFor(const std::string& address,
                                                                              const ListenerSecurity& security);

// The credentials of a dial (to a plugin endpoint): TLS when `tls` is set,
// verifying the server against tls->ca_file (the system roots if empty), and
// presenting tls->cert_file when set (mTLS).
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> ChannelCredentialsFor(const std::optional<TlsFiles>& tls);

// Whether `address` is a TCP address on the loopback interface.
bool IsLoopbackAddress(const std::string& address);

}  // namespace podium::scheduler
