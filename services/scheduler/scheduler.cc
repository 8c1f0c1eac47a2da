#include "scheduler.h"

#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "queue/events.h"

namespace podium::scheduler {
namespace {

constexpr size_t kMaxDiagnoses = 10000;

std::string PodKey(const v1::Pod& pod) {
  return absl::StrCat(pod.meta().namespace_(), "/", pod.meta().name());
}

v1::ObjectRef PodRef(const v1::Pod& pod) {
  v1::ObjectRef ref;
  ref.set_kind("Pod");
  ref.set_uid(pod.meta().uid());
  ref.set_namespace_(pod.meta().namespace_());
  ref.set_name(pod.meta().name());
  return ref;
}

bool Terminal(const v1::Pod& pod) {
  return pod.phase() == v1::SUCCEEDED || pod.phase() == v1::FAILED;
}

}  // namespace

// ---------------------------------------------------------------- Executor

Executor::Executor(int threads, size_t max_queued) : max_queued_(max_queued) {
  for (int i = 0; i < threads; ++i) {
    threads_.emplace_back([this] {
      while (true) {
        std::function<void()> work;
        {
          absl::MutexLock lock(&mu_);
          mu_.Await(absl::Condition(
              +[](Executor* e) ABSL_NO_THREAD_SAFETY_ANALYSIS { return e->stopped_ || !e->work_.empty(); },
              this));
          if (work_.empty()) return;
          work = std::move(work_.front());
          work_.pop_front();
        }
        work();
      }
    });
  }
}

Executor::~Executor() { Stop(); }

bool Executor::Post(std::function<void()> work) {
  absl::MutexLock lock(&mu_);
  if (stopped_ || work_.size() >= max_queued_) return false;
  work_.push_back(std::move(work));
  return true;
}

void Executor::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopped_ = true;
  }
  for (auto& t : threads_) {
    if (t.joinable()) t.join();
  }
}

// ---------------------------------------------------------------- Decisions

uint64_t DecisionBroadcaster::Subscribe(Subscriber subscriber) {
  absl::MutexLock lock(&mu_);
  const uint64_t id = next_id_++;
  subscribers_.emplace(id, std::move(subscriber));
  return id;
}

void DecisionBroadcaster::Unsubscribe(uint64_t id) {
  absl::MutexLock lock(&mu_);
  subscribers_.erase(id);
}

void DecisionBroadcaster::Publish(const v1::SchedulingDecision& decision) {
  absl::MutexLock lock(&mu_);
  for (auto& [id, subscriber] : subscribers_) subscriber(decision);
}

// ---------------------------------------------------------------- State source

bool CacheStateSource::ReadDelta(uint64_t from_seq, uint64_t to_seq, v1::StateDelta* out) {
  const uint64_t at = cache_.ReadDelta(from_seq, to_seq, out);
  // A reset at another position would not match the snapshot: send ours.
  return !(out->reset() && at != to_seq);
}

void CacheStateSource::FullState(uint64_t to_seq, v1::StateDelta* out) {
  out->Clear();
  out->set_reset(true);
  out->set_generation(to_seq);
  for (const sdk::NodeInfo* node : snapshot_.Nodes()) {
    auto* n = out->add_node_upserts();
    n->set_id(node->id());
    *n->mutable_node() = node->node();
    for (const auto& pod : node->pods()) {
      auto* p = out->add_pod_upserts();
      p->set_node_id(node->id());
      *p->mutable_pod() = *pod->pod;
      p->set_assumed(cache_.IsAssumed(pod->uid()));
    }
  }
}

// ---------------------------------------------------------------- Scheduler

Scheduler::Scheduler(Options options, Cache& cache, Snapshot& snapshot, SchedulingQueue& queue,
                     std::vector<FrameworkPtr> profiles, SchedulerMetrics& metrics, Clock& clock)
    : options_(options),
      cache_(cache),
      snapshot_(snapshot),
      queue_(queue),
      profiles_(std::move(profiles)),
      metrics_(metrics),
      clock_(clock),
      executor_(options.binding_threads, 100000) {
  for (auto& fw : profiles_) {
    by_scheduler_name_[fw->name()] = fw.get();
    series_.emplace(fw.get(), metrics_.ForProfile(fw->name()));
  }
  last_unschedulable_flush_ = clock_.Now();
}

