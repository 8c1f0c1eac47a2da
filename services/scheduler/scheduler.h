// The scheduler: event handlers that keep the cache and the queue current
// (event_handlers.cc), the scheduling loop, one pod at a time as
// kube-scheduler's scheduleOne (schedule_one.cc), the binding cycle off the
// scheduling thread (binding_cycle.cc) and periodic work (housekeeping.cc).
//
// Threads: the event thread (ClusterEventHandler), the scheduling thread, the
// housekeeping thread, gRPC reader threads (OnPermitDecision) and action
// result callbacks. None of them but the scheduling thread calls a plugin:
// queue work that may (PreEnqueue, queueing hints) runs on the one-thread
// queue worker in event order, binding work on the binding pool.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "batching/batcher.h"
#include "cache/cache.h"
#include "cache/snapshot.h"
#include "cluster_link.h"
#include "decision_broadcaster.h"
#include "diagnosis_store.h"
#include "executor.h"
#include "gang/gang.h"
#include "framework/framework.h"
#include "metrics/metrics.h"
#include "queue/clock.h"
#include "queue/scheduling_queue.h"
#include "waiting_pods.h"

namespace podium::scheduler {

// The condition the scheduler sets on a bound pod whose deferred resize
// preemption cannot make room for.
inline constexpr char kResizePreemptionCondition[] = "PodResizePreemption";

// Counters of refused or dropped input, for tests and the logs.
struct SchedulerCounters {
  uint64_t permit_decisions_unknown_plugin = 0;
  uint64_t permit_decisions_early_dropped = 0;
  uint64_t assumed_pods_expired = 0;
  uint64_t binding_work_refused = 0;  // The binding pool was full.
};

class Scheduler final : public ClusterEventHandler {
 public:
  struct Options {
    int binding_threads = 4;
    size_t max_binding_work = 100000;
    size_t max_queue_work = 100000;  // Beyond it the event thread waits (back-pressure).
    absl::Duration flush_unschedulable_interval = absl::Seconds(30);
    // kube-scheduler's durationToExpireAssumedPod: an assumed pod whose bind
    // the adapter confirmed but whose bound update never came is forgotten.
    absl::Duration assumed_pod_ttl = absl::Minutes(15);
    // Binds sent to the adapter and not yet confirmed (or failed) at which
    // the scheduling thread stops popping pods until half of them came back:
    // the pods stay in activeQ, where a later higher-priority pod can still
    // overtake them, instead of waiting behind thousands of binds (attempt
    // latency = binds in flight / throughput). Resuming at half, not at the
    // first free slot, wakes the thread once per N/2 results rather than once
    // per result. 0: no bound. Binds a Bind plugin makes, and pods at Permit
    // or PreBind, are not counted.
    size_t max_binds_in_flight = 8;
    // While a list arrives (no pod is popped until it ends), the scheduling
    // thread brings the plugin mirrors up to the cache every this many listed
    // objects, so that the host takes the cluster in as it is listed rather
    // than all of it with the first pod's request. 0: only once idle.
    size_t list_sync_every = 1024;
    // A pod PreEnqueue holds (a gang member whose siblings are not all there
    // yet) is told why, PodScheduled=False with reason SchedulingGated, only
    // once it has been held this long: the members of a gang created one by
    // one are not each told that the others are missing when the last
    // arrives within the delay (kube-scheduler tells none). Zero: at once.
    absl::Duration gated_status_delay = absl::Seconds(1);
    // Tests drive cycles (ScheduleNext) and Housekeeping themselves.
    bool run_scheduling_thread = true;
    bool run_housekeeping_thread = true;
    DiagnosisStore::Options diagnoses;
    DecisionBroadcaster::Options decisions;
    batching::OpportunisticBatching::Options batching;
  };

  // `snapshot` is the one plugin mirrors are brought to (CacheStateSource);
  // only the scheduling thread writes it.
  Scheduler(Options options, Cache& cache, Snapshot& snapshot, SchedulingQueue& queue,
            std::vector<FrameworkPtr> profiles, SchedulerMetrics& metrics, Clock& clock);
  ~Scheduler() override;

