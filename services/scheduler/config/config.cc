#include "config/config.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <optional>
#include <set>
#include <sstream>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "boost/json/array.hpp"
#include "boost/json/value.hpp"
#include "common/yaml/safe_yaml.h"
#include "yaml-cpp/yaml.h"

namespace podium::scheduler {
namespace {

constexpr char kKubeApiVersion[] = "kubescheduler.config.k8s.io/v1";
constexpr char kKubeKind[] = "KubeSchedulerConfiguration";
constexpr char kPodiumApiVersion[] = "podium.dev/v1alpha1";
constexpr char kPodiumKind[] = "PodiumConfiguration";

// The default out-of-process plugins the plugin host serves.
const std::vector<std::string>& DefaultHostPlugins() {
  static const auto* plugins = new std::vector<std::string>{
      "NodeUnschedulable", "NodeName",         "TaintToleration",
      "NodeAffinity",      "NodePorts",        "NodeResourcesFit",
      "PodTopologySpread", "InterPodAffinity",
      "NodeResourcesBalancedAllocation",       "ImageLocality",
      "Coscheduling"};
  return *plugins;
}

absl::Status Error(std::string_view path, std::string_view message) {
  return absl::InvalidArgumentError(
      absl::StrCat(absl::string_view(path.data(), path.size()), ": ",
                   absl::string_view(message.data(), message.size())));
}

std::string Quote(std::string_view s) { return absl::StrCat("\"", absl::string_view(s.data(), s.size()), "\""); }

std::string Describe(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Null:
      return "null";
    case YAML::NodeType::Scalar:
      return Quote(node.Scalar());
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Map:
      return "a mapping";
    default:
      return "nothing";
  }
}

// ---- typed access to YAML with field paths in errors ----

absl::Status ExpectMap(const YAML::Node& node, std::string_view path) {
  if (!node.IsMap()) return Error(path, absl::StrCat("expected a mapping, got ", Describe(node)));
  return absl::OkStatus();
}

absl::Status ExpectSequence(const YAML::Node& node, std::string_view path) {
  if (!node.IsSequence()) return Error(path, absl::StrCat("expected a list, got ", Describe(node)));
  return absl::OkStatus();
}

// Strict decoding: every key must be known.
absl::Status CheckKeys(const YAML::Node& map, std::string_view path,
                       const std::set<std::string, std::less<>>& allowed) {
  for (const auto& kv : map) {
    if (!kv.first.IsScalar()) return Error(path, "keys must be strings");
    const std::string& key = kv.first.Scalar();
    if (!allowed.contains(key)) {
      return Error(path.empty() ? key : absl::StrCat(absl::string_view(path.data(), path.size()), ".", key),
                   "unknown field");
    }
  }
  return absl::OkStatus();
}

std::string Join(std::string_view path, std::string_view key) {
  absl::string_view p(path.data(), path.size());
  absl::string_view k(key.data(), key.size());
  return p.empty() ? std::string(k) : absl::StrCat(p, ".", k);
}

std::string Index(std::string_view path, size_t i) {
  return absl::StrCat(absl::string_view(path.data(), path.size()), "[", i, "]");
}

bool IsPlain(const YAML::Node& node) { return node.Tag() != "!"; }

absl::StatusOr<std::string> GetString(const YAML::Node& node, std::string_view path) {
  if (!node.IsScalar()) return Error(path, absl::StrCat("expected a string, got ", Describe(node)));
  return node.Scalar();
}

absl::StatusOr<int64_t> GetInt(const YAML::Node& node, std::string_view path) {
  int64_t value = 0;
  if (!node.IsScalar() || !IsPlain(node) || !absl::SimpleAtoi(node.Scalar(), &value)) {
    return Error(path, absl::StrCat("expected an integer, got ", Describe(node)));
  }
  return value;
}

absl::StatusOr<bool> GetBool(const YAML::Node& node, std::string_view path) {
  if (node.IsScalar() && IsPlain(node)) {
    const std::string& v = node.Scalar();
    if (v == "true" || v == "True" || v == "TRUE") return true;
    if (v == "false" || v == "False" || v == "FALSE") return false;
  }
  return Error(path, absl::StrCat("expected true or false, got ", Describe(node)));
}

absl::StatusOr<absl::Duration> GetDuration(const YAML::Node& node, std::string_view path) {
  if (!node.IsScalar()) {
    return Error(path, absl::StrCat("expected a duration such as \"500ms\" or \"2s\", got ",
                                    Describe(node)));
  }
  absl::Duration d;
  const std::string& text = node.Scalar();
  if (!absl::ParseDuration(text, &d) || d == absl::InfiniteDuration() ||
      d == -absl::InfiniteDuration()) {
    return Error(path, absl::StrCat("invalid duration ", Quote(text),
                                    " (expected e.g. \"500ms\", \"2s\", \"1m\")"));
  }
  if (d <= absl::ZeroDuration()) {
    return Error(path, absl::StrCat("duration must be positive, got ", Quote(text)));
  }
  return d;
}

// ---- pluginConfig args: YAML -> JSON ----

bool IsYamlNull(const std::string& s) { return s == "~" || s == "null" || s == "Null" || s == "NULL"; }

std::optional<bool> YamlBool(const std::string& s) {
  if (s == "true" || s == "True" || s == "TRUE") return true;
  if (s == "false" || s == "False" || s == "FALSE") return false;
  return std::nullopt;
}

bool LooksNumeric(const std::string& s) {
  // Digits with optional sign, point and exponent; absl's parsers alone would
  // also take "inf"/"nan", which YAML spells ".inf"/".nan".
  if (s.empty()) return false;
  for (char c : s) {
    if (!(std::isdigit(static_cast<unsigned char>(c)) || c == '-' || c == '+' || c == '.' ||
          c == 'e' || c == 'E')) {
      return false;
    }
  }
  return std::any_of(s.begin(), s.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
}

absl::StatusOr<boost::json::value> ToJson(const YAML::Node& node, std::string_view path) {
  switch (node.Type()) {
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined:
      return boost::json::value(nullptr);
    case YAML::NodeType::Scalar: {
      const std::string& s = node.Scalar();
      if (!IsPlain(node)) return boost::json::value(s);  // Quoted: always a string.
      if (IsYamlNull(s)) return boost::json::value(nullptr);
      if (auto b = YamlBool(s)) return boost::json::value(*b);
      if (LooksNumeric(s)) {
        int64_t i;
        if (absl::SimpleAtoi(s, &i)) return boost::json::value(i);
        double d;
        if (absl::SimpleAtod(s, &d)) return boost::json::value(d);
      }
      return boost::json::value(s);
    }
    case YAML::NodeType::Sequence: {
      boost::json::array array;
      for (size_t i = 0; i < node.size(); ++i) {
        absl::StatusOr<boost::json::value> v = ToJson(node[i], Index(path, i));
        if (!v.ok()) return v.status();
        array.push_back(std::move(*v));
      }
      return boost::json::value(std::move(array));
    }
    case YAML::NodeType::Map: {
      boost::json::object object;
      for (const auto& kv : node) {
        if (!kv.first.IsScalar()) return Error(path, "keys must be strings");
        absl::StatusOr<boost::json::value> v = ToJson(kv.second, Join(path, kv.first.Scalar()));
        if (!v.ok()) return v.status();
        object[kv.first.Scalar()] = std::move(*v);
      }
      return boost::json::value(std::move(object));
    }
  }
  return Error(path, "unsupported YAML node");
}

// ---- KubeSchedulerConfiguration ----

// What the user wrote for one profile, before defaulting.
struct RawProfile {
  ProfileConfig profile;                     // per_point, args, name, percentage.
  std::optional<PluginSetConfig> multi_point;  // As written.
};

struct RawKubeConfig {
  std::vector<RawProfile> profiles;
};

absl::StatusOr<PluginSetConfig> ParsePluginSet(const YAML::Node& node, const std::string& path) {
  PluginSetConfig set;
  if (node.IsNull()) return set;
  if (absl::Status s = ExpectMap(node, path); !s.ok()) return s;
  if (absl::Status s = CheckKeys(node, path, {"enabled", "disabled"}); !s.ok()) return s;
  if (const YAML::Node enabled = node["enabled"]; enabled && !enabled.IsNull()) {
    const std::string epath = Join(path, "enabled");
    if (absl::Status s = ExpectSequence(enabled, epath); !s.ok()) return s;
    for (size_t i = 0; i < enabled.size(); ++i) {
      const std::string ipath = Index(epath, i);
      const YAML::Node p = enabled[i];
      if (absl::Status s = ExpectMap(p, ipath); !s.ok()) return s;
      if (absl::Status s = CheckKeys(p, ipath, {"name", "weight"}); !s.ok()) return s;
      PluginRef ref;
      if (!p["name"]) return Error(Join(ipath, "name"), "required");
      absl::StatusOr<std::string> name = GetString(p["name"], Join(ipath, "name"));
      if (!name.ok()) return name.status();
      if (name->empty()) return Error(Join(ipath, "name"), "must not be empty");
      ref.name = *name;
      if (p["weight"]) {
        absl::StatusOr<int64_t> w = GetInt(p["weight"], Join(ipath, "weight"));
        if (!w.ok()) return w.status();
        if (*w < 0 || *w > kMaxPluginWeight) {
          return Error(Join(ipath, "weight"), absl::StrCat("must be in 0..", kMaxPluginWeight,
                                                           ", got ", *w));
        }
        ref.weight = static_cast<int32_t>(*w);
      }
      set.enabled.push_back(std::move(ref));
    }
  }
  if (const YAML::Node disabled = node["disabled"]; disabled && !disabled.IsNull()) {
    const std::string dpath = Join(path, "disabled");
    if (absl::Status s = ExpectSequence(disabled, dpath); !s.ok()) return s;
    for (size_t i = 0; i < disabled.size(); ++i) {
      const std::string ipath = Index(dpath, i);
      const YAML::Node p = disabled[i];
      if (absl::Status s = ExpectMap(p, ipath); !s.ok()) return s;
      if (absl::Status s = CheckKeys(p, ipath, {"name", "weight"}); !s.ok()) return s;
      if (!p["name"]) return Error(Join(ipath, "name"), "required");
      absl::StatusOr<std::string> name = GetString(p["name"], Join(ipath, "name"));
      if (!name.ok()) return name.status();
      set.disabled.push_back(*name);
    }
  }
  return set;
}

absl::StatusOr<RawProfile> ParseProfile(const YAML::Node& node, const std::string& path) {
  RawProfile raw;
  ProfileConfig& p = raw.profile;
  if (absl::Status s = ExpectMap(node, path); !s.ok()) return s;
  if (absl::Status s = CheckKeys(node, path, {"schedulerName", "percentageOfNodesToScore",
                                              "plugins", "pluginConfig"});
      !s.ok()) {
    return s;
  }
  if (const YAML::Node n = node["schedulerName"]; n && !n.IsNull()) {
    absl::StatusOr<std::string> name = GetString(n, Join(path, "schedulerName"));
    if (!name.ok()) return name.status();
    p.scheduler_name = *name;
  }
  if (p.scheduler_name.empty()) p.scheduler_name = std::string(kDefaultSchedulerName);
  if (const YAML::Node n = node["percentageOfNodesToScore"]; n && !n.IsNull()) {
    const std::string ppath = Join(path, "percentageOfNodesToScore");
    absl::StatusOr<int64_t> v = GetInt(n, ppath);
    if (!v.ok()) return v.status();
    if (*v < 0 || *v > 100) return Error(ppath, absl::StrCat("must be in 0..100, got ", *v));
    p.percentage_of_nodes_to_score = static_cast<int>(*v);
  }
  if (const YAML::Node plugins = node["plugins"]; plugins && !plugins.IsNull()) {
    const std::string ppath = Join(path, "plugins");
    if (absl::Status s = ExpectMap(plugins, ppath); !s.ok()) return s;
    std::set<std::string, std::less<>> allowed(ExtensionPointNames().begin(),
                                               ExtensionPointNames().end());
    allowed.insert("multiPoint");
    if (absl::Status s = CheckKeys(plugins, ppath, allowed); !s.ok()) return s;
    for (const auto& kv : plugins) {
      const std::string& point = kv.first.Scalar();
      absl::StatusOr<PluginSetConfig> set = ParsePluginSet(kv.second, Join(ppath, point));
      if (!set.ok()) return set.status();
      if (point == "multiPoint") {
        raw.multi_point = std::move(*set);
      } else {
        p.per_point[point] = std::move(*set);
      }
    }
  }
  if (const YAML::Node configs = node["pluginConfig"]; configs && !configs.IsNull()) {
    const std::string cpath = Join(path, "pluginConfig");
    if (absl::Status s = ExpectSequence(configs, cpath); !s.ok()) return s;
    for (size_t i = 0; i < configs.size(); ++i) {
      const std::string ipath = Index(cpath, i);
      const YAML::Node c = configs[i];
      if (absl::Status s = ExpectMap(c, ipath); !s.ok()) return s;
      if (absl::Status s = CheckKeys(c, ipath, {"name", "args"}); !s.ok()) return s;
      if (!c["name"]) return Error(Join(ipath, "name"), "required");
      absl::StatusOr<std::string> name = GetString(c["name"], Join(ipath, "name"));
      if (!name.ok()) return name.status();
      if (p.plugin_args.contains(*name)) {
        return Error(Join(ipath, "name"), absl::StrCat("duplicate pluginConfig for ", Quote(*name)));
      }
      boost::json::object args;
      if (const YAML::Node a = c["args"]; a && !a.IsNull()) {
        const std::string apath = Join(ipath, "args");
        if (absl::Status s = ExpectMap(a, apath); !s.ok()) return s;
        absl::StatusOr<boost::json::value> v = ToJson(a, apath);
        if (!v.ok()) return v.status();
        args = std::move(v->as_object());
      }
      p.plugin_args[*name] = std::move(args);
    }
  }
  return raw;
}

// kube's mergePluginSet (v1 defaulting).
PluginSetConfig MergePluginSet(const std::vector<PluginRef>& defaults,
                               const PluginSetConfig& custom) {
  PluginSetConfig merged;
  merged.disabled = custom.disabled;
  const bool all_disabled =
      std::find(custom.disabled.begin(), custom.disabled.end(), "*") != custom.disabled.end();
  std::vector<bool> replaced(custom.enabled.size(), false);
  if (!all_disabled) {
    for (const PluginRef& d : defaults) {
      if (std::find(custom.disabled.begin(), custom.disabled.end(), d.name) !=
          custom.disabled.end()) {
        continue;
      }
      PluginRef ref = d;
      for (size_t i = 0; i < custom.enabled.size(); ++i) {
        if (custom.enabled[i].name == d.name) {
          ref = custom.enabled[i];  // Re-configured in place, keeping kube's order.
          replaced[i] = true;
          break;
        }
      }
      merged.enabled.push_back(std::move(ref));
    }
  }
  for (size_t i = 0; i < custom.enabled.size(); ++i) {
    if (!replaced[i]) merged.enabled.push_back(custom.enabled[i]);
  }
  return merged;
}

absl::Status ParseKubeDocument(const YAML::Node& doc, SchedulerConfig& config,
                               RawKubeConfig& raw) {
  if (absl::Status s = CheckKeys(
          doc, "",
          {"apiVersion", "kind", "percentageOfNodesToScore", "podInitialBackoffSeconds",
           "podMaxBackoffSeconds", "profiles", "extenders", "parallelism", "leaderElection",
           "clientConnection", "healthzBindAddress", "metricsBindAddress", "enableProfiling",
           "enableContentionProfiling", "delayCacheUntilActive"});
      !s.ok()) {
    return s;
  }
  if (const YAML::Node n = doc["percentageOfNodesToScore"]; n && !n.IsNull()) {
    absl::StatusOr<int64_t> v = GetInt(n, "percentageOfNodesToScore");
    if (!v.ok()) return v.status();
    if (*v < 0 || *v > 100) {
      return Error("percentageOfNodesToScore", absl::StrCat("must be in 0..100, got ", *v));
    }
    config.percentage_of_nodes_to_score = static_cast<int>(*v);
  }
  int64_t initial = 1;
  int64_t max = 10;
  if (const YAML::Node n = doc["podInitialBackoffSeconds"]; n && !n.IsNull()) {
    absl::StatusOr<int64_t> v = GetInt(n, "podInitialBackoffSeconds");
    if (!v.ok()) return v.status();
    if (*v <= 0) return Error("podInitialBackoffSeconds", absl::StrCat("must be greater than 0, got ", *v));
    initial = *v;
  }
  if (const YAML::Node n = doc["podMaxBackoffSeconds"]; n && !n.IsNull()) {
    absl::StatusOr<int64_t> v = GetInt(n, "podMaxBackoffSeconds");
    if (!v.ok()) return v.status();
    if (*v <= 0) return Error("podMaxBackoffSeconds", absl::StrCat("must be greater than 0, got ", *v));
    max = *v;
  }
  if (max < initial) {
    return Error("podMaxBackoffSeconds",
                 absl::StrCat("must be greater than or equal to podInitialBackoffSeconds (", max,
                              " < ", initial, ")"));
  }
  config.initial_backoff = absl::Seconds(initial);
  config.max_backoff = absl::Seconds(max);
  if (const YAML::Node n = doc["leaderElection"]; n && !n.IsNull()) {
    if (absl::Status s = ExpectMap(n, "leaderElection"); !s.ok()) return s;
    if (absl::Status s = CheckKeys(n, "leaderElection",
                                   {"leaderElect", "leaseDuration", "renewDeadline", "retryPeriod",
                                    "resourceLock", "resourceName", "resourceNamespace"});
        !s.ok()) {
      return s;
    }
    if (const YAML::Node e = n["leaderElect"]; e && !e.IsNull()) {
      absl::StatusOr<bool> elect = GetBool(e, "leaderElection.leaderElect");
      if (!elect.ok()) return elect.status();
      if (*elect) {
        return Error("leaderElection.leaderElect",
                     "leader election is not supported yet: run one scheduler per adapter and "
                     "set leaderElect: false");
      }
    }
  }
  if (const YAML::Node n = doc["parallelism"]; n && !n.IsNull()) {
    // Read and checked as kube-scheduler's validation does; Podium's
    // parallelism is its plugin processes, not this number.
    absl::StatusOr<int64_t> v = GetInt(n, "parallelism");
    if (!v.ok()) return v.status();
    if (*v <= 0) return Error("parallelism", absl::StrCat("must be a positive integer, got ", *v));
  }
  if (const YAML::Node n = doc["extenders"]; n && !n.IsNull()) {
    if (absl::Status s = ExpectSequence(n, "extenders"); !s.ok()) return s;
    if (n.size() > 0) {
      return Error("extenders",
                   "scheduler extenders are not supported; serve the logic as an "
                   "out-of-process plugin (pluginEndpoints)");
    }
  }
  if (const YAML::Node profiles = doc["profiles"]; profiles && !profiles.IsNull()) {
    if (absl::Status s = ExpectSequence(profiles, "profiles"); !s.ok()) return s;
    std::set<std::string> names;
    for (size_t i = 0; i < profiles.size(); ++i) {
      const std::string path = Index("profiles", i);
      absl::StatusOr<RawProfile> p = ParseProfile(profiles[i], path);
      if (!p.ok()) return p.status();
      if (!names.insert(p->profile.scheduler_name).second) {
        return Error(Join(path, "schedulerName"),
                     absl::StrCat("duplicate value ", Quote(p->profile.scheduler_name)));
      }
      raw.profiles.push_back(std::move(*p));
    }
  }
  return absl::OkStatus();
}

// ---- PodiumConfiguration ----

absl::Status ParsePodiumDocument(const YAML::Node& doc, SchedulerConfig& config) {
  if (absl::Status s = CheckKeys(doc, "", {"apiVersion", "kind", "pluginEndpoints",
                                           "podMaxInUnschedulablePodsDuration", "profiles"});
      !s.ok()) {
    return s;
  }
  if (const YAML::Node profiles = doc["profiles"]; profiles && !profiles.IsNull()) {
    if (absl::Status s = ExpectSequence(profiles, "profiles"); !s.ok()) return s;
    for (size_t i = 0; i < profiles.size(); ++i) {
      const std::string path = Index("profiles", i);
      const YAML::Node p = profiles[i];
      if (absl::Status s = ExpectMap(p, path); !s.ok()) return s;
      if (absl::Status s = CheckKeys(p, path, {"schedulerName", "opportunisticBatching", "whatIfCopies"}); !s.ok()) {
        return s;
      }
      std::string name(kDefaultSchedulerName);
      if (const YAML::Node n = p["schedulerName"]; n && !n.IsNull()) {
        absl::StatusOr<std::string> v = GetString(n, Join(path, "schedulerName"));
        if (!v.ok()) return v.status();
        name = *v;
      }
      bool batching = true;
      if (const YAML::Node n = p["opportunisticBatching"]; n && !n.IsNull()) {
        absl::StatusOr<bool> v = GetBool(n, Join(path, "opportunisticBatching"));
        if (!v.ok()) return v.status();
        batching = *v;
      }
      if (!config.batching_by_profile.emplace(name, batching).second) {
        return Error(Join(path, "schedulerName"), absl::StrCat("profile ", Quote(name), " is listed twice"));
      }
      if (const YAML::Node n = p["whatIfCopies"]; n && !n.IsNull()) {
        absl::StatusOr<int64_t> v = GetInt(n, Join(path, "whatIfCopies"));
        if (!v.ok()) return v.status();
        if (*v < 0 || *v > kMaxWhatIfCopies) {
          return Error(Join(path, "whatIfCopies"),
                       absl::StrCat("must be between 0 and ", kMaxWhatIfCopies, ", got ", *v));
        }
        config.what_if_copies_by_profile[name] = static_cast<uint32_t>(*v);
      }
    }
  }
  if (const YAML::Node n = doc["podMaxInUnschedulablePodsDuration"]; n && !n.IsNull()) {
    absl::StatusOr<absl::Duration> d = GetDuration(n, "podMaxInUnschedulablePodsDuration");
    if (!d.ok()) return d.status();
    config.max_in_unschedulable = *d;
  }
  const YAML::Node endpoints = doc["pluginEndpoints"];
  if (!endpoints || endpoints.IsNull()) return absl::OkStatus();
  if (absl::Status s = ExpectSequence(endpoints, "pluginEndpoints"); !s.ok()) return s;
  std::map<std::string, std::string> served_by;  // plugin -> endpoint
  for (size_t i = 0; i < endpoints.size(); ++i) {
    const std::string path = Index("pluginEndpoints", i);
    const YAML::Node e = endpoints[i];
    if (absl::Status s = ExpectMap(e, path); !s.ok()) return s;
    if (absl::Status s = CheckKeys(e, path, {"name", "address", "failurePolicy", "timeout", "plugins"});
        !s.ok()) {
      return s;
    }
    PluginEndpointConfig ep;
    if (!e["name"]) return Error(Join(path, "name"), "required");
    absl::StatusOr<std::string> name = GetString(e["name"], Join(path, "name"));
    if (!name.ok()) return name.status();
    if (name->empty()) return Error(Join(path, "name"), "must not be empty");
    for (const auto& other : config.endpoints) {
      if (other.name == *name) return Error(Join(path, "name"), absl::StrCat("duplicate endpoint name ", Quote(*name)));
    }
    ep.name = *name;
    if (!e["address"]) return Error(Join(path, "address"), "required");
    absl::StatusOr<std::string> address = GetString(e["address"], Join(path, "address"));
    if (!address.ok()) return address.status();
    if (address->empty()) return Error(Join(path, "address"), "must not be empty");
    ep.address = *address;
    if (const YAML::Node n = e["failurePolicy"]; n && !n.IsNull()) {
      absl::StatusOr<std::string> policy = GetString(n, Join(path, "failurePolicy"));
      if (!policy.ok()) return policy.status();
      if (*policy == "Fail") {
        ep.failure_policy = FailurePolicy::kFail;
      } else if (*policy == "Ignore") {
        ep.failure_policy = FailurePolicy::kIgnore;
      } else {
        return Error(Join(path, "failurePolicy"),
                     absl::StrCat("unknown value ", Quote(*policy), " (expected Fail or Ignore)"));
      }
    }
    if (const YAML::Node n = e["timeout"]; n && !n.IsNull()) {
      absl::StatusOr<absl::Duration> d = GetDuration(n, Join(path, "timeout"));
      if (!d.ok()) return d.status();
      ep.timeout = *d;
    }
    if (const YAML::Node plugins = e["plugins"]; plugins && !plugins.IsNull()) {
      const std::string ppath = Join(path, "plugins");
      if (absl::Status s = ExpectSequence(plugins, ppath); !s.ok()) return s;
      for (size_t j = 0; j < plugins.size(); ++j) {
        const std::string jpath = Index(ppath, j);
        absl::StatusOr<std::string> plugin = GetString(plugins[j], jpath);
        if (!plugin.ok()) return plugin.status();
        if (plugin->empty()) return Error(jpath, "must not be empty");
        if (IsBuiltinPlugin(*plugin)) {
          return Error(jpath, absl::StrCat("plugin ", Quote(*plugin),
                                           " is built into the scheduler"));
        }
        auto [it, inserted] = served_by.emplace(*plugin, ep.name);
        if (!inserted) {
          return Error(jpath, absl::StrCat("plugin ", Quote(*plugin),
                                           " is already served by endpoint ", Quote(it->second)));
        }
        ep.plugins.push_back(*plugin);
      }
    }
    config.endpoints.push_back(std::move(ep));
  }
  return absl::OkStatus();
}

PluginEndpointConfig DefaultHostEndpoint(std::string address) {
  PluginEndpointConfig ep;
  ep.name = std::string(kDefaultHostEndpointName);
  ep.address = std::move(address);
  ep.plugins = DefaultHostPlugins();
  return ep;
}

ProfileConfig DefaultProfile() {
  ProfileConfig p;
  p.scheduler_name = std::string(kDefaultSchedulerName);
  p.multi_point.enabled = DefaultMultiPointPlugins();
  return p;
}

absl::Status ValidatePluginNames(const SchedulerConfig& config, const RawKubeConfig& raw) {
  auto known = [&](const std::string& name) {
    return IsBuiltinPlugin(name) || config.EndpointFor(name) != nullptr;
  };
  auto check = [&](const PluginSetConfig& set, const std::string& path) -> absl::Status {
    std::set<std::string_view> seen;
    for (size_t i = 0; i < set.enabled.size(); ++i) {
      if (!known(set.enabled[i].name)) {
        return Error(absl::StrCat(path, ".enabled[", i, "].name"),
                     absl::StrCat("unknown plugin ", Quote(set.enabled[i].name)));
      }
      // kube-scheduler refuses a plugin enabled twice at one point
      // ("already registered"); accepted, it would run twice per cycle.
      if (!seen.insert(set.enabled[i].name).second) {
        return Error(absl::StrCat(path, ".enabled[", i, "].name"),
                     absl::StrCat("plugin ", Quote(set.enabled[i].name), " is enabled twice"));
      }
    }
    return absl::OkStatus();
  };
  for (size_t i = 0; i < raw.profiles.size(); ++i) {
    const std::string path = absl::StrCat("profiles[", i, "].plugins");
    if (raw.profiles[i].multi_point.has_value()) {
      if (absl::Status s = check(*raw.profiles[i].multi_point, Join(path, "multiPoint")); !s.ok()) {
        return s;
      }
    }
    for (const std::string& point : ExtensionPointNames()) {
      auto it = raw.profiles[i].profile.per_point.find(point);
      if (it == raw.profiles[i].profile.per_point.end()) continue;
      if (absl::Status s = check(it->second, Join(path, point)); !s.ok()) return s;
    }
  }
  // The defaults a profile keeps must be served too (an endpoint list that
  // drops a default plugin needs the profile to disable it).
  for (size_t i = 0; i < config.profiles.size(); ++i) {
    for (const PluginRef& ref : config.profiles[i].multi_point.enabled) {
      // Coscheduling is a default that endpoint lists written before it
      // existed do not name: such a profile simply has no gangs.
      if (ref.name == "Coscheduling") continue;
      if (!known(ref.name)) {
        return Error(absl::StrCat("profiles[", i, "].plugins.multiPoint"),
                     absl::StrCat("default plugin ", Quote(ref.name),
                                  " is served by no plugin endpoint; serve it or disable it"));
      }
    }
  }
  return absl::OkStatus();
}

// Configuration Podium would accept and then not honour is refused instead.
absl::Status RefuseUnhonouredPoints(const RawKubeConfig& raw) {
  for (size_t i = 0; i < raw.profiles.size(); ++i) {
    const auto& per_point = raw.profiles[i].profile.per_point;
    const std::string path = absl::StrCat("profiles[", i, "].plugins");
    if (auto it = per_point.find("queueSort"); it != per_point.end()) {
      // kube-scheduler: "no queue sort plugin is enabled". PrioritySort is
      // the only one, so disabling it cannot be honoured.
      for (const std::string& name : it->second.disabled) {
        if ((name == "*" || name == "PrioritySort") &&
            std::none_of(it->second.enabled.begin(), it->second.enabled.end(),
                         [](const PluginRef& r) { return r.name == "PrioritySort"; })) {
          return Error(absl::StrCat(path, ".queueSort.disabled"),
                       "no queue sort plugin is enabled: the queue sorts with PrioritySort, which "
                       "cannot be disabled");
        }
      }
      for (size_t j = 0; j < it->second.enabled.size(); ++j) {
        if (it->second.enabled[j].name != "PrioritySort") {
          return Error(absl::StrCat(path, ".queueSort.enabled[", j, "].name"),
                       absl::StrCat("queue sort plugin ", Quote(it->second.enabled[j].name),
                                    " is not supported: the queue sorts with PrioritySort only"));
        }
      }
    }
    if (auto it = per_point.find("postFilter"); it != per_point.end() && !it->second.enabled.empty()) {
      return Error(absl::StrCat(path, ".postFilter.enabled[0].name"),
                   absl::StrCat("plugin ", Quote(it->second.enabled[0].name),
                                ": out-of-process PostFilter plugins are not called yet; remove "
                                "it from postFilter"));
    }
  }
  return absl::OkStatus();
}

// Whether the profile enables `plugin` anywhere (after multiPoint defaulting).
bool ProfileUses(const ProfileConfig& profile, const std::string& plugin) {
  auto in = [&](const std::vector<PluginRef>& refs) {
    return std::any_of(refs.begin(), refs.end(), [&](const PluginRef& r) { return r.name == plugin; });
  };
  if (in(profile.multi_point.enabled)) return true;
  for (const auto& [point, set] : profile.per_point) {
    if (in(set.enabled)) return true;
  }
  return false;
}

}  // namespace

const std::vector<std::string>& ExtensionPointNames() {
  static const auto* names = new std::vector<std::string>{
      "preEnqueue", "queueSort", "preFilter", "filter",  "postFilter", "preScore",
      "score",      "reserve",   "permit",    "preBind", "bind",       "postBind"};
  return *names;
}

bool IsBuiltinPlugin(std::string_view name) {
  return name == "PrioritySort" || name == "SchedulingGates" || name == "DefaultBinder";
}

const PluginEndpointConfig* SchedulerConfig::EndpointFor(std::string_view plugin) const {
  for (const PluginEndpointConfig& ep : endpoints) {
    if (std::find(ep.plugins.begin(), ep.plugins.end(), plugin) != ep.plugins.end()) return &ep;
  }
  return nullptr;
}

const boost::json::object* SchedulerConfig::ArgsFor(const std::string& plugin) const {
  for (const ProfileConfig& p : profiles) {
    if (!ProfileUses(p, plugin)) continue;
    auto it = p.plugin_args.find(plugin);
    return it == p.plugin_args.end() ? nullptr : &it->second;
  }
  return nullptr;
}

std::vector<SchedulerConfig::ArgsForProfiles> SchedulerConfig::ArgsByProfile(
    const std::string& plugin) const {
  std::vector<ArgsForProfiles> out;
  static const boost::json::object kEmpty;
  for (const ProfileConfig& p : profiles) {
    if (!ProfileUses(p, plugin)) continue;
    auto it = p.plugin_args.find(plugin);
    const boost::json::object* args = it == p.plugin_args.end() ? nullptr : &it->second;
    // Absent args and {} both mean the defaults.
    const boost::json::object& compare = args == nullptr ? kEmpty : *args;
    auto same = std::find_if(out.begin(), out.end(), [&](const ArgsForProfiles& a) {
      return (a.args == nullptr ? kEmpty : *a.args) == compare;
    });
    if (same == out.end()) same = out.insert(out.end(), ArgsForProfiles{args, {}});
    same->scheduler_names.push_back(p.scheduler_name);
  }
  return out;
}

std::vector<PluginRef> DefaultMultiPointPlugins() {
  return {
      {"SchedulingGates", 0},
      {"PrioritySort", 0},
      {"NodeUnschedulable", 0},
      {"NodeName", 0},
      {"TaintToleration", 3},
      {"NodeAffinity", 2},
      {"NodePorts", 0},
      {"NodeResourcesFit", 1},
      {"PodTopologySpread", 2},
      {"InterPodAffinity", 2},
      {"NodeResourcesBalancedAllocation", 1},
      {"ImageLocality", 1},
      // Gangs (PodGroups): called only for pods that name a group.
      {"Coscheduling", 0},
      {"DefaultBinder", 0},
  };
}

SchedulerConfig DefaultConfig(std::string host_address) {
  SchedulerConfig config;
  config.profiles.push_back(DefaultProfile());
  config.endpoints.push_back(DefaultHostEndpoint(std::move(host_address)));
  return config;
}

absl::StatusOr<SchedulerConfig> ParseConfig(std::string_view yaml, std::string host_address) {
  // Bounded: a configuration is small, and an alias bomb must not exhaust memory.
  absl::StatusOr<std::vector<YAML::Node>> loaded =
      podium::yaml::LoadAllDocuments("config", yaml, {.max_bytes = 1 << 20, .max_nodes = 100'000});
  if (!loaded.ok()) return loaded.status();
  std::vector<YAML::Node> docs = *std::move(loaded);
  SchedulerConfig config;
  RawKubeConfig raw;
  bool have_kube = false;
  bool have_podium = false;
  try {
    for (size_t i = 0; i < docs.size(); ++i) {
      const YAML::Node& doc = docs[i];
      if (doc.IsNull()) continue;  // An empty document (e.g. a trailing "---").
      const std::string where = absl::StrCat("document ", i + 1);
      if (!doc.IsMap()) return Error(where, absl::StrCat("expected a mapping, got ", Describe(doc)));
      std::string api_version, kind;
      if (doc["apiVersion"]) {
        absl::StatusOr<std::string> v = GetString(doc["apiVersion"], "apiVersion");
        if (!v.ok()) return v.status();
        api_version = *v;
      }
      if (doc["kind"]) {
        absl::StatusOr<std::string> v = GetString(doc["kind"], "kind");
        if (!v.ok()) return v.status();
        kind = *v;
      }
      if (kind == kKubeKind) {
        if (api_version != kKubeApiVersion) {
          return Error("apiVersion", absl::StrCat("unsupported ", Quote(api_version), " for ",
                                                  kKubeKind, " (expected ", kKubeApiVersion, ")"));
        }
        if (have_kube) return Error(where, absl::StrCat("a second ", kKubeKind));
        have_kube = true;
        if (absl::Status s = ParseKubeDocument(doc, config, raw); !s.ok()) return s;
      } else if (kind == kPodiumKind) {
        if (api_version != kPodiumApiVersion) {
          return Error("apiVersion", absl::StrCat("unsupported ", Quote(api_version), " for ",
                                                  kPodiumKind, " (expected ", kPodiumApiVersion,
                                                  ")"));
        }
        if (have_podium) return Error(where, absl::StrCat("a second ", kPodiumKind));
        have_podium = true;
        if (absl::Status s = ParsePodiumDocument(doc, config); !s.ok()) return s;
      } else {
        return Error(Join(where, "kind"),
                     absl::StrCat("unknown kind ", Quote(kind), " (expected ", kKubeKind, " or ",
                                  kPodiumKind, ")"));
      }
    }
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("invalid configuration: ", e.what()));
  }

  if (!have_podium) config.endpoints.push_back(DefaultHostEndpoint(std::move(host_address)));
  if (raw.profiles.empty()) {
    config.profiles.push_back(DefaultProfile());
  } else {
    const std::vector<PluginRef> defaults = DefaultMultiPointPlugins();
    for (RawProfile& p : raw.profiles) {
      ProfileConfig profile = p.profile;
      profile.multi_point = MergePluginSet(defaults, p.multi_point.value_or(PluginSetConfig{}));
      config.profiles.push_back(std::move(profile));
    }
  }
  for (const auto& entry : config.batching_by_profile) {
    // Not a structured binding: clang before 16 cannot capture one.
    const std::string& name = entry.first;
    const auto& batching = entry.second;
    auto it = std::find_if(config.profiles.begin(), config.profiles.end(),
                           [&name](const ProfileConfig& p) { return p.scheduler_name == name; });
    if (it == config.profiles.end()) {
      return Error("profiles", absl::StrCat("PodiumConfiguration names profile ", Quote(name),
                                            " that the KubeSchedulerConfiguration does not have"));
    }
    it->opportunistic_batching = batching;
    if (auto copies = config.what_if_copies_by_profile.find(name);
        copies != config.what_if_copies_by_profile.end()) {
      it->what_if_copies = copies->second;
    }
  }
  if (absl::Status s = ValidatePluginNames(config, raw); !s.ok()) return s;
  if (absl::Status s = RefuseUnhonouredPoints(raw); !s.ok()) return s;
  return config;
}

absl::StatusOr<SchedulerConfig> LoadConfigFile(const std::string& path, std::string host_address) {
  absl::StatusOr<std::string> text = podium::yaml::ReadFileBounded(path, 1 << 20);
  if (!text.ok()) return text.status();
  absl::StatusOr<SchedulerConfig> config = ParseConfig(*text, std::move(host_address));
  if (!config.ok()) {
    return absl::Status(config.status().code(),
                        absl::StrCat(path, ": ", config.status().message()));
  }
  return config;
}

absl::Status ApplyEndpointOverride(SchedulerConfig& config, std::string_view flag) {
  const size_t eq = flag.find('=');
  if (eq == std::string_view::npos || eq == 0 || eq + 1 == flag.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--plugin-endpoint: expected name=address, got ", Quote(flag)));
  }
  const std::string_view name = flag.substr(0, eq);
  const std::string_view address = flag.substr(eq + 1);
  for (PluginEndpointConfig& ep : config.endpoints) {
    if (ep.name == name) {
      ep.address = std::string(address);
      return absl::OkStatus();
    }
  }
  std::vector<std::string> names;
  for (const auto& ep : config.endpoints) names.push_back(ep.name);
  return absl::NotFoundError(absl::StrCat("--plugin-endpoint: no plugin endpoint named ",
                                          Quote(name), " (have: ", absl::StrJoin(names, ", "),
                                          ")"));
}

}  // namespace podium::scheduler
