// kube-scheduler's SchedulingQueue (PriorityQueue): activeQ, backoffQ and the
// unschedulable pool, PreEnqueue gating, queueing hints and periodic flushes.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "podium/sdk/framework.h"
#include "podium/v1/plugin.pb.h"
#include "queue/clock.h"
#include "queue/queueing_hint_evaluator.h"

namespace podium::scheduler {

// Where a pending pod waits. A gated pod sits in the unschedulable pool but is
// reported separately, as kube-scheduler's scheduler_pending_pods{queue="gated"}.
// kInFlight is no queue: a pod popped and not yet Done (being scheduled,
// waiting at Permit or binding), as the Admin API lists it.
enum class QueueKind { kActive, kBackoff, kUnschedulable, kGated, kInFlight };
// "active", "backoff", "unschedulable", "gated", "in_flight"
std::string_view QueueKindName(QueueKind kind);

struct QueuedPodInfo {
  sdk::PodInfoPtr pod_info;
  // Scheduling attempts so far (incremented by Pop).
  int attempts = 0;
  // Attempts that ended Unschedulable (a plugin rejected the pod or left it
  // Pending), and the Errors since the last such one. The backoff counts the
  // errors while they last, else the unschedulable attempts (kube-scheduler
  // #128748): an API or plugin outage does not lengthen a pod's backoff for
  // good.
  int unschedulable_count = 0;
  int consecutive_errors_count = 0;
  // When the pod was added to the queue (Add, or AddUnschedulableIfNotPresent
  // after an attempt); backoff and the pool's leftover flush count from it,
  // and PrioritySort orders pods of equal priority by it.
  absl::Time timestamp = absl::InfinitePast();
  // When the pod was first popped.
  std::optional<absl::Time> initial_attempt_timestamp;
  // Plugins that rejected the pod (Unschedulable*) / returned Pending in the
  // last attempt; none of either means the attempt failed with an Error.
  std::set<std::string> unschedulable_plugins;
  std::set<std::string> pending_plugins;
  // Held back by PreEnqueue.
  bool gated = false;
  std::string gating_plugin;
  // The last FailedScheduling message (or the PreEnqueue message when gated).
  std::string message;

