// The scheduler: event handlers that keep the cache and the queue current,
// the scheduling loop (one pod at a time, as kube-scheduler's scheduleOne), and
// the binding cycle, which runs off the scheduling thread.
#pragma once

#include <atomic>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "cache/cache.h"
#include "cache/snapshot.h"
#include "framework/framework.h"
#include "metrics/metrics.h"
#include "podium/v1/admin.pb.h"
#include "queue/clock.h"
#include "queue/scheduling_queue.h"
#include "server/cluster_service.h"

namespace podium::scheduler {

using QueuedPodInfoPtr = std::shared_ptr<QueuedPodInfo>;

// A small pool for binding work that calls plugins (PreBind, PostBind...).
class Executor {
 public:
  Executor(int threads, size_t max_queued);
  ~Executor();
  // False when the queue is full or the executor stopped.
  bool Post(std::function<void()> work);
  void Stop();

 private:
  absl::Mutex mu_;
  std::deque<std::function<void()>> work_ ABSL_GUARDED_BY(mu_);
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  const size_t max_queued_;
  std::vector<std::thread> threads_;
};

// Fans scheduling decisions out to Admin.WatchDecisions subscribers.
class DecisionBroadcaster {
 public:
  using Subscriber = std::function<void(const v1::SchedulingDecision&)>;
  uint64_t Subscribe(Subscriber subscriber);
  void Unsubscribe(uint64_t id);
  void Publish(const v1::SchedulingDecision& decision);

 private:
  absl::Mutex mu_;
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  std::map<uint64_t, Subscriber> subscribers_ ABSL_GUARDED_BY(mu_);
};

// Brings plugin mirrors to the scheduling cycle's snapshot.
class CacheStateSource final : public StateSource {
 public:
  CacheStateSource(Cache& cache, const Snapshot& snapshot) : cache_(cache), snapshot_(snapshot) {}
  bool ReadDelta(uint64_t from_seq, uint64_t to_seq, v1::StateDelta* out) override;
  void FullState(uint64_t to_seq, v1::StateDelta* out) override;

 private:
  Cache& cache_;
  const Snapshot& snapshot_;
};

class Scheduler final : public ClusterEventHandler {
 public:
  struct Options {
    int binding_threads = 4;
    absl::Duration flush_unschedulable_interval = absl::Seconds(30);
  };

  // `snapshot` is the one plugin mirrors are brought to (CacheStateSource);
  // only the scheduling thread writes it.
  Scheduler(Options options, Cache& cache, Snapshot& snapshot, SchedulingQueue& queue,
            std::vector<FrameworkPtr> profiles, SchedulerMetrics& metrics, Clock& clock);
  ~Scheduler() override;

  void SetActionSink(ActionSink* sink) { sink_ = sink; }

  // Starts the scheduling loop and housekeeping threads. Scheduling waits for
  // the adapter's first complete list.
  void Start();
  void Stop();

  // ClusterEventHandler (event thread).
  void OnListBegin() override;
  void OnObjectEvent(const v1::ObjectEvent& event) override;
  void OnListEnd() override;
  void OnAdapterDisconnected() override;

  // The queue's PreEnqueue: SchedulingGates, then the remote PreEnqueue
  // plugins of the pod's profile. Called outside the queue's lock.
  sdk::Status PreEnqueue(const sdk::PodInfo& pod) const;

  // A plugin allowed or rejected a pod waiting at Permit.
  void OnPermitDecision(const v1::PermitDecision& decision);

  // Admin.
  void SetPaused(bool paused);
  bool paused() const;
  DecisionBroadcaster& decisions() { return decisions_; }
  // The last FailedScheduling diagnosis of a pending pod, by namespace/name.
  std::optional<std::pair<v1::Pod, Diagnosis>> LastDiagnosis(const std::string& ns,
                                                             const std::string& name) const;
  // Periodic work also exposed for tests: flushes, waiting-pod timeouts, gauges.
  void Housekeeping();
  // Whether the pod waits at Permit. For tests: a pod is assumed before Permit
  // runs, so "assumed" does not yet mean its permit deadlines are set.
  bool WaitingAtPermit(std::string_view uid) const;
  void SetHousekeepingHook(std::function<void()> hook) { housekeeping_hook_ = std::move(hook); }