Scheduler::~Scheduler() { Stop(); }

void Scheduler::Start() {
  scheduling_thread_ = std::thread([this] { SchedulingLoop(); });
  housekeeping_thread_ = std::thread([this] {
    absl::MutexLock lock(&mu_);
    while (!stopped_) {
      mu_.AwaitWithTimeout(absl::Condition(&stopped_), absl::Milliseconds(100));
      if (stopped_) break;
      mu_.Unlock();
      Housekeeping();
      mu_.Lock();
    }
  });
}

void Scheduler::Stop() {
  {
    absl::MutexLock lock(&mu_);
    if (stopped_) return;
    stopped_ = true;
  }
  queue_.Close();
  if (scheduling_thread_.joinable()) scheduling_thread_.join();
  if (housekeeping_thread_.joinable()) housekeeping_thread_.join();
  executor_.Stop();
}

void Scheduler::SetPaused(bool paused) {
  absl::MutexLock lock(&mu_);
  paused_ = paused;
}

bool Scheduler::paused() const {
  absl::MutexLock lock(&mu_);
  return paused_;
}

Framework* Scheduler::FrameworkFor(const v1::Pod& pod) const {
  const std::string_view name = SchedulerNameOf(pod);
  auto it = by_scheduler_name_.find(absl::string_view(name.data(), name.size()));
  return it == by_scheduler_name_.end() ? nullptr : it->second;
}

sdk::Status Scheduler::PreEnqueue(const sdk::PodInfo& pod) const {
  sdk::Status gates = SchedulingGatesPreEnqueue(pod);
  if (!gates.IsSuccess()) return gates;
  const Framework* fw = FrameworkFor(*pod.pod);
  return fw == nullptr ? gates : fw->RunPreEnqueue(*pod.pod);
}

bool Scheduler::Responsible(const v1::Pod& pod) const {
  return FrameworkFor(pod) != nullptr;
}

void Scheduler::SendAction(v1::Action action, ActionSink::ResultCallback on_result) {
  if (sink_ == nullptr) return;
  if (!on_result) on_result = [](const v1::ActionResult&) {};
  sink_->Send(std::move(action), std::move(on_result));
}

// ------------------------------------------------------------ event handlers

void Scheduler::OnListBegin() {
  relisting_ = true;
  seen_pods_.clear();
  seen_nodes_.clear();
}

void Scheduler::OnListEnd() {
  if (relisting_) {
    // What the new list does not carry was deleted while we were not watching.
    std::vector<std::shared_ptr<const v1::Pod>> gone_pods;
    for (const auto& [uid, pod] : pods_) {
      if (!seen_pods_.contains(uid)) gone_pods.push_back(pod);
    }
    for (const auto& pod : gone_pods) {
      v1::ObjectEvent event;
      event.set_type(v1::ObjectEvent::DELETE);
      *event.mutable_pod() = *pod;
      HandlePod(event);
    }
    std::vector<std::shared_ptr<const v1::Node>> gone_nodes;
    for (const auto& [name, node] : nodes_) {
      if (!seen_nodes_.contains(name)) gone_nodes.push_back(node);
    }
    for (const auto& node : gone_nodes) {
      v1::ObjectEvent event;
      event.set_type(v1::ObjectEvent::DELETE);
      *event.mutable_node() = *node;
      HandleNode(event);
    }
    relisting_ = false;
  }
  absl::MutexLock lock(&mu_);
  if (!synced_) {
    std::fprintf(stderr, "podium-scheduler: cluster synced: %zu nodes, %zu pods\n", nodes_.size(),
                 pods_.size());
  }
  synced_ = true;
}

void Scheduler::OnAdapterDisconnected() {
  // Keep the cache: the adapter relists when it comes back, and the relist
  // reconciles what changed meanwhile.
  std::fprintf(stderr, "podium-scheduler: adapter disconnected; waiting for it to relist\n");
}

