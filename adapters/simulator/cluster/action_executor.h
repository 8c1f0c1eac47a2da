#pragma once

#include <deque>
#include <functional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "cluster/in_memory_cluster.h"

namespace podium::sim {

// Executes the scheduler's actions against the cluster off the stream's reader
// thread, as the Kubernetes adapter issues API calls: `concurrency` workers,
// each waiting `api_latency` before its call, behind a bounded queue.
// Without latency there is nothing to overlap (every action takes the
// cluster's one lock for microseconds): Submit executes the action on the
// caller's thread, in arrival order, and no worker is started; handing each
// action to a worker and its outcome back cost two thread wake-ups per action
// (about a third of podium-sim's CPU on preempt-500).
class ActionExecutor {
 public:
  using OutcomeSink = std::function<void(ActionOutcome&&)>;
  struct Options {
    int concurrency = 16;
    absl::Duration api_latency = absl::ZeroDuration();
    size_t queue_capacity = 1 << 16;
  };

  ActionExecutor(InMemoryCluster& cluster, Options options, OutcomeSink sink);
  ~ActionExecutor();  // Stop()s.

  // Blocks while the queue is full (backpressure onto the stream reader);
  // without latency, until the action is executed and its outcome sunk.
  // Returns false once stopped.
  bool Submit(v1::Action action);
  // Finishes the queued actions, then joins the workers. Idempotent.
  void Stop();
  // Queued plus running actions.
  size_t InFlight() const;

 private:
  void Work();
  bool HasRoom() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool HasWork() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  InMemoryCluster& cluster_;
  const Options options_;
  const OutcomeSink sink_;
  mutable absl::Mutex mu_;
  std::deque<v1::Action> queue_ ABSL_GUARDED_BY(mu_);
  size_t running_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> workers_;
};

}  // namespace podium::sim