  // Set before Start; may be changed later (published atomically).
  void SetActionSink(ActionSink* sink) { sink_.store(sink, std::memory_order_release); }

  // Starts the threads the options ask for. Scheduling waits for the
  // adapter's first complete list.
  void Start();
  void Stop();

  // ClusterEventHandler (event thread). Never blocks on a plugin.
  void OnListBegin() override;
  void OnObjectEvent(const v1::ObjectEvent& event) override;
  void OnListEnd() override;
  void OnAdapterDisconnected() override;

  // The queue's PreEnqueue: SchedulingGates, then the remote PreEnqueue
  // plugins of the pod's profile. Called outside the queue's lock, on the
  // queue worker.
  // A pod a remote plugin holds gets PodScheduled=False, reason
  // SchedulingGated, with the plugin's message (once per change; held
  // back while a list arrives, see listing_, and for
  // Options::gated_status_delay).
  sdk::Status PreEnqueue(const sdk::PodInfo& pod);

  // A plugin allowed or rejected a pod waiting at Permit (gRPC reader
  // thread; never blocks). The endpoint that sent it was checked to serve the
  // plugin it names (remote/, where it enters).
  void OnPermitDecision(const v1::PermitDecision& decision);

  // One scheduling cycle for the next pod in activeQ, on the calling thread,
  // when scheduling may run (synced, adapter connected, not paused). False
  // when no pod was scheduled. For tests without the scheduling thread.
  bool ScheduleNext();

  // Admin.
  void SetPaused(bool paused);
  bool paused() const;
  // False from OnAdapterDisconnected until the next complete list: no pod is
  // popped meanwhile.
  bool adapter_connected() const;
  // Binds sent to the adapter whose result has not come back.
  size_t binds_in_flight() const;
  DecisionBroadcaster& decisions() { return decisions_; }
  // The last failed attempt of a pending pod, by namespace/name.
  std::optional<PodDiagnosis> LastDiagnosis(std::string_view ns, std::string_view name) const;
  // A bound pod whose deferred resize preemption could not help (KEP-5836):
  // it waits for a pod to leave its node. By namespace/name; the cached pod.
  struct FailedResize {
    sdk::PodInfoPtr pod;
    std::string message;  // Why no victim set makes room.
  };
  std::optional<FailedResize> FailedResizeOf(std::string_view ns, std::string_view name) const;
  const DiagnosisStore& diagnoses() const { return diagnoses_; }
  SchedulerCounters counters() const;
  // Opportunistic batching: hits, misses and why pods were unsignable.
  batching::BatchStats batch_stats() const { return batching_.stats(); }

