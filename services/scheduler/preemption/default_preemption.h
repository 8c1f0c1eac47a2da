// DefaultPreemption, kube-scheduler's PostFilter plugin, built into the
// scheduler, and the PreemptionController that carries its decisions out
// asynchronously (KEP-4832).
//
// The preemptor's cycle ends as soon as its victims are chosen: PostFilter
// returns the nominated node, and once the scheduler has put the preemptor
// back in its queue (PostFilterResult::after_requeue) the controller sends,
// per victim, a DisruptionTarget condition patch and then a DeletePod with the
// victim's uid as precondition, plus a Preempted event; a victim waiting at
// Permit (assumed, not bound) is instead rejected there, unreserved and
// requeued, as kube-scheduler does, and counts as gone once forgotten. While these are in
// flight the preemptor is held: a cycle it gets meanwhile (another event moved
// it) ends in PostFilter with kube-scheduler's "not eligible" message and sends
// nothing. When every victim's deletion has been seen (or its delete answered
// NotFound: already gone), the preemptor goes straight to activeQ; the event
// did it, never a timer. A victim two preemptions chose is evicted once and
// its deletion releases both. Any other failure clears the nomination and leaves the
// preemptor where the failed attempt put it (backoffQ or the pool).
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "cache/cache.h"
#include "cache/snapshot.h"
#include "config/config.h"
#include "framework/framework.h"
#include "preemption/dry_run.h"
#include "preemption/nominator.h"
#include "preemption/preemption.h"
#include "server/cluster_service.h"

namespace podium::scheduler::preemption {

inline constexpr char kDefaultPreemption[] = "DefaultPreemption";

// One per scheduler, shared by the profiles' DefaultPreemption plugins. Sits
// in front of the scheduler as the adapter's event handler, so nominations and
// victims are tracked from the same events the cache sees.
class PreemptionController final : public ClusterEventHandler {
 public:
  // Moves pods straight to activeQ (SchedulingQueue::Activate).
  using Activator = std::function<void(const std::vector<std::string>& uids)>;
  // The scheduler's pods waiting at Permit (kube-scheduler's
  // Handle.GetWaitingPod): assumed, not yet bound. A victim among them is
  // rejected in place instead of deleted through the API.
  struct WaitingPods {
    std::function<bool(std::string_view uid)> waiting;
    // Ends the wait with a rejection by `plugin`; `released` runs once the pod
    // is unreserved and forgotten. False when the pod is not waiting (any more).
    std::function<bool(std::string_view uid, const std::string& plugin, const std::string& message,
                       std::function<void()> released)>
        reject;
  };

  // The preemptor's place in the queue (SchedulingQueue::Hold/Release/
  // Unhold): held out of the cycles while its preemption's API calls are out,
  // as kube-scheduler's DefaultPreemption.PreEnqueue does (KEP-4832), so no
  // cycle runs (and no status patch goes out) for it meanwhile. When every
  // call returned, it is left in the pool ungated (unhold): events move it
  // as any unschedulable pod, so room freed elsewhere during the victims'
  // grace period is used, and a cycle meanwhile finds it not eligible to
  // preempt again ("a terminating pod on the nominated node"). Moved to
  // activeQ when every victim is gone (released, or activated once
  // unheld), or released as after a failed attempt when an action failed.
  struct QueueControl {
    std::function<void(const std::string& uid, const std::string& message)> hold;
    // False when the pod was not held (then it is activated, with to_active).
    std::function<bool(const std::string& uid, bool to_active)> release;
    std::function<void(const std::string& uid)> unhold;
  };
  // kube-scheduler's message for a preemptor held at PreEnqueue.
  static constexpr char kWaitingForPreemption[] = "waiting for the preemption for this pod to be finished";

  explicit PreemptionController(Nominator& nominator) : nominator_(nominator) {}
  PreemptionController(ClusterEventHandler& scheduler, Nominator& nominator)
      : scheduler_(&scheduler), nominator_(nominator) {}
  // The handler events are forwarded to (the scheduler); set before events flow.
  void SetScheduler(ClusterEventHandler& scheduler) { scheduler_ = &scheduler; }

