// A fixed pool of threads that runs posted work, in posting order, behind a
// bounded queue. The scheduler has two: the binding pool (PreBind, Bind,
// PostBind, Unreserve after a failed bind or a Permit rejection) and the
// one-thread queue worker (PreEnqueue and queueing hints, in event order), so
// that no gRPC callback, action result or cluster event waits on a plugin.
#pragma once

#include <cstddef>
#include <deque>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace podium::scheduler {

class BoundedExecutor {
 public:
  // `name` names its threads (top -H, perf, ps -L; at most 15 characters).
  BoundedExecutor(int threads, size_t max_queued, std::string name = "executor");
  ~BoundedExecutor();
  BoundedExecutor(const BoundedExecutor&) = delete;
  BoundedExecutor& operator=(const BoundedExecutor&) = delete;

  // False when the queue is full or the executor stopped.
  bool Post(std::function<void()> work);
  // Waits for room instead (back-pressure on the caller). False when stopped.
  bool PostOrWait(std::function<void()> work);
  // Runs `work` on the calling thread when nothing is queued or running, so
  // that it keeps its place in posting order without a hand-off (a futex
  // wake and a context switch); the threads start nothing meanwhile. False
  // (nothing ran) otherwise or when stopped: post it instead. `work` must not
  // post to this executor (it may be full and its threads wait for `work`).
  bool RunHereIfIdle(const std::function<void()>& work);
  // Blocks until every work posted before the call has run (tests, shutdown).
  void Drain();
  // Runs what is queued, then joins the threads; later Posts fail.
  void Stop();

 private:
  void Run();

  const size_t max_queued_;
  absl::Mutex mu_;
  std::deque<std::function<void()>> work_ ABSL_GUARDED_BY(mu_);
  size_t running_ ABSL_GUARDED_BY(mu_) = 0;  // Including a RunHereIfIdle.
  bool running_here_ ABSL_GUARDED_BY(mu_) = false;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

}  // namespace podium::scheduler