void Scheduler::OnObjectEvent(const v1::ObjectEvent& event) {
  switch (event.object_case()) {
    case v1::ObjectEvent::kPod: HandlePod(event); break;
    case v1::ObjectEvent::kNode: HandleNode(event); break;
    // Cached and mirrored to plugins now; preemption and gangs read them.
    case v1::ObjectEvent::kPdb: {
      absl::Status s = event.type() == v1::ObjectEvent::DELETE
                           ? cache_.RemovePdb(event.pdb().meta().uid())
                           : cache_.AddOrUpdatePdb(event.pdb());
      if (!s.ok()) std::fprintf(stderr, "podium-scheduler: PodDisruptionBudget: %s\n", std::string(s.message()).c_str());
      break;
    }
    case v1::ObjectEvent::kPodGroup: {
      absl::Status s = event.type() == v1::ObjectEvent::DELETE
                           ? cache_.RemovePodGroup(event.pod_group().meta().uid())
                           : cache_.AddOrUpdatePodGroup(event.pod_group());
      if (!s.ok()) std::fprintf(stderr, "podium-scheduler: PodGroup: %s\n", std::string(s.message()).c_str());
      break;
    }
    default: break;  // PriorityClasses are resolved by the adapter.
  }
}

void Scheduler::MoveOnEvent(v1::ClusterEvent event) {
  queue_.MoveAllToActiveOrBackoffQueue(event);
}

void Scheduler::HandleNode(const v1::ObjectEvent& event) {
  const v1::Node& node = event.node();
  const std::string& name = node.meta().name();
  if (relisting_) seen_nodes_.insert(name);
  auto it = nodes_.find(name);
  if (event.type() == v1::ObjectEvent::DELETE) {
    if (it == nodes_.end()) return;
    nodes_.erase(it);
    if (absl::Status s = cache_.RemoveNode(name); !s.ok()) {
      std::fprintf(stderr, "podium-scheduler: removing Node %s: %s\n", name.c_str(),
                   std::string(s.message()).c_str());
    }
    return;
  }
  auto latest = std::make_shared<const v1::Node>(node);
  v1::ClusterEvent cluster_event;
  cluster_event.set_resource(v1::NODE);
  if (it == nodes_.end()) {
    cluster_event.set_action(v1::ADD);
  } else {
    const uint32_t actions = NodeUpdateActions(*it->second, node);
    if (actions == 0 && it->second->meta().resource_version() == node.meta().resource_version()) {
      return;  // Nothing the scheduler looks at changed.
    }
    cluster_event.set_action(actions);
    *cluster_event.mutable_old_node() = *it->second;
  }
  nodes_[name] = latest;
  cache_.AddOrUpdateNode(node);
  if (cluster_event.action() != 0) {
    *cluster_event.mutable_new_node() = node;
    MoveOnEvent(std::move(cluster_event));
  }
}

void Scheduler::HandlePod(const v1::ObjectEvent& event) {
  const v1::Pod& pod = event.pod();
  const std::string& uid = pod.meta().uid();
  if (relisting_) seen_pods_.insert(uid);
  auto it = pods_.find(uid);
  std::shared_ptr<const v1::Pod> old = it == pods_.end() ? nullptr : it->second;
  const bool was_assigned = old != nullptr && !old->node_name().empty();
  const bool deleted = event.type() == v1::ObjectEvent::DELETE;

  if (deleted || !pod.node_name().empty()) {
    absl::MutexLock lock(&mu_);
    pending_uids_.erase(uid);
  }
  if (deleted) {
    if (old == nullptr) return;
    pods_.erase(uid);
    if (was_assigned) {
      (void)cache_.RemovePod(uid);
      v1::ClusterEvent e;
      e.set_resource(v1::POD);
      e.set_action(v1::DELETE);
      *e.mutable_old_pod() = *old;
      MoveOnEvent(std::move(e));
    } else {
      queue_.Delete(uid);
      // A pod waiting at Permit that is deleted is rejected.
      absl::MutexLock lock(&mu_);
      waiting_.erase(uid);
    }
    return;
  }

  auto latest = std::make_shared<const v1::Pod>(pod);
  pods_[uid] = latest;
  if (!pod.node_name().empty()) {
    // Bound: by us (the adapter confirms our bind) or by someone else.
    if (!was_assigned) queue_.Delete(uid);
    if (Terminal(pod)) {
      (void)cache_.RemovePod(uid);
    } else if (absl::Status s = cache_.AddOrUpdatePod(pod); !s.ok()) {
      std::fprintf(stderr, "podium-scheduler: caching Pod %s: %s\n", PodKey(pod).c_str(),
                   std::string(s.message()).c_str());
    }
    v1::ClusterEvent e;
    e.set_resource(v1::POD);
    if (!was_assigned) {
      e.set_action(v1::ADD);
    } else {
      uint32_t actions = PodUpdateActions(*old, pod);
      if (Terminal(pod) && !Terminal(*old)) actions |= v1::DELETE;  // Frees its resources.
      if (actions == 0) return;
      e.set_action(actions);
      *e.mutable_old_pod() = *old;
    }
    *e.mutable_new_pod() = pod;
    MoveOnEvent(std::move(e));
    return;
  }
  // Pending.
  if (!Responsible(pod) || Terminal(pod) || pod.meta().deletion_timestamp_us() != 0) {
    if (old != nullptr) queue_.Delete(uid);
    absl::MutexLock lock(&mu_);
    pending_uids_.erase(uid);
    return;
  }
  {
    absl::MutexLock lock(&mu_);
    pending_uids_.insert(uid);
  }
  if (old == nullptr) {
    queue_.Add(sdk::PodInfo::Create(pod));
  } else {
    queue_.Update(*old, sdk::PodInfo::Create(pod));
  }
}

