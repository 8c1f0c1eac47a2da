#include "queue/scheduling_queue.h"

#include <algorithm>
#include <iterator>
#include <tuple>
#include <utility>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "queue/events.h"

namespace podium::scheduler {

struct SchedulingQueue::Entry {
  QueuedPodInfo info;
  QueueKind where = QueueKind::kActive;  // kActive, kBackoff or kUnschedulable.
  absl::Time backoff_expiry = absl::InfinitePast();  // Set while in backoffQ.
  bool error_backoff = false;  // In error_backoff_q_ rather than backoff_q_.
  uint64_t pool_stay = 0;
  bool held = false;  // Gated by Hold, not by PreEnqueue: only Release ends it.
  std::string group_key;  // Where members_by_group_ lists it; empty: no gang.
};

namespace {

// Abseil here is built with its own string_view type.
absl::string_view AV(std::string_view s) { return absl::string_view(s.data(), s.size()); }

// kube's isPodUpdated: a change beyond status and resourceVersion.
bool IsPodUpdated(const v1::Pod& old_pod, const v1::Pod& new_pod) {
  return !SamePodExcept(old_pod, new_pod,
                        {v1::Pod::kPhaseFieldNumber, v1::Pod::kNominatedNodeNameFieldNumber,
                         v1::Pod::kConditionsFieldNumber, v1::Pod::kResizeStatusFieldNumber,
                         v1::Pod::kAllocatedFieldNumber, v1::Pod::kStartTimeUsFieldNumber},
                        {v1::ObjectMeta::kResourceVersionFieldNumber});
}

bool EventMatches(const v1::ClusterEventInterest& interest, const v1::ClusterEvent& event) {
  // An unspecified resource is kube's WildCard on either side.
  if (event.resource() == v1::RESOURCE_UNSPECIFIED) return true;
  if (interest.resource() != v1::RESOURCE_UNSPECIFIED && interest.resource() != event.resource()) {
    return false;
  }
  if (event.resource() == v1::UNSCHEDULED_POD && event.action() == v1::UPDATE) {
    // A change of the pending pod that no UPDATE_POD_* bit names (kube's
    // updatePodOther): only an interest in every update matches it.
    return (interest.action_mask() & v1::UPDATE) == v1::UPDATE;
  }
  return (interest.action_mask() & event.action()) != 0;
}

// The pending pod's own update, as the UNSCHEDULED_POD event plugins
// register for (kube-scheduler's UnscheduledPodUpdate events). Null when
// nothing beyond its status changed.
std::shared_ptr<const v1::ClusterEvent> SelfUpdateEvent(const v1::Pod& before, const v1::Pod& after) {
  if (!IsPodUpdated(before, after)) return nullptr;
  auto event = std::make_shared<v1::ClusterEvent>();
  event->set_resource(v1::UNSCHEDULED_POD);
  const uint32_t actions = PodUpdateActions(before, after);
  event->set_action(actions != 0 ? actions : static_cast<uint32_t>(v1::UPDATE));
  *event->mutable_old_pod() = before;
  *event->mutable_new_pod() = after;
  return event;
}


}  // namespace

std::string_view QueueKindName(QueueKind kind) {
  switch (kind) {
    case QueueKind::kActive:
      return "active";
    case QueueKind::kBackoff:
      return "backoff";
    case QueueKind::kUnschedulable:
      return "unschedulable";
    case QueueKind::kGated:
      return "gated";
    case QueueKind::kInFlight:
      return "in_flight";
  }
  return "unknown";
}

sdk::Status SchedulingGatesPreEnqueue(const sdk::PodInfo& pod) {
  const auto& gates = pod.pod->scheduling_gates();
  if (gates.empty()) return sdk::Status::Success();
  sdk::Status status(sdk::Code::kUnschedulableAndUnresolvable,
                     absl::StrCat("waiting for scheduling gates: [", absl::StrJoin(gates, " "), "]"));
  status.WithPlugin("SchedulingGates");
  return status;
}

bool PrioritySortLess(const QueuedPodInfo& a, const QueuedPodInfo& b) {
  const int32_t pa = a.pod().priority();
  const int32_t pb = b.pod().priority();
  if (pa != pb) return pa > pb;
  // kube's PrioritySort: the time the pod was (re)queued, not its creation
  // time, so a pod that failed goes behind pods queued before it came back.
  return a.timestamp < b.timestamp;
}

// ---- ordering ----

bool SchedulingQueue::ActiveLess::operator()(const Entry* a, const Entry* b) const {
  if ((*less)(a->info, b->info)) return true;
  if ((*less)(b->info, a->info)) return false;
  // Equal for QueueSort: first come, first served; uid makes it total.
  return std::tie(a->info.timestamp, a->info.uid()) < std::tie(b->info.timestamp, b->info.uid());
}

bool SchedulingQueue::BackoffLess::operator()(const Entry* a, const Entry* b) const {
  if (a->backoff_expiry != b->backoff_expiry) return a->backoff_expiry < b->backoff_expiry;
  if (less != nullptr) {
    if ((*less)(a->info, b->info)) return true;
    if ((*less)(b->info, a->info)) return false;
  }
  return std::tie(a->info.timestamp, a->info.uid()) < std::tie(b->info.timestamp, b->info.uid());
}

// ---- construction ----

SchedulingQueue::SchedulingQueue(Options options)
    : initial_backoff_(options.initial_backoff),
      max_backoff_(options.max_backoff),
      max_in_unschedulable_(options.max_in_unschedulable),
      pop_from_backoff_q_(options.pop_from_backoff_q),
      backoff_ordering_window_(options.backoff_ordering_window),
      clock_(options.clock != nullptr ? *options.clock : Clock::Real()),
      pre_enqueue_(std::move(options.pre_enqueue)),
      less_(options.less ? std::move(options.less) : QueueLessFn(PrioritySortLess)),
      on_incoming_pod_(std::move(options.on_incoming_pod)),
      hint_evaluator_(options.hint_evaluator),
      active_q_(ActiveLess{&less_}),
      backoff_q_(BackoffLess{pop_from_backoff_q_ ? &less_ : nullptr}),
      error_backoff_q_(BackoffLess{nullptr}) {}

SchedulingQueue::~SchedulingQueue() = default;

void SchedulingQueue::SetEventRegistry(EventRegistry registry) {
  absl::MutexLock lock(&mu_);
  registry_ = std::move(registry);
}

void SchedulingQueue::SetQueueingHintEvaluator(QueueingHintEvaluator* evaluator) {
  absl::MutexLock lock(&mu_);
  hint_evaluator_ = evaluator;
}

// ---- placement helpers ----

absl::Duration SchedulingQueue::BackoffDuration(int attempts) const {
  if (attempts <= 0) return absl::ZeroDuration();
  absl::Duration d = initial_backoff_;
  for (int i = 1; i < attempts; ++i) {
    if (d > max_backoff_ - d) return max_backoff_;
    d += d;
  }
  return std::min(d, max_backoff_);
}

absl::Time SchedulingQueue::BackoffExpiry(const QueuedPodInfo& info) const {
  // The errors while they last, else the rejections (kube #128748).
  const int failures =
      info.consecutive_errors_count > 0 ? info.consecutive_errors_count : info.unschedulable_count;
  const absl::Time expiry = info.timestamp + BackoffDuration(info.attempts <= 0 ? 0 : failures);
  if (!pop_from_backoff_q_ || info.attempts <= 0 ||
      backoff_ordering_window_ <= absl::ZeroDuration() || expiry == absl::InfiniteFuture()) {
    return expiry;
  }
  // The end of the ordering window the expiry falls in (kube truncates to
  // the window's start and counts the window as still backing off: the same
  // moment, but for expiries exactly on a window's edge).
  return absl::UnixEpoch() + absl::Ceil(expiry - absl::UnixEpoch(), backoff_ordering_window_);
}

void SchedulingQueue::Detach(Entry* entry) {
  switch (entry->where) {
    case QueueKind::kActive:
      active_q_.erase(entry);
      break;
    case QueueKind::kBackoff:
      (entry->error_backoff ? error_backoff_q_ : backoff_q_).erase(entry);
      entry->backoff_expiry = absl::InfinitePast();
      entry->error_backoff = false;
      break;
    case QueueKind::kUnschedulable:
    case QueueKind::kGated:
      unschedulable_pods_.erase(entry);
      break;
    case QueueKind::kInFlight:
      break;  // Not an entry's place: a popped pod lives in in_flight_.
  }
}

void SchedulingQueue::CountIncoming(const Entry& entry, std::string_view event) const {
  if (event.empty() || !on_incoming_pod_) return;
  on_incoming_pod_(QueueKindName(entry.where == QueueKind::kUnschedulable && entry.info.gated
                                     ? QueueKind::kGated
                                     : entry.where),
                   event);
}

void SchedulingQueue::InsertActive(Entry* entry, std::string_view event) {
  entry->where = QueueKind::kActive;
  active_q_.insert(entry);
  CountIncoming(*entry, event);
}

void SchedulingQueue::InsertBackoff(Entry* entry, std::string_view event) {
  entry->where = QueueKind::kBackoff;
  entry->backoff_expiry = BackoffExpiry(entry->info);
  // No plugin rejected it and none is pending: the attempt failed with an Error.
  entry->error_backoff =
      entry->info.unschedulable_plugins.empty() && entry->info.pending_plugins.empty();
  (entry->error_backoff ? error_backoff_q_ : backoff_q_).insert(entry);
  CountIncoming(*entry, event);
}

void SchedulingQueue::InsertPool(Entry* entry, std::string_view event) {
  entry->where = QueueKind::kUnschedulable;
  entry->pool_stay = ++next_pool_stay_;
  unschedulable_pods_.insert(entry);
  CountIncoming(*entry, event);
}

void SchedulingQueue::MoveToActiveOrBackoff(Entry* entry, absl::Time now, std::string_view event) {
  Detach(entry);
  if (BackoffExpiry(entry->info) > now) {
    InsertBackoff(entry, event);
  } else {
    InsertActive(entry, event);
  }
}

static std::string PodKey(std::string_view namespace_name, std::string_view name) {
  return absl::StrCat(AV(namespace_name), "/", AV(name));
}

static std::string GroupKeyOf(const v1::Pod& pod) {
  return pod.pod_group().empty() ? std::string() : PodKey(pod.meta().namespace_(), pod.pod_group());
}

void SchedulingQueue::IndexGroup(Entry* e) {
  e->group_key = GroupKeyOf(e->info.pod());
  if (!e->group_key.empty()) members_by_group_[e->group_key].insert(e);
}

void SchedulingQueue::UnindexGroup(Entry* e) {
  if (e->group_key.empty()) return;
  if (auto g = members_by_group_.find(e->group_key); g != members_by_group_.end()) {
    g->second.erase(e);
    if (g->second.empty()) members_by_group_.erase(g);
  }
  e->group_key.clear();
}

void SchedulingQueue::SetPodInfo(Entry* e, sdk::PodInfoPtr pod) {
  e->info.pod_info = std::move(pod);
  if (GroupKeyOf(e->info.pod()) == e->group_key) return;
  UnindexGroup(e);  // The pod joined or left a gang (e.g. its label changed).
  IndexGroup(e);
}

SchedulingQueue::Entry* SchedulingQueue::Insert(std::unique_ptr<Entry> entry) {
  Entry* e = entry.get();
  const std::string uid = e->info.uid();
  uids_by_key_[PodKey(e->info.pod().meta().namespace_(), e->info.pod().meta().name())].push_back(uid);
  IndexGroup(e);
  pods_.emplace(uid, std::move(entry));
  return e;
}

void SchedulingQueue::Remove(const std::string& uid_ref, const v1::Pod& pod_ref) {
  // Both may live in the entry erased below.
  const std::string uid = uid_ref;
  const std::string key = PodKey(pod_ref.meta().namespace_(), pod_ref.meta().name());
  if (auto k = uids_by_key_.find(key); k != uids_by_key_.end()) {
    std::erase(k->second, uid);
    if (k->second.empty()) uids_by_key_.erase(k);
  }
  if (auto it = pods_.find(uid); it != pods_.end()) {
    UnindexGroup(it->second.get());
    pods_.erase(it);
  }
}

void SchedulingQueue::Erase(Entry* entry) {
  Detach(entry);
  Remove(entry->info.uid(), entry->info.pod());  // Destroys entry.
}

sdk::Status SchedulingQueue::RunPreEnqueue(const sdk::PodInfo& pod) const {
  if (!pre_enqueue_) return sdk::Status::Success();
  return pre_enqueue_(pod);
}

// ---- pending pods come and go ----

void SchedulingQueue::Add(sdk::PodInfoPtr pod) {
  if (pod == nullptr) return;
  bool known;
  {
    absl::MutexLock lock(&mu_);
    known = pods_.contains(pod->uid()) || in_flight_.contains(pod->uid());
  }
  if (known) {
    Update(std::move(pod));  // An add of a known pod is an update.
  } else {
    AddNew(std::move(pod));
  }
}

void SchedulingQueue::AddNew(sdk::PodInfoPtr pod) {
  sdk::Status gate = RunPreEnqueue(*pod);
  absl::MutexLock lock(&mu_);
  const std::string uid = pod->uid();
  if (pods_.contains(uid) || in_flight_.contains(uid)) return;  // Raced with another add.
  auto entry = std::make_unique<Entry>();
  entry->info.pod_info = std::move(pod);
  entry->info.timestamp = clock_.Now();
  Entry* e = Insert(std::move(entry));
  if (gate.IsSuccess()) {
    InsertActive(e, kEventPodAdd);
  } else {
    e->info.gated = true;
    e->info.gating_plugin = gate.plugin();
    e->info.message = gate.Message();
    InsertPool(e, kEventPodAdd);
  }
}

void SchedulingQueue::Update(sdk::PodInfoPtr new_pod) {
  if (new_pod == nullptr) return;
  const std::string uid = new_pod->uid();
  if (!new_pod->pod->node_name().empty()) {
    Delete(uid);  // Assigned: no longer pending.
    return;
  }
  uint64_t gated_stay = 0;
  // A pool pod whose own update needs a hint: asked once the lock is gone.
  sdk::PodInfoPtr hinted_pod;
  uint64_t hinted_stay = 0;
  std::vector<PodHint> hints;
  QueueingHintEvaluator* evaluator = nullptr;
  {
    absl::MutexLock lock(&mu_);
    if (auto it = in_flight_.find(uid); it != in_flight_.end()) {
      // Kept with the cluster events: if the attempt fails, the rejecting
      // plugins judge it as they judge the rest (kube's in-flight events).
      InFlight& flight = it->second;
      if (flight.latest != nullptr) {  // Pop sets it.
        if (auto event = SelfUpdateEvent(*flight.latest->pod, *new_pod->pod)) RecordInFlightEvent(std::move(event));
      }
      flight.latest = std::move(new_pod);
      return;
    }
    auto it = pods_.find(uid);
    if (it != pods_.end()) {
      Entry* e = it->second.get();
      switch (e->where) {
        case QueueKind::kActive:
          Detach(e);  // The sort key may change.
          SetPodInfo(e, std::move(new_pod));
          InsertActive(e);
          return;
        case QueueKind::kBackoff:
          Detach(e);  // Within a window the QueueSort order decides.
          SetPodInfo(e, std::move(new_pod));
          InsertBackoff(e);
          return;
        case QueueKind::kUnschedulable:
        case QueueKind::kGated:
        case QueueKind::kInFlight:  // Never an entry's place (in_flight_ above).
          break;
      }
      if (!e->info.gated) {
        // kube-scheduler with queueing hints: the update moves the pod only
        // when a rejecting plugin registered for it (UNSCHEDULED_POD) and,
        // if it has a hint, the hint says Queue.
        std::shared_ptr<const v1::ClusterEvent> event = SelfUpdateEvent(*e->info.pod_info->pod, *new_pod->pod);
        SetPodInfo(e, std::move(new_pod));
        if (event == nullptr) return;
        std::vector<std::string> plugins;
        switch (Decide(e->info, *event, &plugins)) {
          case EventDecision::kStay:
            return;
          case EventDecision::kMove:
            MoveToActiveOrBackoff(e, clock_.Now(), kEventPodUpdate);
            return;
          case EventDecision::kAskHints:
            break;
        }
        hinted_pod = e->info.pod_info;
        hinted_stay = e->pool_stay;
        hints.push_back(PodHint{std::move(event), std::move(plugins)});
        evaluator = hint_evaluator_;
      } else if (e->held) {  // Only Release lets it go; it leaves with this version.
        SetPodInfo(e, std::move(new_pod));
        return;
      } else {
        gated_stay = e->pool_stay;
      }
    }
  }
  if (hinted_pod != nullptr) {
    // Update runs where plugins may be called (the queue worker).
    AskPooledPodHints(std::move(hinted_pod), hinted_stay, hints, evaluator);
    return;
  }
  if (gated_stay == 0) {
    AddNew(std::move(new_pod));  // Not queued: a new pending pod.
    return;
  }
  // Gated: ask PreEnqueue again, outside the lock.
  sdk::Status gate = RunPreEnqueue(*new_pod);
  absl::MutexLock lock(&mu_);
  auto it = pods_.find(uid);
  if (it == pods_.end() || it->second->pool_stay != gated_stay || !it->second->info.gated ||
      it->second->held || unschedulable_pods_.count(it->second.get()) == 0) {
    return;  // Changed meanwhile; the newer change wins.
  }
  Entry* e = it->second.get();
  SetPodInfo(e, std::move(new_pod));
  if (gate.IsSuccess()) {
    e->info.gated = false;
    e->info.gating_plugin.clear();
    e->info.message.clear();
    Detach(e);
    InsertActive(e, kEventPodUpdate);
  } else {
    e->info.gating_plugin = gate.plugin();
    e->info.message = gate.Message();
  }
}

bool SchedulingQueue::Delete(std::string_view uid_view) {
  absl::MutexLock lock(&mu_);
  bool found = false;
  if (auto it = in_flight_.find(AV(uid_view)); it != in_flight_.end()) {
    it->second.deleted = true;
    found = true;
  }
  if (auto it = pods_.find(AV(uid_view)); it != pods_.end()) {
    Erase(it->second.get());
    found = true;
  }
  return found;
}

// ---- popping ----

bool SchedulingQueue::ReadyToPop() const {
  return closed_ || !active_q_.empty() || (pop_from_backoff_q_ && !backoff_q_.empty());
}

std::optional<QueuedPodInfo> SchedulingQueue::PopLocked() {
  if (closed_) return std::nullopt;
  Entry* e;
  if (!active_q_.empty()) {
    e = *active_q_.begin();
  } else if (pop_from_backoff_q_ && !backoff_q_.empty()) {
    // KEP-5142: activeQ is empty, so the cycle would idle; retry the pod
    // whose backoff ends first instead. Error backoffs keep waiting.
    e = *backoff_q_.begin();
    ++popped_from_backoff_q_;
  } else {
    return std::nullopt;
  }
  Detach(e);
  QueuedPodInfo info = std::move(e->info);
  Remove(info.uid(), info.pod());
  ++info.attempts;
  ++scheduling_cycle_;
  if (!info.initial_attempt_timestamp.has_value()) info.initial_attempt_timestamp = clock_.Now();
  // The next attempt records its own rejections.
  info.unschedulable_plugins.clear();
  info.pending_plugins.clear();
  in_flight_[info.uid()] = InFlight{
      .latest = info.pod_info, .events_before = last_event_seq_, .attempts = info.attempts, .popped = clock_.Now()};
  return info;
}

std::vector<QueuedPodInfo> SchedulingQueue::PopGroupMembers(
    std::string_view namespace_, std::string_view group, const std::function<bool(const QueuedPodInfo&)>& also) {
  absl::MutexLock lock(&mu_);
  auto g = members_by_group_.find(PodKey(namespace_, group));
  if (g == members_by_group_.end()) return {};
  std::vector<Entry*> matched;
  for (Entry* e : g->second) {
    if (!e->info.gated && (!also || also(e->info))) matched.push_back(e);
  }
  ActiveLess less{&less_};
  std::sort(matched.begin(), matched.end(), less);
  std::vector<QueuedPodInfo> out;
  out.reserve(matched.size());
  const absl::Time now = clock_.Now();
  for (Entry* e : matched) {
    Detach(e);
    QueuedPodInfo info = std::move(e->info);
    Remove(info.uid(), info.pod());  // Also leaves the group index.
    ++info.attempts;
    if (!info.initial_attempt_timestamp.has_value()) info.initial_attempt_timestamp = now;
    info.unschedulable_plugins.clear();
    info.pending_plugins.clear();
    in_flight_[info.uid()] =
        InFlight{.latest = info.pod_info, .events_before = last_event_seq_, .attempts = info.attempts, .popped = now};
    out.push_back(std::move(info));
  }
  return out;
}

size_t SchedulingQueue::RetryGatedMembers(std::string_view namespace_, std::string_view group,
                                          std::string_view except_uid) {
  std::vector<GatedAsk> asked;
  {
    absl::MutexLock lock(&mu_);
    auto g = members_by_group_.find(PodKey(namespace_, group));
    if (g == members_by_group_.end()) return 0;
    for (Entry* e : g->second) {
      if (Askable(e) && e->info.uid() != except_uid) {
        asked.push_back({e->info.pod_info, e->pool_stay});
      }
    }
  }
  return AskGatedAgain(asked);
}

size_t SchedulingQueue::RetryGated(const std::vector<std::string>& uids) {
  std::vector<GatedAsk> asked;
  {
    absl::MutexLock lock(&mu_);
    for (const std::string& uid : uids) {
      auto it = pods_.find(uid);
      if (it != pods_.end() && Askable(it->second.get())) {
        asked.push_back({it->second->info.pod_info, it->second->pool_stay});
      }
    }
  }
  return AskGatedAgain(asked);
}

bool SchedulingQueue::Askable(const Entry* e) const {
  return e->info.gated && !e->held && unschedulable_pods_.contains(e);
}

size_t SchedulingQueue::AskGatedAgain(const std::vector<GatedAsk>& asked) {
  size_t moved = 0;
  for (const GatedAsk& a : asked) {
    sdk::Status gate = RunPreEnqueue(*a.pod);
    absl::MutexLock lock(&mu_);
    auto it = pods_.find(a.pod->uid());
    if (it == pods_.end() || it->second->pool_stay != a.pool_stay || !Askable(it->second.get())) {
      continue;  // Changed meanwhile; the newer change decided.
    }
    Entry* e = it->second.get();
    if (gate.IsSuccess()) {
      e->info.gated = false;
      e->info.gating_plugin.clear();
      e->info.message.clear();
      Detach(e);
      InsertActive(e, kEventPreEnqueueRetry);
      ++moved;
    } else {
      e->info.gating_plugin = gate.plugin();
      e->info.message = gate.Message();
    }
  }
  return moved;
}

std::optional<QueuedPodInfo> SchedulingQueue::Pop() {
  absl::MutexLock lock(&mu_, absl::Condition(this, &SchedulingQueue::ReadyToPop));
  return PopLocked();
}

bool SchedulingQueue::HasPodToPop() const {
  absl::ReaderMutexLock lock(&mu_);
  return ReadyToPop();
}

std::optional<QueuedPodInfo> SchedulingQueue::TryPop() {
  absl::MutexLock lock(&mu_);
  return PopLocked();
}

std::vector<sdk::PodInfoPtr> SchedulingQueue::PeekActive(size_t n) const {
  std::vector<sdk::PodInfoPtr> out;
  absl::ReaderMutexLock lock(&mu_);
  if (closed_) return out;
  for (auto it = active_q_.begin(); it != active_q_.end() && out.size() < n; ++it) {
    out.push_back((*it)->info.pod_info);
  }
  return out;
}

std::optional<QueuedPodInfo> SchedulingQueue::PopWithTimeout(absl::Duration timeout) {
  mu_.LockWhenWithTimeout(absl::Condition(this, &SchedulingQueue::ReadyToPop), timeout);
  std::optional<QueuedPodInfo> info = PopLocked();
  mu_.Unlock();
  return info;
}

void SchedulingQueue::Close() {
  absl::MutexLock lock(&mu_);
  closed_ = true;
}

bool SchedulingQueue::closed() const {
  absl::ReaderMutexLock lock(&mu_);
  return closed_;
}

uint64_t SchedulingQueue::scheduling_cycle() const {
  absl::ReaderMutexLock lock(&mu_);
  return scheduling_cycle_;
}

absl::Status SchedulingQueue::AddUnschedulableIfNotPresent(QueuedPodInfo info, uint64_t pod_scheduling_cycle,
                                                           const HintDeferral& defer) {
  if (info.pod_info == nullptr) return absl::InvalidArgumentError("null pod");
  const std::string uid = info.uid();
  std::vector<PodHint> hints;
  sdk::PodInfoPtr pooled;
  uint64_t pool_stay = 0;
  QueueingHintEvaluator* evaluator;
  {
    absl::MutexLock lock(&mu_);
    evaluator = hint_evaluator_;
    std::optional<InFlight> flight;
    if (auto it = in_flight_.find(uid); it != in_flight_.end()) {
      flight = std::move(it->second);
      in_flight_.erase(it);
    }
    // The pod is no longer in flight: once its events are read (below), those
    // no other pod in flight can be judged by go. Runs before the lock is
    // released, whichever way this returns.
    absl::Cleanup prune = [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { PruneInFlightEvents(); };
    if (pods_.contains(uid)) {
      return absl::AlreadyExistsError(absl::StrCat("pod ", uid, " is already queued"));
    }
    if (flight.has_value()) {
      if (flight->deleted) return absl::OkStatus();
      // The newest version, status changes included (an external
      // nominatedNodeName, say), as kube requeues the informer's latest.
      if (flight->latest != nullptr) info.pod_info = flight->latest;
    }
    if (!info.pod().node_name().empty()) return absl::OkStatus();  // Assigned meanwhile.

    const absl::Time now = clock_.Now();
    info.timestamp = now;
    info.gated = false;
    info.gating_plugin.clear();
    const bool error = info.unschedulable_plugins.empty() && info.pending_plugins.empty();
    if (error) {
      ++info.consecutive_errors_count;
    } else {
      ++info.unschedulable_count;
      info.consecutive_errors_count = 0;  // The errors are over.
    }
    // Did something change while the attempt ran that may make it pass?
    bool retry = error;
    if (!retry && !flight.has_value()) {
      retry = move_request_cycle_ >= pod_scheduling_cycle;  // Never popped: no record to read.
    } else if (!retry && flight->events_before < events_dropped_through_) {
      retry = true;  // Some of its events were dropped: assume the worst.
    } else if (!retry) {
      std::vector<std::string> plugins;
      auto first = std::upper_bound(
          in_flight_events_.begin(), in_flight_events_.end(), flight->events_before,
          [](uint64_t seq, const auto& recorded) { return seq < recorded.first; });
      for (auto it = first; it != in_flight_events_.end() && !retry; ++it) {
        const v1::ClusterEvent& event = *it->second;
        if (event.resource() == v1::UNSCHEDULED_POD && event.new_pod().meta().uid() != uid) continue;
        switch (Decide(info, event, &plugins)) {
          case EventDecision::kStay:
            break;
          case EventDecision::kMove:
            retry = true;
            break;
          case EventDecision::kAskHints:
            if (hints.size() == kMaxInFlightHintEvents) {
              retry = true;
            } else {
              hints.push_back(PodHint{it->second, plugins});
            }
            break;
        }
      }
    }
    auto entry = std::make_unique<Entry>();
    entry->info = std::move(info);
    Entry* e = Insert(std::move(entry));
    if (retry) {
      if (BackoffExpiry(e->info) > now) {
        InsertBackoff(e, kEventScheduleAttemptFailure);
      } else {
        InsertActive(e, kEventScheduleAttemptFailure);
      }
      return absl::OkStatus();
    }
    InsertPool(e, kEventScheduleAttemptFailure);
    if (hints.empty()) return absl::OkStatus();
    pooled = e->info.pod_info;
    pool_stay = e->pool_stay;
  }
  if (defer) {
    defer([this, pooled = std::move(pooled), pool_stay, hints = std::move(hints), evaluator] {
      AskPooledPodHints(pooled, pool_stay, hints, evaluator);
    });
  } else {
    AskPooledPodHints(std::move(pooled), pool_stay, hints, evaluator);
  }
  return absl::OkStatus();
}

SchedulingQueue::Entry* SchedulingQueue::PooledAsAsked(std::string_view uid, uint64_t pool_stay) {
  auto it = pods_.find(AV(uid));
  if (it == pods_.end()) return nullptr;
  Entry* e = it->second.get();
  if (e->pool_stay != pool_stay || e->info.gated || unschedulable_pods_.count(e) == 0) return nullptr;
  return e;
}

void SchedulingQueue::AskPooledPodHints(sdk::PodInfoPtr pod, uint64_t pool_stay, const std::vector<PodHint>& hints,
                                        QueueingHintEvaluator* evaluator) {
  for (const PodHint& hint : hints) {
    {
      // Held (a preemptor) or moved by a later event: nothing to ask.
      absl::MutexLock lock(&mu_);
      if (PooledAsAsked(pod->uid(), pool_stay) == nullptr) return;
    }
    std::vector<bool> queue;
    if (evaluator != nullptr) queue = evaluator->Evaluate(*hint.event, {HintCandidate{pod->pod.get(), hint.plugins}});
    if (queue.size() == 1 && !queue[0]) continue;  // QueueSkip; else Queue, or no usable answer.
    absl::MutexLock lock(&mu_);
    if (Entry* e = PooledAsAsked(pod->uid(), pool_stay)) {
      MoveToActiveOrBackoff(e, clock_.Now(), on_incoming_pod_ ? ClusterEventLabel(*hint.event) : "");
    }
    return;
  }
}

void SchedulingQueue::Done(std::string_view uid) {
  absl::MutexLock lock(&mu_);
  if (in_flight_.erase(AV(uid)) > 0) PruneInFlightEvents();
}

void SchedulingQueue::RecordInFlightEvent(std::shared_ptr<const v1::ClusterEvent> event) {
  in_flight_events_.emplace_back(++last_event_seq_, std::move(event));
  if (in_flight_events_.size() > kMaxInFlightEvents) {
    events_dropped_through_ = in_flight_events_.front().first;
    in_flight_events_.pop_front();
  }
}

void SchedulingQueue::PruneInFlightEvents() {
  if (in_flight_events_.empty()) return;
  if (in_flight_.empty()) {
    in_flight_events_.clear();
    return;
  }
  uint64_t oldest = in_flight_.begin()->second.events_before;
  for (const auto& [uid, flight] : in_flight_) oldest = std::min(oldest, flight.events_before);
  while (!in_flight_events_.empty() && in_flight_events_.front().first <= oldest) in_flight_events_.pop_front();
}

size_t SchedulingQueue::InFlightEventCount() const {
  absl::MutexLock lock(&mu_);
  return in_flight_events_.size();
}

absl::flat_hash_map<std::string, size_t> SchedulingQueue::InFlightEventsByLabel() const {
  absl::flat_hash_map<std::string, size_t> counts;
  absl::MutexLock lock(&mu_);
  if (!in_flight_.empty()) counts["PodPoppedInFlightEvent"] = in_flight_.size();
  for (const auto& [seq, event] : in_flight_events_) ++counts[ClusterEventLabel(*event)];
  return counts;
}

// ---- cluster events ----

SchedulingQueue::EventDecision SchedulingQueue::Decide(
    const QueuedPodInfo& info, const v1::ClusterEvent& event,
    std::vector<std::string>* hinted_plugins) const {
  if (event.resource() == v1::RESOURCE_UNSPECIFIED) return EventDecision::kMove;  // WildCard.
  if (info.unschedulable_plugins.empty() && info.pending_plugins.empty()) {
    return EventDecision::kMove;
  }
  hinted_plugins->clear();
  auto consider = [&](const std::string& plugin) {
    auto it = registry_.find(plugin);
    if (it == registry_.end()) return true;  // Registered for everything, no hint.
    bool hinted = false;
    for (const v1::ClusterEventInterest& interest : it->second) {
      if (!EventMatches(interest, event)) continue;
      if (!interest.has_queueing_hint()) return true;
      hinted = true;
    }
    if (hinted && std::find(hinted_plugins->begin(), hinted_plugins->end(), plugin) ==
                      hinted_plugins->end()) {
      hinted_plugins->push_back(plugin);
    }
    return false;
  };
  for (const std::string& plugin : info.unschedulable_plugins) {
    if (consider(plugin)) return EventDecision::kMove;
  }
  for (const std::string& plugin : info.pending_plugins) {
    if (consider(plugin)) return EventDecision::kMove;
  }
  return hinted_plugins->empty() ? EventDecision::kStay : EventDecision::kAskHints;
}

size_t SchedulingQueue::MoveAllToActiveOrBackoffQueue(const v1::ClusterEvent& event) {
  return MoveAll(event, nullptr, nullptr, {});
}

size_t SchedulingQueue::MoveAllToActiveOrBackoffQueue(const v1::ClusterEvent& event, const HintDeferral& defer,
                                                      std::string_view except_uid) {
  return MoveAll(event, nullptr, defer, except_uid);
}

size_t SchedulingQueue::MoveAllToActiveOrBackoffQueue(std::shared_ptr<const v1::ClusterEvent> event,
                                                      const HintDeferral& defer, std::string_view except_uid) {
  const v1::ClusterEvent& ref = *event;
  return MoveAll(ref, std::move(event), defer, except_uid);
}

size_t SchedulingQueue::MoveAll(const v1::ClusterEvent& event, std::shared_ptr<const v1::ClusterEvent> shared,
                                const HintDeferral& defer, std::string_view except_uid) {
  // The event as kept or handed on: copied once, and only when needed.
  auto keep = [&]() {
    if (shared == nullptr) shared = std::make_shared<const v1::ClusterEvent>(event);
    return shared;
  };
  std::vector<HintCandidate> candidates;
  std::vector<HintAsked> asked;
  QueueingHintEvaluator* evaluator;
  size_t moved = 0;
  {
    absl::MutexLock lock(&mu_);
    move_request_cycle_ = scheduling_cycle_;
    if (!in_flight_.empty()) RecordInFlightEvent(keep());
    evaluator = hint_evaluator_;
    const absl::Time now = clock_.Now();
    std::vector<Entry*> to_move;
    std::vector<std::string> plugins;
    for (Entry* e : unschedulable_pods_) {
      if (e->info.gated || (!except_uid.empty() && e->info.uid() == except_uid)) continue;
      switch (Decide(e->info, event, &plugins)) {
        case EventDecision::kStay:
          break;
        case EventDecision::kMove:
          to_move.push_back(e);
          break;
        case EventDecision::kAskHints:
          candidates.push_back(HintCandidate{e->info.pod_info->pod.get(), plugins});
          asked.push_back(HintAsked{e->info.pod_info, e->pool_stay});
          break;
      }
    }
    const std::string label = to_move.empty() || !on_incoming_pod_ ? "" : ClusterEventLabel(event);
    for (Entry* e : to_move) MoveToActiveOrBackoff(e, now, label);
    moved = to_move.size();
  }
  if (candidates.empty()) return moved;
  if (defer) {
    // The pods asked about stay alive in `asked`.
    defer([this, event = keep(), candidates = std::move(candidates), asked = std::move(asked), evaluator]() mutable {
      AskHintsAndMove(*event, candidates, asked, evaluator);
    });
    return moved;
  }
  return moved + AskHintsAndMove(event, candidates, asked, evaluator);
}

size_t SchedulingQueue::AskHintsAndMove(const v1::ClusterEvent& event, const std::vector<HintCandidate>& candidates,
                                        const std::vector<HintAsked>& asked, QueueingHintEvaluator* evaluator) {
  std::vector<bool> queue;
  if (evaluator != nullptr) queue = evaluator->Evaluate(event, candidates);
  if (queue.size() != candidates.size()) {
    // No evaluator, or an answer that does not fit: requeue, as kube does
    // when a hint fails.
    queue.assign(candidates.size(), true);
  }
  const std::string label = on_incoming_pod_ ? ClusterEventLabel(event) : "";
  size_t moved = 0;
  absl::MutexLock lock(&mu_);
  const absl::Time now = clock_.Now();
  for (size_t i = 0; i < asked.size(); ++i) {
    if (!queue[i]) continue;
    Entry* e = PooledAsAsked(asked[i].pod->uid(), asked[i].pool_stay);
    if (e == nullptr) continue;  // Left the pool since we asked.
    MoveToActiveOrBackoff(e, now, label);
    ++moved;
  }
  return moved;
}

size_t SchedulingQueue::AssignedPodAdded(const v1::Pod& pod) {
  v1::ClusterEvent event;
  event.set_resource(v1::POD);
  event.set_action(v1::ADD);
  *event.mutable_new_pod() = pod;
  return MoveAllToActiveOrBackoffQueue(event);
}

size_t SchedulingQueue::AssignedPodUpdated(const v1::Pod& old_pod, const v1::Pod& new_pod,
                                           uint32_t action) {
  v1::ClusterEvent event;
  event.set_resource(v1::POD);
  event.set_action(action);
  *event.mutable_old_pod() = old_pod;
  *event.mutable_new_pod() = new_pod;
  return MoveAllToActiveOrBackoffQueue(event);
}

size_t SchedulingQueue::AssignedPodDeleted(const v1::Pod& pod) {
  v1::ClusterEvent event;
  event.set_resource(v1::POD);
  event.set_action(v1::DELETE);
  *event.mutable_old_pod() = pod;
  return MoveAllToActiveOrBackoffQueue(event);
}

// ---- periodic flushes ----

size_t SchedulingQueue::FlushBackoffQCompleted() {
  absl::MutexLock lock(&mu_);
  const absl::Time now = clock_.Now();
  size_t moved = 0;
  for (auto* heap : {&backoff_q_, &error_backoff_q_}) {
    while (!heap->empty()) {
      Entry* e = *heap->begin();
      if (e->backoff_expiry > now) break;
      Detach(e);
      InsertActive(e, kEventBackoffComplete);
      ++moved;
    }
  }
  return moved;
}

size_t SchedulingQueue::FlushUnschedulablePodsLeftover() {
  absl::MutexLock lock(&mu_);
  const absl::Time now = clock_.Now();
  std::vector<Entry*> to_move;
  for (Entry* e : unschedulable_pods_) {
    if (!e->info.gated && now - e->info.timestamp > max_in_unschedulable_) to_move.push_back(e);
  }
  for (Entry* e : to_move) MoveToActiveOrBackoff(e, now, kEventUnschedulableTimeout);
  return to_move.size();
}

// ---- admin ----

size_t SchedulingQueue::MoveAllToActiveQueue() {
  absl::MutexLock lock(&mu_);
  std::vector<Entry*> to_move(backoff_q_.begin(), backoff_q_.end());
  to_move.insert(to_move.end(), error_backoff_q_.begin(), error_backoff_q_.end());
  for (Entry* e : unschedulable_pods_) {
    if (!e->info.gated) to_move.push_back(e);
  }
  for (Entry* e : to_move) {
    Detach(e);
    InsertActive(e, kEventForceActivate);
  }
  return to_move.size();
}

size_t SchedulingQueue::Activate(const std::vector<std::string>& uids) {
  absl::MutexLock lock(&mu_);
  size_t moved = 0;
  for (const std::string& uid : uids) {
    auto it = pods_.find(uid);
    if (it == pods_.end()) continue;
    Entry* e = it->second.get();
    if (e->where == QueueKind::kActive || e->info.gated) continue;
    Detach(e);
    InsertActive(e, kEventForceActivate);
    ++moved;
  }
  return moved;
}

bool SchedulingQueue::Hold(std::string_view uid, std::string plugin, std::string message) {
  absl::MutexLock lock(&mu_);
  auto it = pods_.find(AV(uid));
  if (it == pods_.end()) return false;
  Entry* e = it->second.get();
  e->held = true;
  e->info.gated = true;
  e->info.gating_plugin = std::move(plugin);
  e->info.message = std::move(message);
  if (!unschedulable_pods_.contains(e)) {
    Detach(e);
    InsertPool(e);
  }
  return true;
}

SchedulingQueue::Entry* SchedulingQueue::EndHold(std::string_view uid) {
  auto it = pods_.find(AV(uid));
  if (it == pods_.end() || !it->second->held) return nullptr;
  Entry* e = it->second.get();
  e->held = false;
  e->info.gated = false;
  e->info.gating_plugin.clear();
  e->info.message.clear();
  return e;
}

bool SchedulingQueue::Release(std::string_view uid, bool to_active) {
  absl::MutexLock lock(&mu_);
  Entry* e = EndHold(uid);
  if (e == nullptr) return false;
  if (to_active) {
    Detach(e);
    InsertActive(e, kEventForceActivate);
  } else {
    MoveToActiveOrBackoff(e, clock_.Now(), kEventScheduleAttemptFailure);
  }
  return true;
}

bool SchedulingQueue::Unhold(std::string_view uid) {
  absl::MutexLock lock(&mu_);
  return EndHold(uid) != nullptr;  // It stays in the pool, ungated.
}

uint64_t SchedulingQueue::popped_from_backoff_q() const {
  absl::ReaderMutexLock lock(&mu_);
  return popped_from_backoff_q_;
}

std::vector<const SchedulingQueue::Entry*> SchedulingQueue::BackoffInOrder() const {
  std::vector<const Entry*> out;
  out.reserve(backoff_q_.size() + error_backoff_q_.size());
  // Both heaps are sorted by expiry first; ties keep backoff_q_'s order.
  std::merge(backoff_q_.begin(), backoff_q_.end(), error_backoff_q_.begin(), error_backoff_q_.end(),
             std::back_inserter(out), [](const Entry* a, const Entry* b) {
               return a->backoff_expiry < b->backoff_expiry;
             });
  return out;
}

PendingPodCounts SchedulingQueue::PendingPods() const {
  absl::ReaderMutexLock lock(&mu_);
  PendingPodCounts counts;
  counts.active = active_q_.size();
  counts.backoff = backoff_q_.size() + error_backoff_q_.size();
  for (const Entry* e : unschedulable_pods_) {
    if (e->info.gated) {
      ++counts.gated;
    } else {
      ++counts.unschedulable;
    }
  }
  return counts;
}

QueuedPodSummary SchedulingQueue::Summarize(const Entry& e) const {
  QueuedPodSummary s;
  s.pod_info = e.info.pod_info;
  s.queue = e.where == QueueKind::kUnschedulable && e.info.gated ? QueueKind::kGated : e.where;
  s.attempts = e.info.attempts;
  s.timestamp = e.info.timestamp;
  s.backoff_expiry = e.where == QueueKind::kBackoff ? e.backoff_expiry : absl::InfinitePast();
  s.unschedulable_plugins.assign(e.info.unschedulable_plugins.begin(),
                                 e.info.unschedulable_plugins.end());
  s.pending_plugins.assign(e.info.pending_plugins.begin(), e.info.pending_plugins.end());
  s.gating_plugin = e.info.gating_plugin;
  s.message = e.info.message;
  return s;
}

std::vector<QueuedPodSummary> SchedulingQueue::List() const {
  absl::ReaderMutexLock lock(&mu_);
  std::vector<QueuedPodSummary> out;
  out.reserve(pods_.size());
  for (const Entry* e : active_q_) out.push_back(Summarize(*e));
  for (const Entry* e : BackoffInOrder()) out.push_back(Summarize(*e));
  std::vector<const Entry*> pool(unschedulable_pods_.begin(), unschedulable_pods_.end());
  std::sort(pool.begin(), pool.end(), [](const Entry* a, const Entry* b) {
    return std::tie(a->info.timestamp, a->info.uid()) < std::tie(b->info.timestamp, b->info.uid());
  });
  for (const Entry* e : pool) out.push_back(Summarize(*e));
  return out;
}

QueueListPage SchedulingQueue::ListPage(const QueueListFilter& filter, size_t offset,
                                        size_t limit) const {
  auto kind_of = [](const Entry& e) {
    return e.where == QueueKind::kUnschedulable && e.info.gated ? QueueKind::kGated : e.where;
  };
  auto matches = [&](const Entry& e) {
    if (filter.queue.has_value() && kind_of(e) != *filter.queue) return false;
    if (!filter.namespace_name.empty() && e.info.pod().meta().namespace_() != filter.namespace_name) {
      return false;
    }
    if (!filter.plugin.empty() && e.info.gating_plugin != filter.plugin &&
        !e.info.unschedulable_plugins.contains(filter.plugin) &&
        !e.info.pending_plugins.contains(filter.plugin)) {
      return false;
    }
    return true;
  };
  QueueListPage page;
  absl::ReaderMutexLock lock(&mu_);
  // activeQ and backoffQ iterate in order: count, and copy only the page.
  auto take_ordered = [&](const auto& ordered) {
    for (const Entry* e : ordered) {
      if (!matches(*e)) continue;
      const size_t index = page.total++;
      if (index >= offset && page.pods.size() < limit) page.pods.push_back(Summarize(*e));
    }
  };
  const std::optional<QueueKind> only = filter.queue;
  if (!only || *only == QueueKind::kActive) take_ordered(active_q_);
  if (!only || *only == QueueKind::kBackoff) take_ordered(BackoffInOrder());
  // The pool and the pods in flight are unordered: select the page's slice
  // by time without sorting the rest.
  auto take_unordered = [&](auto& matched, const auto& by_time, const auto& summarize) {
    const size_t start = page.total;
    page.total += matched.size();
    const size_t first = offset > start ? offset - start : 0;
    if (first >= matched.size() || page.pods.size() >= limit) return;
    const size_t last = std::min(matched.size(), first + (limit - page.pods.size()));
    std::nth_element(matched.begin(), matched.begin() + first, matched.end(), by_time);
    std::partial_sort(matched.begin() + first, matched.begin() + last, matched.end(), by_time);
    for (size_t i = first; i < last; ++i) page.pods.push_back(summarize(*matched[i]));
  };
  if (!only || *only == QueueKind::kUnschedulable || *only == QueueKind::kGated) {
    std::vector<const Entry*> pool;
    for (const Entry* e : unschedulable_pods_) {
      if (matches(*e)) pool.push_back(e);
    }
    take_unordered(
        pool,
        [](const Entry* a, const Entry* b) {
          return std::tie(a->info.timestamp, a->info.uid()) < std::tie(b->info.timestamp, b->info.uid());
        },
        [&](const Entry& e) { return Summarize(e); });
  }
  if ((!only || *only == QueueKind::kInFlight) && filter.plugin.empty()) {
    using Flight = std::pair<const std::string, InFlight>;
    std::vector<const Flight*> flights;
    for (const Flight& f : in_flight_) {
      // Deleted in flight: its attempt is ending and it is no longer pending.
      if (f.second.deleted || f.second.latest == nullptr || f.second.popped == absl::InfinitePast()) continue;
      if (filter.except_in_flight.contains(f.first)) continue;
      if (!filter.namespace_name.empty() && f.second.latest->pod->meta().namespace_() != filter.namespace_name) {
        continue;
      }
      flights.push_back(&f);
    }
    take_unordered(
        flights,
        [](const Flight* a, const Flight* b) {
          return std::tie(a->second.popped, a->first) < std::tie(b->second.popped, b->first);
        },
        [](const Flight& f) {
          QueuedPodSummary s;
          s.pod_info = f.second.latest;
          s.queue = QueueKind::kInFlight;
          s.attempts = f.second.attempts;
          s.timestamp = f.second.popped;
          s.backoff_expiry = absl::InfinitePast();
          return s;
        });
  }
  return page;
}

std::vector<std::string> SchedulingQueue::UidsOf(std::string_view namespace_name,
                                                 std::string_view name) const {
  absl::ReaderMutexLock lock(&mu_);
  auto it = uids_by_key_.find(PodKey(namespace_name, name));
  if (it == uids_by_key_.end()) return {};
  return it->second;
}

std::optional<QueuedPodSummary> SchedulingQueue::Find(std::string_view uid) const {
  absl::ReaderMutexLock lock(&mu_);
  auto it = pods_.find(AV(uid));
  if (it == pods_.end()) return std::nullopt;
  return Summarize(*it->second);
}

}  // namespace podium::scheduler
