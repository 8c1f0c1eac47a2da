#include "profiles.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace podium::scheduler {
namespace {

struct Point {
  const char* config_name;
  v1::ExtensionPoint point;
};

// The extension points a configuration may list remote plugins at.
constexpr Point kPoints[] = {
    {"preEnqueue", v1::PRE_ENQUEUE},
    {"preFilter", v1::PRE_FILTER}, {"filter", v1::FILTER},     {"postFilter", v1::POST_FILTER},
    {"preScore", v1::PRE_SCORE},   {"score", v1::SCORE},       {"reserve", v1::RESERVE},
    {"permit", v1::PERMIT},        {"preBind", v1::PRE_BIND},  {"bind", v1::BIND},
    {"postBind", v1::POST_BIND},
};

bool BuiltinImplements(const std::string& name, v1::ExtensionPoint point) {
  return (name == kDefaultBinder && point == v1::BIND) ||
         (name == kSchedulingGates && point == v1::PRE_ENQUEUE);
}

}  // namespace

absl::StatusOr<ProfileSpec> ResolveProfile(const ProfileConfig& profile, size_t index,
                                           int default_percentage,
                                           const absl::flat_hash_map<std::string, ServedPlugin>& served) {
  ProfileSpec spec;
  spec.scheduler_name = profile.scheduler_name;
  spec.percentage_of_nodes_to_score = profile.percentage_of_nodes_to_score.value_or(default_percentage);
  spec.opportunistic_batching = profile.opportunistic_batching;
  spec.what_if_copies = profile.what_if_copies;
  auto implements = [&](const std::string& name, v1::ExtensionPoint point) {
    if (BuiltinImplements(name, point)) return true;
    auto it = served.find(name);
    if (it == served.end()) return false;
    const auto& points = it->second.registration.extension_points();
    return std::find(points.begin(), points.end(), point) != points.end();
  };
  const std::string prefix = absl::StrCat("profiles[", index, "].plugins.");
  for (const Point& p : kPoints) {
    std::vector<PluginRef> list;
    for (const auto& ref : profile.multi_point.enabled) {
      if (implements(ref.name, p.point)) list.push_back(ref);
    }
    auto at = profile.per_point.find(p.config_name);
    if (at != profile.per_point.end()) {
      const PluginSetConfig& set = at->second;
      if (std::find(set.disabled.begin(), set.disabled.end(), "*") != set.disabled.end()) {
        list.clear();
      } else {
        list.erase(std::remove_if(list.begin(), list.end(),
                                  [&](const PluginRef& r) {
                                    return std::find(set.disabled.begin(), set.disabled.end(), r.name) !=
                                           set.disabled.end();
                                  }),
                   list.end());
      }
      for (size_t i = 0; i < set.enabled.size(); ++i) {
        const PluginRef& ref = set.enabled[i];
        if (!implements(ref.name, p.point)) {
          return absl::InvalidArgumentError(absl::StrCat(
              prefix, p.config_name, ".enabled[", i, "].name: plugin \"", ref.name,
              "\" does not implement ", p.config_name,
              served.contains(ref.name) ? "" : " (no connected plugin endpoint serves it)"));
        }
        auto existing = std::find_if(list.begin(), list.end(),
                                     [&](const PluginRef& r) { return r.name == ref.name; });
        if (existing != list.end()) {
          existing->weight = ref.weight;  // The specific point overrides multiPoint.
        } else {
          list.push_back(ref);
        }
      }
    }
    if (!list.empty()) spec.plugins[p.point] = std::move(list);
  }
  if (!spec.plugins.contains(v1::BIND)) {
    return absl::InvalidArgumentError(absl::StrCat(prefix, "bind: at least one bind plugin is required"));
  }
  for (const auto& [point, refs] : spec.plugins) {
    for (const auto& ref : refs) {
      auto it = served.find(ref.name);
      if (it == served.end()) continue;
      spec.processes[ref.name] = it->second.process;
      if (it->second.registration.pod_group_members_only()) spec.pod_group_members_only.insert(ref.name);
      if (it->second.registration.unreserve_only()) spec.unreserve_only.insert(ref.name);
    }
  }
  return spec;
}

}  // namespace podium::scheduler
