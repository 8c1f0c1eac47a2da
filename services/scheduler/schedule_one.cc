// The scheduling loop (kube-scheduler's schedule_one.go): pop one pod, run
// its profile's cycle on a fresh snapshot, assume it on the chosen node, run
// Reserve and Permit, and hand it to the binding cycle; or record why it fits
// nowhere and requeue it.
#include <cstdio>

#include "logging/logger.h"
#include "absl/strings/str_cat.h"
#include "pod_ref.h"
#include "scheduler.h"

namespace podium::scheduler {

bool Scheduler::MaySchedule() const { return synced_ && adapter_connected_ && !paused_; }

bool Scheduler::BindSlotFree() const {
  const size_t max = options_.max_binds_in_flight;
  if (max == 0) return true;
  return binds_draining_ ? binds_in_flight_ <= max / 2 : binds_in_flight_ < max;
}

void Scheduler::NoteBindsInFlight() {
  if (options_.max_binds_in_flight != 0 && binds_in_flight_ >= options_.max_binds_in_flight) {
    binds_draining_ = true;
  }
}

void Scheduler::SchedulingLoop() {
  auto may_schedule_or_stopped = +[](Scheduler* s) ABSL_NO_THREAD_SAFETY_ANALYSIS {
    return s->stopped_ || s->MaySchedule();
  };
  // Before the pop, also a free bind slot: the wait ends when a bind's result
  // comes back (a failure too: a disconnect fails every pending action), or
  // on Stop. Only this thread waits; the result callbacks only count.
  static constexpr auto may_pop_or_stopped = +[](Scheduler* s) ABSL_NO_THREAD_SAFETY_ANALYSIS {
    return s->stopped_ || (s->MaySchedule() && s->BindSlotFree());
  };
  // Or, while a list arrives, the mirrors to bring up (list_sync_every).
  auto may_pop_or_sync = +[](Scheduler* s) ABSL_NO_THREAD_SAFETY_ANALYSIS {
    return may_pop_or_stopped(s) || (!s->MaySchedule() && s->list_sync_wanted_);
  };
  // Busy while the next pod can be popped at once: the actions this thread
  // sends meanwhile (a preemptor's nomination patch and victim deletes) may
  // wait a little to share a message with the next pods' (ActionSink::
  // SetSchedulerBusy); before any wait here they are written.
  bool busy = false;
  auto set_busy = [&](bool b) {
    if (b == busy) return;
    busy = b;
    if (ActionSink* sink = sink_.load(std::memory_order_acquire)) sink->SetSchedulerBusy(b);
  };
  while (true) {
    bool ready;
    {
      absl::MutexLock lock(&mu_);
      NoteBindsInFlight();
      ready = may_pop_or_stopped(this);
    }
    if (!ready || !queue_.HasPodToPop()) set_busy(false);
    bool sync_only = false;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(may_pop_or_sync, this));
      if (stopped_) return;
      list_sync_wanted_ = false;
      if (may_pop_or_stopped(this)) {
        binds_draining_ = false;
      } else {
        sync_only = true;  // A list is arriving.
      }
    }
    if (sync_only || !queue_.HasPodToPop()) SyncMirrorsWhileIdle();
    if (sync_only) continue;
    std::optional<QueuedPodInfo> popped = queue_.Pop();
    if (!popped) return;
    auto pod = std::make_shared<QueuedPodInfo>(std::move(*popped));
    {
      // Paused or disconnected while it waited in Pop: hold it until resumed.
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(may_schedule_or_stopped, this));
      if (stopped_) return;
    }
    set_busy(true);
    ScheduleOne(std::move(pod));
  }
}

bool Scheduler::ScheduleNext() {
  {
    absl::MutexLock lock(&mu_);
    NoteBindsInFlight();
    if (!MaySchedule() || !BindSlotFree()) return false;
    binds_draining_ = false;
  }
  std::optional<QueuedPodInfo> popped = queue_.TryPop();
  if (!popped) return false;
  ScheduleOne(std::make_shared<QueuedPodInfo>(std::move(*popped)));
  return true;
}

