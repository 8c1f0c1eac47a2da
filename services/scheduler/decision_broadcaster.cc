#include "decision_broadcaster.h"

#include <algorithm>
#include <iterator>

#include "absl/strings/str_cat.h"

namespace podium::scheduler {

void DecisionQueue::Push(const SchedulingDecision& decision) {
  absl::MutexLock lock(&mu_);
  if (backlog_.size() >= max_backlog_) {
    backlog_.pop_front();
    ++dropped_;
  }
  backlog_.push_back(decision);
}

std::optional<SchedulingDecision> DecisionQueue::Pop() {
  absl::MutexLock lock(&mu_);
  if (backlog_.empty()) return std::nullopt;
  SchedulingDecision d = std::move(backlog_.front());
  backlog_.pop_front();
  return d;
}

std::vector<SchedulingDecision> DecisionQueue::PopUpTo(size_t max) {
  absl::MutexLock lock(&mu_);
  const size_t n = std::min(max, backlog_.size());
  std::vector<SchedulingDecision> taken(std::make_move_iterator(backlog_.begin()),
                                        std::make_move_iterator(backlog_.begin() + n));
  backlog_.erase(backlog_.begin(), backlog_.begin() + n);
  return taken;
}

size_t DecisionQueue::size() const {
  absl::MutexLock lock(&mu_);
  return backlog_.size();
}

uint64_t DecisionQueue::dropped() const {
  absl::MutexLock lock(&mu_);
  return dropped_;
}

absl::StatusOr<DecisionBroadcaster::Subscription> DecisionBroadcaster::Subscribe(Notify notify) {
  absl::MutexLock lock(&mu_);
  if (subscribers_.size() >= options_.max_subscribers) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "too many decision watchers (", options_.max_subscribers, "); try again later"));
  }
  Subscription s{next_id_++, std::make_shared<DecisionQueue>(options_.max_backlog)};
  subscribers_.emplace(s.id, Subscriber{s.queue, std::move(notify)});
  return s;
}

void DecisionBroadcaster::Unsubscribe(uint64_t id) {
  absl::MutexLock lock(&mu_);
  subscribers_.erase(id);
}

void DecisionBroadcaster::Publish(const SchedulingDecision& decision) {
  absl::MutexLock lock(&mu_);
  for (auto& [id, subscriber] : subscribers_) {
    subscriber.queue->Push(decision);
    if (subscriber.notify) subscriber.notify();
  }
}

size_t DecisionBroadcaster::num_subscribers() const {
  absl::MutexLock lock(&mu_);
  return subscribers_.size();
}

}  // namespace podium::scheduler
