#pragma once

#include <atomic>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/dial/scheduler_dial.h"

namespace podium::sim {

// Everything podium-sim's command line says; nothing reads a flag after this.
struct SimOptions {
  std::vector<std::string> clusters;  // --cluster PATH (repeatable).
  std::string workload;               // --workload basic-500|basic-5000.
  double create_rate = 0;             // --create-rate N pods/s; 0 = at once.
  absl::Duration api_latency = absl::ZeroDuration();
  int api_concurrency = 16;
  absl::Duration settle = absl::Milliseconds(500);
  absl::Duration termination_grace = absl::ZeroDuration();  // --termination-grace.
  // --reconnect-after-deletes: a test fault (0: off).
  int reconnect_after_deletes = 0;
  absl::Duration timeout = absl::Seconds(120);
  bool json = false;   // --output json.
  bool bench = false;  // --bench: watch decisions, summary only.
  bool serve = false;
  bool spawn = false;
  std::string scheduler;  // --scheduler ADDR (without --spawn).
  // --scheduler-token-file, --scheduler-tls-*: the credentials of the dial.
  adapter::SchedulerDialOptions dial;
  std::string scheduler_bin, plugin_host_bin, config;
  std::vector<std::string> plugin_endpoints;
  std::vector<std::string> scheduler_names;
  // --plugin-host-endpoint: the endpoint of the scheduler's configuration that
  // the spawned podium-plugin-host serves (its address is overridden).
  std::string plugin_host_endpoint = "host";
};

// Parses argv; a usage error's message is meant for stderr with the usage text.
absl::StatusOr<SimOptions> ParseSimArgs(int argc, char** argv);
extern const char kSimUsage[];

// Exit codes.
inline constexpr int kExitOk = 0;
inline constexpr int kExitError = 1;
inline constexpr int kExitUsage = 2;
inline constexpr int kExitTimeout = 3;
inline constexpr int kExitSchedulingErrors = 4;  // Some pods' attempts failed with an error.
inline constexpr int kExitInterrupted = 130;

// --spawn attaches the plugin host to the endpoint options.plugin_host_endpoint
// names: the configuration (--config, or the scheduler's default, whose one
// endpoint is "host") must declare it. The error says how to fix it.
absl::Status CheckSpawnEndpoint(const SimOptions& options);

// Runs the simulation; `stop` turns true on SIGINT/SIGTERM.
int RunSim(const SimOptions& options, const std::atomic<bool>& stop);

}  // namespace podium::sim