  void SetActionSink(ActionSink* sink) { sink_ = sink; }
  void SetActivator(Activator activator) { activate_ = std::move(activator); }
  void SetWaitingPods(WaitingPods waiting) { waiting_ = std::move(waiting); }
  void SetQueueControl(QueueControl queue) { queue_ = std::move(queue); }
  // Told when one preemption's API calls are done (kube-scheduler's
  // preemption goroutine metrics): "success" once every victim's delete
  // returned (or found it gone), "error" at the first that failed; the time
  // since Execute sent them. Not called for a preemption that sent none.
  using ApiCallsObserver = std::function<void(std::string_view result, absl::Duration duration)>;
  void SetApiCallsObserver(ApiCallsObserver observer) { api_calls_observer_ = std::move(observer); }
  // Whether the cache still holds a pod (a victim chosen from an older
  // snapshot may be gone by the time its preemption is carried out).
  void SetPodLookup(std::function<bool(std::string_view uid)> present) { present_ = std::move(present); }
  // Whether the pod is assumed and waiting at Permit.
  bool WaitingAtPermit(std::string_view uid) const { return waiting_.waiting && waiting_.waiting(uid); }
  Nominator& nominator() { return nominator_; }

  // ClusterEventHandler: forwards to the scheduler, then acts on what it saw.
  void OnListBegin() override { scheduler_->OnListBegin(); }
  void OnObjectEvent(const v1::ObjectEvent& event) override;
  void OnListEnd() override { scheduler_->OnListEnd(); }
  void OnAdapterDisconnected() override { scheduler_->OnAdapterDisconnected(); }

  // Whether the pod's last preemption is still being carried out.
  bool InFlight(std::string_view preemptor_uid) const;
  size_t NumInFlight() const;

  // Records the decision and sends its actions (scheduling thread, after the
  // preemptor was requeued). `lower_nominated` are pods nominated to the node
  // whose nomination is cleared.
  void Execute(const v1::Pod& preemptor, const std::string& node,
               const std::vector<sdk::PodInfoPtr>& victims,
               const std::vector<sdk::PodInfoPtr>& lower_nominated);

  // A victim is gone (its deletion was seen, or its delete found nothing).
  void VictimGone(const std::string& victim_uid);
  // The API no longer has this victim (its patch or delete found no pod, or
  // another incarnation under its name: NotFound, Conflict) while the cache
  // still showed it; true until its deletion event is seen. A preemption
  // that would choose it again waits for that event (DefaultPreemption's
  // PostFilter) instead of sending calls bound to fail: the preemptor's
  // retry may come before the cache caught up (backoffQ is popped at once
  // when activeQ is empty).
  bool GoneFromApi(std::string_view victim_uid) const;
  // Drops the pod's nomination and patches status.nominatedNodeName away.
  void ClearNomination(const v1::Pod& pod);
  // Moves the pod straight to activeQ.
  void Activate(const std::string& uid) {
    if (activate_) activate_({uid});
  }