  // Periodic work: Permit timeouts, backoff and pool flushes, assumed-pod
  // expiry, the hook. Run by the housekeeping thread every 100 ms.
  void Housekeeping();
  // Pods waiting at Permit on a plugin whose process's stream broke since
  // (it crashed or restarted: the decision would never come) are decided as
  // that endpoint's failure policy says, at once rather than at the wait's
  // timeout: rejected (Fail) or allowed by that plugin (Ignore).
  void DecideWaitsOfLostStreams() ABSL_EXCLUSIVE_LOCKS_REQUIRED(housekeeping_mu_);
  // Sends the delayed SchedulingGated patches that are due, of pods still
  // held with the message they were held with (PreEnqueue).
  void SendDueGatedPatches(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(housekeeping_mu_);
  // Blocks until the queue worker and the binding pool ran what was posted
  // before the call (tests; shutdown).
  void WaitForBackgroundWork();
  bool WaitingAtPermit(std::string_view uid) const { return waiting_.Contains(uid); }
  // The pods waiting at Permit now (the Admin API's WAITING_ON_PERMIT).
  std::vector<WaitingPodSummary> PodsWaitingAtPermit() const { return waiting_.List(); }
  // Ends the wait of a pod waiting at Permit with a rejection by `plugin`, as
  // kube-scheduler's waitingPod.Reject (DefaultPreemption: "preempted"): off
  // this thread it is unreserved, forgotten and requeued, then `released`
  // runs. False (and nothing happens) when the pod is not waiting. Never blocks.
  bool RejectWaitingPod(std::string_view uid, const std::string& plugin, const std::string& message,
                        std::function<void()> released = nullptr);
  void SetHousekeepingHook(std::function<void()> hook) { housekeeping_hook_ = std::move(hook); }
  // The handler the adapter's events reach first, which forwards them here
  // (the preemption controller): the deletions a relist infers are sent
  // through it, as watched ones are. Set before Run.
  void SetEventFront(ClusterEventHandler* front) { event_front_ = front; }
  // Clears a pod's nomination; called on the scheduling thread right after a
  // pod is assumed on a node (kube-scheduler's assume: the pod's nomination
  // goes, since it now counts on its node as assumed; a failed binding does
  // not bring it back), and for a pod deleted while its PostFilter nominated
  // it (the deletion's event may have cleared the nomination first). Set
  // before Run.
  void SetClearNominationHook(std::function<void(const std::string& uid)> hook) {
    clear_nomination_hook_ = std::move(hook);
  }

 private:
  // schedule_one.cc
  void SchedulingLoop();
  bool MaySchedule() const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // Below max_binds_in_flight, or, once it was reached, back to half of it.
  bool BindSlotFree() const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // Notes that the bound was reached (the next pop waits for half of it).
  void NoteBindsInFlight() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ScheduleOne(QueuedPodInfoPtr pod);
  // Permit, then the binding cycle (or the wait at Permit) for a pod assumed
  // on `node` with Reserve done.
  // `ready`: when set, a pod every Permit plugin allowed at once is added
  // there for the caller to Bind, instead of being bound here (the gang pass
  // binds its members back to back, so their Bind actions travel together).
  void PermitAndBind(QueuedPodInfoPtr qp, Framework* fw, const std::string& node, sdk::PodInfoPtr assumed,
                     uint64_t cycle_id, uint64_t scheduling_cycle, absl::Time start,
                     std::vector<BindingPod>* ready = nullptr);
  // schedule_gang.cc: a member of a PodGroup in the snapshot and its queued
  // siblings, placed in one pass on one snapshot (each assumed before the next
  // cycle); if fewer than the group's minimum fit, every assumption is undone
  // and every member gets a FailedScheduling message that says why. False
  // when the pod is not a gang member the pass can take (no such group).
  bool ScheduleGang(const QueuedPodInfoPtr& first);
  // A bound pod whose in-place resize was deferred: preemption on its own
  // node only (KEP-5836).
  void ScheduleDeferredResize(QueuedPodInfoPtr qp);
  // Brings snapshot_ up to date and tells batching what changed (it reads the
  // last update's changed nodes, so no update may skip it).
  void RefreshSnapshot();
  // Assumes `pod` on `node` (it counts there from the next cycle on, before
  // binding), tells the batcher (Assumed) and the assumed hook. The error
  // says "assuming the pod: ...".
  absl::StatusOr<sdk::PodInfoPtr> Assume(const v1::Pod& pod, const std::string& node);
  // With no pod to pop: brings the plugin processes' mirrors up to the
  // cluster as it is now (state-only messages, waited on by nothing), so that
  // the next pod's request does not carry a backlog of changes, such as the
  // whole cluster after the initial list or a relist, or a run's binds.
  void SyncMirrorsWhileIdle();
  // Deferred resizes whose preemption failed on `node` are queued again
  // (event thread, when a pod left that node).
  void RetryDeferredResizes(const std::string& node);
  // Gated members of the group `namespace_/group` run PreEnqueue again
  // (queue worker).
  void RetryGatedMembers(const std::string& namespace_, const std::string& group);
  Framework* FrameworkFor(const v1::Pod& pod) const;
  bool HasProfileFor(const v1::Pod& pod) const;
  bool StillPending(const std::string& uid) const;
  // A pod whose PostFilter chose victims and nominated it, deleted meanwhile:
  // the decision is withdrawn (true). False while the pod is pending.
  bool DeletedWhilePreempting(const std::string& uid, PostFilterResult& post);
  // A failed scheduling attempt of the queue's cycle `scheduling_cycle`:
  // requeue, record the diagnosis, tell the adapter (condition + event)
  // unless `report` is false (PostFilterResult::retry_unreported).
  void AttemptFailed(QueuedPodInfoPtr pod, Framework* fw, uint64_t scheduling_cycle, absl::Time start,
                     ScheduleResult::Outcome outcome, const std::string& message,
                     const absl::flat_hash_set<std::string>& plugins, const Diagnosis* diagnosis,
                     const std::string* nominated_node = nullptr, bool report = true);
  void PublishDecision(const v1::Pod& pod, SchedulingDecision::Result result, const std::string& node,
                       const std::string& message, absl::Duration attempt, const std::string& profile,
                       const std::string& nominated_node = "");
  void SendAction(v1::Action action, ActionSink::ResultCallback on_result = nullptr);
  // Counts in counters_ and in podium_scheduler_events_total{kind}.
  void Count(uint64_t SchedulerCounters::*counter, const char* kind);

  // binding_cycle.cc
  void FinishWaiting(WaitingPods::Outcome outcome);
  void Bind(BindingPod pod);
  void SendBind(BindingPod pod);
  // Unreserve (a plugin call), forget the assumed pod, requeue with the
  // pod's own scheduling cycle. Runs on the binding pool.
  void BindingFailed(BindingPod pod, const sdk::Status& status, bool unschedulable);
  // After a binding-cycle failure undid `pod`'s assumption on `node`: the
  // pool's other pods are told (AssignedPodDelete).
  void MoveOnForgottenAssumption(const v1::Pod& pod, const std::string& node);
  // Hands BindingFailed to the binding pool; when it is full, releases the
  // pod without Unreserve (counted) rather than block the caller.
  // `released` runs once the pod is forgotten.
  void PostBindingFailed(BindingPod pod, sdk::Status status, bool unschedulable,
                         std::function<void()> released = nullptr);
  // A pod that stopped waiting because it was deleted: release what it assumed.
  void ReleaseDeleted(BindingPod pod);

  // event_handlers.cc
  // OnObjectEvent's work, timed there (scheduler_event_handling_duration_seconds).
  void HandleObjectEvent(const v1::ObjectEvent& event);
  std::string EventHandlingLabel(const v1::ObjectEvent& event) const;
  void HandlePod(const v1::ObjectEvent& event);
  void HandleNode(const v1::ObjectEvent& event);
  void HandleNamespace(const v1::ObjectEvent& event);
  void PodGone(const std::string& uid, const std::shared_ptr<const v1::Pod>& old);
  // Queue work in event order, off the event thread.
  void PostQueueWork(std::function<void()> work);
  void MoveOnEvent(v1::ClusterEvent event);
  // In event order: `done_uid` (if any) out of the queue, then the event's
  // moves; on this thread when the queue worker has nothing before it, the
  // hints (which may call plugins) always on the worker.
  void QueueWorkHere(std::string done_uid, v1::ClusterEvent event);
  // `done_uid` (if any) out of the queue, then the event's moves; the hints
  // to `defer` when given, else asked here.
  void DeleteAndMove(const std::string& done_uid, std::shared_ptr<const v1::ClusterEvent> event,
                     const SchedulingQueue::HintDeferral& defer);
  // Hands hints to the queue worker (PostQueueWork).
  SchedulingQueue::HintDeferral HintsToQueueWorker();

  const Options options_;
  Cache& cache_;
  // Written by the scheduling thread only.
  Snapshot& snapshot_;
  SchedulingQueue& queue_;
  std::vector<FrameworkPtr> profiles_;
  absl::flat_hash_map<std::string, Framework*> by_scheduler_name_;
  absl::flat_hash_map<const Framework*, SchedulerMetrics::ProfileSeries> series_;
  SchedulerMetrics& metrics_;
  Clock& clock_;
  std::atomic<ActionSink*> sink_{nullptr};
  DecisionBroadcaster decisions_;
  DiagnosisStore diagnoses_;
  WaitingPods waiting_;
  gang::MemberRegistry gang_members_;
  std::function<void()> housekeeping_hook_;
  std::function<void(const std::string& uid)> clear_nomination_hook_;
  ClusterEventHandler* event_front_ = nullptr;

  // Scheduling thread only (or the ScheduleNext caller).
  uint64_t cycle_id_ = 0;

  // Event thread only: the last state of every object, for diffs and relists.
  absl::flat_hash_map<std::string, std::shared_ptr<const v1::Pod>> pods_;    // uid -> pod
  absl::flat_hash_map<std::string, std::shared_ptr<const v1::Node>> nodes_;  // name -> node
  bool relisting_ = false;
  absl::flat_hash_set<std::string> seen_pods_, seen_nodes_;
  size_t listed_ = 0;  // Objects of this list since the last mirror sync asked for.

  // Lock order: mu_ is never held across a call out (plugins, queue, cache,
  // sink, broadcaster); housekeeping_mu_ before mu_.
  mutable absl::Mutex mu_;
  bool synced_ ABSL_GUARDED_BY(mu_) = false;
  bool adapter_connected_ ABSL_GUARDED_BY(mu_) = false;
  bool paused_ ABSL_GUARDED_BY(mu_) = false;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  // The event thread listed list_sync_every objects since the scheduling
  // thread last brought the mirrors up (Options::list_sync_every).
  bool list_sync_wanted_ ABSL_GUARDED_BY(mu_) = false;
  // Between a list's begin and its end the scheduler's view is partial (a
  // gang's other members may be further down the list): PreEnqueue notes
  // each pod it asks meanwhile and tells none it is held (no SchedulingGated
  // patch); they are asked again once the list is in. A list cut short
  // leaves its pods to the next list's end.
  bool listing_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::string> gated_while_listing_ ABSL_GUARDED_BY(mu_);
  // SchedulingGated patches waiting out Options::gated_status_delay, by pod
  // uid. Housekeeping sends those due whose pod the queue still holds with
  // the same message; a pod PreEnqueue lets through drops its own.
  struct GatedPatch {
    absl::Time due;
    std::string message;
    v1::Action patch;
  };
  absl::flat_hash_map<std::string, GatedPatch> gated_patches_ ABSL_GUARDED_BY(mu_);
  // Pods that are pending and ours to schedule (a failed attempt of a pod
  // deleted meanwhile is not requeued).
  absl::flat_hash_set<std::string> pending_uids_ ABSL_GUARDED_BY(mu_);
  // Assumed pods whose bind the adapter confirmed -> when the assumption
  // expires unless the bound pod is observed first.
  absl::flat_hash_map<std::string, absl::Time> bind_confirmed_ ABSL_GUARDED_BY(mu_);
  // Deferred resizes whose preemption found no victim set: node -> pod uid
  // -> why (the PodResizePreemption condition's message).
  absl::flat_hash_map<std::string, absl::flat_hash_map<std::string, std::string>> failed_resizes_
      ABSL_GUARDED_BY(mu_);
  SchedulerCounters counters_ ABSL_GUARDED_BY(mu_);
  // Bind actions sent to the adapter whose result (success or failure) has
  // not come back: SendBind counts, its result callback releases.
  size_t binds_in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  // The bound was reached and the binds in flight have not yet fallen to half.
  bool binds_draining_ ABSL_GUARDED_BY(mu_) = false;

  // Serialises Housekeeping (its thread and tests).
  absl::Mutex housekeeping_mu_;
  absl::Time last_unschedulable_flush_ ABSL_GUARDED_BY(housekeeping_mu_);
  // The sum of the plugin processes' stream generations at the last
  // DecideWaitsOfLostStreams: the waiting pods are read only when it moved.
  uint64_t permit_streams_seen_ ABSL_GUARDED_BY(housekeeping_mu_) = 0;

  BoundedExecutor binding_pool_;
  BoundedExecutor queue_worker_;
  // Scheduling thread only (stats() from anywhere).
  batching::OpportunisticBatching batching_;
  std::thread scheduling_thread_;
  std::thread housekeeping_thread_;
};

}  // namespace podium::scheduler
