// Periodic work (every 100 ms on the housekeeping thread): Permit timeouts,
// kube-scheduler's backoffQ and unschedulable-pool flushes, expiry of assumed
// pods whose bound update never came, delayed SchedulingGated patches, and
// the gauges' hook. Plugin calls (Unreserve of timed-out pods) go to the
// binding pool.
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
  DecideWaitsOfLostStreams();
  SendDueGatedPatches(now);
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

void Scheduler::DecideWaitsOfLostStreams() {
  // No stream dialed again since the last tick: no wait to decide, and the
  // waiting pods (a large gang's, every 100 ms) are not copied.
  uint64_t streams = 0;
  for (const FrameworkPtr& fw : profiles_) {
    for (const auto& [plugin, process] : fw->spec_ptr()->processes) streams += process->stream_generation();
  }
  if (streams == permit_streams_seen_) return;
  permit_streams_seen_ = streams;
  if (waiting_.size() == 0) return;
  for (const WaitingPodSummary& w : waiting_.List()) {
    if (w.framework == nullptr) continue;
    for (const auto& [plugin, deadline] : w.pending) {
      auto at_wait = w.permit_streams.find(plugin);
      if (at_wait == w.permit_streams.end()) continue;
      PluginProcess* process = w.framework->ProcessServing(plugin);
      if (process == nullptr || process->stream_generation() == at_wait->second) continue;
      v1::PermitDecision decision;
      decision.set_pod_uid(w.pod->uid());
      decision.set_plugin(plugin);
      if (process->failure_policy() == FailurePolicy::kIgnore) {
        process->CountIgnoredFailure();
        decision.set_allow(true);
      } else {
        decision.set_reason(absl::StrCat("the stream of plugin endpoint ", process->name(),
                                         " broke while the pod waited (the process stopped or restarted)"));
      }
      PODIUM_LOG(Warning, "Permit wait decided: its plugin's stream broke", {"pod", w.pod->uid()},
                 {"plugin", plugin}, {"endpoint", process->name()}, {"allowed", decision.allow()});
      OnPermitDecision(decision);
    }
  }
}

}  // namespace podium::scheduler