  const v1::Pod& pod() const { return *pod_info->pod; }
  const std::string& uid() const { return pod_info->uid(); }
};

// PreEnqueue plugins: a non-success status gates the pod (status.plugin()
// names the plugin). May do RPCs: the queue never calls it under its lock.
using PreEnqueueFn = std::function<sdk::Status(const sdk::PodInfo& pod)>;
// kube-scheduler's SchedulingGates PreEnqueue plugin.
sdk::Status SchedulingGatesPreEnqueue(const sdk::PodInfo& pod);

// QueueSort: true when a should be popped before b.
using QueueLessFn = std::function<bool(const QueuedPodInfo& a, const QueuedPodInfo& b)>;
// PrioritySort: priority descending, then QueuedPodInfo::timestamp (when the
// pod was added or requeued after an attempt) ascending.
bool PrioritySortLess(const QueuedPodInfo& a, const QueuedPodInfo& b);

// Per plugin name, the cluster events it registered (with or without a
// queueing hint). A plugin missing from the registry is treated as registered
// for every event without a hint (kube-scheduler does so for plugins without
// EnqueueExtensions); a plugin with an empty list is requeued by no event,
// only by the periodic leftover flush.
using EventRegistry = absl::flat_hash_map<std::string, std::vector<v1::ClusterEventInterest>>;

struct PendingPodCounts {
  size_t active = 0;
  size_t backoff = 0;
  size_t unschedulable = 0;  // Not gated.
  size_t gated = 0;
};

// One pending pod as the Admin API lists it.
struct QueuedPodSummary {
  sdk::PodInfoPtr pod_info;
  QueueKind queue = QueueKind::kActive;
  int attempts = 0;
  // When it entered its queue; for kInFlight, when it was popped.
  absl::Time timestamp;
  absl::Time backoff_expiry;  // InfinitePast when not backing off.
  std::vector<std::string> unschedulable_plugins;
  std::vector<std::string> pending_plugins;
  std::string gating_plugin;
  std::string message;
};

// Which pending pods a listing returns. Empty fields match everything.
struct QueueListFilter {
  std::optional<QueueKind> queue;
  std::string namespace_name;
  // A plugin that rejected the pod, answered Pending or gates it (so no pod
  // in flight matches: its attempt has no verdict yet).
  std::string plugin;
  // In-flight pods left out (the Admin service lists those waiting at Permit
  // on their own).
  absl::flat_hash_set<std::string> except_in_flight;
};

// One page of a listing: pods [offset, offset + limit) of the matching pods in
// List() order, and how many match in all.
struct QueueListPage {
  std::vector<QueuedPodSummary> pods;
  size_t total = 0;
};

// Thread-safe; one lock, never held while calling PreEnqueue or the hint
// evaluator.
class SchedulingQueue {
 public:
  struct Options {
    absl::Duration initial_backoff = absl::Seconds(1);
    absl::Duration max_backoff = absl::Seconds(10);
    absl::Duration max_in_unschedulable = absl::Minutes(5);
    const Clock* clock = nullptr;  // Null: the real clock.
    PreEnqueueFn pre_enqueue;      // Empty: no PreEnqueue plugin.
    QueueLessFn less;              // Empty: PrioritySort.
    // Null: every hinted plugin counts as saying Queue. Must outlive the queue.
    QueueingHintEvaluator* hint_evaluator = nullptr;
    // KEP-5142 (kube's SchedulerPopFromBackoffQ, on by default since 1.33):
    // when activeQ is empty, Pop takes the head of backoffQ instead of
    // idling. Pods backing off after an Error (no plugin rejected them) are
    // never popped early. Backoff expiries are rounded up to whole
    // `backoff_ordering_window`s, and pods whose backoff ends in the same
    // window are ordered as activeQ orders them.
    bool pop_from_backoff_q = true;
    absl::Duration backoff_ordering_window = absl::Seconds(1);
    // Called (under the queue's lock: must not call back into the queue) for
    // every pod that enters a queue, with the queue's name (QueueKindName) and
    // the event that brought it (kube-scheduler's
    // scheduler_queue_incoming_pods_total{queue,event}).
    std::function<void(std::string_view queue, std::string_view event)> on_incoming_pod;
  };

  // The `event` label values of on_incoming_pod besides cluster events
  // (ClusterEventLabel), as kube-scheduler names them.
  static constexpr std::string_view kEventPodAdd = "PodAdd";
  static constexpr std::string_view kEventPodUpdate = "PodUpdate";
  static constexpr std::string_view kEventScheduleAttemptFailure = "ScheduleAttemptFailure";
  static constexpr std::string_view kEventBackoffComplete = "BackoffComplete";
  static constexpr std::string_view kEventUnschedulableTimeout = "UnschedulableTimeout";
  static constexpr std::string_view kEventForceActivate = "ForceActivate";
  // A gated pod passed PreEnqueue when asked again (a gang's member arrived).
  static constexpr std::string_view kEventPreEnqueueRetry = "PreEnqueueRetry";

  SchedulingQueue() : SchedulingQueue(Options{}) {}
  explicit SchedulingQueue(Options options);
  ~SchedulingQueue();
  SchedulingQueue(const SchedulingQueue&) = delete;
  SchedulingQueue& operator=(const SchedulingQueue&) = delete;

  void SetEventRegistry(EventRegistry registry);
  void SetQueueingHintEvaluator(QueueingHintEvaluator* evaluator);

  // A new pending pod. Runs PreEnqueue: gated pods go to the pool, marked
  // gated, and leave it only on an update that clears the gate. A pod already
  // queued is updated instead.
  void Add(sdk::PodInfoPtr pod);
  // A pending pod changed. In activeQ/backoffQ it is updated in place. In the
  // pool a gated pod moves out when the gate cleared; any other pod is judged
  // by an UNSCHEDULED_POD event (UPDATE_POD_* bits, or UPDATE when none
  // names the change, which only interests in every update match): it moves
  // when a rejecting plugin registered for it without a hint or its hint
  // says Queue (asked on the calling thread, outside the lock), as
  // kube-scheduler's queueing hints judge UnscheduledPodUpdate; a change of
  // status alone moves nothing. A pod that got a node_name is no longer
  // pending and is removed. A pod being scheduled (popped, not Done) keeps
  // the new version, and the update is judged with the other in-flight
  // events if that attempt fails. Unknown pods are added.
  void Update(sdk::PodInfoPtr new_pod);
  void Update(const v1::Pod& old_pod, sdk::PodInfoPtr new_pod) { Update(std::move(new_pod)); }
  // Returns whether the pod was queued or in flight.
  bool Delete(std::string_view uid);

