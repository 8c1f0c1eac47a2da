#include "plugins/pod_topology_spread/pod_topology_spread.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "google/protobuf/util/message_differencer.h"
#include "plugins/helper/args.h"
#include "plugins/helper/cycle_state.h"
#include "plugins/helper/events.h"
#include "plugins/helper/node_selector.h"
#include "plugins/helper/str.h"
#include "plugins/helper/taints.h"
#include "plugins/pod_topology_spread/kept_counts.h"

namespace podium::plugins {
namespace {

constexpr std::string_view kPreFilterStateKey = "PreFilterPodTopologySpread";
constexpr std::string_view kPreScoreStateKey = "PreScorePodTopologySpread";
constexpr std::string_view kHostnameLabel = "kubernetes.io/hostname";
constexpr std::string_view kZoneLabel = "topology.kubernetes.io/zone";

// Labels a controller puts on each pod of a set, which its selector never
// holds: left out of the default selector built from the pod's labels.
bool IsPerPodLabel(const std::string& key) {
  return key == "statefulset.kubernetes.io/pod-name" || key == "apps.kubernetes.io/pod-index" ||
         key == "controller-revision-hash";
}

// kube-scheduler's helper.DefaultSelector selects by the Services, RCs, RSs
// and StatefulSets of the pod. Podium does not mirror those objects: a pod
// owned by one of these controllers is selected by its own labels (less the
// per-pod ones), which is what the controller's selector matches. Empty when
// no such owner.
sdk::LabelSelector DefaultSelector(const v1::Pod& pod) {
  bool owned = false;
  for (const v1::OwnerReference& ref : pod.meta().owner_references()) {
    if (ref.kind() == "ReplicaSet" || ref.kind() == "ReplicationController" ||
        ref.kind() == "StatefulSet") {
      owned = true;
    }
  }
  sdk::LabelSelector selector = sdk::LabelSelector::Nothing();
  if (!owned) return selector;
  std::vector<std::pair<std::string, std::string>> labels;
  for (const auto& [k, v] : pod.meta().labels()) {
    if (!IsPerPodLabel(k)) labels.emplace_back(k, v);
  }
  if (labels.empty()) return selector;
  std::sort(labels.begin(), labels.end());
  selector = sdk::LabelSelector::Everything();
  for (auto& [k, v] : labels) selector.AddRequirement(k, sdk::LabelSelector::Operator::kIn, {v});
  return selector;
}

bool NodeHasAllKeys(const v1::Node& node, const std::vector<SpreadConstraint>& constraints) {
  const auto& labels = node.meta().labels();
  for (const SpreadConstraint& c : constraints) {
    if (labels.find(c.topology_key) == labels.end()) return false;
  }
  return true;
}

// nodeInclusionPolicies: does this node count for the constraint?
bool NodeIncluded(const SpreadConstraint& c, const v1::Pod& pod, const v1::Node& node,
                  const RequiredNodeAffinity& affinity) {
  if (c.honor_node_affinity && !affinity.Matches(node)) return false;
  if (c.honor_node_taints &&
      FindUntoleratedDoNotScheduleTaint(node.taints(), pod.tolerations()) != nullptr) {
    return false;
  }
  return true;
}

// The two domains with the fewest matching pods (kube-scheduler's
// criticalPaths), by domain id: updated in O(1) as pods are added or removed
// in a dry run.
struct CriticalPaths {
  struct Path {
    int32_t domain = -1;
    int64_t count = std::numeric_limits<int32_t>::max();
  };
  Path paths[2];
  void Update(int32_t domain, int64_t count) {
    int i = domain == paths[0].domain ? 0 : domain == paths[1].domain ? 1 : -1;
    if (i >= 0) {
      paths[i].count = count;
      if (paths[0].count > paths[1].count) std::swap(paths[0], paths[1]);
    } else if (count < paths[0].count) {
      paths[1] = paths[0];
      paths[0] = {domain, count};
    } else if (count < paths[1].count) {
      paths[1] = {domain, count};
    }
  }
};

// A constraint's matching pods per domain, by the ids of the plugin's
// TopologyDomains for its key (kept as they were when the cycle began), plus
// domains a dry run met on nodes those ids do not cover (`extra`).
struct DomainCounts {
  std::shared_ptr<const TopologyDomains> domains;
  std::vector<int64_t> counts;  // By domain id.
  std::vector<char> present;    // The domain is counted (a node in it counts).
  int64_t num_present = 0;
  std::vector<std::string> extra;  // Values of the ids from domains->size() on.

