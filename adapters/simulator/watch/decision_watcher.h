#pragma once

#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "podium/v1/admin.grpc.pb.h"

namespace podium::sim {

// Follows Admin.WatchDecisionBatches: one SchedulingDecision per scheduling
// attempt, with attempt_ms (kube's
// scheduler_scheduling_attempt_duration_seconds), several per message when
// the scheduler is busy. A scheduler without the RPC is a normal case:
// unimplemented() turns true.
//
// Nobody reads the decisions before the report, so the stream is not followed
// message by message: its thread collects what has arrived every `interval`
// (on a completion queue of its own, without blocking on it) and sleeps in
// between. A thread blocked on each message was woken once per scheduling
// attempt and took part in polling the channel the Sync stream shares, which
// cost about a quarter of podium-sim's CPU on basic-5000; collecting every
// 5 ms still cost 13 % (each pass polls), every 20 ms 5 %, every 50 ms 3 %
// (perf, one run each). 20 ms of decisions (about 40 on basic-5000, 4 KB)
// wait in the stream's flow-control window; the scheduler keeps up to 10 000
// per watcher before dropping the oldest.
class DecisionWatcher {
 public:
  explicit DecisionWatcher(std::shared_ptr<grpc::Channel> channel, absl::Duration interval = absl::Milliseconds(20));
  ~DecisionWatcher();  // Stop().

  void Start();
  void Stop();  // Cancels the stream and joins. Idempotent.

  // Every decision that has reached this process: collects what arrived since
  // the last pass first (waits for one pass of the thread, unless it ended).
  std::vector<v1::SchedulingDecision> Decisions() const;
  bool unimplemented() const;
  // The stream is over (the scheduler ended it, or Stop) and fully collected.
  bool ended() const;

 private:
  void Run();
  // Takes the completions that are ready, the first waited for until
  // `deadline`; false once the stream is finished.
  bool Drain(gpr_timespec deadline);
  bool DrainWantedOrStopping() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  struct DrainWait {
    const DecisionWatcher* watcher;
    uint64_t want;
  };
  static bool DrainedOrDone(const DrainWait* wait);  // Under the watcher's mu_.

  std::unique_ptr<v1::Admin::Stub> stub_;
  const absl::Duration interval_;
  grpc::ClientContext context_;
  grpc::CompletionQueue cq_;
  std::unique_ptr<grpc::ClientAsyncReader<v1::DecisionBatch>> reader_;
  // Owned by the thread: the message being read and the final status.
  v1::DecisionBatch incoming_;
  grpc::Status status_;
  std::thread thread_;
  mutable absl::Mutex mu_;
  std::vector<v1::SchedulingDecision> decisions_ ABSL_GUARDED_BY(mu_);
  bool unimplemented_ ABSL_GUARDED_BY(mu_) = false;
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool done_ ABSL_GUARDED_BY(mu_) = false;           // The thread ended.
  mutable uint64_t drains_wanted_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t drains_done_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace podium::sim
