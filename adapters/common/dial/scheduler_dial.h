// How an adapter (podium-sim, podium-k8s-adapter) dials podium-scheduler's
// Cluster and Admin services with credentials: TLS or mTLS with certificates
// from files (re-read when they change, gRPC's FileWatcherCertificateProvider)
// and/or a bearer token from a file (re-read when it changes, as a projected
// service-account token rotates), sent as "authorization: Bearer TOKEN" on
// every call the channel makes. The scheduler's access control
// (services/scheduler/server/access_control.h) takes the token's user or the
// certificate's CN as the caller and accepts Cluster.Sync only from its
// --adapter-identity.
#pragma once

#include <sys/types.h>

#include <ctime>
#include <memory>
#include <optional>
#include <string>

#include <grpcpp/grpcpp.h>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace podium::adapter {

// The credential flags every adapter takes (same names in each).
struct SchedulerDialOptions {
  std::string token_file = {};       // --scheduler-token-file: one bearer token.
  std::string tls_ca_file = {};      // --scheduler-tls-ca-file: turns TLS on; the CA of the scheduler's certificate.
  std::string tls_cert_file = {};    // --scheduler-tls-cert-file: client certificate (mTLS).
  std::string tls_key_file = {};     // --scheduler-tls-key-file: its private key.
  std::string tls_server_name = {};  // --scheduler-tls-server-name: the name the server certificate must carry.
  int tls_reload_seconds = 60;  // How often the certificate files are checked for a change.

  bool tls() const { return !tls_ca_file.empty(); }
};

// The usage text of the flags (for --help), and the flag parser: true when
// `flag` is one of them (then `value` is stored or the error is set).
extern const char kSchedulerDialUsage[];
bool ParseSchedulerDialFlag(const std::string& flag, const std::string& value, SchedulerDialOptions& options,
                            absl::Status& error);
// Whether `flag` is one of the flags above (it then takes a value).
bool IsSchedulerDialFlag(const std::string& flag);

// A bearer token read from a file, re-read when the file changes (one stat
// per Get). A file that becomes unreadable or empty keeps the token read last.
class TokenSource {
 public:
  // Reads `path` now: an error names the file when it cannot be read or does
  // not hold exactly one token.
  static absl::StatusOr<std::shared_ptr<TokenSource>> Load(const std::string& path);
  std::string Get();

 private:
  struct Version {
    ino_t inode = 0;
    off_t size = 0;
    timespec mtime{};
    bool operator==(const Version& o) const {
      return inode == o.inode && size == o.size && mtime.tv_sec == o.mtime.tv_sec && mtime.tv_nsec == o.mtime.tv_nsec;
    }
  };
  explicit TokenSource(std::string path) : path_(std::move(path)) {}
  absl::Status Reload() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string path_;
  absl::Mutex mu_;
  Version version_ ABSL_GUARDED_BY(mu_);
  std::string token_ ABSL_GUARDED_BY(mu_);
};

// A channel to `target` with `options`' credentials. Files are checked now:
// an error names the flag and the file. `args` are the caller's channel
// arguments (message sizes).
absl::StatusOr<std::shared_ptr<grpc::Channel>> DialScheduler(const std::string& target,
                                                             const SchedulerDialOptions& options,
                                                             grpc::ChannelArguments args = {});

}  // namespace podium::adapter