 private:
  struct WaitingPod {
    QueuedPodInfoPtr pod;
    Framework* framework;
    std::string node;
    uint64_t cycle_id;
    absl::Time start;
    std::map<std::string, absl::Time> pending;  // plugin -> deadline
  };

  // Applies one decision to a waiting pod. Returns the pod when it is done
  // waiting (every plugin allowed it, or one rejected it: *rejected is set).
  std::optional<WaitingPod> ApplyPermitDecision(const v1::PermitDecision& decision, bool* rejected)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void FinishWaiting(WaitingPod pod, bool rejected, const v1::PermitDecision& decision);
  void SchedulingLoop();
  void ScheduleOne(QueuedPodInfoPtr pod);
  Framework* FrameworkFor(const v1::Pod& pod) const;
  bool Responsible(const v1::Pod& pod) const;
  // Binding cycle: after Permit allowed the pod.
  void Bind(QueuedPodInfoPtr pod, Framework* fw, std::string node, uint64_t cycle_id, absl::Time start);
  void SendBind(QueuedPodInfoPtr pod, Framework* fw, std::string node, uint64_t cycle_id, absl::Time start);
  void BindingFailed(QueuedPodInfoPtr pod, Framework* fw, const std::string& node, uint64_t cycle_id,
                     absl::Time start, const sdk::Status& status, bool unschedulable);
  // A failed scheduling attempt: requeue, tell the adapter (condition + event).
  void AttemptFailed(QueuedPodInfoPtr pod, Framework* fw, uint64_t cycle, absl::Time start,
                     ScheduleResult::Outcome outcome, const std::string& message,
                     const absl::flat_hash_set<std::string>& plugins, const Diagnosis* diagnosis,
                     const std::string* nominated_node = nullptr);
  void PublishDecision(const v1::Pod& pod, v1::SchedulingDecision::Result result,
                       const std::string& node, const std::string& message, absl::Duration attempt,
                       const std::string& profile);
  void SendAction(v1::Action action, ActionSink::ResultCallback on_result = nullptr);
  void HandlePod(const v1::ObjectEvent& event);
  void HandleNode(const v1::ObjectEvent& event);
  void MoveOnEvent(v1::ClusterEvent event);

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
  ActionSink* sink_ = nullptr;
  DecisionBroadcaster decisions_;
  std::function<void()> housekeeping_hook_;

  // Scheduling thread only.
  uint64_t cycle_id_ = 0;

  // Event thread only: the last state of every object, for diffs and relists.
  absl::flat_hash_map<std::string, std::shared_ptr<const v1::Pod>> pods_;  // uid -> pod
  absl::flat_hash_map<std::string, std::shared_ptr<const v1::Node>> nodes_;  // name -> node
  bool relisting_ = false;
  absl::flat_hash_set<std::string> seen_pods_, seen_nodes_;

  mutable absl::Mutex mu_;
  bool synced_ ABSL_GUARDED_BY(mu_) = false;
  bool paused_ ABSL_GUARDED_BY(mu_) = false;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  absl::flat_hash_map<std::string, WaitingPod> waiting_ ABSL_GUARDED_BY(mu_);
  // The pod whose Permit the scheduling thread is running ("" when none), and
  // decisions for it that arrived before it was in waiting_ (a plugin may
  // speak right after answering WAIT); applied when it starts waiting.
  std::string in_permit_ ABSL_GUARDED_BY(mu_);
  std::vector<v1::PermitDecision> early_decisions_ ABSL_GUARDED_BY(mu_);
  // Pods that are pending and ours to schedule (a failed attempt of a pod
  // deleted meanwhile is not requeued).
  absl::flat_hash_set<std::string> pending_uids_ ABSL_GUARDED_BY(mu_);
  // namespace/name -> last failure, for ExplainPod. Bounded.
  absl::flat_hash_map<std::string, std::pair<v1::Pod, Diagnosis>> diagnoses_ ABSL_GUARDED_BY(mu_);

  Executor executor_;
  std::thread scheduling_thread_;
  std::thread housekeeping_thread_;
  absl::Time last_unschedulable_flush_;
};

}  // namespace podium::scheduler