  void Reset(std::shared_ptr<const TopologyDomains> d) {
    domains = std::move(d);
    counts.assign(domains->size(), 0);
    present.assign(domains->size(), 0);
    num_present = 0;
    extra.clear();
  }
  // The node's domain id, TopologyDomains::kMissing when it lacks the key, or
  // kNoSuchValue for a value never counted.
  int32_t Of(const sdk::NodeInfo& node, const std::string** value = nullptr) const {
    const int32_t known = domains->Known(node.id());
    if (known != TopologyDomains::kUnknown) return known;
    const auto& labels = node.node().meta().labels();
    auto it = labels.find(domains->key());
    if (it == labels.end()) return TopologyDomains::kMissing;
    if (value != nullptr) *value = &it->second;
    const int32_t d = domains->Find(it->second);
    if (d >= 0) return d;
    for (size_t j = 0; j < extra.size(); ++j) {
      if (extra[j] == it->second) return static_cast<int32_t>(domains->size() + j);
    }
    return TopologyDomains::kNoSuchValue;
  }
  // Of, giving a domain that was never counted an id of its own.
  int32_t Intern(const sdk::NodeInfo& node) {
    const std::string* value = nullptr;
    int32_t d = Of(node, &value);
    if (d != TopologyDomains::kNoSuchValue) return d;
    d = static_cast<int32_t>(counts.size());
    extra.push_back(*value);
    counts.push_back(0);
    present.push_back(0);
    return d;
  }
  int64_t Count(int32_t d) const {
    return d >= 0 && static_cast<size_t>(d) < counts.size() ? counts[d] : 0;
  }
  // Adds `delta` pods to domain d (>= 0), counting the domain from now on.
  void Add(int32_t d, int64_t delta) {
    if (!present[d]) {
      present[d] = 1;
      ++num_present;
    }
    counts[d] += delta;
  }
};

struct PreFilterState : sdk::StateData {
  std::vector<SpreadConstraint> constraints;
  // Per constraint: matching pods per domain, for the domains of the nodes
  // that count (inclusion policies), empty domains included.
  std::vector<DomainCounts> counts;
  std::vector<CriticalPaths> critical;
  // Per constraint: 1 when the incoming pod matches its selector (it counts
  // itself in the domain it lands in), computed once, not per node.
  std::vector<int64_t> self_match;
  std::shared_ptr<const RequiredNodeAffinity> affinity;

  std::unique_ptr<sdk::StateData> Clone() const override {
    return std::make_unique<PreFilterState>(*this);
  }

  int64_t MinMatch(size_t i) const {
    // Fewer domains than minDomains: the global minimum is 0.
    if (counts[i].num_present < constraints[i].min_domains) return 0;
    return critical[i].paths[0].count;
  }

