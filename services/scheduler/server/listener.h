// Starting the scheduler's gRPC server so that only the scheduler's own user
// can reach a unix socket: the socket file is created with mode 0600.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "grpcpp/grpcpp.h"

namespace podium::scheduler {

// The file path of a "unix:///path" or "unix:path" address; empty otherwise.
std::string UnixSocketPath(const std::string& address);

// Adds `address` to `builder` and starts the server. A unix socket is created
// owner-only (0600, set by the umask while gRPC binds, then checked); an
// abstract unix socket ("unix-abstract:") is refused, as any local process
// could reach it. `bound_port` receives the TCP port (for host:0).
// `credentials` null: plaintext (grpc::InsecureServerCredentials).
absl::StatusOr<std::unique_ptr<grpc::Server>> StartServer(
    grpc::ServerBuilder& builder, const std::string& address, int* bound_port = nullptr,
    std::shared_ptr<grpc::ServerCredentials> credentials = nullptr);

}  // namespace podium::scheduler
