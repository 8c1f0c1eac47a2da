#include "waiting_pods.h"

#include <algorithm>
#include <tuple>

namespace podium::scheduler {

void WaitingPods::BeginPermit(std::string uid, Framework* framework) {
  absl::MutexLock lock(&mu_);
  in_permit_ = std::move(uid);
  in_permit_framework_ = framework;
  early_.clear();
}

std::vector<v1::PermitDecision> WaitingPods::EndPermit() {
  absl::MutexLock lock(&mu_);
  in_permit_.clear();
  in_permit_framework_ = nullptr;
  std::vector<v1::PermitDecision> early;
  early.swap(early_);
  return early;
}

WaitingPods::Outcome WaitingPods::Add(BindingPod pod, std::map<std::string, absl::Time> deadlines,
                                      const std::vector<v1::PermitDecision>& early) {
  absl::MutexLock lock(&mu_);
  const std::string uid = pod.pod->uid();
  pods_[uid] = Entry{std::move(pod), std::move(deadlines)};
  Outcome outcome;
  outcome.verdict = Verdict::kStillWaiting;
  for (const auto& decision : early) {
    outcome = DecideLocked(decision);
    if (outcome.done) break;
  }
  return outcome;
}

WaitingPods::Outcome WaitingPods::Decide(const v1::PermitDecision& decision) {
  absl::MutexLock lock(&mu_);
  return DecideLocked(decision);
}

WaitingPods::Outcome WaitingPods::DecideLocked(const v1::PermitDecision& decision) {
  Outcome outcome;
  outcome.decision = decision;
  auto it = pods_.find(decision.pod_uid());
  if (it == pods_.end()) {
    if (!in_permit_.empty() && in_permit_ == decision.pod_uid()) {
      // Its Permit answer may still be on its way back: keep the decision.
      if (early_.size() >= kMaxEarlyPermitDecisions) {
        outcome.verdict = Verdict::kDroppedEarly;
      } else {
        early_.push_back(decision);
        outcome.verdict = Verdict::kKeptEarly;
      }
      return outcome;
    }
    outcome.verdict = Verdict::kNotWaiting;
    return outcome;
  }
  auto plugin = it->second.pending.find(decision.plugin());
  if (plugin == it->second.pending.end()) {
    outcome.verdict = Verdict::kUnknownPlugin;
    return outcome;
  }
  if (decision.allow()) {
    it->second.pending.erase(plugin);
    if (!it->second.pending.empty()) {
      outcome.verdict = Verdict::kStillWaiting;
      return outcome;
    }
    outcome.verdict = Verdict::kAllowed;
  } else {
    outcome.verdict = Verdict::kRejected;
  }
  outcome.done = std::move(it->second.pod);
  pods_.erase(it);
  return outcome;
}

std::optional<BindingPod> WaitingPods::Remove(std::string_view uid) {
  absl::MutexLock lock(&mu_);
  auto it = pods_.find(absl::string_view(uid.data(), uid.size()));
  if (it == pods_.end()) return std::nullopt;
  BindingPod pod = std::move(it->second.pod);
  pods_.erase(it);
  return pod;
}

std::vector<std::pair<BindingPod, std::string>> WaitingPods::Expire(absl::Time now) {
  absl::MutexLock lock(&mu_);
  std::vector<std::pair<BindingPod, std::string>> expired;
  for (auto it = pods_.begin(); it != pods_.end();) {
    std::string plugin;
    for (const auto& [name, deadline] : it->second.pending) {
      if (deadline <= now) {
        plugin = name;
        break;
      }
    }
    if (plugin.empty()) {
      ++it;
      continue;
    }
    expired.emplace_back(std::move(it->second.pod), plugin);
    pods_.erase(it++);
  }
  return expired;
}

bool WaitingPods::Contains(std::string_view uid) const {
  absl::MutexLock lock(&mu_);
  return pods_.contains(absl::string_view(uid.data(), uid.size()));
}

Framework* WaitingPods::FrameworkOf(std::string_view uid) const {
  absl::MutexLock lock(&mu_);
  auto it = pods_.find(absl::string_view(uid.data(), uid.size()));
  if (it != pods_.end()) return it->second.pod.framework;
  return !in_permit_.empty() && in_permit_ == uid ? in_permit_framework_ : nullptr;
}

std::vector<WaitingPodSummary> WaitingPods::List() const {
  std::vector<WaitingPodSummary> out;
  {
    absl::MutexLock lock(&mu_);
    out.reserve(pods_.size());
    for (const auto& [uid, entry] : pods_) {
      out.push_back(WaitingPodSummary{entry.pod.pod, entry.pod.node, entry.pod.wait_start, entry.pending,
                                      entry.pod.framework, entry.pod.permit_streams});
    }
  }
  std::sort(out.begin(), out.end(), [](const WaitingPodSummary& a, const WaitingPodSummary& b) {
    return std::tie(a.waiting_since, a.pod->uid()) < std::tie(b.waiting_since, b.pod->uid());
  });
  return out;
}

size_t WaitingPods::size() const {
  absl::MutexLock lock(&mu_);
  return pods_.size();
}

}  // namespace podium::scheduler