bool Scheduler::StillPending(const std::string& uid) const {
  absl::MutexLock lock(&mu_);
  return pending_uids_.contains(uid);
}

bool Scheduler::DeletedWhilePreempting(const std::string& uid, PostFilterResult& post) {
  if (StillPending(uid)) return false;
  // Its victims are not evicted for it, and it is nominated nowhere: its
  // deletion's event may have cleared the nomination before PostFilter set it.
  if (post.withdraw) post.withdraw();
  if (clear_nomination_hook_) clear_nomination_hook_(uid);
  return true;
}

void Scheduler::ScheduleOne(QueuedPodInfoPtr qp) {
  // A bound pod in the queue is there for its deferred resize (KEP-5836).
  if (!qp->pod().node_name().empty()) {
    ScheduleDeferredResize(std::move(qp));
    return;
  }
  // A gang member brings its queued siblings: placed together or not at all.
  if (!qp->pod().pod_group().empty() && ScheduleGang(qp)) return;
  const v1::Pod& pod = *qp->pod_info->pod;
  const std::string& uid = pod.meta().uid();
  Framework* fw = FrameworkFor(pod);
  // Deleted or bound since it was queued (the queue hears of it later).
  if (fw == nullptr || cache_.IsAssumed(uid) || !StillPending(uid)) {
    queue_.Done(uid);
    return;
  }
  const absl::Time start = clock_.Now();
  const uint64_t scheduling_cycle = queue_.scheduling_cycle();
  uint64_t cycle_id = ++cycle_id_;
  PODIUM_VLOG(3, "Attempting to schedule pod", {"pod", PodKey(pod)}, {"cycle", cycle_id});
  RefreshSnapshot();

  // The pod's signature's ranking when it can serve, else the full cycle.
  // The pod likely popped next: a batch hit's request may carry its verdicts
  // (batcher.h "Lookahead verdicts"); only of the same profile.
  // The pods after it too (later lookaheads), up to the first of another profile.
  std::vector<sdk::PodInfoPtr> upcoming;
  // A nominated pod's request may check the nominated pods after it.
  if (batching_.Enabled(fw)) upcoming = queue_.PeekActive(batching_.upcoming_for(pod));
  for (size_t k = 0; k < upcoming.size(); ++k) {
    if (!upcoming[k]->pod->node_name().empty() || FrameworkFor(*upcoming[k]->pod) != fw) {
      upcoming.resize(k);
      break;
    }
  }
  sdk::PodInfoPtr next = upcoming.empty() ? nullptr : upcoming.front();
  if (!upcoming.empty()) upcoming.erase(upcoming.begin());
  ScheduleResult result = batching_.SchedulePod(*fw, pod, snapshot_, snapshot_.delta_seq(), cycle_id,
                                                [this] { return ++cycle_id_; }, std::move(next), upcoming);
  const SchedulerMetrics::ProfileSeries& series = series_.at(fw);
  (result.outcome == ScheduleResult::Outcome::kScheduled ? series.filter_success : series.filter_unschedulable)
      ->Observe(absl::ToDoubleSeconds(clock_.Now() - start));
  if (result.outcome == ScheduleResult::Outcome::kUnschedulable) {
    std::function<void()> after_requeue;  // Preemption's evictions, once the pod is queued.
    std::string nominated;
    bool report = true;
    if (fw->HasPostFilterPlugins()) {
      auto [post, status] = fw->RunPostFilter(pod, result.diagnosis);
      if (status.IsSuccess() && DeletedWhilePreempting(uid, post)) post = {};
      after_requeue = std::move(post.after_requeue);
      report = !post.retry_unreported;
      result.diagnosis.post_filter_message = status.Message();
      // The pod waits for its nominated node; later cycles count it there. The
      // nomination rides in the PodScheduled=False patch (kube-scheduler's updatePod).
      if (status.IsSuccess()) nominated = std::move(post.nominated_node_name);
    }
    AttemptFailed(qp, fw, scheduling_cycle, start, result.outcome, result.diagnosis.Message(),
                  result.diagnosis.unschedulable_plugins, &result.diagnosis,
                  nominated.empty() ? nullptr : &nominated, report);
    if (after_requeue) after_requeue();
    return;
  }
  if (result.outcome == ScheduleResult::Outcome::kError) {
    AttemptFailed(qp, fw, scheduling_cycle, start, result.outcome, std::string(result.error.message()), {},
                  nullptr);
    return;
  }

  absl::StatusOr<sdk::PodInfoPtr> assumed_or = Assume(pod, result.node_name);
  if (!assumed_or.ok()) {
    AttemptFailed(qp, fw, scheduling_cycle, start, ScheduleResult::Outcome::kError,
                  std::string(assumed_or.status().message()), {}, nullptr);
    return;
  }
  sdk::PodInfoPtr assumed = *std::move(assumed_or);
  sdk::Status reserve = fw->RunReserve(*assumed->pod, result.node_name, cycle_id);
  if (!reserve.IsSuccess()) {
    fw->RunUnreserve(*assumed->pod, result.node_name, cycle_id);
    (void)cache_.ForgetPod(uid);
    const bool rejected = reserve.IsRejected();
    AttemptFailed(qp, fw, scheduling_cycle, start,
                  rejected ? ScheduleResult::Outcome::kUnschedulable : ScheduleResult::Outcome::kError,
                  reserve.Message(), {reserve.plugin()}, nullptr);
    return;
  }
  PermitAndBind(std::move(qp), fw, result.node_name, std::move(assumed), cycle_id, scheduling_cycle, start);
}

