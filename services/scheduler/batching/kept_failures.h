// Kept failures: the batcher's rankings for pods that fit no node. A full
// cycle of a signable pod that finds no feasible node examined every node (no
// feasible node means no early stop, whatever percentageOfNodesToScore says),
// so its rejection status per node is the whole verdict. It is kept for the
// signature, with the nominated pods' fingerprints it saw; the next pod of the
// signature re-evaluates only the nodes that changed since, under the
// batcher's rules (batcher.h: nodes touched by cluster events, nodes whose
// nominated pods changed as that pod counts them; invalidated by what moves
// verdicts on other nodes; stale after max_age or when more than half of the
// nodes changed). Still none feasible: the pod gets the Diagnosis a full cycle
// would give (every node's status, UnschedulableAndUnresolvable kept) and goes
// on to PostFilter. One feasible: the failure is dropped and the pod takes the
// normal path (a full cycle).
//
// Nominations. With the nominator's change log (ProfileSpec::
// nomination_changes) a failure keeps the nominations' generation its
// verdicts saw and, at the next pod, re-evaluates the nodes whose nominations
// changed since among those of its priority or more (the signature holds the
// priority): a superset of the nodes whose nominations as that pod counts
// them changed, plus the nodes of the two pods' own nominations (a pod does
// not count itself). That costs the
// changes, not a walk over every nomination (preempt-500: one per node
// for every preemptor's first attempt). A log that no longer reaches back
// makes the failure stale. Without the log, per-node fingerprints of the
// nominations as the pod counts them are compared.
//
// A kept failure also holds the signature's kept dry runs (KeptDryRuns,
// framework.h), which PostFilter fills: the changed nodes' entries are erased
// before a pod's cycle, and the narrowed cycle carries the dry run of those
// nodes (CycleScope::predict_dry_run), so PostFilter usually asks nothing more.
//
// What-ifs (plugin protocol version 7, with the change log only). The
// narrowed cycle's dry run also asks, for the changed nodes and the nodes
// the next candidate walks will likely pick (PostFilterPlugin::
// PredictDryRunOn), the pod's verdict and
// dry run with a copy of the pod nominated there. The next pod is served
// from them with no request when the only change since is the last pod's
// nomination to one of those nodes (ServeFromWhatIf): no node changed in
// the snapshot, the nominations' generation moved by one, on that node, and
// neither pod had a nomination of its own. Each what-if stands for one
// nomination and is used once; anything else and the pod asks as before.
//
// What-ifs of pods gone (protocol version 8). The same request also asks,
// for each node whose preemption's victims are still there, the pod's
// verdict and dry run once those victims have left the node
// (PreemptionDryRunRequest.what_if_gone), and for each predicted pick, the
// node once the victims a pod nominated there would take have left, that pod
// still nominated (WhatIfNominated.then_gone: it joins the others when a pod
// is served from that pick). A node changed since (the victims' deletions)
// takes one instead of a request when it is now exactly the node as asked
// without them: the same node object and the same pod objects (by identity:
// an update is a new object), no nomination on it changed since, and the
// PDBs did not change (ResolveGone). The node is then clean; the pod is
// served from the what-ifs above when nothing else changed, and otherwise
// asks for fewer nodes. The chain's what-if for that node, asked while those
// pods were still there, is dropped.
//
// Not thread-safe: the scheduling thread owns it.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/time/time.h"
#include "cache/snapshot.h"
#include "framework/framework.h"
#include "queue/clock.h"

namespace podium::scheduler::batching {

// The rules a kept ranking and a kept failure share.
//
// Re-evaluating more than half of the examined nodes (at least 64) would cost
// about a full cycle: the kept result is stale then.
inline bool TooManyChanged(size_t dirty, size_t examined) {
  return dirty > std::max<size_t>(examined / 2, 64);
}

// Calls mark(node) for every node whose nominated pods' fingerprint (as the
// pod counts them) differs between `before` and `now`: added, changed or gone.
template <typename Mark>
void ForEachChangedNomination(const absl::flat_hash_map<uint32_t, uint64_t>& before,
                              const absl::flat_hash_map<uint32_t, uint64_t>& now, Mark mark) {
  for (const auto& [node, fp] : now) {
    auto it = before.find(node);
    if (it == before.end() || it->second != fp) mark(node);
  }
  for (const auto& [node, fp] : before) {
    if (!now.contains(node)) mark(node);
  }
}

class KeptFailures {
 public:
  enum class Outcome {
    kServed,       // The pod fits nowhere: result holds the full cycle's diagnosis.
    kNone,         // No failure kept for the signature.
    kInvalidated,  // Dropped: a change that moves verdicts on other nodes.
    kStale,        // Dropped: too old, or too many nodes changed.
    kFeasible,     // Dropped: a changed node passes now.
    kRefused,      // Dropped: the narrowed cycle failed otherwise (PreFilter, an error).
  };