  void Update(const sdk::PodInfo& updated, const v1::Pod& preemptor, const sdk::NodeInfo& node,
              int64_t delta) {
    const v1::ObjectMeta& meta = updated.pod->meta();
    if (meta.namespace_() != preemptor.meta().namespace_()) return;
    for (const DomainCounts& c : counts) {
      if (c.Of(node) == TopologyDomains::kMissing) return;  // NodeHasAllKeys.
    }
    for (size_t i = 0; i < constraints.size(); ++i) {
      const SpreadConstraint& c = constraints[i];
      if (!c.selector.Matches(meta.labels())) continue;
      if (!NodeIncluded(c, preemptor, node.node(), *affinity)) continue;
      const int32_t d = counts[i].Intern(node);
      counts[i].Add(d, delta);
      critical[i].Update(d, counts[i].counts[d]);
    }
  }
};

struct PreScoreState : sdk::StateData {
  std::vector<SpreadConstraint> constraints;
  absl::flat_hash_set<uint32_t> ignored_nodes;
  std::vector<std::shared_ptr<const TopologyDomains>> domains;
  // Per constraint (not hostname): matching pods per domain id of the
  // candidates' domains; the last slot (or the id of the value "", which it
  // joins) holds the nodes without the key, as kube's empty value.
  std::vector<std::vector<int64_t>> counts;
  // Per constraint: the kept matching pods by node id (Score reads the
  // hostname constraints'); NormalizeScore lets go of them.
  std::vector<std::shared_ptr<const PodsPerNode>> per_node;
  std::vector<double> weights;
  std::unique_ptr<sdk::StateData> Clone() const override {
    return std::make_unique<PreScoreState>(*this);
  }
};

absl::StatusOr<SpreadConstraint> FromPodConstraint(const v1::Pod& pod,
                                                   const v1::TopologySpreadConstraint& c,
                                                   size_t index) {
  SpreadConstraint out;
  const std::string path = Cat("spec.topologySpreadConstraints[", index, "]");
  out.max_skew = c.max_skew();
  out.topology_key = c.topology_key();
  absl::StatusOr<sdk::LabelSelector> selector = sdk::LabelSelector::CompileOptional(
      c.has_label_selector(), c.label_selector(), Cat(path, ".labelSelector"));
  if (!selector.ok()) {
    return absl::InvalidArgumentError(Cat("pod ", pod.meta().namespace_(), "/", pod.meta().name(),
                                          ": ", std::string(selector.status().message())));
  }
  out.selector = *std::move(selector);
  const auto& labels = pod.meta().labels();
  for (const std::string& key : c.match_label_keys()) {
    auto it = labels.find(key);
    if (it != labels.end()) {
      out.selector.AddRequirement(key, sdk::LabelSelector::Operator::kIn, {it->second});
    }
  }
  out.min_domains = c.has_min_domains() ? c.min_domains() : 1;
  out.honor_node_affinity = c.node_affinity_policy() != v1::TopologySpreadConstraint::IGNORE;
  out.honor_node_taints = c.node_taints_policy() == v1::TopologySpreadConstraint::HONOR;
  return out;
}

sdk::Status FromError(const absl::Status& s) {
  return sdk::Status(sdk::Code::kUnschedulableAndUnresolvable, std::string(s.message()));
}

double NormalizingWeight(size_t size) { return std::log(static_cast<double>(size + 2)); }

}  // namespace

absl::StatusOr<std::vector<SpreadConstraint>> PodTopologySpread::Constraints(
    const v1::Pod& pod, bool do_not_schedule,
    const std::vector<DefaultSpreadConstraint>& defaults) {
  std::vector<SpreadConstraint> out;
  const auto want = do_not_schedule ? v1::TopologySpreadConstraint::DO_NOT_SCHEDULE
                                    : v1::TopologySpreadConstraint::SCHEDULE_ANYWAY;
  if (!pod.topology_spread_constraints().empty()) {
    for (int i = 0; i < pod.topology_spread_constraints_size(); ++i) {
      const v1::TopologySpreadConstraint& c = pod.topology_spread_constraints(i);
      if (c.when_unsatisfiable() != want) continue;
      absl::StatusOr<SpreadConstraint> sc = FromPodConstraint(pod, c, i);
      if (!sc.ok()) return sc.status();
      out.push_back(*std::move(sc));
    }
    return out;
  }
  bool any = false;
  for (const DefaultSpreadConstraint& d : defaults) any = any || d.do_not_schedule == do_not_schedule;
  if (!any) return out;
  sdk::LabelSelector selector = DefaultSelector(pod);
  if (selector.MatchesNothing()) return out;
  for (const DefaultSpreadConstraint& d : defaults) {
    if (d.do_not_schedule != do_not_schedule) continue;
    SpreadConstraint c;
    c.max_skew = d.max_skew;
    c.topology_key = d.topology_key;
    c.selector = selector;
    out.push_back(std::move(c));
  }
  return out;
}

absl::StatusOr<sdk::PluginPtr> PodTopologySpread::New(const boost::json::object& args,
                                                      sdk::Handle& handle) {
  if (absl::Status s = CheckKnownFields(args, kName, "", {"defaultConstraints", "defaultingType"});
      !s.ok()) {
    return s;
  }
  std::string defaulting = "System";
  if (const boost::json::value* v = args.if_contains("defaultingType")) {
    if (absl::Status s = ReadString(*v, kName, "defaultingType", &defaulting); !s.ok()) return s;
    if (defaulting != "System" && defaulting != "List") {
      return ArgsError(kName, "defaultingType",
                       Cat("unknown value \"", defaulting, "\" (expected System or List)"));
    }
  }
  std::vector<DefaultSpreadConstraint> defaults;
  const boost::json::value* list = args.if_contains("defaultConstraints");
  if (list != nullptr) {
    const boost::json::array* items;
    if (absl::Status s = ReadArray(*list, kName, "defaultConstraints", &items); !s.ok()) return s;
    if (defaulting == "System" && !items->empty()) {
      return ArgsError(kName, "defaultConstraints",
                       "must be empty when defaultingType is System");
    }
    for (size_t i = 0; i < items->size(); ++i) {
      const std::string path = IndexPath("defaultConstraints", i);
      const boost::json::object* o;
      if (absl::Status s = ReadObject((*items)[i], kName, path, &o); !s.ok()) return s;
      if (o->if_contains("labelSelector") != nullptr) {
        return ArgsError(kName, JoinPath(path, "labelSelector"),
                         "constraint must not define a selector, as they deduced for each pod");
      }
      if (absl::Status s =
              CheckKnownFields(*o, kName, path, {"maxSkew", "topologyKey", "whenUnsatisfiable"});
          !s.ok()) {
        return s;
      }
      DefaultSpreadConstraint d;
      int64_t skew = 0;
      const boost::json::value* ms = o->if_contains("maxSkew");
      if (ms == nullptr) return ArgsError(kName, JoinPath(path, "maxSkew"), "required");
      if (absl::Status s = ReadInt(*ms, kName, JoinPath(path, "maxSkew"), &skew); !s.ok()) return s;
      if (skew <= 0 || skew > std::numeric_limits<int32_t>::max()) {
        return ArgsError(kName, JoinPath(path, "maxSkew"), "must be greater than zero");
      }
      d.max_skew = static_cast<int32_t>(skew);
      const boost::json::value* key = o->if_contains("topologyKey");
      if (key == nullptr) return ArgsError(kName, JoinPath(path, "topologyKey"), "required");
      if (absl::Status s = ReadString(*key, kName, JoinPath(path, "topologyKey"), &d.topology_key);
          !s.ok()) {
        return s;
      }
      if (d.topology_key.empty()) {
        return ArgsError(kName, JoinPath(path, "topologyKey"), "can not be empty");
      }
      std::string when;
      const boost::json::value* w = o->if_contains("whenUnsatisfiable");
      if (w == nullptr) return ArgsError(kName, JoinPath(path, "whenUnsatisfiable"), "required");
      if (absl::Status s = ReadString(*w, kName, JoinPath(path, "whenUnsatisfiable"), &when);
          !s.ok()) {
        return s;
      }
      if (when != "DoNotSchedule" && when != "ScheduleAnyway") {
        return ArgsError(kName, JoinPath(path, "whenUnsatisfiable"),
                         Cat("unknown value \"", when, "\""));
      }
      d.do_not_schedule = when == "DoNotSchedule";
      for (const DefaultSpreadConstraint& other : defaults) {
        if (other.topology_key == d.topology_key && other.do_not_schedule == d.do_not_schedule) {
          return ArgsError(kName, path, Cat("duplicate constraint {", d.topology_key, ", ", when, "}"));
        }
      }
      defaults.push_back(std::move(d));
    }
  }
  const bool system = defaulting == "System";
  if (system) {
    defaults = {{3, std::string(kHostnameLabel), false}, {5, std::string(kZoneLabel), false}};
  }
  return std::make_unique<PodTopologySpread>(std::move(defaults), system, handle);
}

PodTopologySpread::PodTopologySpread(std::vector<DefaultSpreadConstraint> defaults,
                                     bool system_defaulted, sdk::Handle& handle)
    : defaults_(std::make_shared<const std::vector<DefaultSpreadConstraint>>(std::move(defaults))),
      system_defaulted_(system_defaulted),
      handle_(handle),
      kept_(std::make_unique<KeptSpreadCounts>()) {}

PodTopologySpread::~PodTopologySpread() = default;

std::pair<sdk::PreFilterResult, sdk::Status> PodTopologySpread::PreFilter(
    sdk::CycleState& state, const sdk::PodInfo& pod_info, const sdk::Snapshot& snapshot) {
  const v1::Pod& pod = *pod_info.pod;
  absl::StatusOr<std::vector<SpreadConstraint>> constraints = Constraints(pod, true, *defaults_);
  if (!constraints.ok()) return {sdk::PreFilterResult{}, FromError(constraints.status())};
  if (constraints->empty()) return {sdk::PreFilterResult{}, sdk::Status(sdk::Code::kSkip)};

  auto s = std::make_unique<PreFilterState>();
  s->constraints = *std::move(constraints);
  s->affinity = std::make_shared<const RequiredNodeAffinity>(RequiredNodeAffinity::ForPod(pod));
  const size_t n = s->constraints.size();
  s->counts.resize(n);
  s->critical.resize(n);
  s->self_match.resize(n);
  for (size_t i = 0; i < n; ++i) s->self_match[i] = s->constraints[i].selector.Matches(pod.meta().labels()) ? 1 : 0;
  const std::string& ns = pod.meta().namespace_();
  // One pass over the nodes finds the domains (empty ones count for the
  // minimum) and adds up the matching pods kept per node: O(nodes) array
  // lookups, plus the pods that changed since the last cycle.
  kept_->Sync(snapshot);
  std::vector<std::shared_ptr<const PodsPerNode>> pods(n);
  std::vector<const TopologyDomains*> domains(n);
  for (size_t i = 0; i < n; ++i) {
    const SpreadConstraint& c = s->constraints[i];
    s->counts[i].Reset(kept_->Domains(c.topology_key, snapshot));
    domains[i] = s->counts[i].domains.get();
    pods[i] = kept_->Matching(c.selector, ns, snapshot);
  }
  std::vector<int32_t> node_domains(n);
  for (const sdk::NodeInfo* node : snapshot.Nodes()) {
    const uint32_t id = node->id();
    bool has_all_keys = true;
    for (size_t i = 0; i < n && has_all_keys; ++i) {
      node_domains[i] = domains[i]->Known(id);
      has_all_keys = node_domains[i] >= 0;
    }
    if (!has_all_keys) continue;
    const v1::Node& v1node = node->node();
    for (size_t i = 0; i < n; ++i) {
      if (!NodeIncluded(s->constraints[i], pod, v1node, *s->affinity)) continue;
      const PodsPerNode& on_node = *pods[i];
      s->counts[i].Add(node_domains[i], id < on_node.size() ? on_node[id] : 0);
    }
  }
  for (size_t i = 0; i < n; ++i) {
    const DomainCounts& c = s->counts[i];
    for (size_t d = 0; d < c.counts.size(); ++d) {
      if (c.present[d]) s->critical[i].Update(static_cast<int32_t>(d), c.counts[d]);
    }
  }
  state.Write(std::string(kPreFilterStateKey), std::move(s));
  return {sdk::PreFilterResult{}, sdk::Status::Success()};
}

sdk::Status PodTopologySpread::AddPod(sdk::CycleState& state, const sdk::PodInfo& pod_to_schedule,
                                      const sdk::PodInfo& pod_to_add, const sdk::NodeInfo& node) {
  if (auto* s = state.ReadAs<PreFilterState>(kPreFilterStateKey)) {
    s->Update(pod_to_add, *pod_to_schedule.pod, node, 1);
  }
  return sdk::Status::Success();
}

sdk::Status PodTopologySpread::RemovePod(sdk::CycleState& state,
                                         const sdk::PodInfo& pod_to_schedule,
                                         const sdk::PodInfo& pod_to_remove,
                                         const sdk::NodeInfo& node) {
  if (auto* s = state.ReadAs<PreFilterState>(kPreFilterStateKey)) {
    s->Update(pod_to_remove, *pod_to_schedule.pod, node, -1);
  }
  return sdk::Status::Success();
}

sdk::Status PodTopologySpread::Filter(sdk::CycleState& state, const sdk::PodInfo& pod,
                                      const sdk::NodeInfo& node) {
  const auto* s = state.ReadAs<PreFilterState>(kPreFilterStateKey);
  if (s == nullptr) {
    return MissingCycleState(kPreFilterStateKey);
  }
  for (size_t i = 0; i < s->constraints.size(); ++i) {
    const DomainCounts& counts = s->counts[i];
    const int32_t d = counts.Of(node);
    if (d == TopologyDomains::kMissing) {
      return sdk::Status(sdk::Code::kUnschedulableAndUnresolvable, std::string(kReasonNodeLabelNotMatch));
    }
    if (counts.Count(d) + s->self_match[i] - s->MinMatch(i) > s->constraints[i].max_skew) {
      return sdk::Status(sdk::Code::kUnschedulable, std::string(kReasonConstraintsNotMatch));
    }
  }
  return sdk::Status::Success();
}

sdk::Status PodTopologySpread::PreScore(sdk::CycleState& state, const sdk::PodInfo& pod_info,
                                        const std::vector<const sdk::NodeInfo*>& filtered) {
  const sdk::Snapshot& snapshot = handle_.snapshot();
  if (filtered.empty() || snapshot.NumNodes() == 0) return sdk::Status(sdk::Code::kSkip);
  const v1::Pod& pod = *pod_info.pod;
  absl::StatusOr<std::vector<SpreadConstraint>> constraints = Constraints(pod, false, *defaults_);
  if (!constraints.ok()) return sdk::Status(sdk::Code::kError, std::string(constraints.status().message()));
  if (constraints->empty()) return sdk::Status(sdk::Code::kSkip);

  auto s = std::make_unique<PreScoreState>();
  s->constraints = *std::move(constraints);
  const size_t n = s->constraints.size();
  const std::string& ns = pod.meta().namespace_();
  kept_->Sync(snapshot);
  s->domains.resize(n);
  s->counts.resize(n);
  s->per_node.resize(n);
  // Per constraint (not hostname): the slot of the nodes without the key
  // (kube counts them under the empty value), and which slots hold a
  // candidate's domain.
  std::vector<size_t> missing_slot(n);
  std::vector<std::vector<char>> candidate(n);
  for (size_t i = 0; i < n; ++i) {
    const SpreadConstraint& c = s->constraints[i];
    s->domains[i] = kept_->Domains(c.topology_key, snapshot);
    // Hostname constraints are counted per node in Score, as kube-scheduler
    // does: the kept matching pods per node.
    s->per_node[i] = kept_->Matching(c.selector, ns, snapshot);
    if (c.topology_key == kHostnameLabel) continue;
    const TopologyDomains& domains = *s->domains[i];
    const int32_t empty = domains.Find("");
    missing_slot[i] = empty >= 0 ? static_cast<size_t>(empty) : domains.size();
    s->counts[i].assign(domains.size() + 1, 0);
    candidate[i].assign(domains.size() + 1, 0);
  }
  // The slot of a node's domain for constraint i: its id, the missing slot,
  // or -1 for a node the kept domains have not learnt with a value they do
  // not know (not in the snapshot).
  auto slot_of = [&](size_t i, const sdk::NodeInfo& node) -> int64_t {
    const TopologyDomains& domains = *s->domains[i];
    int32_t d = domains.Known(node.id());
    if (d == TopologyDomains::kUnknown) {
      const auto& labels = node.node().meta().labels();
      auto it = labels.find(domains.key());
      d = it == labels.end() ? TopologyDomains::kMissing : domains.Find(it->second);
      if (d == TopologyDomains::kNoSuchValue) return -1;
    }
    return d == TopologyDomains::kMissing ? static_cast<int64_t>(missing_slot[i]) : d;
  };
  auto has_all_keys = [&](const sdk::NodeInfo& node) {
    for (size_t i = 0; i < n; ++i) {
      const int32_t d = s->domains[i]->Known(node.id());
      if (d == TopologyDomains::kMissing) return false;
      if (d == TopologyDomains::kUnknown) return NodeHasAllKeys(node.node(), s->constraints);
    }
    return true;
  };
  // Nodes without every topology key are left out of scoring, unless the
  // constraints are the system defaults (so that nodes without a zone label
  // still spread by hostname).
  const bool require_all = !pod.topology_spread_constraints().empty() || !system_defaulted_;
  std::vector<size_t> domain_count(n, 0);
  // Domains of candidates the kept ones do not know (nodes outside the
  // snapshot): counted as domains, with no pods.
  std::vector<absl::flat_hash_set<std::string>> unknown(n);
  for (const sdk::NodeInfo* node : filtered) {
    if (require_all && !has_all_keys(*node)) {
      s->ignored_nodes.insert(node->id());
      continue;
    }
    for (size_t i = 0; i < n; ++i) {
      if (s->constraints[i].topology_key == kHostnameLabel) continue;
      const int64_t slot = slot_of(i, *node);
      if (slot < 0) {
        if (unknown[i].insert(node->node().meta().labels().at(s->domains[i]->key())).second) ++domain_count[i];
      } else if (!candidate[i][slot]) {
        candidate[i][slot] = 1;
        ++domain_count[i];
      }
    }
  }
  s->weights.resize(n);
  for (size_t i = 0; i < n; ++i) {
    size_t size = domain_count[i];
    if (s->constraints[i].topology_key == kHostnameLabel) size = filtered.size() - s->ignored_nodes.size();
    s->weights[i] = NormalizingWeight(size);
  }

  // The matching pods of the candidates' domains, from every node that counts.
  const bool any_domain = std::any_of(s->constraints.begin(), s->constraints.end(),
                                     [](const SpreadConstraint& c) { return c.topology_key != kHostnameLabel; });
  if (any_domain) {
    const RequiredNodeAffinity affinity = RequiredNodeAffinity::ForPod(pod);
    for (const sdk::NodeInfo* node : snapshot.Nodes()) {
      if (require_all && !has_all_keys(*node)) continue;
      const uint32_t id = node->id();
      for (size_t i = 0; i < n; ++i) {
        const SpreadConstraint& c = s->constraints[i];
        if (c.topology_key == kHostnameLabel) continue;
        const int64_t slot = slot_of(i, *node);
        if (slot < 0 || !candidate[i][slot]) continue;  // No candidate node in this domain.
        if (!NodeIncluded(c, pod, node->node(), affinity)) continue;
        const PodsPerNode& on_node = *s->per_node[i];
        s->counts[i][slot] += id < on_node.size() ? on_node[id] : 0;
      }
    }
  }
  state.Write(std::string(kPreScoreStateKey), std::move(s));
  return sdk::Status::Success();
}

std::pair<int64_t, sdk::Status> PodTopologySpread::Score(sdk::CycleState& state,
                                                         const sdk::PodInfo& pod,
                                                         const sdk::NodeInfo& node) {
  const auto* s = state.ReadAs<PreScoreState>(kPreScoreStateKey);
  if (s == nullptr) {
    return {0, MissingCycleState(kPreScoreStateKey)};
  }
  if (s->ignored_nodes.contains(node.id())) return {0, sdk::Status::Success()};
  if (s->per_node.empty()) {
    return {0, sdk::Status(sdk::Code::kError, "PodTopologySpread: Score after NormalizeScore")};
  }
  const uint32_t id = node.id();
  double score = 0;
  for (size_t i = 0; i < s->constraints.size(); ++i) {
    const SpreadConstraint& c = s->constraints[i];
    const TopologyDomains& domains = *s->domains[i];
    int32_t d = domains.Known(id);
    if (d == TopologyDomains::kUnknown) {
      const auto& labels = node.node().meta().labels();
      auto it = labels.find(domains.key());
      d = it == labels.end() ? TopologyDomains::kMissing : domains.Find(it->second);
    }
    if (d == TopologyDomains::kMissing) continue;
    int64_t count = 0;
    if (c.topology_key == kHostnameLabel) {
      const PodsPerNode& on_node = *s->per_node[i];
      if (id < on_node.size()) count = on_node[id];
    } else if (d >= 0) {
      count = s->counts[i][d];
    }
    score += static_cast<double>(count) * s->weights[i] + static_cast<double>(c.max_skew - 1);
  }
  return {static_cast<int64_t>(std::llround(score)), sdk::Status::Success()};
}

sdk::Status PodTopologySpread::NormalizeScore(sdk::CycleState& state, const sdk::PodInfo&,
                                              std::vector<sdk::NodeScore>& scores) {
  auto* s = state.ReadAs<PreScoreState>(kPreScoreStateKey);
  if (s == nullptr) return sdk::Status::Success();
  // Scores are in: let go of the kept pods per node, so that the next cycle's
  // pod changes need not copy them for a state that lives on until the
  // scheduler reports the cycle finished (hundreds of cycles later).
  s->per_node.clear();
  int64_t min_score = std::numeric_limits<int64_t>::max();
  int64_t max_score = 0;
  for (const sdk::NodeScore& ns : scores) {
    if (s->ignored_nodes.contains(ns.node->id())) continue;
    min_score = std::min(min_score, ns.score);
    max_score = std::max(max_score, ns.score);
  }
  for (sdk::NodeScore& ns : scores) {
    if (s->ignored_nodes.contains(ns.node->id())) {
      ns.score = 0;
    } else if (max_score == 0) {
      ns.score = sdk::kMaxNodeScore;
    } else {
      ns.score = sdk::kMaxNodeScore * (max_score + min_score - ns.score) / max_score;
    }
  }
  return sdk::Status::Success();
}

std::vector<sdk::ClusterEventWithHint> PodTopologySpread::EventsToRegister() const {
  auto defaults = defaults_;
  // Only Filter rejects, and Filter sees only the DoNotSchedule constraints
  // (kube's getConstraints for hints). Nullopt when they cannot be built:
  // then requeue, as kube does when a hint fails.
  auto hard_constraints =
      [defaults](const v1::Pod& pod) -> std::optional<std::vector<SpreadConstraint>> {
    auto c = Constraints(pod, /*hard=*/true, *defaults);
    if (!c.ok()) return std::nullopt;
    return *std::move(c);
  };
  // kube's isSchedulableAfterPodChange: only assigned pods of the pending
  // pod's namespace are counted, and only when some selector matches them
  // (or, for a label change, the match changed).
  auto pod_hint = [hard_constraints](const v1::Pod& pod, const v1::ClusterEvent& e) {
    const v1::Pod* before = e.has_old_pod() ? &e.old_pod() : nullptr;
    const v1::Pod* after = e.has_new_pod() ? &e.new_pod() : nullptr;
    const v1::Pod* any = after != nullptr ? after : before;
    if (any == nullptr) return sdk::QueueingHint::kQueue;
    for (const v1::Pod* p : {before, after}) {
      if (p != nullptr && (p->node_name().empty() || p->meta().namespace_() != pod.meta().namespace_())) {
        return sdk::QueueingHint::kQueueSkip;
      }
    }
    std::optional<std::vector<SpreadConstraint>> constraints = hard_constraints(pod);
    if (!constraints) return sdk::QueueingHint::kQueue;
    const bool deleted = (e.action() & v1::DELETE) != 0;
    if (before != nullptr && after != nullptr && !deleted) {
      for (const SpreadConstraint& c : *constraints) {
        if (c.selector.Matches(before->meta().labels()) !=
            c.selector.Matches(after->meta().labels())) {
          return sdk::QueueingHint::kQueue;
        }
      }
      return sdk::QueueingHint::kQueueSkip;
    }
    const v1::Pod& subject = deleted && before != nullptr ? *before : *any;
    for (const SpreadConstraint& c : *constraints) {
      if (c.selector.Matches(subject.meta().labels())) return sdk::QueueingHint::kQueue;
    }
    return sdk::QueueingHint::kQueueSkip;
  };
  // kube's isSchedulableAfterNodeChange: a node that joins or leaves the
  // domains the constraints count (it has every topology key), moves between
  // domains, or changes taints while counted (nodeTaintsPolicy).
  auto node_hint = [hard_constraints](const v1::Pod& pod, const v1::ClusterEvent& e) {
    std::optional<std::vector<SpreadConstraint>> constraints = hard_constraints(pod);
    if (!constraints) return sdk::QueueingHint::kQueue;
    const v1::Node* before = OldNode(e);
    const v1::Node* after = NewNode(e);
    const bool counted_before = before != nullptr && NodeHasAllKeys(*before, *constraints);
    const bool counted_after = after != nullptr && NodeHasAllKeys(*after, *constraints);
    if (before == nullptr || after == nullptr) {
      return counted_before || counted_after ? sdk::QueueingHint::kQueue
                                             : sdk::QueueingHint::kQueueSkip;
    }
    if (counted_before != counted_after) return sdk::QueueingHint::kQueue;
    if (!counted_after) return sdk::QueueingHint::kQueueSkip;
    for (const SpreadConstraint& c : *constraints) {
      if (before->meta().labels().at(c.topology_key) != after->meta().labels().at(c.topology_key)) {
        return sdk::QueueingHint::kQueue;
      }
    }
    if (before->taints_size() != after->taints_size()) return sdk::QueueingHint::kQueue;
    for (int i = 0; i < before->taints_size(); ++i) {
      if (!google::protobuf::util::MessageDifferencer::Equals(before->taints(i), after->taints(i))) {
        return sdk::QueueingHint::kQueue;
      }
    }
    return sdk::QueueingHint::kQueueSkip;
  };
  // kube's isSchedulableAfterPodChange for the pending pod itself: new
  // tolerations count when a constraint honours taints; a label change
  // counts when it flips whether the pod matches a constraint's selector
  // (the pod counts itself in its domain).
  auto self_hint = [hard_constraints](const v1::Pod& pod, const v1::ClusterEvent& e) {
    if (!e.has_old_pod() || !e.has_new_pod()) return sdk::QueueingHint::kQueue;
    std::optional<std::vector<SpreadConstraint>> constraints = hard_constraints(pod);
    if (!constraints) return sdk::QueueingHint::kQueue;
    if ((e.action() & v1::UPDATE_POD_TOLERATIONS) != 0) {
      for (const SpreadConstraint& c : *constraints) {
        if (c.honor_node_taints) return sdk::QueueingHint::kQueue;
      }
    }
    for (const SpreadConstraint& c : *constraints) {
      if (c.selector.Matches(e.old_pod().meta().labels()) != c.selector.Matches(e.new_pod().meta().labels())) {
        return sdk::QueueingHint::kQueue;
      }
    }
    return sdk::QueueingHint::kQueueSkip;
  };
  return {
      {v1::POD, Actions(v1::ADD, v1::DELETE) | static_cast<uint32_t>(v1::UPDATE_POD_LABEL),
       pod_hint},
      {v1::UNSCHEDULED_POD, Actions(v1::UPDATE_POD_LABEL, v1::UPDATE_POD_TOLERATIONS), self_hint},
      {v1::NODE,
       Actions(v1::ADD, v1::DELETE) | static_cast<uint32_t>(v1::UPDATE_NODE_LABEL) |
           static_cast<uint32_t>(v1::UPDATE_NODE_TAINT),
       node_hint},
  };
}

}  // namespace podium::plugins