// KEP-5836: the pod is bound and the kubelet deferred its in-place resize for
// lack of room. No node is searched: its own node is the only candidate, and
// PostFilter (DefaultPreemption) looks there for lower-priority victims whose
// eviction lets the resize through. When none will do, the pod's status says
// why (condition PodResizePreemption=False and a FailedResizePreemption
// event); it is tried again when a pod leaves that node.
void Scheduler::ScheduleDeferredResize(QueuedPodInfoPtr qp) {
  const std::string uid = qp->uid();
  // The latest version: the queue holds the one that entered it.
  sdk::PodInfoPtr cached = cache_.GetPod(uid);
  Framework* fw = cached == nullptr ? nullptr : FrameworkFor(*cached->pod);
  if (fw == nullptr || cache_.IsAssumed(uid) || cached->pod->resize_status() != kDeferredResize ||
      !fw->HasPostFilterPlugins()) {
    queue_.Done(uid);
    return;
  }
  const v1::Pod pod = *cached->pod;
  RefreshSnapshot();
  Diagnosis diagnosis;
  diagnosis.cycle_id = ++cycle_id_;
  diagnosis.num_all_nodes = 1;
  diagnosis.node_statuses.emplace_back(
      pod.node_name(), MakeSharedStatus(sdk::Status(sdk::Code::kUnschedulable, "the resized pod does not fit")));
  auto [post, status] = fw->RunPostFilter(pod, diagnosis);
  fw->AbandonCycle(diagnosis.cycle_id);
  queue_.Done(uid);
  if (status.IsSuccess()) {
    if (post.after_requeue) post.after_requeue();  // The evictions.
    return;
  }
  const std::string message = status.Message();
  {
    absl::MutexLock lock(&mu_);
    failed_resizes_[pod.node_name()][uid] = message;
  }
  bool condition_current = false;
  for (const auto& c : pod.conditions()) {
    condition_current |= c.type() == kResizePreemptionCondition && c.status() == "False" && c.message() == message;
  }
  if (condition_current) return;  // Said already.
  v1::Action patch;
  auto* p = patch.mutable_patch_pod_status();
  *p->mutable_pod() = PodRef(pod);
  auto* c = p->add_conditions();
  c->set_type(kResizePreemptionCondition);
  c->set_status("False");
  c->set_reason("PreemptionNotHelpful");
  c->set_message(message);
  SendAction(std::move(patch));
  v1::Action event;
  auto* e = event.mutable_record_event();
  *e->mutable_regarding() = PodRef(pod);
  e->set_type("Warning");
  e->set_reason("FailedResizePreemption");
  e->set_action("Preempting");
  e->set_note(absl::StrCat("deferred resize on node ", pod.node_name(), ": ", message));
  SendAction(std::move(event));
}