// ------------------------------------------------------------ scheduling

void Scheduler::SchedulingLoop() {
  {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(
        +[](Scheduler* s) ABSL_NO_THREAD_SAFETY_ANALYSIS { return s->synced_ || s->stopped_; }, this));
  }
  while (true) {
    std::optional<QueuedPodInfo> popped = queue_.Pop();
    if (!popped) return;
    auto pod = std::make_shared<QueuedPodInfo>(std::move(*popped));
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](Scheduler* s) ABSL_NO_THREAD_SAFETY_ANALYSIS { return !s->paused_ || s->stopped_; }, this));
      if (stopped_) return;
    }
    ScheduleOne(std::move(pod));
  }
}

void Scheduler::ScheduleOne(QueuedPodInfoPtr qp) {
  const v1::Pod& pod = *qp->pod_info->pod;
  Framework* fw = FrameworkFor(pod);
  if (fw == nullptr || cache_.IsAssumed(pod.meta().uid())) {
    queue_.Done(pod.meta().uid());
    return;
  }
  const absl::Time start = clock_.Now();
  const uint64_t cycle = queue_.scheduling_cycle();
  const uint64_t cycle_id = ++cycle_id_;
  cache_.UpdateSnapshot(snapshot_);

  ScheduleResult result = fw->SchedulePod(pod, snapshot_, snapshot_.delta_seq(), cycle_id);
  const SchedulerMetrics::ProfileSeries& series = series_.at(fw);
  (result.outcome == ScheduleResult::Outcome::kScheduled ? series.filter_success : series.filter_unschedulable)
      ->Observe(absl::ToDoubleSeconds(clock_.Now() - start));
  if (result.outcome == ScheduleResult::Outcome::kUnschedulable) {
    std::function<void()> after_requeue;  // Preemption's evictions, once the pod is queued.
    std::string nominated;
    if (fw->HasPostFilterPlugins()) {
      auto [post, status] = fw->RunPostFilter(pod, result.diagnosis);
      after_requeue = std::move(post.after_requeue);
      result.diagnosis.post_filter_message = status.Message();
      // The pod waits for its nominated node; later cycles count it there. The
      // nomination rides in the PodScheduled=False patch (kube-scheduler's updatePod).
      if (status.IsSuccess()) nominated = std::move(post.nominated_node_name);
    }
    AttemptFailed(qp, fw, cycle, start, result.outcome, result.diagnosis.Message(),
                  result.diagnosis.unschedulable_plugins, &result.diagnosis,
                  nominated.empty() ? nullptr : &nominated);
    if (after_requeue) after_requeue();
    return;
  }
  if (result.outcome == ScheduleResult::Outcome::kError) {
    AttemptFailed(qp, fw, cycle, start, result.outcome, std::string(result.error.message()), {},
                  nullptr);
    return;
  }

  // Assume: the pod counts on its node from the next cycle on, before binding.
  v1::Pod assumed_pod = pod;
  assumed_pod.set_node_name(result.node_name);
  sdk::PodInfoPtr assumed = sdk::PodInfo::Create(std::move(assumed_pod));
  if (absl::Status s = cache_.AssumePod(assumed, result.node_name); !s.ok()) {
    AttemptFailed(qp, fw, cycle, start, ScheduleResult::Outcome::kError,
                  absl::StrCat("assuming the pod: ", s.message()), {}, nullptr);
    return;
  }
  sdk::Status reserve = fw->RunReserve(*assumed->pod, result.node_name, cycle_id);
  if (!reserve.IsSuccess()) {
    fw->RunUnreserve(*assumed->pod, result.node_name, cycle_id);
    (void)cache_.ForgetPod(pod.meta().uid());
    const bool rejected = reserve.IsRejected();
    AttemptFailed(qp, fw, cycle, start,
                  rejected ? ScheduleResult::Outcome::kUnschedulable : ScheduleResult::Outcome::kError,
                  reserve.Message(), {reserve.plugin()}, nullptr);
    return;
  }
  {
    absl::MutexLock lock(&mu_);
    in_permit_ = pod.meta().uid();
  }
  PermitOutcome permit = fw->RunPermit(*assumed->pod, result.node_name, cycle_id);
  std::vector<v1::PermitDecision> early;
  {
    absl::MutexLock lock(&mu_);
    in_permit_.clear();
    early.swap(early_decisions_);
  }
  if (!permit.status.IsSuccess() && !permit.status.IsWait()) {
    fw->RunUnreserve(*assumed->pod, result.node_name, cycle_id);
    (void)cache_.ForgetPod(pod.meta().uid());
    const bool rejected = permit.status.IsRejected();
    AttemptFailed(qp, fw, cycle, start,
                  rejected ? ScheduleResult::Outcome::kUnschedulable : ScheduleResult::Outcome::kError,
                  permit.status.Message(), {permit.status.plugin()}, nullptr);
    return;
  }
  if (permit.status.IsWait()) {
    WaitingPod waiting{qp, fw, result.node_name, cycle_id, start, {}};
    const absl::Time now = clock_.Now();
    for (const auto& [plugin, timeout] : permit.waiting) waiting.pending[plugin] = now + timeout;
    std::optional<WaitingPod> done;
    bool rejected = false;
    v1::PermitDecision last;
    {
      absl::MutexLock lock(&mu_);
      waiting_.emplace(pod.meta().uid(), std::move(waiting));
      for (const auto& decision : early) {
        last = decision;
        done = ApplyPermitDecision(decision, &rejected);
        if (done) break;
      }
    }
    // The binding cycle starts when every plugin allowed it.
    if (done) FinishWaiting(std::move(*done), rejected, last);
    return;
  }
  Bind(std::move(qp), fw, result.node_name, cycle_id, start);
}