  // Blocks until a pod is in activeQ (or, with pop_from_backoff_q, in
  // backoffQ for a rejection, not an Error) or the queue is closed (nullopt).
  // Takes activeQ's head, or backoffQ's when activeQ is empty. Counts an
  // attempt and a scheduling cycle.
  std::optional<QueuedPodInfo> Pop();
  std::optional<QueuedPodInfo> TryPop();
  // Whether Pop would return at once (a pod to pop, or the queue closed).
  bool HasPodToPop() const;
  // The first `n` pods of activeQ in the order Pop takes them (fewer when it
  // holds fewer), without popping them: what Pop would take next unless the
  // queue changes meanwhile.
  std::vector<sdk::PodInfoPtr> PeekActive(size_t n) const;
  // Waits at most `timeout` (real time).
  std::optional<QueuedPodInfo> PopWithTimeout(absl::Duration timeout);
  void Close();
  bool closed() const;
  // Cycles started so far (the cycle of the last Pop).
  uint64_t scheduling_cycle() const;

  // Where the asking of queueing hints goes when it may call a plugin (e.g.
  // posted to the queue worker); null: asked on the calling thread.
  using HintDeferral = std::function<void(std::function<void()>)>;

  // After a failed attempt: to backoffQ (or activeQ when the backoff already
  // expired) if no plugin rejected it (an Error), or a cluster event that
  // came while it was in flight (its own updates included) may make it
  // schedulable; otherwise to the unschedulable pool. The events are judged
  // as kube-scheduler (with queueing hints) judges them: an event that a
  // rejecting plugin registered without a hint moves the pod at once; events
  // whose rejecting plugins registered hints are asked (through `defer`)
  // once the pod is in the pool, which it leaves on the first Queue, as on
  // any event meanwhile. When more than kMaxInFlightHintEvents such events
  // came, or the in-flight record overflowed (kMaxInFlightEvents), the pod
  // goes to backoffQ without asking. A pod never popped (no record) goes to
  // backoffQ if any event came during or after `pod_scheduling_cycle`.
  // Dropped if it was deleted or assigned while in flight. AlreadyExists if
  // queued.
  absl::Status AddUnschedulableIfNotPresent(QueuedPodInfo pod_info, uint64_t pod_scheduling_cycle,
                                            const HintDeferral& defer = nullptr);
  // Cluster events kept while pods are in flight (kube-scheduler's
  // inFlightEvents): the oldest go first beyond this many.
  static constexpr size_t kMaxInFlightEvents = 10000;
  // In-flight events asked about for one failed pod, at most: beyond it the
  // pod is retried after its backoff (a busy cluster changed a lot).
  static constexpr size_t kMaxInFlightHintEvents = 8;
  // Cluster events recorded and not yet pruned.
  size_t InFlightEventCount() const;
  // kube-scheduler's scheduler_inflight_events{event}: the kept events by
  // their label (NodeAdd, AssignedPodDelete, ...), and the pods in flight as
  // "PodPoppedInFlightEvent".
  absl::flat_hash_map<std::string, size_t> InFlightEventsByLabel() const;
  // The attempt for this pod is over (after success or requeue).
  void Done(std::string_view uid);

