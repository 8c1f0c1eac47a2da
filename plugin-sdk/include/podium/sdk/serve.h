// Serve(): puts plugins written against framework.h behind the Plugin.Run
// stream (proto/podium/v1/plugin.proto). A plugin process is:
//
//   int main() {
//     return podium::sdk::Serve({.address = "unix:///run/podium/my.sock",
//                                .process_name = "my-plugins",
//                                .plugins = {{"MyPlugin", &MyPlugin::New}}}).ok() ? 0 : 1;
//   }
//
// Every stream gets its own plugin instances (built from Open's args), its own
// mirror of the cluster (kept from the scheduler's state deltas) and its own
// cycle states. Plugin code runs one message at a time, in the order the
// scheduler sent them: on the server's driver thread (cycle requests) or on
// the stream's worker thread (Open, reset deltas, binding phases, backlog);
// Handle::snapshot() may only be read from those calls, while
// AllowWaitingPod / RejectWaitingPod may be called from any thread.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "podium/sdk/framework.h"

namespace podium::sdk {

// TLS on a TCP address, with PEM files re-read when they change (gRPC's
// FileWatcherCertificateProvider): a new connection gets the new certificate,
// open streams keep theirs. The counterpart of podium-scheduler's
// --plugin-tls-ca-file / --plugin-tls-cert-file / --plugin-tls-key-file.
struct ServeTls {
  std::string cert_file = {};  // Certificate (chain) the server presents.
  std::string key_file = {};   // Its private key.
  // mTLS: every client must present a certificate signed by this CA (the
  // scheduler's --plugin-tls-cert-file); empty = no client certificate asked.
  std::string client_ca_file = {};
  int reload_interval_seconds = 60;  // How often the files are checked.
};

struct ServeOptions {
  // "unix:///abs/path" or "host:port" ("127.0.0.1:0" picks a free port).
  std::string address;
  // Sent in Registration.process_name.
  std::string process_name;
  std::vector<PluginDefinition> plugins;
  // Threads that filter and score one request's nodes (the calling gRPC
  // thread included) when there are many: 0 = the cores the process may run
  // on, at most 16 (serial below 4 cores); 1 = serial. Plugins' Filter and Score must then be safe to call
  // concurrently for different nodes (see plugin-sdk/README.md).
  int parallelism = 0;
  // TLS on a host:port address (nullopt: plaintext). Not on a unix socket:
  // the scheduler dials those in plaintext, their file mode is the guard.
  std::optional<ServeTls> tls = std::nullopt;
};

// The Plugin service on one listening address. Thread-safe.
class PluginServer {
 public:
  explicit PluginServer(ServeOptions options);
  ~PluginServer();  // Shutdown().
  PluginServer(const PluginServer&) = delete;
  PluginServer& operator=(const PluginServer&) = delete;

  // Binds and starts serving, with grpc.health.v1.Health (Check and Watch:
  // SERVING for the server as a whole, service "").
  absl::Status Start();
  // The bound TCP port after Start() (0 for unix sockets).
  int port() const;
  // The address streams can dial after Start(): `address` with a ":0" port
  // replaced by the bound one.
  std::string address() const;
  // Cancels open streams, waits for their workers and removes the unix socket
  // file. Idempotent.
  void Shutdown();
  // Blocks until Shutdown() has completed.
  void Wait();

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

// Starts a PluginServer and blocks until SIGINT or SIGTERM, then shuts down
// gracefully. Blocks both signals in the calling thread (and so in the server's
// threads); call it from main before starting other threads.
absl::Status Serve(ServeOptions options);

}  // namespace podium::sdk
