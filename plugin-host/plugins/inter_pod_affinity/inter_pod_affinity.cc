#include "plugins/inter_pod_affinity/inter_pod_affinity.h"

#include <algorithm>
#include <limits>
#include <string>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "plugins/helper/args.h"
#include "plugins/helper/cycle_state.h"
#include "plugins/helper/events.h"
#include "plugins/helper/pod_index.h"
#include "plugins/helper/str.h"
#include "podium/sdk/pod_affinity.h"

namespace podium::plugins {
namespace {

constexpr std::string_view kPreFilterStateKey = "PreFilterInterPodAffinity";
constexpr std::string_view kPreScoreStateKey = "PreScoreInterPodAffinity";

// The assigned pods that may match `term` (helper/pod_index.h); false when
// the caller must scan every pod.
bool ForEachCandidate(const sdk::Snapshot& snapshot, const sdk::AffinityTerm& term,
                      const sdk::Snapshot::PodVisitor& visit) {
  return ForEachPodMaybeMatching(snapshot, term.selector, visit);
}

// Topology key -> value -> matching terms; entries that reach 0 are erased,
// so "empty" means no pod matched anywhere. Keyed by topology key first so
// that Filter looks up a node's few keys, not every (key, value) pair.
using TopologyCounts = absl::flat_hash_map<std::string, absl::flat_hash_map<std::string, int64_t>>;

void Bump(TopologyCounts& counts, const v1::Node& node, const std::string& key, int64_t delta) {
  const auto& labels = node.meta().labels();
  auto it = labels.find(key);
  if (it == labels.end()) return;
  auto& values = counts[key];
  auto [entry, inserted] = values.try_emplace(it->second, 0);
  entry->second += delta;
  if (entry->second == 0) values.erase(entry);
  if (values.empty()) counts.erase(key);
}

// The count in the domain `value` of `key` (0 when none).
int64_t CountAt(const TopologyCounts& counts, const std::string& key, const std::string& value) {
  auto k = counts.find(key);
  if (k == counts.end()) return 0;
  auto v = k->second.find(value);
  return v == k->second.end() ? 0 : v->second;
}

// Does the node's domain for `key` hold a count?
bool Has(const TopologyCounts& counts, const std::string& key, const std::string& value) {
  auto k = counts.find(key);
  return k != counts.end() && k->second.contains(value);
}

// Counts shared with the plugin's kept counts (KeptAntiAffinityCounts: never
// changed while a cycle state holds them) plus the cycle's own AddPod /
// RemovePod changes, which may be negative.
struct SharedCounts {
  std::vector<std::shared_ptr<const TopologyCounts>> bases;
  TopologyCounts delta;