  // Moves pods of the pool (not gated) that the event may make schedulable: a
  // rejecting plugin is registered for it without a hint, or its hint says
  // Queue (asked in one batch, outside the lock). Pods without rejecting
  // plugins move on any event. Returns how many pods moved.
  size_t MoveAllToActiveOrBackoffQueue(const v1::ClusterEvent& event);
  // The same, with the asking handed to `defer` (e.g. posted to the queue
  // worker): what needs no plugin is decided and moved on the calling thread,
  // which never waits on a hint; the pods whose hints say Queue move when the
  // deferred work runs (if they are still in the pool as they were). Returns
  // how many pods moved here.
  // `except_uid`: a pod left where it is (kube's binding-cycle failure moves
  // everyone but the pod whose assumption it undid). While pods are in
  // flight the event is also kept for their verdicts (see
  // AddUnschedulableIfNotPresent): the shared_ptr form keeps it without a
  // copy.
  size_t MoveAllToActiveOrBackoffQueue(const v1::ClusterEvent& event, const HintDeferral& defer,
                                       std::string_view except_uid = {});
  size_t MoveAllToActiveOrBackoffQueue(std::shared_ptr<const v1::ClusterEvent> event, const HintDeferral& defer,
                                       std::string_view except_uid = {});
  // kube's event handlers for assigned pods.
  size_t AssignedPodAdded(const v1::Pod& pod);
  size_t AssignedPodUpdated(const v1::Pod& old_pod, const v1::Pod& new_pod,
                            uint32_t action = v1::UPDATE);
  size_t AssignedPodDeleted(const v1::Pod& pod);

  // kube runs this every second: backoffQ pods whose backoff expired go to activeQ.
  size_t FlushBackoffQCompleted();
  // kube runs this every 30 s: pool pods (not gated) there longer than
  // max_in_unschedulable go to backoffQ/activeQ.
  size_t FlushUnschedulablePodsLeftover();

  // Admin "move back": every pod of backoffQ and the pool (not gated) / the
  // given pods go straight to activeQ. Returns how many moved.
  size_t MoveAllToActiveQueue();
  size_t Activate(const std::vector<std::string>& uids);
  size_t Move(const std::vector<std::string>& uids) { return Activate(uids); }

  // Holds a queued pod back, as a PreEnqueue plugin would, until Release:
  // kube-scheduler's DefaultPreemption keeps a preemptor out of the cycles
  // while its preemption is carried out (KEP-4832). The pod waits in the pool,
  // gated by `plugin` with `message` (what the Admin API shows); updates,
  // moves, flushes and Activate leave it there. False when the pod is not
  // queued (in flight or gone).
  bool Hold(std::string_view uid, std::string plugin, std::string message);
  // Ends a hold: straight to activeQ with `to_active`, otherwise as after a
  // failed attempt (backoffQ until its backoff expires). False when the pod
  // is not held.
  bool Release(std::string_view uid, bool to_active);
  // Ends a hold and leaves the pod in the pool, ungated: events move it as
  // they move any unschedulable pod (kube-scheduler's preemptor once its
  // preemption's API calls returned). False when the pod is not held.
  bool Unhold(std::string_view uid);

  PendingPodCounts PendingPods() const;
  // How many pods Pop has taken from backoffQ because activeQ was empty.
  uint64_t popped_from_backoff_q() const;
  // activeQ in pop order, then backoffQ by expiry, then the pool by timestamp.
  std::vector<QueuedPodSummary> List() const;
  std::optional<QueuedPodSummary> Find(std::string_view uid) const;
  // The same order as List(), then the pods in flight by when they were
  // popped (then uid), filtered and paged. Copies only the page: the cost is
  // O(queued and in-flight pods) comparisons to filter and count, plus
  // O(offset) steps through activeQ/backoffQ, plus a partial sort of the pool
  // or of the pods in flight (pointers only) when the page reaches into it.
  QueueListPage ListPage(const QueueListFilter& filter, size_t offset, size_t limit) const;
  // The uids of queued pods (not in flight) named namespace/name: usually
  // one, two while a deleted pod and its re-created namesake are both queued.
  std::vector<std::string> UidsOf(std::string_view namespace_name, std::string_view name) const;

  // Gangs. Takes the queued pods of the group namespace_/group that are not
  // gated (and for which `also` is true, when given) out of activeQ, backoffQ
  // or the pool, as Pop takes one (an attempt counted, in flight until Done /
  // AddUnschedulableIfNotPresent), in pop order. The scheduler places a gang's
  // members in one pass with these. Found through a per-group index: O(the
  // group's queued pods), not O(queued pods).
  std::vector<QueuedPodInfo> PopGroupMembers(std::string_view namespace_, std::string_view group,
                                             const std::function<bool(const QueuedPodInfo&)>& also = nullptr);
  // The gated pods of the group (but `except_uid`) run PreEnqueue again,
  // outside the lock; those it lets through go to activeQ (e.g. when the last
  // member of their gang or the PodGroup appears). Returns how many moved.
  size_t RetryGatedMembers(std::string_view namespace_, std::string_view group, std::string_view except_uid = "");
  // The same for the named pods that are still gated (unknown or ungated
  // ones are skipped): e.g. those gated while a list was arriving, asked
  // again once all of it is in.
  size_t RetryGated(const std::vector<std::string>& uids);

