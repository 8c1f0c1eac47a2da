// The binding cycle, off the scheduling thread: Permit decisions from
// plugins, PreBind and Bind plugins, the DefaultBinder's bind as an action to
// the adapter, PostBind; and the release of a pod whose binding failed or
// that was deleted meanwhile. Plugin calls run on the binding pool only: the
// gRPC reader that delivers a PermitDecision, the action result callback and
// the event thread never wait on a plugin.
#include <cstdio>

#include "logging/logger.h"
#include "absl/strings/str_cat.h"
#include "pod_ref.h"
#include "scheduler.h"

namespace podium::scheduler {
namespace {

// A name a plugin sent, fit for one log line: bounded, no control characters.
std::string ForLog(std::string_view s) {
  std::string out(s.substr(0, 128));
  for (char& c : out) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
  }
  if (s.size() > 128) out += "...";
  return out;
}

}  // namespace

// The plugin process's client (remote/) already refused decisions for plugins
// the sending endpoint does not serve at Permit.
void Scheduler::OnPermitDecision(const v1::PermitDecision& decision) {
  WaitingPods::Outcome outcome = waiting_.Decide(decision);
  switch (outcome.verdict) {
    case WaitingPods::Verdict::kNotWaiting:
    case WaitingPods::Verdict::kKeptEarly:
    case WaitingPods::Verdict::kStillWaiting:
      break;
    case WaitingPods::Verdict::kDroppedEarly: {
      Count(&SchedulerCounters::permit_decisions_early_dropped, "permit_decision_early_dropped");
      PODIUM_LOG(Warning, "PermitDecision dropped: too many decisions came before its Permit answer",
                 {"podUID", ForLog(decision.pod_uid())}, {"plugin", ForLog(decision.plugin())},
                 {"max", kMaxEarlyPermitDecisions});
      break;
    }
    case WaitingPods::Verdict::kUnknownPlugin: {
      Count(&SchedulerCounters::permit_decisions_unknown_plugin, "permit_decision_unknown_plugin");
      PODIUM_LOG(Warning, "PermitDecision refused: the pod does not wait on that plugin",
                 {"podUID", ForLog(decision.pod_uid())}, {"plugin", ForLog(decision.plugin())});
      break;
    }
    case WaitingPods::Verdict::kAllowed:
    case WaitingPods::Verdict::kRejected: {
      FinishWaiting(std::move(outcome));
      break;
    }
  }
}

void Scheduler::FinishWaiting(WaitingPods::Outcome outcome) {
  metrics_.ObservePermitWait(outcome.verdict == WaitingPods::Verdict::kAllowed ? "Success" : "Unschedulable",
                             clock_.Now() - outcome.done->wait_start);
  if (outcome.verdict == WaitingPods::Verdict::kAllowed) {
    Bind(std::move(*outcome.done));
    return;
  }
  sdk::Status status(sdk::Code::kUnschedulable,
                     absl::StrCat("rejected while waiting on permit: ", outcome.decision.reason()));
  status.WithPlugin(outcome.decision.plugin());
  PostBindingFailed(std::move(*outcome.done), std::move(status), true);
}

bool Scheduler::RejectWaitingPod(std::string_view uid, const std::string& plugin, const std::string& message,
                                 std::function<void()> released) {
  std::optional<BindingPod> pod = waiting_.Remove(uid);
  if (!pod) return false;
  sdk::Status status(sdk::Code::kUnschedulable, absl::StrCat("rejected while waiting on permit: ", message));
  status.WithPlugin(plugin);
  PostBindingFailed(std::move(*pod), std::move(status), true, std::move(released));
  return true;
}