 private:
  struct Preemption {
    std::string node;
    absl::flat_hash_set<std::string> victims;  // Not yet seen gone.
    bool failed = false;
    bool resize = false;  // For a bound pod's deferred resize (KEP-5836).
    // Some victim is evicted by another preemption (its calls, not ours):
    // held until the victims are gone, since that eviction may still fail.
    bool shares_an_eviction = false;
  };
  void Send(v1::Action action, ActionSink::ResultCallback on_result);
  // An action for `victim_uid` failed: the preemption that sent it fails,
  // and so does any other waiting for that victim.
  void ActionFailed(const std::string& preemptor_uid, const std::string& victim_uid,
                    const v1::ActionResult& result);
  // GoneFromApi from now on when `result` says the API has no such victim.
  void MarkIfGoneFromApi(const std::string& victim_uid, const v1::ActionResult& result);
  // Drops an in-flight preemption and its claims on its victims.
  void Forget(absl::flat_hash_map<std::string, Preemption>::iterator it) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Ends the preemptor's hold (QueueControl), or activates it without one.
  void Release(const std::string& uid, bool to_active);
  // One victim's last API call for `preemptor_uid` returned (ok: it went
  // through or found the pod gone). The last one ends the hold (QueueControl)
  // and is told to the ApiCallsObserver.
  void ApiCallReturned(const std::string& preemptor_uid, bool ok);
  // Its preemption is in flight and waits on no other preemption's eviction:
  // once its own calls returned, its hold can end.
  bool HeldOnlyForItsCalls(const std::string& preemptor_uid) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  ClusterEventHandler* scheduler_ = nullptr;
  Nominator& nominator_;
  ActionSink* sink_ = nullptr;
  Activator activate_;
  WaitingPods waiting_;
  QueueControl queue_;
  std::function<bool(std::string_view uid)> present_;
  ApiCallsObserver api_calls_observer_;

  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, Preemption> in_flight_ ABSL_GUARDED_BY(mu_);  // preemptor uid ->
  // victim uid -> the preemptors waiting for its deletion, the one that
  // evicts it first.
  absl::flat_hash_map<std::string, std::vector<std::string>> victim_of_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, v1::Pod> preemptors_ ABSL_GUARDED_BY(mu_);
  // GoneFromApi's victims. One whose deletion was seen before its call's
  // answer stays (its uid never comes back, so it matters to no one); the
  // set is bounded by clearing it past kMaxGoneFromApi.
  absl::flat_hash_set<std::string> gone_from_api_ ABSL_GUARDED_BY(mu_);
  static constexpr size_t kMaxGoneFromApi = 4096;
  // Preemptions whose victims' API calls have not all returned: preemptor
  // uid -> when they were sent and how many victims' calls are out.
  struct ApiCalls {
    absl::Time sent;
    int pending = 0;  // Victims' calls out, plus one while Execute sends them.
  };
  absl::flat_hash_map<std::string, ApiCalls> api_calls_ ABSL_GUARDED_BY(mu_);
};

class DefaultPreemption final : public PostFilterPlugin {
 public:
  struct Options {
    int min_candidate_nodes_percentage = kMinCandidateNodesPercentage;
    int min_candidate_nodes_absolute = kMinCandidateNodesAbsolute;
    uint64_t seed = std::random_device{}();
  };

  // `framework` is the profile this plugin belongs to (its filter plugins and
  // processes); `snapshot` is the scheduling cycle's, read only on the
  // scheduling thread.
  DefaultPreemption(Options options, const Framework& framework, const Snapshot& snapshot,
                    const Cache& cache, PreemptionController& controller);

  std::string_view Name() const override { return kDefaultPreemption; }
  std::pair<PostFilterResult, sdk::Status> PostFilter(const v1::Pod& pod,
                                                      const Diagnosis& diagnosis) override;
  // The first dry-run chunk PostFilter would send if no node is rejected as
  // UnschedulableAndUnresolvable (the usual failure: resources), with its
  // walk taken now; PostFilter uses it, and the answer that rode in
  // the cycle, only when its own first chunk is this one.
  std::optional<v1::PreemptionDryRunRequest> PredictDryRun(const v1::Pod& pod,
                                                           uint64_t cycle_id) override;
  // The dry run of the given nodes (those with lower-priority pods), every
  // one evaluated: what a kept failure's narrowed cycle carries for the nodes
  // that changed (batching/kept_failures.h), so that PostFilter finds their
  // outcomes with the kept ones of the clean nodes.
  // With `what_if_from`: what-ifs (PreemptionDryRunRequest.what_if) for the
  // nodes changed here (node_ids), and for the picks of the next
  // `what_if_nodes` candidate walks (the next PostFilters', UpcomingWalk)
  // and their picks predicted from the kept outcomes:
  // where this pod and the next pods of its signature will likely be
  // nominated.
  std::optional<v1::PreemptionDryRunRequest> PredictDryRunOn(const v1::Pod& pod, uint64_t cycle_id,
                                                             const std::vector<uint32_t>& node_ids,
                                                             const KeptDryRuns* what_if_from,
                                                             uint32_t what_if_nodes, bool what_if_gone) override;

 private:
  using Pdbs = std::vector<std::shared_ptr<const v1::PodDisruptionBudget>>;
  // The next chunk of up to chunk_size candidate nodes from
  // potential[(offset + k) % n], advancing k (up to `end`); nodes with no
  // lower-priority pod are skipped and, when `without_victims` is set, listed
  // there.
  std::vector<DryRunNode> NextChunk(const v1::Pod& pod,
                                           const std::vector<const sdk::NodeInfo*>& potential,
                                           uint32_t offset, uint32_t chunk_size, uint32_t end,
                                           uint32_t& k,
                                           const Pdbs& pdbs,
                                           const absl::flat_hash_set<std::string>& assumed,
                                           std::vector<const sdk::NodeInfo*>* without_victims) const;