  // `what_if_nodes`: how many candidate walks' picks a narrowed cycle asks
  // preemption what-ifs for (CycleScope::what_if_nodes; 0: none). See
  // "What-ifs" below.
  KeptFailures(absl::Duration max_age, Clock& clock, uint32_t what_if_nodes = 0)
      : max_age_(max_age), clock_(clock), what_if_nodes_(what_if_nodes) {}
  // Pods served with no request, from the what-ifs of an earlier pod's.
  uint64_t what_if_hits() const { return what_if_hits_; }
  // Changed nodes that took a what-if of pods gone instead of a request.
  uint64_t what_if_gone_nodes() const { return what_if_gone_nodes_; }

  // Nodes whose verdicts may have changed (Snapshot::last_update_changed).
  void NodesChanged(const std::vector<uint32_t>& ids);
  // Verdicts on other nodes may have changed: every kept failure is dropped
  // at its next use.
  void InvalidateAll();
  // The profile's plugins or processes changed.
  void ForgetProfile(const Framework* fw) { profiles_.erase(fw); }
  void Forget(const Framework* fw, const std::string& key);
  bool Has(const Framework* fw, const std::string& key) const {
    auto p = profiles_.find(fw);
    return p != profiles_.end() && p->second.contains(key);
  }

  // The pod's nominated pods' fingerprints per node, as OpportunisticBatching
  // takes them: asked only without the nominator's change log.
  using Fingerprints = std::function<absl::flat_hash_map<uint32_t, uint64_t>()>;

  // Serves `pod` from its signature's kept failure: re-evaluates the changed
  // nodes. `snapshot_generation`: the nominations' generation when the
  // snapshot was taken (OpportunisticBatching::SnapshotUpdating), which the
  // failure keeps when older than the log's: a change between the snapshot
  // and this call is re-evaluated again by the next pod. `ran_cycle`: a
  // narrowed cycle ran under cycle_id (to be ended by the caller unless
  // kServed).
  Outcome Serve(Framework& fw, const std::string& key, const v1::Pod& pod, const Snapshot& snapshot,
                uint64_t state_seq, uint64_t cycle_id, const Fingerprints& nominated,
                std::optional<uint64_t> snapshot_generation, ScheduleResult& result, bool& ran_cycle);

  // Keeps a full cycle's failure when it is a per-node verdict (every node
  // rejected, no PreFilter rejection) and hands the kept dry runs to its
  // diagnosis. With the change log, `generation` is the nominations' as the
  // cycle saw them (and `nominated` is not asked); without it, `nominated`
  // is, as for Serve.
  void Remember(const Framework& fw, const std::string& key, const v1::Pod& pod, ScheduleResult& result,
                const Snapshot& snapshot, std::optional<uint64_t> generation, const Fingerprints& nominated);

  size_t size() const;