void Scheduler::Bind(BindingPod pod) {
  Framework* fw = pod.framework;
  if (!fw->HasRemotePlugins(v1::PRE_BIND) && !fw->HasRemotePlugins(v1::BIND)) {
    SendBind(std::move(pod));
    return;
  }
  // PreBind and Bind plugins are remote calls: off the calling thread.
  BindingPod copy = pod;
  const bool posted = binding_pool_.Post([this, pod = std::move(pod)]() mutable {
    Framework* fw = pod.framework;
    v1::Pod bound = *pod.pod->pod_info->pod;
    bound.set_node_name(pod.node);
    sdk::Status pre_bind = fw->RunPreBind(bound, pod.node, pod.cycle_id);
    if (!pre_bind.IsSuccess()) {
      BindingFailed(std::move(pod), pre_bind, pre_bind.IsRejected());
      return;
    }
    sdk::Status bind = fw->RunBindPlugins(bound, pod.node, pod.cycle_id);
    if (bind.IsSkip()) {
      SendBind(std::move(pod));
      return;
    }
    if (!bind.IsSuccess()) {
      BindingFailed(std::move(pod), bind, false);
      return;
    }
    // A Bind plugin bound it; the adapter's pod update confirms it.
    queue_.Done(bound.meta().uid());
    PublishDecision(bound, SchedulingDecision::Result::kScheduled, pod.node, "",
                    clock_.Now() - pod.start, fw->name());
  });
  if (!posted) {
    PostBindingFailed(std::move(copy), sdk::Status(sdk::Code::kError, "binding executor is full"), false);
  }
}

void Scheduler::SendBind(BindingPod pod) {
  const v1::Pod& p = *pod.pod->pod_info->pod;
  v1::Action action;
  *action.mutable_bind()->mutable_pod() = PodRef(p);
  action.mutable_bind()->set_node_name(pod.node);
  {
    // Released by the result below, whatever it is (SchedulingLoop waits for a slot).
    absl::MutexLock lock(&mu_);
    ++binds_in_flight_;
  }
  SendAction(std::move(action), [this, pod](const v1::ActionResult& result, absl::Time received) mutable {
    // An action result callback, possibly on the thread that read the result
    // off the stream: bookkeeping only; Unreserve goes to the pool.
    const v1::Pod& p = *pod.pod->pod_info->pod;
    Framework* fw = pod.framework;
    if (result.code() != v1::ActionResult::OK) {
      {
        absl::MutexLock lock(&mu_);
        --binds_in_flight_;
      }
      PostBindingFailed(std::move(pod),
                        sdk::Status(sdk::Code::kError, absl::StrCat("binding rejected: ",
                                                                    v1::ActionResult::Code_Name(result.code()),
                                                                    ": ", result.message())),
                        false);
      return;
    }
    {
      // The bound pod update normally follows; if it never does, the
      // assumption expires (housekeeping).
      const bool assumed = cache_.IsAssumed(p.meta().uid());
      absl::MutexLock lock(&mu_);
      if (assumed) bind_confirmed_[p.meta().uid()] = clock_.Now() + options_.assumed_pod_ttl;
      --binds_in_flight_;
    }
    queue_.Done(p.meta().uid());
    // The attempt ends when the bind's result arrived (kube-scheduler: when
    // its Bind call returned), not when this callback got to run.
    const absl::Duration attempt = received - pod.start;
    const SchedulerMetrics::ProfileSeries& series = series_.at(fw);
    series.attempts_scheduled->Increment();
    series.attempt_scheduled->Observe(absl::ToDoubleSeconds(attempt));
    metrics_.ObservePodScheduled(
        pod.pod->attempts, absl::ToDoubleSeconds(received - pod.pod->initial_attempt_timestamp.value_or(pod.start)));
    PublishDecision(p, SchedulingDecision::Result::kScheduled, pod.node, "", attempt, fw->name());
    PODIUM_VLOG(2, "Successfully bound pod to node", {"pod", PodKey(p)}, {"node", pod.node},
                {"cycle", pod.cycle_id});
    v1::Action event;
    auto* e = event.mutable_record_event();
    *e->mutable_regarding() = PodRef(p);
    e->set_type("Normal");
    e->set_reason("Scheduled");
    e->set_action("Binding");
    e->set_note(absl::StrCat("Successfully assigned ", PodKey(p), " to ", pod.node));
    SendAction(std::move(event));
    if (fw->HasRemotePlugins(v1::POST_BIND)) {
      binding_pool_.Post([pod] {
        v1::Pod bound = *pod.pod->pod_info->pod;
        bound.set_node_name(pod.node);
        pod.framework->RunPostBind(bound, pod.node, pod.cycle_id);
      });
    }
  });
}