absl::StatusOr<sdk::PodInfoPtr> Scheduler::Assume(const v1::Pod& pod, const std::string& node) {
  v1::Pod assumed_pod = pod;
  assumed_pod.set_node_name(node);
  sdk::PodInfoPtr assumed = sdk::PodInfo::Create(std::move(assumed_pod));
  Cache::AssumedAt at;
  if (absl::Status s = cache_.AssumePod(assumed, node, &at); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat("assuming the pod: ", s.message()));
  }
  // The batch that served the pod may answer the next pod's verdict on this
  // node from its what-if verdicts; an assume undone later (ForgetPod)
  // changes the node again, and the batch treats it as dirty.
  batching_.Assumed(at.node_id, at.change_generation_before, at.change_generation_after);
  if (clear_nomination_hook_) clear_nomination_hook_(assumed->uid());
  return assumed;
}

void Scheduler::RefreshSnapshot() {
  batching_.SnapshotUpdating();
  cache_.UpdateSnapshot(snapshot_);
  batching_.SnapshotUpdated(snapshot_);
}

void Scheduler::SyncMirrorsWhileIdle() {
  RefreshSnapshot();
  for (const FrameworkPtr& fw : profiles_) fw->SyncMirrors(snapshot_.delta_seq());
}

void Scheduler::PermitAndBind(QueuedPodInfoPtr qp, Framework* fw, const std::string& node, sdk::PodInfoPtr assumed,
                              uint64_t cycle_id, uint64_t scheduling_cycle, absl::Time start,
                              std::vector<BindingPod>* ready) {
  const std::string uid = qp->uid();
  waiting_.BeginPermit(uid, fw);
  PermitOutcome permit = fw->RunPermit(*assumed->pod, node, cycle_id);
  std::vector<v1::PermitDecision> early = waiting_.EndPermit();
  if (!permit.status.IsSuccess() && !permit.status.IsWait()) {
    fw->RunUnreserve(*assumed->pod, node, cycle_id);
    (void)cache_.ForgetPod(uid);
    const bool rejected = permit.status.IsRejected();
    AttemptFailed(qp, fw, scheduling_cycle, start,
                  rejected ? ScheduleResult::Outcome::kUnschedulable : ScheduleResult::Outcome::kError,
                  permit.status.Message(), {permit.status.plugin()}, nullptr);
    return;
  }
  BindingPod binding{qp, fw, node, cycle_id, scheduling_cycle, start};
  if (permit.status.IsWait()) {
    const absl::Time now = clock_.Now();
    binding.wait_start = now;
    std::map<std::string, absl::Time> deadlines;
    // kube-scheduler caps a Permit wait at 15 minutes.
    for (const auto& [plugin, timeout] : permit.waiting) {
      deadlines[plugin] = now + std::min(timeout, kMaxPermitWait);
      if (PluginProcess* process = fw->ProcessServing(plugin)) {
        binding.permit_streams[plugin] = process->stream_generation();
      }
    }
    WaitingPods::Outcome outcome = waiting_.Add(std::move(binding), std::move(deadlines), early);
    // The binding cycle starts when every plugin allowed it.
    if (outcome.done) FinishWaiting(std::move(outcome));
    // The pod may have been deleted while Permit ran: its deletion found
    // nothing waiting, so release it here.
    if (!StillPending(uid)) {
      if (std::optional<BindingPod> gone = waiting_.Remove(uid)) ReleaseDeleted(std::move(*gone));
    }
    return;
  }
  if (ready != nullptr) {
    ready->push_back(std::move(binding));
    return;
  }
  Bind(std::move(binding));
}