 private:
  struct Failure {
    absl::flat_hash_map<uint32_t, SharedStatus> statuses;  // Every node's, by id.
    // `statuses` in the snapshot's node order, as every attempt it serves
    // is diagnosed (one list shared by them; null when it is to be built
    // again), each node's place in it, and the plugins they name.
    std::shared_ptr<NodeStatuses::Vector> diagnosis;
    absl::flat_hash_map<uint32_t, uint32_t> diagnosis_index;
    absl::flat_hash_set<std::string> diagnosis_plugins;
    // The distinct statuses `statuses` points at (a few), so that a node
    // re-evaluated to the same rejection shares its object (Intern).
    std::vector<SharedStatus> distinct;
    absl::flat_hash_set<uint32_t> dirty;
    absl::flat_hash_map<uint32_t, uint64_t> nominated;  // node -> fingerprint (without the change log).
    // With the change log: the nominations' generation the statuses saw, and
    // the node the pod they were taken for was nominated to ("" when none).
    std::optional<uint64_t> generation;
    std::string own_node;
    std::shared_ptr<KeptDryRuns> dry_runs;
    absl::Time created;
    bool invalidated = false;
    // What-ifs (with the change log only): the verdict and dry run of the
    // signature's pods on nodes where one more of them would be nominated,
    // from the last narrowed cycle, valid while the only change since is
    // `last_uid`'s nomination to one of their nodes (ServeFromWhatIf).
    struct GoneWhatIf;
    struct WhatIf {
      SharedStatus status;
      KeptDryRun dry_run;
      // The node once dry_run's victims have left it, the pod still
      // nominated there (WhatIfNominated.then_gone): a chain's what-if hands
      // it to `gone` when a pod is served from it.
      std::shared_ptr<GoneWhatIf> then_gone;
    };
    struct Chain {
      std::string last_uid;  // The pod served last.
      uint64_t generation = 0;  // The nominations' generation it was served at.
      absl::flat_hash_map<uint32_t, WhatIf> nodes;  // Each used once, then erased.
    };
    std::optional<Chain> chain;
    // What-ifs of pods gone, by node: the node as asked (its object, and
    // its pods once the gone ones left, sorted by address), valid while
    // nothing on it but their leaving changed since `generation` (of the
    // nominations) and the PDBs are those of `objects_generation`.
    struct GoneWhatIf {
      WhatIf what_if;
      // No potential victim is left: the verdict only, and no kept dry run
      // (PostFilter skips a node with no lower-priority pod).
      bool no_candidate = false;
      std::shared_ptr<const v1::Node> node;
      std::vector<sdk::PodInfoPtr> remaining;
      uint64_t generation = 0;
      uint64_t objects_generation = 0;
    };
    absl::flat_hash_map<uint32_t, GoneWhatIf> gone;
  };
  // One what-if answer as a narrowed cycle would have kept it: true when
  // `out` holds a rejection and a dry run; false to leave the node to a
  // request. `invalid` says why when the answer names a pod not on the node.
  static bool ParseWhatIf(const v1::WhatIfNominated& w, const sdk::NodeInfo& node, Failure::WhatIf& out,
                          std::string& invalid);
  // The same for a what-if of pods gone (w.gone), into `out` (its node and
  // the pods left); `out.generation` and `out.objects_generation` are the
  // caller's to set.
  static bool ParseGoneWhatIf(const v1::WhatIfNominated& w, const sdk::NodeInfo& node, Failure::GoneWhatIf& out,
                              std::string& invalid);
  // Takes the what-ifs of pods gone of a narrowed cycle's answer into failure.gone.
  static void TakeGoneWhatIfs(Failure& failure, const v1::PreemptionDryRunResponse& answer,
                              const Snapshot& snapshot, uint64_t generation);
  // Cleans the changed nodes that are exactly as a what-if of pods gone
  // foresaw them, with its verdict and dry run.
  void ResolveGone(Framework& fw, Failure& failure, const v1::Pod& pod, const Snapshot& snapshot);
  // Takes the what-ifs of a narrowed cycle's answer into failure.chain.
  static void TakeWhatIfs(Failure& failure, const v1::PreemptionDryRunResponse& answer, const Snapshot& snapshot,
                          const std::string& uid, uint64_t generation);
  // Serves the pod from failure.chain when it holds (no request); false otherwise.
  bool ServeFromWhatIf(Framework& fw, Failure& failure, const v1::Pod& pod, const Snapshot& snapshot);
  // Sets a node's status, and its entry in failure.diagnosis in place when
  // no attempt holds that list any more and the rejecting plugin is the
  // same (else the list is built again).
  static void SetStatus(Failure& failure, uint32_t node, SharedStatus status);
  // The full cycle's diagnosis from failure.statuses.
  static void Diagnose(Failure& failure, const Snapshot& snapshot, uint64_t cycle_id, ScheduleResult& result);
  using Failures = absl::flat_hash_map<std::string, Failure>;  // By signature.
  // `status`, or an equal one (code, plugin, reasons) the failure holds
  // already: nodes that share a rejection share one object, so that what
  // walks every node's status (the message, podiumctl explain's counts,
  // PostFilter's potential nodes) counts runs of one status rather than
  // hashing a status per node.
  static SharedStatus Intern(Failure& failure, SharedStatus status);

  const absl::Duration max_age_;
  Clock& clock_;
  uint32_t what_if_nodes_ = 0;
  uint64_t what_if_hits_ = 0;
  uint64_t what_if_gone_nodes_ = 0;
  absl::flat_hash_map<const Framework*, Failures> profiles_;
};

}  // namespace podium::scheduler::batching