  bool empty() const { return bases.empty() && delta.empty(); }
  int64_t Count(const std::string& key, const std::string& value) const {
    int64_t count = CountAt(delta, key, value);
    for (const auto& base : bases) count += CountAt(*base, key, value);
    return count;
  }
  // Does a pod count in the node's domain of `key`?
  bool HasAt(const sdk::Labels& node_labels, const std::string& key) const {
    auto it = node_labels.find(key);
    return it != node_labels.end() && Count(key, it->second) > 0;
  }
};

// Terms that match the same pods in the same domains (requirements compared
// in order: equal terms written in another order are merely kept apart).
bool SameTerm(const sdk::AffinityTerm& a, const sdk::AffinityTerm& b) {
  return a.topology_key == b.topology_key && a.namespaces == b.namespaces &&
         a.selector.SameAs(b.selector) &&
         a.namespace_selector.SameAs(b.namespace_selector);
}

// Affinity: an existing pod counts for the incoming pod's terms only when it
// matches all of them (podMatchesAllAffinityTerms).
bool MatchesAll(const std::vector<sdk::AffinityTerm>& terms, const v1::Pod& pod) {
  if (terms.empty()) return false;
  for (const sdk::AffinityTerm& t : terms) {
    if (!t.Matches(pod, nullptr)) return false;
  }
  return true;
}

void UpdateAffinity(TopologyCounts& counts, const std::vector<sdk::AffinityTerm>& terms,
                    const v1::Pod& existing, const v1::Node& node, int64_t delta) {
  if (!MatchesAll(terms, existing)) return;
  for (const sdk::AffinityTerm& t : terms) Bump(counts, node, t.topology_key, delta);
}

void UpdateAntiAffinity(TopologyCounts& counts, const std::vector<sdk::AffinityTerm>& terms,
                        const v1::Pod& pod, const sdk::Labels* namespace_labels,
                        const v1::Node& node, int64_t delta) {
  for (const sdk::AffinityTerm& t : terms) {
    if (t.Matches(pod, namespace_labels)) Bump(counts, node, t.topology_key, delta);
  }
}

// Hints see no Namespace labels: a term with a namespaceSelector is taken to
// select the pod's namespace (a hint may requeue too often, never too rarely).
bool MatchesForHint(const sdk::AffinityTerm& t, const v1::Pod& pod) {
  if (!t.selector.Matches(pod.meta().labels())) return false;
  return !t.namespace_selector.MatchesNothing() ||
         std::find(t.namespaces.begin(), t.namespaces.end(), pod.meta().namespace_()) !=
             t.namespaces.end();
}

bool MatchesAllForHint(const std::vector<sdk::AffinityTerm>& terms, const v1::Pod& pod) {
  if (terms.empty()) return false;
  for (const sdk::AffinityTerm& t : terms) {
    if (!MatchesForHint(t, pod)) return false;
  }
  return true;
}

const std::vector<sdk::AffinityTerm>& NoTerms() {
  static const auto* none = new std::vector<sdk::AffinityTerm>();
  return *none;
}

// kube-scheduler's mergeAffinityTermNamespacesIfNotEmpty, once per cycle: a
// term's namespaceSelector (neither absent nor `{}`) becomes the names of the
// namespaces whose labels it matches, added to its namespaces list, so that
// matching a pod against it is a list lookup.
void ResolveTerm(sdk::AffinityTerm& t, const std::vector<const v1::Namespace*>& namespaces) {
  for (const v1::Namespace* ns : namespaces) {
    if (t.namespace_selector.Matches(ns->meta().labels()) &&
        std::find(t.namespaces.begin(), t.namespaces.end(), ns->meta().name()) == t.namespaces.end()) {
      t.namespaces.push_back(ns->meta().name());
    }
  }
  t.namespace_selector = sdk::LabelSelector::Nothing();
}

bool NeedsResolving(const sdk::AffinityTerm& t) {
  return !t.namespace_selector.MatchesNothing() && !t.namespace_selector.MatchesEverything();
}

// The pod's terms with their namespaceSelectors resolved; `terms` itself when
// no term has one to resolve (the usual case: no copy).
std::shared_ptr<const sdk::PodAffinityTerms> ResolveNamespaceSelectors(
    const std::shared_ptr<const sdk::PodAffinityTerms>& terms, const sdk::Snapshot& snapshot) {
  if (terms == nullptr) return terms;
  bool needed = false;
  for (const auto* list : {&terms->required_affinity, &terms->required_anti_affinity}) {
    for (const sdk::AffinityTerm& t : *list) needed = needed || NeedsResolving(t);
  }
  for (const auto* list : {&terms->preferred_affinity, &terms->preferred_anti_affinity}) {
    for (const sdk::WeightedAffinityTerm& t : *list) needed = needed || NeedsResolving(t.term);
  }
  if (!needed) return terms;
  const std::vector<const v1::Namespace*> namespaces = snapshot.Namespaces();
  auto out = std::make_shared<sdk::PodAffinityTerms>(*terms);
  for (auto* list : {&out->required_affinity, &out->required_anti_affinity}) {
    for (sdk::AffinityTerm& t : *list) {
      if (NeedsResolving(t)) ResolveTerm(t, namespaces);
    }
  }
  for (auto* list : {&out->preferred_affinity, &out->preferred_anti_affinity}) {
    for (sdk::WeightedAffinityTerm& t : *list) {
      if (NeedsResolving(t.term)) ResolveTerm(t.term, namespaces);
    }
  }
  return out;
}

// The labels of the incoming pod's namespace, which existing pods' terms
// (symmetry, hardPodAffinityWeight, their preferred terms) match against.
sdk::Labels NamespaceLabels(const v1::Pod& pod, const sdk::Snapshot& snapshot) {
  const v1::Namespace* ns = snapshot.GetNamespace(pod.meta().namespace_());
  return ns != nullptr ? ns->meta().labels() : sdk::Labels();
}

struct PreFilterState : sdk::StateData {
  // The pod's terms, namespaceSelectors resolved. Null: the pod has none.
  std::shared_ptr<const sdk::PodAffinityTerms> terms;
  sdk::Labels namespace_labels;  // Of the incoming pod's namespace.
  // Existing pods' required anti-affinity terms the incoming pod matches.
  SharedCounts existing_anti_affinity;
  // Existing pods matching all the incoming pod's required affinity terms.
  TopologyCounts affinity;
  // Existing pods matching one of the incoming pod's required anti-affinity terms.
  SharedCounts anti_affinity;

