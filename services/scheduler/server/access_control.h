// Who may call what on the scheduler's gRPC listeners, checked per call in one
// place: an AuthMetadataProcessor attached to each listener's credentials
// (gRPC runs it on every call before the handler, with the call's metadata,
// its :path, and the connection's verified TLS peer).
//
// Identities come from a bearer token (a Kubernetes static token file:
// `token,user,uid,"group1,group2"`) or a verified mTLS client certificate
// (user = subject CN, groups = subject O, as Kubernetes reads certificates).
//
//   - read-only Admin RPCs, health and reflection: any identity, or no
//     identity on a unix socket (its mode 0600 already limits it to the
//     scheduler's user);
//   - every other Admin RPC (SetSchedulingPaused, MovePodsToActiveQueue,
//     SetLogVerbosity, and
//     any RPC not known to be read-only): an identity in the admin group;
//   - Cluster.Sync: the configured adapter identity only;
//   - anything else: refused.
// No credentials (or a token the file does not know): UNAUTHENTICATED.
// Known but not allowed: PERMISSION_DENIED.
#pragma once

#include <sys/types.h>

#include <ctime>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <grpcpp/security/auth_metadata_processor.h>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace podium::scheduler {

// The AuthContext property AccessControl sets to the caller's user; a call
// without it came with no identity.
inline constexpr char kCallerUserProperty[] = "podium_user";

struct CallerIdentity {
  std::string user;
  std::vector<std::string> groups;
  bool operator==(const CallerIdentity&) const = default;
};

// A Kubernetes static token file (kube-apiserver --token-auth-file): one
// `token,user,uid[,"group1,group2"]` per line; blank lines and lines starting
// with '#' are skipped. Re-read when the file changes (checked on each
// lookup: one stat); a file that no longer parses keeps the tokens read last.
class TokenFile {
 public:
  // Reads `path` now; a bad file is an error naming the line and the field.
  static absl::StatusOr<std::unique_ptr<TokenFile>> Load(const std::string& path);
  // The file's content parsed (for tests and Load).
  static absl::StatusOr<absl::flat_hash_map<std::string, CallerIdentity>> Parse(const std::string& content,
                                                                                const std::string& path);

  // The identity a token stands for, nullopt when the file does not list it.
  std::optional<CallerIdentity> Lookup(const std::string& token);
  // The error of the last reload that failed (OK while the file parses).
  absl::Status last_reload_error() const;

 private:
  struct FileVersion {
    ino_t inode = 0;
    off_t size = 0;
    timespec mtime{};
    bool operator==(const FileVersion& o) const {
      return inode == o.inode && size == o.size && mtime.tv_sec == o.mtime.tv_sec && mtime.tv_nsec == o.mtime.tv_nsec;
    }
  };
  explicit TokenFile(std::string path) : path_(std::move(path)) {}
  absl::Status Reload() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string path_;
  mutable absl::Mutex mu_;
  FileVersion version_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, CallerIdentity> tokens_ ABSL_GUARDED_BY(mu_);
  absl::Status last_error_ ABSL_GUARDED_BY(mu_);
};

struct AccessPolicy {
  std::shared_ptr<TokenFile> tokens;  // Null: bearer tokens are not accepted.
  // Members may call mutating Admin RPCs.
  std::string admin_group = "podium:admins";
  // The only user Cluster.Sync accepts. Empty: no one (on a unix socket, a
  // caller without credentials is then taken as the adapter, as before
  // access control existed).
  std::string adapter_identity;
};

// What kind of call a full method name ("/podium.v1.Admin/ListPlugins") is.
enum class MethodAccess { kRead, kMutate, kClusterSync, kUnknown };
MethodAccess ClassifyMethod(const std::string& path);

// The decision for one call, apart from gRPC (unit-testable): `identity` is
// who the credentials say (nullopt: none given), `local` whether the call
// came over a unix socket.
absl::Status Authorize(const AccessPolicy& policy, const std::string& method,
                       const std::optional<CallerIdentity>& identity, bool local);

// The interceptor: one instance per listener (it knows whether its listener is
// a unix socket). It adds the caller's user to the call's AuthContext as
// property "podium_user".
class AccessControl final : public grpc::AuthMetadataProcessor {
 public:
  AccessControl(AccessPolicy policy, bool local_listener)
      : policy_(std::move(policy)), local_(local_listener) {}

  // Lookups are in memory, plus one stat of the token file.
  bool IsBlocking() const override { return false; }
  grpc::Status Process(const InputMetadata& auth_metadata, grpc::AuthContext* context,
                       OutputMetadata* consumed_auth_metadata, OutputMetadata* response_metadata) override;

 private:
  const AccessPolicy policy_;
  const bool local_;
};

}  // namespace podium::scheduler
