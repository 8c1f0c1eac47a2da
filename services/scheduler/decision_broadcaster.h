// Fans scheduling decisions out to Admin.WatchDecisions(Batches) subscribers. Each
// subscriber has its own bounded backlog: a slow reader loses its oldest
// decisions (counted), never the scheduler's memory or time; the number of
// subscribers is capped.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace podium::scheduler {

// One scheduling decision, as the core reports it (server/ translates).
struct SchedulingDecision {
  enum class Result { kScheduled, kUnschedulable, kError };
  std::string pod_uid;
  std::string pod_namespace;
  std::string pod_name;
  Result result = Result::kError;
  std::string node_name;  // kScheduled.
  std::string nominated_node_name;  // kUnschedulable after a preemption.
  std::string message;    // The FailedScheduling message or the error.
  absl::Duration attempt;
  absl::Time time;
  std::string profile;
};

// One subscriber's backlog.
class DecisionQueue {
 public:
  explicit DecisionQueue(size_t max_backlog) : max_backlog_(max_backlog) {}
  // The oldest decision not yet taken.
  std::optional<SchedulingDecision> Pop();
  // The oldest decisions not yet taken, at most `max`, oldest first.
  std::vector<SchedulingDecision> PopUpTo(size_t max);
  size_t size() const;
  // Decisions dropped because the backlog was full.
  uint64_t dropped() const;

 private:
  friend class DecisionBroadcaster;
  void Push(const SchedulingDecision& decision);

  const size_t max_backlog_;
  mutable absl::Mutex mu_;
  std::deque<SchedulingDecision> backlog_ ABSL_GUARDED_BY(mu_);
  uint64_t dropped_ ABSL_GUARDED_BY(mu_) = 0;
};

class DecisionBroadcaster {
 public:
  struct Options {
    size_t max_subscribers = 16;
    size_t max_backlog = 10000;  // Per subscriber (about 2 MB).
  };
  // Runs on the publishing thread after a decision was queued for the
  // subscriber, under the broadcaster's lock: it must not block and must not
  // call the broadcaster (it may Pop its queue). Lock order: broadcaster ->
  // subscriber -> DecisionQueue.
  using Notify = std::function<void()>;
  struct Subscription {
    uint64_t id = 0;
    std::shared_ptr<DecisionQueue> queue;
  };

  DecisionBroadcaster() : DecisionBroadcaster(Options{}) {}
  explicit DecisionBroadcaster(Options options) : options_(options) {}

  // ResourceExhausted when max_subscribers are subscribed.
  absl::StatusOr<Subscription> Subscribe(Notify notify);
  // After it returns, the subscriber's Notify never runs again.
  void Unsubscribe(uint64_t id);
  void Publish(const SchedulingDecision& decision);
  size_t num_subscribers() const;

 private:
  struct Subscriber {
    std::shared_ptr<DecisionQueue> queue;
    Notify notify;
  };
  const Options options_;
  mutable absl::Mutex mu_;
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  std::map<uint64_t, Subscriber> subscribers_ ABSL_GUARDED_BY(mu_);
};

}  // namespace podium::scheduler