  const std::vector<sdk::AffinityTerm>& required_affinity() const {
    return terms ? terms->required_affinity : NoTerms();
  }
  const std::vector<sdk::AffinityTerm>& required_anti_affinity() const {
    return terms ? terms->required_anti_affinity : NoTerms();
  }

  std::unique_ptr<sdk::StateData> Clone() const override {
    return std::make_unique<PreFilterState>(*this);
  }

  void Update(const sdk::PodInfo& incoming, const sdk::PodInfo& existing, const v1::Node& node,
              int64_t delta) {
    if (existing.affinity != nullptr) {
      UpdateAntiAffinity(existing_anti_affinity.delta, existing.affinity->required_anti_affinity,
                         *incoming.pod, &namespace_labels, node, delta);
    }
    UpdateAffinity(affinity, required_affinity(), *existing.pod, node, delta);
    UpdateAntiAffinity(anti_affinity.delta, required_anti_affinity(), *existing.pod, nullptr, node,
                       delta);
  }
};

// topologyKey -> value -> score.
using ScoreMap = absl::flat_hash_map<std::string, absl::flat_hash_map<std::string, int64_t>>;

struct PreScoreState : sdk::StateData {
  ScoreMap scores;
  std::unique_ptr<sdk::StateData> Clone() const override {
    return std::make_unique<PreScoreState>(*this);
  }
};

void ProcessTerm(ScoreMap& scores, const sdk::AffinityTerm& term, int64_t weight,
                 const v1::Pod& pod, const sdk::Labels* namespace_labels, const v1::Node& node) {
  if (!term.Matches(pod, namespace_labels)) return;
  const auto& labels = node.meta().labels();
  auto it = labels.find(term.topology_key);
  if (it == labels.end()) return;
  scores[term.topology_key][it->second] += weight;
}

void ProcessTerms(ScoreMap& scores, const std::vector<sdk::WeightedAffinityTerm>& terms,
                  const v1::Pod& pod, const sdk::Labels* namespace_labels, const v1::Node& node,
                  int64_t sign) {
  for (const sdk::WeightedAffinityTerm& t : terms) {
    ProcessTerm(scores, t.term, sign * t.weight, pod, namespace_labels, node);
  }
}

sdk::Status ParseError(const v1::Pod& pod, const absl::Status& error) {
  return sdk::Status(sdk::Code::kUnschedulableAndUnresolvable,
                     Cat("parsing pod ", pod.meta().namespace_(), "/", pod.meta().name(), ": ",
                         std::string(error.message())));
}

}  // namespace

class KeptAntiAffinityCounts {
 public:
  // Existing pods with identical required anti-affinity terms, and where
  // they are: pods of one workload share one group.
  struct Group {
    sdk::AffinityTerm term;
    std::shared_ptr<TopologyCounts> counts;
    int64_t terms = 0;  // Pods' terms in the group (a pod may repeat one).
  };

  // Brings the counts up to `snapshot`: its pod changes since the last call,
  // or, when it cannot list them, a rebuild from every node.
  void Sync(const sdk::Snapshot& snapshot) {
    ++syncs_;
    const bool incremental = snapshot.PodChangesSince(&cursor_, [&](const sdk::Snapshot::PodChange& c) {
      Apply(*c.pod, c.node->node(), c.added ? 1 : -1);
    });
    if (incremental) return;
    groups_.clear();
    selected_.clear();
    for (const sdk::NodeInfo* node : snapshot.NodesHavingPodsWithRequiredAntiAffinity()) {
      for (const sdk::PodInfoPtr& pod : node->pods_with_required_anti_affinity()) {
        AddTerms(*pod, node->node(), 1);
      }
    }
  }

  const std::vector<Group>& groups() const { return groups_; }

