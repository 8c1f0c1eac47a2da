// Preemption's dry runs through the framework's plugin processes: one
// PreemptionDryRunRequest per process that serves PreFilter or Filter plugins
// of the profile, carrying every candidate node with its ordered potential
// victims. With one such process (the usual sidecar) its answer is final; with
// several, each picks victims for its own filters, the scheduler takes the
// union per node and confirms it with every process in one more request each.
// A bound pod (spec.nodeName set) is a deferred in-place resize (KEP-5836): its
// node is the only candidate, and the process takes the pod off that node
// before it evaluates it with its spec's requests.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "framework/framework.h"
#include "preemption/preemption.h"

namespace podium::scheduler::preemption {

struct DryRunNode {
  const sdk::NodeInfo* node = nullptr;
  PotentialVictims potential;
};

// A dry run's candidate: the node, its potential victims in reprieve order,
// and how many of them violate a PDB.
void SetCandidate(const sdk::NodeInfo& node, const PotentialVictims& potential,
                  v1::PreemptionDryRunRequest::Candidate& c);

struct DryRunOutcome {
  std::vector<Candidate> candidates;  // In the order of the nodes given.
  // Why the other evaluated nodes are not candidates.
  std::vector<std::pair<NodeName, SharedStatus>> rejected;
};

// Candidates found so far, for kube-scheduler's stop rule (dryRunPreemption):
// enough once there are num_candidates, at least one without PDB violations.
struct DryRunCounts {
  uint32_t non_violating = 0;
  uint32_t violating = 0;
  bool Enough(uint32_t num_candidates) const {
    return num_candidates > 0 && non_violating > 0 && non_violating + violating >= num_candidates;
  }
};

// `num_candidates` is kube-scheduler's stop rule (0: evaluate every node);
// `found` (may be null) carries the count over calls for the nodes of one
// pod sent in chunks, and is updated. An error means a process with
// failurePolicy Fail did not answer well; a process with Ignore that fails is
// left out (counted).
absl::StatusOr<DryRunOutcome> RunDryRuns(
    const ProfileSpec& spec, const v1::Pod& pod, uint64_t cycle_id, uint64_t state_seq,
    const std::vector<DryRunNode>& nodes,
    const google::protobuf::RepeatedPtrField<v1::MirroredPod>& nominated, uint32_t num_candidates,
    DryRunCounts* found = nullptr, const v1::PreemptionDryRunResponse* first_answer = nullptr);

// The first request RunDryRuns would send for `nodes` (counts from zero),
// without its pod, when the profile has one filter process; nullopt
// otherwise. `first_answer` above is its answer when it rode in the cycle
// request (CycleRequest.preemption_dry_run) and was run there.
std::optional<v1::PreemptionDryRunRequest> FirstDryRunRequest(const ProfileSpec& spec,
                                                              uint64_t cycle_id,
                                                              const std::vector<DryRunNode>& nodes,
                                                              uint32_t num_candidates);

}  // namespace podium::scheduler::preemption