std::optional<Scheduler::WaitingPod> Scheduler::ApplyPermitDecision(const v1::PermitDecision& decision,
                                                                   bool* rejected) {
  auto it = waiting_.find(decision.pod_uid());
  if (it == waiting_.end()) return std::nullopt;
  if (decision.allow()) {
    it->second.pending.erase(decision.plugin());
    if (!it->second.pending.empty()) return std::nullopt;
  }
  *rejected = !decision.allow();
  WaitingPod done = std::move(it->second);
  waiting_.erase(it);
  return done;
}

void Scheduler::FinishWaiting(WaitingPod pod, bool rejected, const v1::PermitDecision& decision) {
  if (!rejected) {
    Bind(pod.pod, pod.framework, pod.node, pod.cycle_id, pod.start);
    return;
  }
  sdk::Status status(sdk::Code::kUnschedulable,
                     absl::StrCat("rejected while waiting on permit: ", decision.reason()));
  status.WithPlugin(decision.plugin());
  BindingFailed(pod.pod, pod.framework, pod.node, pod.cycle_id, pod.start, status, true);
}

void Scheduler::OnPermitDecision(const v1::PermitDecision& decision) {
  constexpr size_t kMaxEarlyDecisions = 64;
  std::optional<WaitingPod> done;
  bool rejected = false;
  {
    absl::MutexLock lock(&mu_);
    if (!waiting_.contains(decision.pod_uid())) {
      // Its Permit may still be on its way back: keep the decision for it.
      if (in_permit_ == decision.pod_uid() && early_decisions_.size() < kMaxEarlyDecisions) {
        early_decisions_.push_back(decision);
      }
      return;
    }
    done = ApplyPermitDecision(decision, &rejected);
  }
  if (done) FinishWaiting(std::move(*done), rejected, decision);
}