  // The existing pods `term` (namespaceSelector resolved) selects, per domain
  // of its topology key: counted once, then kept from pod changes.
  std::shared_ptr<const TopologyCounts> Selected(const sdk::AffinityTerm& term,
                                                 const sdk::Snapshot& snapshot) {
    for (Selection& s : selected_) {
      if (SameTerm(s.term, term)) {
        s.last_used = syncs_;
        return s.counts;
      }
    }
    auto counts = std::make_shared<TopologyCounts>();
    // The index visits only pods labelled as the selector's `key In (values)`
    // asks; when that is the selector's only requirement, a pod it visits
    // matches when its namespace does.
    const bool known = IndexVisitsOnlyMatches(term.selector);
    auto bump = [&](const sdk::PodInfo& existing, const sdk::NodeInfo& node) {
      const bool matches = known ? term.MatchesNamespace(existing.pod->meta().namespace_(), nullptr)
                                 : term.Matches(*existing.pod, nullptr);
      if (matches) Bump(*counts, node.node(), term.topology_key, 1);
    };
    if (!ForEachCandidate(snapshot, term, bump)) {
      for (const sdk::NodeInfo* node : snapshot.Nodes()) {
        for (const sdk::PodInfoPtr& existing : node->pods()) {
          if (term.Matches(*existing->pod, nullptr)) Bump(*counts, node->node(), term.topology_key, 1);
        }
      }
    }
    if (selected_.size() >= kMaxSelections) {
      selected_.erase(std::min_element(selected_.begin(), selected_.end(),
                                       [](const Selection& a, const Selection& b) {
                                         return a.last_used < b.last_used;
                                       }));
    }
    selected_.push_back({term, counts, syncs_});
    return counts;
  }

 private:
  // Selections kept for the incoming pods' terms; the least recently used
  // goes first. Each costs a term match per pod change.
  static constexpr size_t kMaxSelections = 16;
  struct Selection {
    sdk::AffinityTerm term;
    std::shared_ptr<TopologyCounts> counts;
    uint64_t last_used = 0;
  };

  // Copy on write: a cycle state may still hold the counts.
  static TopologyCounts& Mutable(std::shared_ptr<TopologyCounts>& counts) {
    if (counts.use_count() > 1) counts = std::make_shared<TopologyCounts>(*counts);
    return *counts;
  }

  void Apply(const sdk::PodInfo& pod, const v1::Node& node, int64_t delta) {
    AddTerms(pod, node, delta);
    for (Selection& s : selected_) {
      if (s.term.Matches(*pod.pod, nullptr)) Bump(Mutable(s.counts), node, s.term.topology_key, delta);
    }
  }

  void AddTerms(const sdk::PodInfo& pod, const v1::Node& node, int64_t delta) {
    if (pod.affinity == nullptr) return;
    for (const sdk::AffinityTerm& t : pod.affinity->required_anti_affinity) {
      auto group = std::find_if(groups_.begin(), groups_.end(),
                                [&](const Group& g) { return SameTerm(g.term, t); });
      if (group == groups_.end()) {
        if (delta < 0) continue;  // Not counted: nothing to take back.
        group = groups_.insert(groups_.end(), Group{t, std::make_shared<TopologyCounts>(), 0});
      }
      Bump(Mutable(group->counts), node, t.topology_key, delta);
      group->terms += delta;
      if (group->terms <= 0) groups_.erase(group);
    }
  }

