#pragma once

#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "podium/v1/admin.grpc.pb.h"

namespace podium::sim {

// Follows Admin.WatchDecisions: one SchedulingDecision per scheduling attempt,
// with attempt_ms (kube's scheduler_scheduling_attempt_duration_seconds). A
// scheduler without the RPC is a normal case: unimplemented() turns true.
class DecisionWatcher {
 public:
  explicit DecisionWatcher(std::shared_ptr<grpc::Channel> channel);
  ~DecisionWatcher();  // Stop().

  void Start();
  void Stop();  // Cancels the stream and joins. Idempotent.

  std::vector<v1::SchedulingDecision> Decisions() const;
  bool unimplemented() const;

 private:
  void Run();

  std::unique_ptr<v1::Admin::Stub> stub_;
  grpc::ClientContext context_;
  std::thread thread_;
  mutable absl::Mutex mu_;
  std::vector<v1::SchedulingDecision> decisions_ ABSL_GUARDED_BY(mu_);
  bool unimplemented_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace podium::sim
