// kube-scheduler's DefaultPreemption rules as pure functions over the cycle's
// snapshot: who may preempt, which nodes might help, how many candidates to
// look at, which lower-priority pods violate a PodDisruptionBudget, in which
// order victims are reprieved, and which candidate wins. No I/O here: the dry
// runs are in dry_run.h, the plugin in default_preemption.h.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "framework/framework.h"
#include "podium/sdk/framework.h"
#include "podium/v1/objects.pb.h"

namespace podium::scheduler::preemption {

// kube-scheduler's DefaultPreemptionArgs defaults.
inline constexpr int kMinCandidateNodesPercentage = 10;
inline constexpr int kMinCandidateNodesAbsolute = 100;

// The condition a victim gets before it is deleted (KEP-3329), and its reason.
inline constexpr char kDisruptionTarget[] = "DisruptionTarget";
inline constexpr char kPreemptionByScheduler[] = "PreemptionByScheduler";

// kube-scheduler's messages.
inline constexpr char kNotEligibleNever[] = "not eligible due to preemptionPolicy=Never.";
// A chosen victim was gone from the cache by the end of the cycle (Podium's).
inline constexpr char kVictimsAlreadyGone[] = "victims already gone; trying again on the current state.";
inline constexpr char kVictimsGoneFromApi[] =
    "victims already gone from the API; trying again once their deletion is seen.";
inline constexpr char kNotEligibleTerminating[] =
    "not eligible due to a terminating pod on the nominated node.";
inline constexpr char kNotHelpful[] = "Preemption is not helpful for scheduling";
inline constexpr char kNoVictims[] = "No preemption victims found for incoming pod";

// corev1helpers.PodPriority: spec.priority (0 when unset, as on the wire).
inline int32_t PodPriority(const v1::Pod& pod) { return pod.priority(); }

// util.GetPodStartTime: status.startTime; a pod not started yet (assumed, or
// bound and not acknowledged by its kubelet) counts as starting now, after
// every started pod.
int64_t PodStartTime(const v1::Pod& pod);
// util.MoreImportantPod: higher priority first; at equal priority the pod that
// started earlier.
bool MoreImportantPod(const v1::Pod& a, const v1::Pod& b);

// Terminating (deletionTimestamp set) with DisruptionTarget=True, reason
// PreemptionByScheduler: a victim of an earlier preemption on its way out.
bool TerminatingByPreemption(const v1::Pod& pod);

// DefaultPreemption.PodEligibleToPreemptOthers. `nominated_node` is the node the
// pod is nominated to ("" when none) and `nominated_node_status` what the last
// cycle said about it (null: not rejected there). Returns "" when eligible,
// otherwise kube-scheduler's message.
std::string PodEligibleToPreemptOthers(const v1::Pod& pod, const sdk::Snapshot& snapshot,
                                       const std::string& nominated_node,
                                       const sdk::Status* nominated_node_status);

// nodesWherePreemptionMightHelp: every node of the snapshot except those the
// diagnosis marks UnschedulableAndUnresolvable (which go to `unresolvable`
// with kube-scheduler's "Preemption is not helpful for scheduling"). When the
// pod failed at PreFilter, no node can help.
std::vector<const sdk::NodeInfo*> NodesWherePreemptionMightHelp(
    const sdk::Snapshot& snapshot, const Diagnosis& diagnosis, NodeStatuses* unresolvable);

// GetOffsetAndNumCandidates' count: 10% of the potential nodes, at least 100,
// at most all of them.
uint32_t NumCandidates(uint32_t num_potential_nodes,
                       int min_percentage = kMinCandidateNodesPercentage,
                       int min_absolute = kMinCandidateNodesAbsolute);

// A LabelSelector as kube's LabelSelectorAsSelector reads it. Invalid (an
// operator that needs values without any, or the reverse) is an error naming
// the field.
absl::Status ValidateLabelSelector(const v1::LabelSelector& selector);
bool SelectorIsEmpty(const v1::LabelSelector& selector);
bool SelectorMatches(const v1::LabelSelector& selector,
                     const google::protobuf::Map<std::string, std::string>& labels);

// The lower-priority pods of one node, ordered for the reprieve loop: those
// whose eviction would violate a PDB first, then the others, each group from
// the most important pod down (filterPodsWithPDBViolation over the pods sorted
// by MoreImportantPod). A PDB with an invalid or empty selector matches nothing;
// a pod already in a PDB's disruptedPods does not use up its budget.
struct PotentialVictims {
  std::vector<sdk::PodInfoPtr> pods;
  size_t num_pdb_violating = 0;  // The first num_pdb_violating of `pods`.
};
PotentialVictims OrderPotentialVictims(
    std::vector<sdk::PodInfoPtr> lower_priority_pods,
    const std::vector<std::shared_ptr<const v1::PodDisruptionBudget>>& pdbs);
// Whether the pod uses up some PDB's budget in OrderPotentialVictims (a
// usable PDB of its namespace selects it, and it is not in that PDB's
// disruptedPods): taking it off the node can change the others' order.
bool SpendsAPdbBudget(const v1::Pod& pod, const std::vector<std::shared_ptr<const v1::PodDisruptionBudget>>& pdbs);

// A node where the pod fits once `victims` are gone.
struct Candidate {
  std::string node_name;
  std::vector<sdk::PodInfoPtr> victims;  // In the order of PotentialVictims.
  int64_t num_pdb_violations = 0;
};

// pickOneNodeForPreemption: fewest PDB violations, then the lowest priority of
// the most important victim, then the smallest sum of victim priorities, then
// the fewest victims, then the latest start time of the most important victims;
// the first candidate in order when still tied. Returns the index; candidates
// must not be empty and every candidate has at least one victim.
size_t PickOneNodeForPreemption(const std::vector<Candidate>& candidates);

// The same order as a key (framework.h PreemptionPickKey): of two
// candidates, PickOneNodeForPreemption takes the one with the smaller key, or
// the first in order when the keys are equal.
using PickKey = PreemptionPickKey;
PickKey PickKeyOf(const std::vector<sdk::PodInfoPtr>& victims, int64_t num_pdb_violations);

}  // namespace podium::scheduler::preemption
