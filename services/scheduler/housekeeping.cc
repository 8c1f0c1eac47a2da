// Periodic work (every 100 ms on the housekeeping thread): Permit timeouts,
// kube-scheduler's backoffQ and unschedulable-pool flushes, expiry of assumed
// pods whose bound update never came, and the gauges' hook. Plugin calls
// (Unreserve of timed-out pods) go to the binding pool.
#include <cstdio>

#include "logging/logger.h"
#include "absl/strings/str_cat.h"
#include "scheduler.h"

namespace podium::scheduler {

void Scheduler::Housekeeping() {
  absl::MutexLock housekeeping(&housekeeping_mu_);
  const absl::Time now = clock_.Now();
  for (auto& [waiting, plugin] : waiting_.Expire(now)) {
    metrics_.ObservePermitWait("Unschedulable", now - waiting.wait_start);
    sdk::Status status(sdk::Code::kUnschedulable,
                       absl::StrCat("rejected due to timeout after waiting at plugin ", plugin));
    status.WithPlugin(plugin);
    PostBindingFailed(std::move(waiting), std::move(status), true);
  }
  queue_.FlushBackoffQCompleted();
  if (now - last_unschedulable_flush_ >= options_.flush_unschedulable_interval) {
    last_unschedulable_flush_ = now;
    queue_.FlushUnschedulablePodsLeftover();
  }
  // kube-scheduler's cleanupAssumedPods: a confirmed bind whose bound pod was
  // never observed (a lost update) must not hold its node's resources forever.
  std::vector<std::string> expired;
  {
    absl::MutexLock lock(&mu_);
    for (auto it = bind_confirmed_.begin(); it != bind_confirmed_.end();) {
      if (it->second <= now) {
        expired.push_back(it->first);
        bind_confirmed_.erase(it++);
      } else {
        ++it;
      }
    }
  }
  for (const std::string& uid : expired) {
    if (!cache_.IsAssumed(uid)) continue;
    if (cache_.ForgetPod(uid).ok()) {
      PODIUM_LOG(Warning, "Assumed pod expired: its bind was confirmed but the bound pod never came",
                 {"podUID", uid});
      Count(&SchedulerCounters::assumed_pods_expired, "assumed_pod_expired");
    }
  }
  if (housekeeping_hook_) housekeeping_hook_();
}

}  // namespace podium::scheduler