  // The backoff for a pod with this many failed attempts (consecutive
  // errors, else unschedulable ones): initial * 2^(attempts-1),
  // capped at max; 0 before the first attempt.
  absl::Duration BackoffDuration(int attempts) const;

 private:
  struct HintAsked {
    sdk::PodInfoPtr pod;  // Keeps HintCandidate::pod alive.
    uint64_t pool_stay;
  };
  size_t MoveAll(const v1::ClusterEvent& event, std::shared_ptr<const v1::ClusterEvent> shared,
                 const HintDeferral& defer, std::string_view except_uid);
  void RecordInFlightEvent(std::shared_ptr<const v1::ClusterEvent> event) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Drops the in-flight events no pod in flight can still be judged by.
  void PruneInFlightEvents() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  struct PodHint {
    std::shared_ptr<const v1::ClusterEvent> event;
    std::vector<std::string> plugins;
  };
  // Asks the hints about one pod in the pool (after its attempt: the events
  // that came while it was in flight; after its own update: that update),
  // event by event, and moves it on the first Queue if it is still there as
  // it was. Outside the lock.
  void AskPooledPodHints(sdk::PodInfoPtr pod, uint64_t pool_stay, const std::vector<PodHint>& hints,
                         QueueingHintEvaluator* evaluator);
  size_t AskHintsAndMove(const v1::ClusterEvent& event, const std::vector<HintCandidate>& candidates,
                         const std::vector<HintAsked>& asked, QueueingHintEvaluator* evaluator);
  struct Entry;
  // The pod's entry if it is still in the pool, ungated, in the stay
  // `pool_stay` (hints were asked about that stay); null otherwise.
  Entry* PooledAsAsked(std::string_view uid, uint64_t pool_stay) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  struct ActiveLess {
    const QueueLessFn* less;
    bool operator()(const Entry* a, const Entry* b) const;
  };
  // By backoff expiry; with `less`, equal expiries (one ordering window) in
  // QueueSort order.
  struct BackoffLess {
    const QueueLessFn* less = nullptr;
    bool operator()(const Entry* a, const Entry* b) const;
  };
  struct InFlight {
    sdk::PodInfoPtr latest;
    // The sequence number of the last cluster event before the pod was
    // popped: later ones came while it was in flight.
    uint64_t events_before = 0;
    bool deleted = false;
    // For listings: the attempt it is in and when it was popped.
    int attempts = 0;
    absl::Time popped = absl::InfinitePast();
  };
  enum class EventDecision { kStay, kMove, kAskHints };