void Scheduler::AttemptFailed(QueuedPodInfoPtr qp, Framework* fw, uint64_t scheduling_cycle,
                              absl::Time start, ScheduleResult::Outcome outcome,
                              const std::string& message,
                              const absl::flat_hash_set<std::string>& plugins,
                              const Diagnosis* diagnosis, const std::string* nominated_node, bool report) {
  const v1::Pod& pod = *qp->pod_info->pod;
  const bool unschedulable = outcome == ScheduleResult::Outcome::kUnschedulable;
  qp->unschedulable_plugins.clear();
  if (unschedulable) {
    for (const auto& p : plugins) {
      if (!p.empty()) qp->unschedulable_plugins.insert(p);
    }
  }
  qp->message = message;
  const absl::Duration attempt = clock_.Now() - start;
  const SchedulerMetrics::ProfileSeries& series = series_.at(fw);
  (unschedulable ? series.attempts_unschedulable : series.attempts_error)->Increment();
  (unschedulable ? series.attempt_unschedulable : series.attempt_error)
      ->Observe(absl::ToDoubleSeconds(attempt));
  // A pod deleted while it was being scheduled is not requeued, nor explained.
  const bool still_pending = StillPending(pod.meta().uid());
  if (still_pending) {
    if (unschedulable) {
      // Both branches lvalues: a Diagnosis{} temporary made this copy all 500 node statuses.
      static const Diagnosis kNoDiagnosis;
      diagnoses_.RecordUnschedulable(pod, diagnosis != nullptr ? *diagnosis : kNoDiagnosis, message);
    } else {
      diagnoses_.RecordError(pod, message);
    }
    (void)queue_.AddUnschedulableIfNotPresent(*qp, scheduling_cycle, HintsToQueueWorker());
  }
  queue_.Done(pod.meta().uid());
  if (unschedulable) {
    PODIUM_VLOG(2, "Unable to schedule pod; no fit; waiting", {"pod", PodKey(pod)},
                {"cycle", scheduling_cycle}, {"err", message});
  } else {
    PODIUM_LOG(Error, "Error scheduling pod; retrying", {"pod", PodKey(pod)}, {"cycle", scheduling_cycle},
               {"err", message});
  }
  PublishDecision(pod, unschedulable ? SchedulingDecision::Result::kUnschedulable : SchedulingDecision::Result::kError,
                  "", message, attempt, fw->name(), nominated_node != nullptr ? *nominated_node : "");
  if (!report || !still_pending) return;

  // Tell the user: PodScheduled=False and a FailedScheduling event, as
  // kube-scheduler does. The condition is patched only when it changes.
  const std::string reason = unschedulable ? "Unschedulable" : "SchedulerError";
  bool condition_current = false;
  for (const auto& c : pod.conditions()) {
    if (c.type() == "PodScheduled" && c.status() == "False" && c.reason() == reason &&
        c.message() == message) {
      condition_current = true;
    }
  }
  if (!condition_current || nominated_node != nullptr) {
    v1::Action patch;
    auto* p = patch.mutable_patch_pod_status();
    *p->mutable_pod() = PodRef(pod);
    if (nominated_node != nullptr) p->set_nominated_node_name(*nominated_node);
    auto* c = p->add_conditions();
    c->set_type("PodScheduled");
    c->set_status("False");
    c->set_reason(reason);
    c->set_message(message);
    c->set_last_transition_time_us(absl::ToUnixMicros(clock_.Now()));
    SendAction(std::move(patch));
  }
  v1::Action event;
  auto* e = event.mutable_record_event();
  *e->mutable_regarding() = PodRef(pod);
  e->set_type("Warning");
  e->set_reason("FailedScheduling");
  e->set_action("Scheduling");
  e->set_note(message);
  SendAction(std::move(event));
}

}  // namespace podium::scheduler