  uint64_t cursor_ = 0;
  uint64_t syncs_ = 0;
  std::vector<Group> groups_;
  std::vector<Selection> selected_;
};

InterPodAffinity::InterPodAffinity(int64_t hard_pod_affinity_weight,
                                   bool ignore_preferred_of_existing, sdk::Handle& handle)
    : hard_weight_(hard_pod_affinity_weight),
      ignore_preferred_of_existing_(ignore_preferred_of_existing),
      handle_(handle),
      kept_(std::make_unique<KeptAntiAffinityCounts>()) {}

InterPodAffinity::~InterPodAffinity() = default;

absl::StatusOr<sdk::PluginPtr> InterPodAffinity::New(const boost::json::object& args,
                                                     sdk::Handle& handle) {
  if (absl::Status s = CheckKnownFields(
          args, kName, "", {"hardPodAffinityWeight", "ignorePreferredTermsOfExistingPods"});
      !s.ok()) {
    return s;
  }
  int64_t weight = 1;
  if (const boost::json::value* v = args.if_contains("hardPodAffinityWeight")) {
    if (absl::Status s = ReadInt(*v, kName, "hardPodAffinityWeight", &weight); !s.ok()) return s;
    if (weight < 0 || weight > 100) {
      return ArgsError(kName, "hardPodAffinityWeight", "not in valid range [0-100]");
    }
  }
  bool ignore = false;
  if (const boost::json::value* v = args.if_contains("ignorePreferredTermsOfExistingPods")) {
    if (!v->is_bool()) {
      return ArgsError(kName, "ignorePreferredTermsOfExistingPods", "must be a boolean");
    }
    ignore = v->get_bool();
  }
  return std::make_unique<InterPodAffinity>(weight, ignore, handle);
}

std::pair<sdk::PreFilterResult, sdk::Status> InterPodAffinity::PreFilter(
    sdk::CycleState& state, const sdk::PodInfo& pod, const sdk::Snapshot& snapshot) {
  if (pod.affinity != nullptr && !pod.affinity->error.ok()) {
    return {sdk::PreFilterResult{}, ParseError(*pod.pod, pod.affinity->error)};
  }
  auto s = std::make_unique<PreFilterState>();
  s->terms = ResolveNamespaceSelectors(pod.affinity, snapshot);
  s->namespace_labels = NamespaceLabels(*pod.pod, snapshot);
  // Existing pods' required anti-affinity, grouped by term and kept across
  // cycles: one match per distinct term.
  kept_->Sync(snapshot);
  for (const KeptAntiAffinityCounts::Group& group : kept_->groups()) {
    if (!group.counts->empty() && group.term.Matches(*pod.pod, &s->namespace_labels)) {
      s->existing_anti_affinity.bases.push_back(group.counts);
    }
  }
  // The pods the incoming pod's anti-affinity terms select, kept too.
  for (const sdk::AffinityTerm& t : s->required_anti_affinity()) {
    std::shared_ptr<const TopologyCounts> selected = kept_->Selected(t, snapshot);
    if (!selected->empty()) s->anti_affinity.bases.push_back(std::move(selected));
  }
  // The incoming pod's required affinity terms: the pods they select, through
  // the label index when the snapshot keeps one (O(matching pods)); what it
  // cannot answer, by scanning every pod.
  const std::vector<sdk::AffinityTerm>& affinity = s->required_affinity();
  const bool affinity_scan =
      !affinity.empty() && !ForEachCandidate(snapshot, affinity.front(),
                                             [&](const sdk::PodInfo& existing, const sdk::NodeInfo& node) {
                                               UpdateAffinity(s->affinity, affinity, *existing.pod, node.node(), 1);
                                             });
  if (affinity_scan) {
    for (const sdk::NodeInfo* node : snapshot.Nodes()) {
      for (const sdk::PodInfoPtr& existing : node->pods()) {
        UpdateAffinity(s->affinity, affinity, *existing->pod, node->node(), 1);
      }
    }
  }
  if (s->existing_anti_affinity.empty() && s->required_affinity().empty() &&
      s->required_anti_affinity().empty()) {
    return {sdk::PreFilterResult{}, sdk::Status(sdk::Code::kSkip)};
  }
  state.Write(std::string(kPreFilterStateKey), std::move(s));
  return {sdk::PreFilterResult{}, sdk::Status::Success()};
}

sdk::Status InterPodAffinity::AddPod(sdk::CycleState& state, const sdk::PodInfo& pod_to_schedule,
                                     const sdk::PodInfo& pod_to_add, const sdk::NodeInfo& node) {
  if (auto* s = state.ReadAs<PreFilterState>(kPreFilterStateKey)) {
    s->Update(pod_to_schedule, pod_to_add, node.node(), 1);
  }
  return sdk::Status::Success();
}

sdk::Status InterPodAffinity::RemovePod(sdk::CycleState& state,
                                        const sdk::PodInfo& pod_to_schedule,
                                        const sdk::PodInfo& pod_to_remove,
                                        const sdk::NodeInfo& node) {
  if (auto* s = state.ReadAs<PreFilterState>(kPreFilterStateKey)) {
    s->Update(pod_to_schedule, pod_to_remove, node.node(), -1);
  }
  return sdk::Status::Success();
}

sdk::Status InterPodAffinity::Filter(sdk::CycleState& state, const sdk::PodInfo& pod,
                                     const sdk::NodeInfo& node) {
  const auto* s = state.ReadAs<PreFilterState>(kPreFilterStateKey);
  if (s == nullptr) {
    return MissingCycleState(kPreFilterStateKey);
  }
  const auto& labels = node.node().meta().labels();

  // Required affinity: every term's domain on this node holds a matching pod.
  bool pods_exist = true;
  for (const sdk::AffinityTerm& t : s->required_affinity()) {
    auto it = labels.find(t.topology_key);
    if (it == labels.end()) {
      return sdk::Status(sdk::Code::kUnschedulableAndUnresolvable, std::string(kReasonAffinity));
    }
    if (!Has(s->affinity, t.topology_key, it->second)) pods_exist = false;
  }
  // The first pod of a group that is affine to itself may go anywhere its
  // topology keys exist: no pod in the cluster matches yet, and it matches
  // its own terms.
  if (!pods_exist && !(s->affinity.empty() && MatchesAll(s->required_affinity(), *pod.pod))) {
    return sdk::Status(sdk::Code::kUnschedulableAndUnresolvable, std::string(kReasonAffinity));
  }

  if (!s->anti_affinity.empty()) {
    for (const sdk::AffinityTerm& t : s->required_anti_affinity()) {
      if (s->anti_affinity.HasAt(labels, t.topology_key)) {
        return sdk::Status(sdk::Code::kUnschedulable, std::string(kReasonAntiAffinity));
      }
    }
  }

  // Every topology key the existing pods' terms use (a few).
  const SharedCounts& existing = s->existing_anti_affinity;
  for (const auto& base : existing.bases) {
    for (const auto& [key, values] : *base) {
      if (existing.HasAt(labels, key)) {
        return sdk::Status(sdk::Code::kUnschedulable, std::string(kReasonExistingAntiAffinity));
      }
    }
  }
  for (const auto& [key, values] : existing.delta) {
    if (existing.HasAt(labels, key)) {
      return sdk::Status(sdk::Code::kUnschedulable, std::string(kReasonExistingAntiAffinity));
    }
  }
  return sdk::Status::Success();
}

sdk::Status InterPodAffinity::PreScore(sdk::CycleState& state, const sdk::PodInfo& pod,
                                       const std::vector<const sdk::NodeInfo*>& nodes) {
  if (nodes.empty()) return sdk::Status(sdk::Code::kSkip);
  const bool has_constraints =
      pod.affinity != nullptr &&
      (!pod.affinity->preferred_affinity.empty() || !pod.affinity->preferred_anti_affinity.empty());
  if (ignore_preferred_of_existing_ && !has_constraints) return sdk::Status(sdk::Code::kSkip);

  const sdk::Snapshot& snapshot = handle_.snapshot();
  const std::shared_ptr<const sdk::PodAffinityTerms> resolved =
      has_constraints ? ResolveNamespaceSelectors(pod.affinity, snapshot) : nullptr;
  const sdk::PodAffinityTerms* terms = resolved.get();
  const sdk::Labels namespace_labels = NamespaceLabels(*pod.pod, snapshot);
  auto s = std::make_unique<PreScoreState>();
  // Existing pods' terms (hardPodAffinityWeight, their preferred terms):
  // only nodes with such pods.
  auto theirs = [&](const sdk::NodeInfo& node, const sdk::PodInfo& existing) {
    const v1::Node& v1node = node.node();
    const sdk::PodAffinityTerms* their = existing.affinity.get();
    if (their == nullptr || v1node.meta().labels().empty()) return;
    if (hard_weight_ > 0) {
      for (const sdk::AffinityTerm& t : their->required_affinity) {
        ProcessTerm(s->scores, t, hard_weight_, *pod.pod, &namespace_labels, v1node);
      }
    }
    // ignorePreferredTermsOfExistingPods only skips PreScore for a pod
    // without preferred terms of its own (above); a pod with some still counts
    // the existing pods' preferred terms, as kube-scheduler does.
    ProcessTerms(s->scores, their->preferred_affinity, *pod.pod, &namespace_labels, v1node, 1);
    ProcessTerms(s->scores, their->preferred_anti_affinity, *pod.pod, &namespace_labels, v1node, -1);
  };
  for (const sdk::NodeInfo* node : snapshot.NodesHavingPodsWithAffinity()) {
    for (const sdk::PodInfoPtr& existing : node->pods_with_affinity()) theirs(*node, *existing);
  }
  // The incoming pod's preferred terms: the pods each selects, through the
  // label index when the snapshot keeps one; the rest by scanning every pod.
  if (has_constraints) {
    struct Weighted {
      const sdk::AffinityTerm* term;
      int64_t weight;
    };
    std::vector<Weighted> scan;
    auto add = [&](const std::vector<sdk::WeightedAffinityTerm>& list, int64_t sign) {
      for (const sdk::WeightedAffinityTerm& t : list) {
        const int64_t weight = sign * t.weight;
        auto score = [&](const sdk::PodInfo& existing, const sdk::NodeInfo& node) {
          ProcessTerm(s->scores, t.term, weight, *existing.pod, nullptr, node.node());
        };
        if (!ForEachCandidate(snapshot, t.term, score)) scan.push_back({&t.term, weight});
      }
    };
    add(terms->preferred_affinity, 1);
    add(terms->preferred_anti_affinity, -1);
    if (!scan.empty()) {
      for (const sdk::NodeInfo* node : snapshot.Nodes()) {
        for (const sdk::PodInfoPtr& existing : node->pods()) {
          for (const Weighted& w : scan) {
            ProcessTerm(s->scores, *w.term, w.weight, *existing->pod, nullptr, node->node());
          }
        }
      }
    }
  }
  // Drop zeros so that "nothing scored" is an empty map.
  for (auto key = s->scores.begin(); key != s->scores.end();) {
    absl::erase_if(key->second, [](const auto& kv) { return kv.second == 0; });
    if (key->second.empty()) {
      s->scores.erase(key++);
    } else {
      ++key;
    }
  }
  if (s->scores.empty()) return sdk::Status(sdk::Code::kSkip);
  state.Write(std::string(kPreScoreStateKey), std::move(s));
  return sdk::Status::Success();
}

std::pair<int64_t, sdk::Status> InterPodAffinity::Score(sdk::CycleState& state,
                                                        const sdk::PodInfo& pod,
                                                        const sdk::NodeInfo& node) {
  const auto* s = state.ReadAs<PreScoreState>(kPreScoreStateKey);
  if (s == nullptr) {
    return {0, MissingCycleState(kPreScoreStateKey)};
  }
  const auto& labels = node.node().meta().labels();
  int64_t score = 0;
  for (const auto& [key, values] : s->scores) {
    auto it = labels.find(key);
    if (it == labels.end()) continue;
    auto v = values.find(it->second);
    if (v != values.end()) score += v->second;
  }
  return {score, sdk::Status::Success()};
}

sdk::Status InterPodAffinity::NormalizeScore(sdk::CycleState& state, const sdk::PodInfo&,
                                             std::vector<sdk::NodeScore>& scores) {
  const auto* s = state.ReadAs<PreScoreState>(kPreScoreStateKey);
  if (s == nullptr || s->scores.empty()) return sdk::Status::Success();
  int64_t min_count = std::numeric_limits<int64_t>::max();
  int64_t max_count = std::numeric_limits<int64_t>::min();
  for (const sdk::NodeScore& ns : scores) {
    min_count = std::min(min_count, ns.score);
    max_count = std::max(max_count, ns.score);
  }
  const int64_t diff = max_count - min_count;
  for (sdk::NodeScore& ns : scores) {
    double f = 0;
    if (diff > 0) {
      f = static_cast<double>(sdk::kMaxNodeScore) *
          (static_cast<double>(ns.score - min_count) / static_cast<double>(diff));
    }
    ns.score = static_cast<int64_t>(f);
  }
  return sdk::Status::Success();
}

std::vector<sdk::ClusterEventWithHint> InterPodAffinity::EventsToRegister() const {
  // kube's isSchedulableAfterPodChange: only assigned pods count. A pod added
  // can satisfy the pending pod's affinity; a pod deleted or relabelled can
  // lift an anti-affinity (the pending pod's, or the deleted pod's own:
  // symmetry).
  auto pod_hint = [](const v1::Pod& pod, const v1::ClusterEvent& e) {
    const v1::Pod* before = e.has_old_pod() ? &e.old_pod() : nullptr;
    const v1::Pod* after = e.has_new_pod() ? &e.new_pod() : nullptr;
    for (const v1::Pod* p : {before, after}) {
      if (p != nullptr && p->node_name().empty()) return sdk::QueueingHint::kQueueSkip;
    }
    auto terms = sdk::PodAffinityTerms::ForPod(pod);
    auto matches_any = [&](const v1::Pod& other, const std::vector<sdk::AffinityTerm>& ts) {
      for (const sdk::AffinityTerm& t : ts) {
        if (MatchesForHint(t, other)) return true;
      }
      return false;
    };
    // Does `other` (existing) keep `pod` away by its own required anti-affinity?
    auto repels = [&](const v1::Pod& other) {
      auto theirs = sdk::PodAffinityTerms::ForPod(other);
      return theirs != nullptr && matches_any(pod, theirs->required_anti_affinity);
    };
    const auto& affinity = terms ? terms->required_affinity : NoTerms();
    const auto& anti = terms ? terms->required_anti_affinity : NoTerms();
    const bool deleted = (e.action() & v1::DELETE) != 0 || after == nullptr;
    if (deleted) {  // Can only lift anti-affinity (a finished pod counts as deleted).
      const v1::Pod* gone = before != nullptr ? before : after;
      if (gone == nullptr) return sdk::QueueingHint::kQueue;
      return matches_any(*gone, anti) || repels(*gone) ? sdk::QueueingHint::kQueue
                                                        : sdk::QueueingHint::kQueueSkip;
    }
    if (before != nullptr) {
      // Label change: helps when the pod now matches the affinity, or no
      // longer matches an anti-affinity term.
      if (MatchesAllForHint(affinity, *after) && !MatchesAllForHint(affinity, *before)) {
        return sdk::QueueingHint::kQueue;
      }
      if (matches_any(*before, anti) && !matches_any(*after, anti)) return sdk::QueueingHint::kQueue;
      return sdk::QueueingHint::kQueueSkip;
    }
    // Added: can only satisfy affinity.
    return !affinity.empty() && MatchesAllForHint(affinity, *after) ? sdk::QueueingHint::kQueue
                                                                    : sdk::QueueingHint::kQueueSkip;
  };
  // kube's isSchedulableAfterNodeChange: affinity needs a node with the
  // term's topology key (added, gained, or moved to another domain);
  // anti-affinity is lifted by a new node, a node that lost the key or
  // moved to another domain.
  auto node_hint = [](const v1::Pod& pod, const v1::ClusterEvent& e) {
    const v1::Node* after = NewNode(e);
    if (after == nullptr) return sdk::QueueingHint::kQueue;
    auto terms = sdk::PodAffinityTerms::ForPod(pod);
    if (terms == nullptr ||
        (terms->required_affinity.empty() && terms->required_anti_affinity.empty())) {
      return sdk::QueueingHint::kQueue;  // Rejected by existing pods' terms (symmetry).
    }
    const v1::Node* before = OldNode(e);
    const auto& now = after->meta().labels();
    for (const sdk::AffinityTerm& t : terms->required_affinity) {
      auto it = now.find(t.topology_key);
      if (it == now.end()) continue;
      if (before == nullptr) return sdk::QueueingHint::kQueue;
      auto old = before->meta().labels().find(t.topology_key);
      if (old == before->meta().labels().end() || old->second != it->second) {
        return sdk::QueueingHint::kQueue;
      }
    }
    for (const sdk::AffinityTerm& t : terms->required_anti_affinity) {
      if (before == nullptr) return sdk::QueueingHint::kQueue;
      auto old = before->meta().labels().find(t.topology_key);
      if (old == before->meta().labels().end()) continue;
      auto it = now.find(t.topology_key);
      if (it == now.end() || it->second != old->second) return sdk::QueueingHint::kQueue;
    }
    return sdk::QueueingHint::kQueueSkip;
  };
  // A Namespace added, deleted or relabelled changes what a namespaceSelector
  // selects, and the labels existing pods' selectors see on the pod's own
  // namespace.
  auto namespace_hint = [](const v1::Pod& pod, const v1::ClusterEvent& e) {
    const v1::Namespace* before = e.has_old_namespace() ? &e.old_namespace() : nullptr;
    const v1::Namespace* after = e.has_new_namespace() ? &e.new_namespace() : nullptr;
    const v1::Namespace* any = after != nullptr ? after : before;
    if (any == nullptr) return sdk::QueueingHint::kQueue;
    if (any->meta().name() == pod.meta().namespace_()) return sdk::QueueingHint::kQueue;
    auto terms = sdk::PodAffinityTerms::ForPod(pod);
    if (terms == nullptr) return sdk::QueueingHint::kQueueSkip;
    static const sdk::Labels* const kNone = new sdk::Labels();
    const sdk::Labels& was = before != nullptr ? before->meta().labels() : *kNone;
    const sdk::Labels& now = after != nullptr ? after->meta().labels() : *kNone;
    auto flips = [&](const sdk::AffinityTerm& t) {
      return NeedsResolving(t) && t.namespace_selector.Matches(was) != t.namespace_selector.Matches(now);
    };
    for (const auto* list : {&terms->required_affinity, &terms->required_anti_affinity}) {
      for (const sdk::AffinityTerm& t : *list) {
        if (flips(t)) return sdk::QueueingHint::kQueue;
      }
    }
    return sdk::QueueingHint::kQueueSkip;
  };
  return {
      {v1::POD, Actions(v1::ADD, v1::DELETE) | static_cast<uint32_t>(v1::UPDATE_POD_LABEL),
       pod_hint},
      {v1::NODE, Actions(v1::ADD, v1::UPDATE_NODE_LABEL), node_hint},
      {v1::NAMESPACE, Actions(v1::ADD, v1::DELETE) | static_cast<uint32_t>(v1::UPDATE),
       namespace_hint},
  };
}

}  // namespace podium::plugins
