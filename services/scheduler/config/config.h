// The scheduler's configuration: a KubeSchedulerConfiguration (v1) plus
// Podium's own PodiumConfiguration document (plugin endpoints) in the same
// multi-document YAML file.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "boost/json/object.hpp"

namespace podium::scheduler {

inline constexpr std::string_view kDefaultSchedulerName = "default-scheduler";
inline constexpr std::string_view kDefaultHostEndpointName = "host";
inline constexpr std::string_view kDefaultHostAddress = "unix:///run/podium/host.sock";
// kube-scheduler's MaxWeight for score plugins.
inline constexpr int32_t kMaxPluginWeight = 100;

// Extension point names as they appear under a profile's `plugins:`
// (multiPoint aside), in the order of the cycle.
const std::vector<std::string>& ExtensionPointNames();
// Plugins implemented inside the scheduler: PrioritySort, SchedulingGates, DefaultBinder.
bool IsBuiltinPlugin(std::string_view name);

struct PluginRef {
  std::string name;
  int32_t weight = 0;  // 0 = unset (a score plugin then weighs 1, as in kube).
  bool operator==(const PluginRef&) const = default;
};

struct PluginSetConfig {
  std::vector<PluginRef> enabled;
  std::vector<std::string> disabled;  // "*" = every default plugin at this point.
};

struct ProfileConfig {
  std::string scheduler_name;
  std::optional<int> percentage_of_nodes_to_score;
  // After kube's defaulting: kube's default multiPoint set merged with the
  // user's (enabled entries replace a default in place or are appended,
  // disabled ones drop it, "*" drops every default).
  PluginSetConfig multi_point;
  // Per extension point (keys from ExtensionPointNames()), as the user wrote
  // them; only points the user configured are present. Expanding multiPoint
  // into points is the framework's job (it knows what each plugin implements).
  std::map<std::string, PluginSetConfig> per_point;
  // pluginConfig args by plugin name.
  std::map<std::string, boost::json::object> plugin_args;
  // Scheduling signatures and opportunistic batching (services/scheduler/
  // batching); PodiumConfiguration profiles[].opportunisticBatching.
  bool opportunistic_batching = true;
  // What-if verdicts a signature's full cycle asks per feasible node (1 ..
  // this many more copies of the pod; 0: none); PodiumConfiguration
  // profiles[].whatIfCopies.
  uint32_t what_if_copies = 2;
};

// The most what-if copies a profile may ask for (the C++ SDK's bound too).
inline constexpr int64_t kMaxWhatIfCopies = 8;

enum class FailurePolicy { kFail, kIgnore };

struct PluginEndpointConfig {
  std::string name;
  std::string address;  // unix:///path or host:port.
  FailurePolicy failure_policy = FailurePolicy::kFail;
  absl::Duration timeout = absl::Seconds(1);  // Per request.
  std::vector<std::string> plugins;
};

struct SchedulerConfig {
  int percentage_of_nodes_to_score = 0;  // 0 = adaptive.
  absl::Duration initial_backoff = absl::Seconds(1);
  absl::Duration max_backoff = absl::Seconds(10);
  absl::Duration max_in_unschedulable = absl::Minutes(5);
  std::vector<ProfileConfig> profiles;
  std::vector<PluginEndpointConfig> endpoints;
  // PodiumConfiguration profiles[]: schedulerName -> opportunisticBatching,
  // applied to `profiles` once both documents are read.
  std::map<std::string, bool> batching_by_profile;
  std::map<std::string, uint32_t> what_if_copies_by_profile;  // profiles[].whatIfCopies.

  // The endpoint serving `plugin`, or null (built-ins and unknown names).
  const PluginEndpointConfig* EndpointFor(std::string_view plugin) const;
  // The pluginConfig args of the first profile that uses `plugin`, or null for
  // none (defaults).
  const boost::json::object* ArgsFor(const std::string& plugin) const;

  // The distinct args the profiles that use `plugin` give it (kube-scheduler's
  // pluginConfig is per profile), each with the schedulerNames of those
  // profiles, in profile order. One entry when they all agree. args is null
  // for defaults.
  struct ArgsForProfiles {
    const boost::json::object* args = nullptr;
    std::vector<std::string> scheduler_names;
  };
  std::vector<ArgsForProfiles> ArgsByProfile(const std::string& plugin) const;
};

// kube-scheduler's default multiPoint plugin set, limited to the plugins
// Podium has, in kube's order with its weights.
std::vector<PluginRef> DefaultMultiPointPlugins();
// The default profile and one endpoint "host" at `host_address` serving the
// default out-of-process plugins.
SchedulerConfig DefaultConfig(std::string host_address = std::string(kDefaultHostAddress));

// Parses and validates the file's documents (KubeSchedulerConfiguration,
// PodiumConfiguration; either may be absent). Errors name the field path, e.g.
//   profiles[0].plugins.filter.enabled[1].name: unknown plugin "Fooo"
// Without a PodiumConfiguration the default "host" endpoint at host_address is
// used.
absl::StatusOr<SchedulerConfig> ParseConfig(
    std::string_view yaml, std::string host_address = std::string(kDefaultHostAddress));
absl::StatusOr<SchedulerConfig> LoadConfigFile(
    const std::string& path, std::string host_address = std::string(kDefaultHostAddress));

// --plugin-endpoint=name=address. NotFound if no endpoint has that name.
absl::Status ApplyEndpointOverride(SchedulerConfig& config, std::string_view flag);

}  // namespace podium::scheduler