  // The pods on `node` that `pod` may preempt: lower priority, and not assumed
  // unless waiting at Permit.
  std::vector<sdk::PodInfoPtr> LowerPriorityPods(const v1::Pod& pod, const sdk::NodeInfo& node,
                                                 const absl::flat_hash_set<std::string>& assumed) const;

  struct Prediction {
    std::string pod_uid;
    uint64_t cycle_id = 0;
    uint32_t num_potential = 0;  // Every node of the snapshot.
    uint64_t walk = 0;  // Its offset: OffsetOf(walk, num_potential).
    // Per candidate node of the first chunk: id, potential victims in order,
    // how many of them violate a PDB.
    struct Node {
      uint32_t id;
      std::vector<std::string> victims;
      size_t num_pdb_violating;
    };
    std::vector<Node> nodes;
  };
  // The prediction a first chunk's dry-run request stands for.
  static Prediction PredictionOf(const std::string& uid, uint64_t cycle_id, uint32_t num_potential,
                                 uint64_t walk, const std::vector<DryRunNode>& chunk);
  std::optional<Prediction> prediction_;
  std::optional<Prediction> dirty_prediction_;  // PredictDryRunOn's (walk unused).
  // Walks' random offsets (kube-scheduler's rand.Int31n(n), one per walk),
  // computed from the walk's index rather than drawn from a generator: the
  // offset of walk w over n potential nodes is OffsetOf(w, n). Looking ahead
  // (PredictDryRunOn's what-ifs cover the next walks) then takes nothing
  // from anyone, and a change in n between the look and the walk changes
  // that walk's offset only, never which walk the later PostFilters are.
  uint64_t next_walk_ = 0;
  std::deque<uint64_t> returned_walks_;  // Given back, in order: taken first.
  // The i-th walk from now (0: the next PostFilter's).
  uint64_t UpcomingWalk(size_t i) const;
  uint64_t TakeWalk();
  // A walk taken that no PostFilter used: the next TakeWalk returns it.
  void ReturnWalk(uint64_t walk);
  uint32_t OffsetOf(uint64_t walk, uint32_t n) const;
  // Whether the pod's own preemption on `node` still has a victim in the
  // snapshot (terminating, or its calls still out).
  bool OwnVictimsOn(std::string_view preemptor_uid, const std::string& node) const;

  // This plugin's preemptions whose victims the snapshot may still hold, by
  // node: what the what-ifs of pods gone ask for (PredictDryRunOn). Kept
  // here, on the scheduling thread, because the controller forgets a victim
  // as soon as its deletion event is seen, before the next snapshot shows it.
  struct Evicting {
    std::string preemptor_uid;
    std::vector<std::string> victims;  // Sorted uids.
  };
  absl::flat_hash_map<std::string, std::vector<Evicting>> evicting_;

  // The best candidate (into `candidates`: none when no node is one),
  // walking `potential` from `offset` in kube-scheduler's order until its
  // stop rule holds, with the signature's kept dry runs: a clean node's kept
  // outcome is taken, the others are asked (one request per process for each
  // run of them) and kept. `answered`: the prediction whose
  // answer rode in this cycle (Diagnosis::dry_run_answer), if any.
  absl::Status WalkKept(const v1::Pod& pod, const Diagnosis& diagnosis, KeptDryRuns& kept,
                        const std::vector<const sdk::NodeInfo*>& potential, uint32_t offset,
                        uint32_t num_candidates, const Pdbs& pdbs,
                        const absl::flat_hash_set<std::string>& assumed,
                        const google::protobuf::RepeatedPtrField<v1::MirroredPod>& nominated_pods,
                        const ProfileSpec& spec, const Prediction* answered, Diagnosis& failure,
                        std::vector<Candidate>& candidates);

  const Options options_;
  const Framework& framework_;
  const Snapshot& snapshot_;
  const Cache& cache_;
  PreemptionController& controller_;
};

// The profile's DefaultPreemption options, or nullopt when the profile
// disables it (postFilter or multiPoint disabled: DefaultPreemption or "*").
// pluginConfig args: minCandidateNodesPercentage (0-100, default 10) and
// minCandidateNodesAbsolute (>= 0, default 100), not both 0. An error names
// the profile and field.
absl::StatusOr<std::optional<DefaultPreemption::Options>> PreemptionOptionsFor(const ProfileConfig& profile,
                                                                              size_t profile_index);

}  // namespace podium::scheduler::preemption
