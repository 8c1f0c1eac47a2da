#include "server/listener.h"

#include <sys/stat.h>
#include <sys/types.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"

namespace podium::scheduler {
namespace {

// umask is per process: two servers starting at once must not restore each
// other's.
absl::Mutex umask_mu;

}  // namespace

std::string UnixSocketPath(const std::string& address) {
  if (absl::StartsWith(address, "unix://")) return address.substr(7);
  if (absl::StartsWith(address, "unix:")) return address.substr(5);
  return "";
}

absl::StatusOr<std::unique_ptr<grpc::Server>> StartServer(grpc::ServerBuilder& builder,
                                                          const std::string& address, int* bound_port,
                                                          std::shared_ptr<grpc::ServerCredentials> credentials) {
  if (absl::StartsWith(address, "unix-abstract:")) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cannot listen on ", address,
        ": abstract unix sockets have no file permissions; use unix:///path"));
  }
  int port = 0;
  builder.AddListeningPort(address, credentials ? credentials : grpc::InsecureServerCredentials(), &port);
  const std::string path = UnixSocketPath(address);
  std::unique_ptr<grpc::Server> server;
  {
    absl::MutexLock lock(&umask_mu);
    const mode_t old = path.empty() ? 0 : ::umask(0177);
    server = builder.BuildAndStart();
    if (!path.empty()) ::umask(old);
  }
  if (server == nullptr) return absl::UnavailableError(absl::StrCat("cannot listen on ", address));
  if (!path.empty()) {
    // Belt and braces: whatever the umask did, the socket ends owner-only.
    if (::chmod(path.c_str(), 0600) != 0) {
      const int err = errno;
      server->Shutdown();
      return absl::PermissionDeniedError(
          absl::StrCat("cannot make ", path, " owner-only (0600): ", std::strerror(err)));
    }
  }
  if (bound_port != nullptr) *bound_port = port;
  return server;
}

}  // namespace podium::scheduler