void Scheduler::Bind(QueuedPodInfoPtr qp, Framework* fw, std::string node, uint64_t cycle_id,
                     absl::Time start) {
  const bool remote_work =
      fw->HasRemotePlugins(v1::PRE_BIND) || fw->HasRemotePlugins(v1::BIND);
  if (!remote_work) {
    SendBind(std::move(qp), fw, std::move(node), cycle_id, start);
    return;
  }
  // PreBind and Bind plugins are remote calls: off the scheduling thread.
  QueuedPodInfoPtr pod = qp;
  const bool posted = executor_.Post([this, qp, fw, node, cycle_id, start] {
    const v1::Pod& p = *qp->pod_info->pod;
    v1::Pod bound = p;
    bound.set_node_name(node);
    sdk::Status pre_bind = fw->RunPreBind(bound, node, cycle_id);
    if (!pre_bind.IsSuccess()) {
      BindingFailed(qp, fw, node, cycle_id, start, pre_bind, pre_bind.IsRejected());
      return;
    }
    sdk::Status bind = fw->RunBindPlugins(bound, node, cycle_id);
    if (bind.IsSkip()) {
      SendBind(qp, fw, node, cycle_id, start);
      return;
    }
    if (!bind.IsSuccess()) {
      BindingFailed(qp, fw, node, cycle_id, start, bind, false);
      return;
    }
    // A Bind plugin bound it; the adapter's pod update confirms it.
    queue_.Done(p.meta().uid());
    PublishDecision(p, v1::SchedulingDecision::SCHEDULED, node, "", clock_.Now() - start, fw->name());
  });
  if (!posted) {
    BindingFailed(pod, fw, node, cycle_id, start,
                  sdk::Status(sdk::Code::kError, "binding executor is full"), false);
  }
}

void Scheduler::SendBind(QueuedPodInfoPtr qp, Framework* fw, std::string node, uint64_t cycle_id,
                         absl::Time start) {
  const v1::Pod& pod = *qp->pod_info->pod;
  v1::Action action;
  *action.mutable_bind()->mutable_pod() = PodRef(pod);
  action.mutable_bind()->set_node_name(node);
  SendAction(std::move(action), [this, qp, fw, node, cycle_id, start](const v1::ActionResult& result) {
    const v1::Pod& p = *qp->pod_info->pod;
    if (result.code() != v1::ActionResult::OK) {
      BindingFailed(qp, fw, node, cycle_id, start,
                    sdk::Status(sdk::Code::kError, absl::StrCat("binding rejected: ",
                                                                v1::ActionResult::Code_Name(result.code()),
                                                                ": ", result.message())),
                    false);
      return;
    }
    const absl::Time now = clock_.Now();
    queue_.Done(p.meta().uid());
    const SchedulerMetrics::ProfileSeries& series = series_.at(fw);
    series.attempts_scheduled->Increment();
    series.attempt_scheduled->Observe(absl::ToDoubleSeconds(now - start));
    metrics_.ObservePodScheduled(qp->attempts,
                                 absl::ToDoubleSeconds(now - qp->initial_attempt_timestamp.value_or(start)));
    PublishDecision(p, v1::SchedulingDecision::SCHEDULED, node, "", now - start, fw->name());
    v1::Action event;
    auto* e = event.mutable_record_event();
    *e->mutable_regarding() = PodRef(p);
    e->set_type("Normal");
    e->set_reason("Scheduled");
    e->set_action("Binding");
    e->set_note(absl::StrCat("Successfully assigned ", PodKey(p), " to ", node));
    SendAction(std::move(event));
    if (fw->HasRemotePlugins(v1::POST_BIND)) {
      executor_.Post([fw, qp, node, cycle_id] {
        v1::Pod bound = *qp->pod_info->pod;
        bound.set_node_name(node);
        fw->RunPostBind(bound, node, cycle_id);
      });
    }
  });
}

