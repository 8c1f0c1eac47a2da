#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace podium::sim {

// grpc.health.v1.Health/Check on `target` (overall server health, service "").
// A server that answers UNIMPLEMENTED is up, only without the health service.
absl::Status CheckHealth(const std::string& target, absl::Duration timeout);

// Peak resident set (VmHWM) of a live process, in MiB.
std::optional<double> PeakRssMb(pid_t pid);

// What a process has cost so far: CPU (user + system, every thread, live or
// exited) and context switches (voluntary + involuntary, summed over its live
// threads). For make bench's per-pod cost per process, which a shared, noisy
// machine disturbs far less than throughput.
struct ProcessCost {
  double cpu_seconds = 0;
  uint64_t context_switches = 0;
};
std::optional<ProcessCost> CostOf(pid_t pid);
// The calling process's own, from getrusage(RUSAGE_SELF).
ProcessCost OwnCost();

struct SpawnOptions {
  std::string scheduler_bin;
  std::string plugin_host_bin;
  std::string config;                          // --config FILE, passed through if set.
  std::vector<std::string> plugin_endpoints;  // Extra NAME=ADDR, passed through.
  std::string plugin_host_endpoint = "host";  // The endpoint the plugin host serves.
  absl::Duration ready_timeout = absl::Seconds(30);
  // Start the scheduler with a token file holding one random token of the
  // group podium:admins, so that podiumctl can make the Admin calls that
  // change the scheduler (refused without credentials); admin_token_file()
  // names the file with the token.
  bool admin_token = false;
};

// Runs podium-plugin-host and podium-scheduler as children on unix sockets in
// a fresh temporary directory, and stops them (SIGTERM, SIGKILL after 5 s).
class Spawner {
 public:
  Spawner() = default;
  Spawner(const Spawner&) = delete;
  Spawner& operator=(const Spawner&) = delete;
  ~Spawner();  // Stop().

  // Starts both and waits until they answer health checks; returns the
  // scheduler's address. On failure, what started is stopped again.
  absl::StatusOr<std::string> Start(const SpawnOptions& options);
  // Records peak RSS, stops the children, removes the directory. Idempotent.
  void Stop();

  // The file holding the Admin token (podiumctl --token-file); empty without
  // SpawnOptions::admin_token.
  const std::string& admin_token_file() const { return admin_token_file_; }
  std::optional<double> scheduler_peak_rss_mb() const { return scheduler_.peak_rss_mb; }
  std::optional<double> plugin_host_peak_rss_mb() const { return host_.peak_rss_mb; }
  std::optional<ProcessCost> scheduler_cost() const { return scheduler_.cost; }
  std::optional<ProcessCost> plugin_host_cost() const { return host_.cost; }

 private:
  struct Child {
    std::string name;
    pid_t pid = -1;
    std::string log;
    std::optional<double> peak_rss_mb;
    std::optional<ProcessCost> cost;  // Just before it was stopped.
  };
  absl::Status Launch(Child& child, const std::vector<std::string>& argv);
  absl::Status WaitHealthy(Child& child, const std::string& target, absl::Duration timeout);
  void StopChild(Child& child);
  absl::StatusOr<std::string> WriteAdminToken();

  std::string dir_;
  std::string admin_token_file_;
  Child host_{"podium-plugin-host", -1, "", std::nullopt, std::nullopt};
  Child scheduler_{"podium-scheduler", -1, "", std::nullopt, std::nullopt};
};

// <dir of this executable>/../../<relative>: the default binaries in the build tree.
std::string BuildTreeBinary(const std::string& relative);

}  // namespace podium::sim