void Scheduler::PostBindingFailed(BindingPod pod, sdk::Status status, bool unschedulable,
                                  std::function<void()> released) {
  BindingPod copy = pod;
  if (binding_pool_.Post([this, pod = std::move(pod), status, unschedulable, released]() mutable {
        BindingFailed(std::move(pod), status, unschedulable);
        if (released) released();
      })) {
    return;
  }
  // No room (or stopping): release the pod without Unreserve rather than
  // block this thread on a plugin.
  {
    Count(&SchedulerCounters::binding_work_refused, "binding_work_refused");
  }
  const std::string uid = copy.pod->uid();
  (void)cache_.ForgetPod(uid);
  absl::flat_hash_set<std::string> plugins;
  if (!status.plugin().empty()) plugins.insert(status.plugin());
  AttemptFailed(copy.pod, copy.framework, copy.scheduling_cycle, copy.start,
                unschedulable ? ScheduleResult::Outcome::kUnschedulable : ScheduleResult::Outcome::kError,
                status.Message(), plugins, nullptr);
  MoveOnForgottenAssumption(*copy.pod->pod_info->pod, copy.node);
  if (released) released();
}

void Scheduler::MoveOnForgottenAssumption(const v1::Pod& pod, const std::string& node) {
  // The room the assumed pod held is free again: pods refused it while it was
  // held may fit now. As kube-scheduler's handleBindingCycleError, an
  // AssignedPodDelete for everyone but the pod itself, which was just
  // requeued (moving it too would send it to backoff, not the pool). Hints
  // are asked on the queue worker.
  v1::ClusterEvent event;
  event.set_resource(v1::POD);
  event.set_action(v1::DELETE);
  *event.mutable_old_pod() = pod;
  event.mutable_old_pod()->set_node_name(node);
  queue_.MoveAllToActiveOrBackoffQueue(event, HintsToQueueWorker(), pod.meta().uid());
}

void Scheduler::BindingFailed(BindingPod pod, const sdk::Status& status, bool unschedulable) {
  const v1::Pod& p = *pod.pod->pod_info->pod;
  v1::Pod assumed = p;
  assumed.set_node_name(pod.node);
  pod.framework->RunUnreserve(assumed, pod.node, pod.cycle_id);
  (void)cache_.ForgetPod(p.meta().uid());
  absl::flat_hash_set<std::string> plugins;
  if (!status.plugin().empty()) plugins.insert(status.plugin());
  // Still in flight: the events during its Permit wait or bind are judged by
  // its rejecting plugin (kube's in-flight events).
  AttemptFailed(pod.pod, pod.framework, pod.scheduling_cycle, pod.start,
                unschedulable ? ScheduleResult::Outcome::kUnschedulable : ScheduleResult::Outcome::kError,
                status.Message(), plugins, nullptr);
  MoveOnForgottenAssumption(p, pod.node);
}

void Scheduler::ReleaseDeleted(BindingPod pod) {
  auto release = [this](const BindingPod& pod) {
    const v1::Pod& p = *pod.pod->pod_info->pod;
    v1::Pod assumed = p;
    assumed.set_node_name(pod.node);
    pod.framework->RunUnreserve(assumed, pod.node, pod.cycle_id);
    if (cache_.IsAssumed(p.meta().uid())) (void)cache_.ForgetPod(p.meta().uid());
    queue_.Done(p.meta().uid());
  };
  BindingPod copy = pod;
  if (binding_pool_.Post([release, pod = std::move(pod)] { release(pod); })) return;
  {
    Count(&SchedulerCounters::binding_work_refused, "binding_work_refused");
  }
  if (cache_.IsAssumed(copy.pod->uid())) (void)cache_.ForgetPod(copy.pod->uid());
  queue_.Done(copy.pod->uid());
}

}  // namespace podium::scheduler