void Scheduler::BindingFailed(QueuedPodInfoPtr qp, Framework* fw, const std::string& node,
                              uint64_t cycle_id, absl::Time start, const sdk::Status& status,
                              bool unschedulable) {
  const v1::Pod& pod = *qp->pod_info->pod;
  v1::Pod assumed = pod;
  assumed.set_node_name(node);
  fw->RunUnreserve(assumed, node, cycle_id);
  (void)cache_.ForgetPod(pod.meta().uid());
  absl::flat_hash_set<std::string> plugins;
  if (!status.plugin().empty()) plugins.insert(status.plugin());
  AttemptFailed(std::move(qp), fw, queue_.scheduling_cycle(), start,
                unschedulable ? ScheduleResult::Outcome::kUnschedulable : ScheduleResult::Outcome::kError,
                status.Message(), plugins, nullptr);
}

void Scheduler::AttemptFailed(QueuedPodInfoPtr qp, Framework* fw, uint64_t cycle, absl::Time start,
                              ScheduleResult::Outcome outcome, const std::string& message,
                              const absl::flat_hash_set<std::string>& plugins,
                              const Diagnosis* diagnosis, const std::string* nominated_node) {
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
  if (unschedulable) {
    absl::MutexLock lock(&mu_);
    if (diagnoses_.size() >= kMaxDiagnoses) diagnoses_.clear();
    diagnoses_[PodKey(pod)] = {pod, diagnosis != nullptr ? *diagnosis : Diagnosis{}};
  }
  // A pod deleted while it was being scheduled is not requeued.
  bool still_pending;
  {
    absl::MutexLock lock(&mu_);
    still_pending = pending_uids_.contains(pod.meta().uid());
  }
  if (still_pending) (void)queue_.AddUnschedulableIfNotPresent(*qp, cycle);
  queue_.Done(pod.meta().uid());
  PublishDecision(pod,
                  unschedulable ? v1::SchedulingDecision::UNSCHEDULABLE : v1::SchedulingDecision::ERROR,
                  "", message, attempt, fw->name());

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

void Scheduler::PublishDecision(const v1::Pod& pod, v1::SchedulingDecision::Result result,
                                const std::string& node, const std::string& message,
                                absl::Duration attempt, const std::string& profile) {
  v1::SchedulingDecision decision;
  *decision.mutable_pod() = PodRef(pod);
  decision.set_result(result);
  decision.set_node_name(node);
  decision.set_message(message);
  decision.set_attempt_ms(absl::ToDoubleMilliseconds(attempt));
  decision.set_time_us(absl::ToUnixMicros(clock_.Now()));
  decision.set_profile(profile);
  decisions_.Publish(decision);
}

std::optional<std::pair<v1::Pod, Diagnosis>> Scheduler::LastDiagnosis(const std::string& ns,
                                                                     const std::string& name) const {
  absl::MutexLock lock(&mu_);
  auto it = diagnoses_.find(absl::StrCat(ns, "/", name));
  if (it == diagnoses_.end()) return std::nullopt;
  return it->second;
}

bool Scheduler::WaitingAtPermit(std::string_view uid) const {
  absl::MutexLock lock(&mu_);
  return waiting_.contains(absl::string_view(uid.data(), uid.size()));
}

void Scheduler::Housekeeping() {
  const absl::Time now = clock_.Now();
  // Permit timeouts.
  std::vector<std::pair<WaitingPod, std::string>> expired;
  {
    absl::MutexLock lock(&mu_);
    for (auto it = waiting_.begin(); it != waiting_.end();) {
      std::string plugin;
      for (const auto& [name, deadline] : it->second.pending) {
        if (deadline <= now) plugin = name;
      }
      if (!plugin.empty()) {
        expired.emplace_back(std::move(it->second), plugin);
        waiting_.erase(it++);
      } else {
        ++it;
      }
    }
  }
  for (auto& [waiting, plugin] : expired) {
    sdk::Status status(sdk::Code::kUnschedulable,
                       absl::StrCat("rejected due to timeout after waiting at plugin ", plugin));
    status.WithPlugin(plugin);
    BindingFailed(waiting.pod, waiting.framework, waiting.node, waiting.cycle_id, waiting.start,
                  status, true);
  }
  queue_.FlushBackoffQCompleted();
  if (now - last_unschedulable_flush_ >= options_.flush_unschedulable_interval) {
    last_unschedulable_flush_ = now;
    queue_.FlushUnschedulablePodsLeftover();
  }
  if (housekeeping_hook_) housekeeping_hook_();
}

}  // namespace podium::scheduler
