#include "cluster/action_executor.h"

#include <algorithm>

namespace podium::sim {

ActionExecutor::ActionExecutor(InMemoryCluster& cluster, Options options, OutcomeSink sink)
    : cluster_(cluster), options_(options), sink_(std::move(sink)) {
  if (options_.api_latency <= absl::ZeroDuration()) return;  // Submit executes inline.
  int n = std::max(1, options_.concurrency);
  for (int i = 0; i < n; ++i) workers_.emplace_back([this] { Work(); });
}

ActionExecutor::~ActionExecutor() { Stop(); }

bool ActionExecutor::Submit(v1::Action action) {
  if (options_.api_latency <= absl::ZeroDuration()) {
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) return false;
      ++running_;  // InFlight() counts it until its outcome is sunk.
    }
    sink_(cluster_.Execute(action));
    absl::MutexLock lock(&mu_);
    --running_;
    return true;
  }
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(this, &ActionExecutor::HasRoom));
  if (stopping_) return false;
  queue_.push_back(std::move(action));
  return true;
}

void ActionExecutor::Stop() {
  {
    absl::MutexLock lock(&mu_);
    if (stopping_ && workers_.empty()) return;
    stopping_ = true;
  }
  for (auto& w : workers_) {
    if (w.joinable()) w.join();
  }
  workers_.clear();
  // An inline Submit still running on another thread finishes first.
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(+[](size_t* running) { return *running == 0; }, &running_));
}

size_t ActionExecutor::InFlight() const {
  absl::MutexLock lock(&mu_);
  return queue_.size() + running_;
}

bool ActionExecutor::HasRoom() const { return stopping_ || queue_.size() < options_.queue_capacity; }
bool ActionExecutor::HasWork() const { return stopping_ || !queue_.empty(); }

void ActionExecutor::Work() {
  for (;;) {
    v1::Action action;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(this, &ActionExecutor::HasWork));
      if (queue_.empty()) return;  // Stopping, and the queue is drained.
      action = std::move(queue_.front());
      queue_.pop_front();
      ++running_;
    }
    if (options_.api_latency > absl::ZeroDuration()) {
      // A delete that patches a condition first is two API calls.
      const bool two_calls = action.has_delete_pod() && action.delete_pod().has_disruption_target();
      absl::SleepFor(two_calls ? 2 * options_.api_latency : options_.api_latency);
    }
    sink_(cluster_.Execute(action));
    absl::MutexLock lock(&mu_);
    --running_;
  }
}

}  // namespace podium::sim
