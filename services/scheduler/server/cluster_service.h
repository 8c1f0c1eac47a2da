// Cluster.Sync: the adapter's stream. Reactions do bookkeeping only; events
// are validated and handed, in order, to the scheduler on the event thread.
#pragma once

#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "cluster_link.h"
#include "podium/v1/cluster.grpc.pb.h"

namespace podium::scheduler {

class SchedulerMetrics;

class ClusterService final : public v1::Cluster::CallbackService, public ActionSink {
 public:
  struct Options {
    std::vector<std::string> scheduler_names;
    absl::Duration action_timeout = absl::Seconds(30);
    size_t max_buffered_messages = 64;  // Reading pauses above this.
  };

  ClusterService(Options options, ClusterEventHandler& handler, SchedulerMetrics* metrics);
  ~ClusterService() override;

  grpc::ServerBidiReactor<v1::ClusterMessage, v1::SchedulerMessage>* Sync(
      grpc::CallbackServerContext* context) override;
  void Send(v1::Action action, ResultCallback on_result) override;

  bool adapter_connected() const;
  void Shutdown();

 private:
  class SyncReactor;
  struct PendingAction {
    ResultCallback on_result;
    absl::Time deadline;
  };
  struct Work {
    SyncReactor* reactor = nullptr;  // Identity only; never dereferenced here.
    v1::ClusterMessage message;
    bool disconnected = false;
  };

  void EventLoop();
  void ResultLoop();
  void Handle(Work& work);
  void OnReactorMessage(SyncReactor* reactor, v1::ClusterMessage&& message);
  void OnReactorDone(SyncReactor* reactor);
  void FailActions(const std::string& why) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Complete(uint64_t id, const v1::ActionResult& result);

  const Options options_;
  ClusterEventHandler& handler_;
  SchedulerMetrics* metrics_;

  // Lock order: mu_ only; callbacks run without it.
  mutable absl::Mutex mu_;
  SyncReactor* active_ ABSL_GUARDED_BY(mu_) = nullptr;
  bool shutdown_ ABSL_GUARDED_BY(mu_) = false;
  std::deque<Work> work_ ABSL_GUARDED_BY(mu_);
  // Action results skip the object events: a bind's result needs no ordering
  // with them and must not wait behind a burst of pod creations.
  std::deque<v1::ActionResult> results_ ABSL_GUARDED_BY(mu_);
  uint64_t next_action_id_ ABSL_GUARDED_BY(mu_) = 1;
  absl::flat_hash_map<uint64_t, PendingAction> pending_ ABSL_GUARDED_BY(mu_);
  // Results to deliver on the event thread (failures decided under mu_).
  std::vector<std::pair<ResultCallback, v1::ActionResult>> to_fail_ ABSL_GUARDED_BY(mu_);
  std::thread event_thread_;
  std::thread result_thread_;
};

}  // namespace podium::scheduler
