#include "preemption/preemption.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "common/validation/object_validation.h"

namespace podium::scheduler::preemption {

int64_t PodStartTime(const v1::Pod& pod) {
  return pod.start_time_us() != 0 ? pod.start_time_us() : std::numeric_limits<int64_t>::max();
}

bool MoreImportantPod(const v1::Pod& a, const v1::Pod& b) {
  if (PodPriority(a) != PodPriority(b)) return PodPriority(a) > PodPriority(b);
  return PodStartTime(a) < PodStartTime(b);
}

bool TerminatingByPreemption(const v1::Pod& pod) {
  if (pod.meta().deletion_timestamp_us() == 0) return false;
  for (const auto& c : pod.conditions()) {
    if (c.type() == kDisruptionTarget && c.status() == "True" && c.reason() == kPreemptionByScheduler) {
      return true;
    }
  }
  return false;
}

std::string PodEligibleToPreemptOthers(const v1::Pod& pod, const sdk::Snapshot& snapshot,
                                       const std::string& nominated_node,
                                       const sdk::Status* nominated_node_status) {
  if (pod.preemption_policy() == v1::NEVER) return kNotEligibleNever;
  if (nominated_node.empty()) return "";
  // Filters say the nominated node cannot take the pod whatever is evicted:
  // preempt again elsewhere.
  if (nominated_node_status != nullptr &&
      nominated_node_status->code() == sdk::Code::kUnschedulableAndUnresolvable) {
    return "";
  }
  if (const sdk::NodeInfo* node = snapshot.Get(nominated_node)) {
    for (const sdk::PodInfoPtr& p : node->pods()) {
      if (PodPriority(*p->pod) < PodPriority(pod) && TerminatingByPreemption(*p->pod)) {
        return kNotEligibleTerminating;
      }
    }
  }
  return "";
}

std::vector<const sdk::NodeInfo*> NodesWherePreemptionMightHelp(
    const sdk::Snapshot& snapshot, const Diagnosis& diagnosis, NodeStatuses* unresolvable) {
  std::vector<const sdk::NodeInfo*> potential;
  // A PreFilter's rejection leaves every node out, unless it was a plain
  // Unschedulable (kube-scheduler gives every node that status then).
  const bool pre_filter_failed = !diagnosis.pre_filter_message.empty() &&
                                 diagnosis.pre_filter_code != sdk::Code::kUnschedulable;
  absl::flat_hash_set<std::string> unresolvable_nodes;
  for (const auto& [name, status] : diagnosis.node_statuses) {
    if (status->code() == sdk::Code::kUnschedulableAndUnresolvable) unresolvable_nodes.insert(name.str());
  }
  SharedStatus not_helpful;  // One status for every such node.
  // Most failures name no such node: then no node's name is hashed.
  const bool any_unresolvable = !unresolvable_nodes.empty();
  potential.reserve(snapshot.Nodes().size());
  for (const sdk::NodeInfo* node : snapshot.Nodes()) {
    if (pre_filter_failed || (any_unresolvable && unresolvable_nodes.contains(node->name()))) {
      if (unresolvable != nullptr) {
        if (not_helpful == nullptr) {
          not_helpful = MakeSharedStatus(sdk::Status(sdk::Code::kUnschedulableAndUnresolvable, kNotHelpful));
        }
        unresolvable->emplace_back(NodeName(*node), not_helpful);
      }
      continue;
    }
    potential.push_back(node);
  }
  return potential;
}

uint32_t NumCandidates(uint32_t num_potential_nodes, int min_percentage, int min_absolute) {
  uint64_t n = uint64_t{num_potential_nodes} * static_cast<uint64_t>(std::max(0, min_percentage)) / 100;
  if (n < static_cast<uint64_t>(std::max(0, min_absolute))) n = static_cast<uint64_t>(min_absolute);
  if (n > num_potential_nodes) n = num_potential_nodes;
  return static_cast<uint32_t>(n);
}

absl::Status ValidateLabelSelector(const v1::LabelSelector& selector) {
  return validation::ValidateLabelSelector(selector, "");
}

bool SelectorIsEmpty(const v1::LabelSelector& selector) {
  return selector.match_labels().empty() && selector.match_expressions().empty();
}

bool SelectorMatches(const v1::LabelSelector& selector,
                     const google::protobuf::Map<std::string, std::string>& labels) {
  for (const auto& [key, value] : selector.match_labels()) {
    auto it = labels.find(key);
    if (it == labels.end() || it->second != value) return false;
  }
  for (const auto& e : selector.match_expressions()) {
    auto it = labels.find(e.key());
    const bool has = it != labels.end();
    const bool in_values =
        has && std::find(e.values().begin(), e.values().end(), it->second) != e.values().end();
    switch (e.operator_()) {
      case v1::LabelSelectorRequirement::IN: if (!in_values) return false; break;
      case v1::LabelSelectorRequirement::NOT_IN: if (in_values) return false; break;
      case v1::LabelSelectorRequirement::EXISTS: if (!has) return false; break;
      case v1::LabelSelectorRequirement::DOES_NOT_EXIST: if (has) return false; break;
      default: return false;
    }
  }
  return true;
}

namespace {

// A PDB with an empty or invalid selector matches nothing.
bool PdbUsable(const v1::PodDisruptionBudget& pdb) {
  return !SelectorIsEmpty(pdb.selector()) && ValidateLabelSelector(pdb.selector()).ok();
}

// Whether evicting `pod` uses up one of a usable `pdb`'s disruptions: it
// selects the pod, and the API server has not counted the pod as disrupted.
bool SpendsBudgetOf(const v1::PodDisruptionBudget& pdb, const v1::Pod& pod) {
  return pdb.meta().namespace_() == pod.meta().namespace_() && SelectorMatches(pdb.selector(), pod.meta().labels()) &&
         !pdb.disrupted_pods().contains(pod.meta().name());
}

}  // namespace

bool SpendsAPdbBudget(const v1::Pod& pod,
                      const std::vector<std::shared_ptr<const v1::PodDisruptionBudget>>& pdbs) {
  if (pod.meta().labels().empty()) return false;
  return std::any_of(pdbs.begin(), pdbs.end(),
                     [&](const auto& pdb) { return PdbUsable(*pdb) && SpendsBudgetOf(*pdb, pod); });
}

PotentialVictims OrderPotentialVictims(
    std::vector<sdk::PodInfoPtr> pods,
    const std::vector<std::shared_ptr<const v1::PodDisruptionBudget>>& pdbs) {
  std::stable_sort(pods.begin(), pods.end(), [](const sdk::PodInfoPtr& a, const sdk::PodInfoPtr& b) {
    return MoreImportantPod(*a->pod, *b->pod);
  });
  // Budgets are spent per node, in importance order, as kube-scheduler does.
  std::vector<int64_t> allowed;
  std::vector<bool> usable;
  allowed.reserve(pdbs.size());
  for (const auto& pdb : pdbs) {
    allowed.push_back(pdb->disruptions_allowed());
    usable.push_back(PdbUsable(*pdb));
  }
  PotentialVictims out;
  std::vector<sdk::PodInfoPtr> non_violating;
  for (sdk::PodInfoPtr& p : pods) {
    const v1::Pod& pod = *p->pod;
    bool violated = false;
    if (!pod.meta().labels().empty()) {
      for (size_t i = 0; i < pdbs.size(); ++i) {
        // A pod already being disrupted (the API server counted it) is not a new violation.
        if (usable[i] && SpendsBudgetOf(*pdbs[i], pod) && --allowed[i] < 0) violated = true;
      }
    }
    if (violated) {
      out.pods.push_back(std::move(p));
    } else {
      non_violating.push_back(std::move(p));
    }
  }
  out.num_pdb_violating = out.pods.size();
  for (auto& p : non_violating) out.pods.push_back(std::move(p));
  return out;
}

namespace {

using Victims = std::vector<sdk::PodInfoPtr>;

int32_t HighestPriority(const Victims& victims) {
  int32_t highest = std::numeric_limits<int32_t>::min();
  for (const auto& v : victims) highest = std::max(highest, PodPriority(*v->pod));
  return highest;
}

int64_t PrioritySum(const Victims& victims) {
  // Shifted by MaxInt32+1 so that negative priorities still add up to more
  // for more pods, as kube-scheduler does.
  int64_t sum = 0;
  for (const auto& v : victims) sum += int64_t{PodPriority(*v->pod)} + int64_t{1} + std::numeric_limits<int32_t>::max();
  return sum;
}

// GetEarliestPodStartTime: the earliest start among the most important victims.
int64_t EarliestStartOfHighest(const Victims& victims) {
  const int32_t highest = HighestPriority(victims);
  int64_t earliest = std::numeric_limits<int64_t>::max();
  for (const auto& v : victims) {
    if (PodPriority(*v->pod) == highest) earliest = std::min(earliest, PodStartTime(*v->pod));
  }
  return earliest;
}

}  // namespace

PickKey PickKeyOf(const std::vector<sdk::PodInfoPtr>& victims, int64_t num_pdb_violations) {
  return {num_pdb_violations, HighestPriority(victims), PrioritySum(victims), victims.size(),
          -EarliestStartOfHighest(victims)};
}

size_t PickOneNodeForPreemption(const std::vector<Candidate>& candidates) {
  // The smallest key; of equal keys, the first.
  size_t best = 0;
  PickKey best_key = PickKeyOf(candidates[0].victims, candidates[0].num_pdb_violations);
  for (size_t i = 1; i < candidates.size(); ++i) {
    const PickKey key = PickKeyOf(candidates[i].victims, candidates[i].num_pdb_violations);
    if (key < best_key) {
      best = i;
      best_key = key;
    }
  }
  return best;
}

}  // namespace podium::scheduler::preemption