  bool ReadyToPop() const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  std::optional<QueuedPodInfo> PopLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  sdk::Status RunPreEnqueue(const sdk::PodInfo& pod) const;
  // A gated pod as it was when asked to retry (its pool stay tells whether
  // it changed meanwhile).
  struct GatedAsk {
    sdk::PodInfoPtr pod;
    uint64_t pool_stay;
  };
  // Gated, not held, and in the pool: a pod PreEnqueue may be asked again for.
  bool Askable(const Entry* e) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Runs PreEnqueue for each (outside the lock) and moves those let through
  // to activeQ. Returns how many moved.
  size_t AskGatedAgain(const std::vector<GatedAsk>& asked) ABSL_LOCKS_EXCLUDED(mu_);
  void AddNew(sdk::PodInfoPtr pod) ABSL_LOCKS_EXCLUDED(mu_);
  void Detach(Entry* entry) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Ends the pod's hold (ungated, where it is); null when it is not held.
  Entry* EndHold(std::string_view uid) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // `event`: what brought the pod, counted by on_incoming_pod; empty for a
  // re-insert into the same queue (its sort key changed), not counted.
  void InsertActive(Entry* entry, std::string_view event = {}) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void InsertBackoff(Entry* entry, std::string_view event = {}) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void InsertPool(Entry* entry, std::string_view event = {}) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void MoveToActiveOrBackoff(Entry* entry, absl::Time now, std::string_view event)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void CountIncoming(const Entry& entry, std::string_view event) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Time BackoffExpiry(const QueuedPodInfo& info) const;
  // backoffQ's pods in expiry order, both heaps merged (for listings).
  std::vector<const Entry*> BackoffInOrder() const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  EventDecision Decide(const QueuedPodInfo& info, const v1::ClusterEvent& event,
                       std::vector<std::string>* hinted_plugins) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);
  QueuedPodSummary Summarize(const Entry& entry) const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  void Erase(Entry* entry) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // pods_ and its namespace/name index change together.
  Entry* Insert(std::unique_ptr<Entry> entry) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Remove(const std::string& uid, const v1::Pod& pod) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // members_by_group_ follows each entry's pod (its group may change on update).
  void IndexGroup(Entry* entry) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void UnindexGroup(Entry* entry) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void SetPodInfo(Entry* entry, sdk::PodInfoPtr pod) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const absl::Duration initial_backoff_;
  const absl::Duration max_backoff_;
  const absl::Duration max_in_unschedulable_;
  const bool pop_from_backoff_q_;
  const absl::Duration backoff_ordering_window_;
  const Clock& clock_;
  const PreEnqueueFn pre_enqueue_;
  const QueueLessFn less_;
  const std::function<void(std::string_view, std::string_view)> on_incoming_pod_;

  mutable absl::Mutex mu_;
  QueueingHintEvaluator* hint_evaluator_ ABSL_GUARDED_BY(mu_);
  EventRegistry registry_ ABSL_GUARDED_BY(mu_);
  // Every queued pod by uid; in-flight pods are not here.
  absl::flat_hash_map<std::string, std::unique_ptr<Entry>> pods_ ABSL_GUARDED_BY(mu_);
  // "namespace/name" -> uids in pods_, so Admin's move-by-name is O(names).
  absl::flat_hash_map<std::string, std::vector<std::string>> uids_by_key_ ABSL_GUARDED_BY(mu_);
  // "namespace/group" -> the queued pods naming that gang (pods_ entries).
  absl::flat_hash_map<std::string, absl::flat_hash_set<Entry*>> members_by_group_ ABSL_GUARDED_BY(mu_);
  std::set<Entry*, ActiveLess> active_q_ ABSL_GUARDED_BY(mu_);
  // backoffQ is two heaps, as kube's: pods a plugin rejected (Pop may take
  // them early) and pods whose attempt failed with an Error (never early).
  std::set<Entry*, BackoffLess> backoff_q_ ABSL_GUARDED_BY(mu_);
  std::set<Entry*, BackoffLess> error_backoff_q_ ABSL_GUARDED_BY(mu_);
  uint64_t popped_from_backoff_q_ ABSL_GUARDED_BY(mu_) = 0;
  absl::flat_hash_set<Entry*> unschedulable_pods_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, InFlight> in_flight_ ABSL_GUARDED_BY(mu_);
  uint64_t scheduling_cycle_ ABSL_GUARDED_BY(mu_) = 0;
  // The scheduling cycle at the last move request (cluster event).
  uint64_t move_request_cycle_ ABSL_GUARDED_BY(mu_) = 0;
  // Cluster events that came while a pod was in flight, by sequence number
  // (kube-scheduler's inFlightEvents), oldest first.
  std::deque<std::pair<uint64_t, std::shared_ptr<const v1::ClusterEvent>>> in_flight_events_ ABSL_GUARDED_BY(mu_);
  uint64_t last_event_seq_ ABSL_GUARDED_BY(mu_) = 0;
  // Events up to this sequence number were dropped over kMaxInFlightEvents.
  uint64_t events_dropped_through_ ABSL_GUARDED_BY(mu_) = 0;
  // Tags each stay in the pool, so a pod that left and came back while hints
  // were asked is not moved on an answer about its earlier stay.
  uint64_t next_pool_stay_ ABSL_GUARDED_BY(mu_) = 0;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace podium::scheduler
