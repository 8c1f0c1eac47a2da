// Turns a configured profile into what the framework runs: multiPoint expanded
// with the extension points each plugin registered in its handshake, then the
// per-point enabled/disabled lists applied, as kube-scheduler does.
#pragma once

#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "config/config.h"
#include "framework/framework.h"

namespace podium::scheduler {

struct ServedPlugin {
  PluginProcess* process = nullptr;
  v1::PluginRegistration registration;
};

// `served`: every remote plugin that some endpoint registered. An error names
// the profile and field.
absl::StatusOr<ProfileSpec> ResolveProfile(const ProfileConfig& profile, size_t profile_index,
                                           int default_percentage_of_nodes_to_score,
                                           const absl::flat_hash_map<std::string, ServedPlugin>& served);

}  // namespace podium::scheduler
