#include "cluster/in_memory_cluster.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "common/translate/k8s_yaml.h"

namespace podium::sim {
namespace {

constexpr size_t kMaxEvents = 10000;

std::string Key(const std::string& ns, const std::string& name) { return absl::StrCat(ns, "/", name); }

v1::ObjectEvent Upsert(const v1::Pod& pod) {
  v1::ObjectEvent e;
  e.set_type(v1::ObjectEvent::UPSERT);
  *e.mutable_pod() = pod;
  return e;
}

ActionOutcome Result(uint64_t id, v1::ActionResult::Code code, std::string message = "") {
  ActionOutcome out;
  out.result.set_action_id(id);
  out.result.set_code(code);
  out.result.set_message(std::move(message));
  return out;
}

// Conditions merge by type, as a strategic-merge status patch does; the
// transition time moves only when the status changes.
void MergeCondition(v1::Pod* pod, const v1::PodCondition& c, int64_t now_us) {
  for (auto& existing : *pod->mutable_conditions()) {
    if (existing.type() != c.type()) continue;
    int64_t transition = existing.last_transition_time_us();
    bool changed = existing.status() != c.status();
    existing = c;
    if (c.last_transition_time_us() == 0) existing.set_last_transition_time_us(changed ? now_us : transition);
    return;
  }
  v1::PodCondition* added = pod->add_conditions();
  *added = c;
  if (added->last_transition_time_us() == 0) added->set_last_transition_time_us(now_us);
}

// What a pod holds on its node as the kubelet sees it: for regular and
// sidecar containers the sum, for init containers the largest, plus the
// overhead. `allocated` (the admitted requests of a pending resize) replaces
// the containers' requests.
struct Held {
  int64_t milli_cpu = 0, memory = 0;
};
Held SpecRequests(const v1::Pod& pod) {
  Held sum, init_max, sidecars;
  for (const auto& c : pod.containers()) {
    sum.milli_cpu += c.requests().milli_cpu();
    sum.memory += c.requests().memory_bytes();
  }
  for (const auto& c : pod.init_containers()) {
    if (c.restartable()) {
      sidecars.milli_cpu += c.requests().milli_cpu();
      sidecars.memory += c.requests().memory_bytes();
    }
    init_max.milli_cpu = std::max(init_max.milli_cpu, sidecars.milli_cpu + c.requests().milli_cpu());
    init_max.memory = std::max(init_max.memory, sidecars.memory + c.requests().memory_bytes());
  }
  Held out{std::max(sum.milli_cpu + sidecars.milli_cpu, init_max.milli_cpu),
           std::max(sum.memory + sidecars.memory, init_max.memory)};
  out.milli_cpu += pod.overhead().milli_cpu();
  out.memory += pod.overhead().memory_bytes();
  return out;
}
Held Admitted(const v1::Pod& pod) {
  if (pod.resize_status().empty() || !pod.has_allocated()) return SpecRequests(pod);
  return Held{pod.allocated().milli_cpu() + pod.overhead().milli_cpu(),
              pod.allocated().memory_bytes() + pod.overhead().memory_bytes()};
}

// A bound pod whose Deferred resize the scheduler has not answered (neither
// applied after evictions nor PodResizePreemption=False).
bool ResizeUnanswered(const v1::Pod& pod) {
  if (pod.resize_status() != "Deferred") return false;
  for (const auto& c : pod.conditions()) {
    if (c.type() == "PodResizePreemption" && c.status() == "False") return false;
  }
  return true;
}

// Pending or resizing, if the pod is ours (Summarize's classification).
bool MaybeUnsettled(const PodRecord& r) {
  if (r.deleted) return false;
  if (!r.pod.node_name().empty()) return ResizeUnanswered(r.pod);
  return !r.unschedulable && !r.scheduling_error && r.pod.scheduling_gates_size() == 0 && !r.held;
}

}  // namespace

InMemoryCluster::InMemoryCluster(Clock clock) : clock_(std::move(clock)) { last_change_ = clock_(); }

void InMemoryCluster::Touch(v1::ObjectMeta* meta) {
  meta->set_resource_version(absl::StrCat(++resource_version_));
  ++generation_;
  last_change_ = clock_();
}

v1::ObjectEvent InMemoryCluster::AddNode(v1::Node node) {
  absl::MutexLock lock(&mu_);
  Touch(node.mutable_meta());
  v1::ObjectEvent e;
  e.set_type(v1::ObjectEvent::UPSERT);
  *e.mutable_node() = node;
  nodes_[node.meta().name()] = std::move(node);
  return e;
}

v1::ObjectEvent InMemoryCluster::CreatePod(v1::Pod pod) {
  absl::MutexLock lock(&mu_);
  return CreatePodLocked(std::move(pod));
}

v1::ObjectEvent InMemoryCluster::CreatePodLocked(v1::Pod pod) {
  Touch(pod.mutable_meta());
  PodRecord rec;
  rec.created = clock_();
  rec.bound_at_load = !pod.node_name().empty();
  rec.resize_requested = rec.bound_at_load && !pod.resize_status().empty();
  rec.pod = std::move(pod);
  if (rec.pod.resize_status() == "Deferred") ++deferred_resizes_;
  RefreshUnschedulable(&rec);
  v1::ObjectEvent e = Upsert(rec.pod);
  std::string key = Key(rec.pod.meta().namespace_(), rec.pod.meta().name());
  live_pods_[key] = pods_.size();
  pods_.push_back(std::move(rec));
  Reindex(pods_.back());
  return e;
}

void InMemoryCluster::AddReplacement(const std::string& ns, const std::string& name, v1::Pod next) {
  absl::MutexLock lock(&mu_);
  replacements_[Key(ns, name)] = std::move(next);
}

std::vector<v1::ObjectEvent> InMemoryCluster::ReplaceIfAsked(const v1::ObjectRef& ref) {
  std::vector<v1::ObjectEvent> events;
  const std::string key = Key(ref.namespace_(), ref.name());
  auto next = replacements_.find(key);
  if (next == replacements_.end()) return events;
  v1::Pod pod = std::move(next->second);
  replacements_.erase(next);
  auto live = live_pods_.find(key);
  if (live == live_pods_.end()) return events;  // Gone already: nothing to replace.
  pods_[live->second].delete_reason = absl::StrCat("replaced by a new incarnation (uid ", pod.meta().uid(), ")");
  events.push_back(Remove(key));
  const std::string old_node = events.front().pod().node_name();
  pod.mutable_meta()->set_name(ref.name());
  pod.mutable_meta()->set_creation_timestamp_us(absl::ToUnixMicros(clock_()));
  events.push_back(CreatePodLocked(std::move(pod)));
  RefreshPdbs(&events);
  // The old incarnation left its node, as a delete's pod does.
  if (!old_node.empty()) ApplyDeferredResizes(old_node, &events);
  return events;
}

ActionOutcome InMemoryCluster::Execute(const v1::Action& action) {
  absl::MutexLock lock(&mu_);
  ActionOutcome out;
  // The replacement comes first and its events before the delete's.
  std::vector<v1::ObjectEvent> replaced;
  if (action.has_delete_pod()) replaced = ReplaceIfAsked(action.delete_pod().pod());
  switch (action.kind_case()) {
    case v1::Action::kBind: out = Bind(action.id(), action.bind()); ++counts_.bind; break;
    case v1::Action::kDeletePod:
      if (action.delete_pod().has_disruption_target()) {
        // Protocol 2: the condition's status patch first (an API call of
        // its own, counted as one), the delete only if it succeeded.
        v1::PatchPodStatus patch;
        *patch.mutable_pod() = action.delete_pod().pod();
        *patch.add_conditions() = action.delete_pod().disruption_target();
        out = Patch(action.id(), patch);
        ++counts_.patch;
        if (out.result.code() != v1::ActionResult::OK) {
          out.result.set_message(absl::StrCat("DisruptionTarget patch: ", out.result.message()));
          break;
        }
        ActionOutcome deleted = Delete(action.id(), action.delete_pod());
        ++counts_.delete_pod;
        for (auto& e : deleted.events) out.events.push_back(std::move(e));
        out.result = std::move(deleted.result);
        break;
      }
      out = Delete(action.id(), action.delete_pod());
      ++counts_.delete_pod;
      break;
    case v1::Action::kPatchPodStatus: out = Patch(action.id(), action.patch_pod_status()); ++counts_.patch; break;
    case v1::Action::kRecordEvent: out = Record(action.id(), action.record_event()); ++counts_.event; break;
    default: out = Result(action.id(), v1::ActionResult::INVALID, "action carries no known kind"); break;
  }
  if (out.result.code() != v1::ActionResult::OK) ++counts_.failed;
  if (!replaced.empty()) {
    for (auto& e : out.events) replaced.push_back(std::move(e));
    out.events = std::move(replaced);
  }
  return out;
}

PodRecord* InMemoryCluster::Lookup(uint64_t id, const v1::ObjectRef& ref, ActionOutcome* failure) {
  auto it = live_pods_.find(Key(ref.namespace_(), ref.name()));
  if (it == live_pods_.end()) {
    *failure = Result(id, v1::ActionResult::NOT_FOUND, absl::StrCat("pod ", ref.namespace_(), "/", ref.name(), " not found"));
    return nullptr;
  }
  PodRecord& rec = pods_[it->second];
  if (!ref.uid().empty() && ref.uid() != rec.pod.meta().uid()) {
    *failure = Result(id, v1::ActionResult::CONFLICT,
                      absl::StrCat("pod ", ref.namespace_(), "/", ref.name(), ": uid precondition failed: want ",
                                   ref.uid(), ", have ", rec.pod.meta().uid()));
    return nullptr;
  }
  return &rec;
}

ActionOutcome InMemoryCluster::Bind(uint64_t id, const v1::BindPod& bind) {
  ActionOutcome out;
  PodRecord* rec = Lookup(id, bind.pod(), &out);
  if (rec == nullptr) return out;
  if (!rec->pod.node_name().empty()) {
    return Result(id, v1::ActionResult::CONFLICT,
                  absl::StrCat("pod ", bind.pod().namespace_(), "/", bind.pod().name(), " is already assigned to node \"",
                               rec->pod.node_name(), "\""));
  }
  if (bind.node_name().empty()) return Result(id, v1::ActionResult::INVALID, "binding has no node name");
  // Like the API server, the binding does not check that the node exists.
  rec->pod.set_node_name(bind.node_name());
  // The kubelet acknowledges the pod at once here: its status.startTime.
  rec->pod.set_start_time_us(absl::ToUnixMicros(clock_()));
  v1::PodCondition scheduled;
  scheduled.set_type("PodScheduled");
  scheduled.set_status("True");
  MergeCondition(&rec->pod, scheduled, absl::ToUnixMicros(clock_()));
  Touch(rec->pod.mutable_meta());
  rec->bound = clock_();
  rec->unschedulable = false;
  rec->scheduling_error = false;
  Reindex(*rec);
  out = Result(id, v1::ActionResult::OK);
  out.events.push_back(Upsert(rec->pod));
  RefreshPdbs(&out.events);
  return out;
}

ActionOutcome InMemoryCluster::Delete(uint64_t id, const v1::DeletePod& del) {
  ActionOutcome out;
  PodRecord* rec = Lookup(id, del.pod(), &out);
  if (rec == nullptr) return out;
  const std::string key = Key(del.pod().namespace_(), del.pod().name());
  // The pod's own grace (validated at load), else --termination-grace.
  absl::StatusOr<std::optional<absl::Duration>> own = k8s::SimTerminationGrace(rec->pod);
  const absl::Duration grace = own.ok() && own->has_value() ? **own : termination_grace_;
  if (grace > absl::ZeroDuration() && !rec->pod.node_name().empty()) {
    // Graceful: terminating now, gone after the grace (FinalizeTerminating).
    out = Result(id, v1::ActionResult::OK);
    if (terminating_.contains(key)) return out;
    Touch(rec->pod.mutable_meta());
    rec->pod.mutable_meta()->set_deletion_timestamp_us(absl::ToUnixMicros(clock_()));
    rec->delete_reason = del.reason();
    terminating_[key] = clock_() + grace;
    out.events.push_back(Upsert(rec->pod));
    RefreshPdbs(&out.events);
    return out;
  }
  // No kubelet here: a graceful deletion completes at once.
  rec->delete_reason = del.reason();
  out = Result(id, v1::ActionResult::OK);
  out.events.push_back(Remove(key));
  RefreshPdbs(&out.events);
  const std::string node = out.events.front().pod().node_name();  // A copy: the events grow below.
  if (!node.empty()) ApplyDeferredResizes(node, &out.events);
  return out;
}

v1::ObjectEvent InMemoryCluster::Remove(const std::string& key) {
  auto live = live_pods_.find(key);
  PodRecord& rec = pods_[live->second];
  Touch(rec.pod.mutable_meta());
  rec.deleted = true;
  Reindex(rec);
  live_pods_.erase(live);
  terminating_.erase(key);
  v1::ObjectEvent e;
  e.set_type(v1::ObjectEvent::DELETE);
  *e.mutable_pod() = rec.pod;
  return e;
}

void InMemoryCluster::ApplyDeferredResizes(const std::string& node_name, std::vector<v1::ObjectEvent>* events) {
  if (deferred_resizes_ == 0) return;
  auto node = nodes_.find(node_name);
  if (node == nodes_.end()) return;
  const v1::ResourceList& allocatable = node->second.allocatable();
  // Oldest request first, as the kubelet retries deferred resizes.
  for (const auto& [key, index] : live_pods_) {
    PodRecord& rec = pods_[index];
    if (rec.pod.node_name() != node_name || rec.pod.resize_status() != "Deferred") continue;
    Held others;
    for (const auto& [other_key, other_index] : live_pods_) {
      const v1::Pod& other = pods_[other_index].pod;
      if (other_index == index || other.node_name() != node_name) continue;
      if (other.phase() == v1::SUCCEEDED || other.phase() == v1::FAILED) continue;
      const Held h = Admitted(other);
      others.milli_cpu += h.milli_cpu;
      others.memory += h.memory;
    }
    const Held want = SpecRequests(rec.pod);
    const bool cpu_ok = allocatable.milli_cpu() == 0 || others.milli_cpu + want.milli_cpu <= allocatable.milli_cpu();
    const bool memory_ok =
        allocatable.memory_bytes() == 0 || others.memory + want.memory <= allocatable.memory_bytes();
    if (!cpu_ok || !memory_ok) continue;
    rec.pod.clear_resize_status();
    rec.pod.clear_allocated();
    // As the kubelet does once it admits the resize (Kubernetes 1.33+ reports
    // the pending resize as this condition).
    auto* conditions = rec.pod.mutable_conditions();
    conditions->erase(std::remove_if(conditions->begin(), conditions->end(),
                                     [](const v1::PodCondition& c) { return c.type() == "PodResizePending"; }),
                      conditions->end());
    rec.resize_applied = true;
    --deferred_resizes_;
    Touch(rec.pod.mutable_meta());
    Reindex(rec);
    events->push_back(Upsert(rec.pod));
  }
}

void InMemoryCluster::SetTerminationGrace(absl::Duration grace) {
  absl::MutexLock lock(&mu_);
  termination_grace_ = grace;
}

size_t InMemoryCluster::Terminating() const {
  absl::MutexLock lock(&mu_);
  return terminating_.size();
}

std::vector<v1::ObjectEvent> InMemoryCluster::FinalizeTerminating(absl::Time now) {
  absl::MutexLock lock(&mu_);
  std::vector<v1::ObjectEvent> events;
  std::set<std::string> freed;  // Nodes a pod left.
  for (auto it = terminating_.begin(); it != terminating_.end();) {
    auto live = live_pods_.find(it->first);
    if (it->second > now || live == live_pods_.end()) {
      if (live == live_pods_.end()) it = terminating_.erase(it);
      else ++it;
      continue;
    }
    const std::string key = (it++)->first;  // Remove erases it from terminating_.
    v1::ObjectEvent e = Remove(key);
    if (!e.pod().node_name().empty()) freed.insert(e.pod().node_name());
    events.push_back(std::move(e));
  }
  if (!events.empty()) RefreshPdbs(&events);
  for (const auto& node : freed) ApplyDeferredResizes(node, &events);
  return events;
}

namespace {

bool Matches(const v1::LabelSelector& selector, const google::protobuf::Map<std::string, std::string>& labels) {
  for (const auto& [k, v] : selector.match_labels()) {
    auto it = labels.find(k);
    if (it == labels.end() || it->second != v) return false;
  }
  for (const auto& e : selector.match_expressions()) {
    auto it = labels.find(e.key());
    const bool has = it != labels.end();
    const bool in = has && std::find(e.values().begin(), e.values().end(), it->second) != e.values().end();
    switch (e.operator_()) {
      case v1::LabelSelectorRequirement::IN: if (!in) return false; break;
      case v1::LabelSelectorRequirement::NOT_IN: if (in) return false; break;
      case v1::LabelSelectorRequirement::EXISTS: if (!has) return false; break;
      case v1::LabelSelectorRequirement::DOES_NOT_EXIST: if (has) return false; break;
      default: return false;
    }
  }
  return true;
}

// An IntOrPercent against a count, percentages rounded up (the disruption
// controller's GetScaledValueFromIntOrPercent(..., true)).
int32_t Scaled(const v1::IntOrPercent& v, int32_t total) {
  if (v.has_percent()) {
    const int64_t pct = std::stoll(v.percent().substr(0, v.percent().size() - 1));
    return static_cast<int32_t>((int64_t{total} * pct + 99) / 100);
  }
  return v.int_value();
}

}  // namespace

v1::PodDisruptionBudget InMemoryCluster::WithStatus(v1::PodDisruptionBudget pdb) const {
  // podium-sim has no workload controllers: the expected pods are the
  // matching pods; healthy ones are bound, not terminating and not finished.
  int32_t expected = 0, healthy = 0;
  for (const auto& [key, index] : live_pods_) {
    const v1::Pod& pod = pods_[index].pod;
    if (pod.meta().namespace_() != pdb.meta().namespace_() || !Matches(pdb.selector(), pod.meta().labels())) continue;
    ++expected;
    if (!pod.node_name().empty() && pod.meta().deletion_timestamp_us() == 0 && pod.phase() != v1::SUCCEEDED &&
        pod.phase() != v1::FAILED) {
      ++healthy;
    }
  }
  int32_t desired = 1;  // Neither field: at least one pod available.
  if (pdb.has_min_available()) desired = Scaled(pdb.min_available(), expected);
  if (pdb.has_max_unavailable()) desired = std::max(0, expected - Scaled(pdb.max_unavailable(), expected));
  pdb.set_expected_pods(expected);
  pdb.set_current_healthy(healthy);
  pdb.set_desired_healthy(desired);
  pdb.set_disruptions_allowed(std::max(0, healthy - desired));
  return pdb;
}

void InMemoryCluster::RefreshPdbs(std::vector<v1::ObjectEvent>* events) {
  for (auto& [key, pdb] : pdbs_) {
    v1::PodDisruptionBudget updated = WithStatus(pdb);
    if (updated.disruptions_allowed() == pdb.disruptions_allowed() &&
        updated.current_healthy() == pdb.current_healthy() && updated.expected_pods() == pdb.expected_pods() &&
        updated.desired_healthy() == pdb.desired_healthy()) {
      continue;
    }
    Touch(updated.mutable_meta());
    pdb = std::move(updated);
    v1::ObjectEvent e;
    e.set_type(v1::ObjectEvent::UPSERT);
    *e.mutable_pdb() = pdb;
    events->push_back(std::move(e));
  }
}

v1::ObjectEvent InMemoryCluster::AddPdb(v1::PodDisruptionBudget pdb) {
  absl::MutexLock lock(&mu_);
  Touch(pdb.mutable_meta());
  pdb = WithStatus(std::move(pdb));
  v1::ObjectEvent e;
  e.set_type(v1::ObjectEvent::UPSERT);
  *e.mutable_pdb() = pdb;
  pdbs_[Key(pdb.meta().namespace_(), pdb.meta().name())] = std::move(pdb);
  return e;
}

v1::ObjectEvent InMemoryCluster::AddPodGroup(v1::PodGroup group) {
  absl::MutexLock lock(&mu_);
  Touch(group.mutable_meta());
  v1::ObjectEvent e;
  e.set_type(v1::ObjectEvent::UPSERT);
  *e.mutable_pod_group() = group;
  pod_groups_[Key(group.meta().namespace_(), group.meta().name())] = std::move(group);
  return e;
}

std::vector<v1::PodGroup> InMemoryCluster::PodGroups() const {
  absl::MutexLock lock(&mu_);
  std::vector<v1::PodGroup> out;
  out.reserve(pod_groups_.size());
  for (const auto& [key, group] : pod_groups_) out.push_back(group);
  return out;
}

ActionOutcome InMemoryCluster::Patch(uint64_t id, const v1::PatchPodStatus& patch) {
  ActionOutcome out;
  PodRecord* rec = Lookup(id, patch.pod(), &out);
  if (rec == nullptr) return out;
  int64_t now_us = absl::ToUnixMicros(clock_());
  for (const auto& c : patch.conditions()) {
    if (c.type().empty()) return Result(id, v1::ActionResult::INVALID, "condition without a type");
  }
  for (const auto& c : patch.conditions()) MergeCondition(&rec->pod, c, now_us);
  if (patch.has_nominated_node_name()) rec->pod.set_nominated_node_name(patch.nominated_node_name());
  Touch(rec->pod.mutable_meta());
  RefreshUnschedulable(rec);
  Reindex(*rec);
  out = Result(id, v1::ActionResult::OK);
  out.events.push_back(Upsert(rec->pod));
  return out;
}

ActionOutcome InMemoryCluster::Record(uint64_t id, const v1::RecordEvent& event) {
  if (events_.size() < kMaxEvents) events_.push_back(event);
  if (event.reason() == "FailedScheduling" && event.regarding().kind() != "PodGroup") {
    auto it = live_pods_.find(Key(event.regarding().namespace_(), event.regarding().name()));
    if (it != live_pods_.end() && pods_[it->second].failed_message.empty()) {
      pods_[it->second].failed_message = event.note();
    }
  }
  return Result(id, v1::ActionResult::OK);
}

void InMemoryCluster::Reindex(const PodRecord& rec) {
  const size_t index = static_cast<size_t>(&rec - pods_.data());
  if (MaybeUnsettled(rec)) unsettled_.insert(index);
  else unsettled_.erase(index);
}

void InMemoryCluster::RefreshUnschedulable(PodRecord* rec) {
  rec->unschedulable = false;
  rec->scheduling_error = false;
  rec->held = false;
  for (const auto& c : rec->pod.conditions()) {
    if (c.type() == "PodScheduled" && c.status() == "False") {
      // Two different FailedScheduling outcomes: the pod did not fit (an
      // outcome), or the attempt failed (an error, e.g. a plugin endpoint with
      // failurePolicy Fail is down), as kube-scheduler's reasons say.
      rec->unschedulable = c.reason() == "Unschedulable";
      rec->scheduling_error = c.reason() == "SchedulerError";
      // The API server's reason for schedulingGates; the scheduler uses it for
      // pods its PreEnqueue plugins hold.
      rec->held = c.reason() == "SchedulingGated";
      if (!c.message().empty()) rec->failed_message = c.message();
    }
  }
}

std::optional<PodRecord> InMemoryCluster::GetPod(const std::string& ns, const std::string& name) const {
  absl::MutexLock lock(&mu_);
  auto it = live_pods_.find(Key(ns, name));
  if (it != live_pods_.end()) return pods_[it->second];
  for (auto r = pods_.rbegin(); r != pods_.rend(); ++r) {
    if (r->pod.meta().namespace_() == ns && r->pod.meta().name() == name) return *r;
  }
  return std::nullopt;
}

std::vector<v1::ObjectEvent> InMemoryCluster::ListObjects() const {
  absl::MutexLock lock(&mu_);
  std::vector<v1::ObjectEvent> out;
  auto upsert = [&out]() -> v1::ObjectEvent& {
    out.emplace_back().set_type(v1::ObjectEvent::UPSERT);
    return out.back();
  };
  for (const auto& [name, node] : nodes_) *upsert().mutable_node() = node;
  for (const auto& [key, group] : pod_groups_) *upsert().mutable_pod_group() = group;
  for (const PodRecord& rec : pods_) {
    if (!rec.deleted) *upsert().mutable_pod() = rec.pod;
  }
  for (const auto& [key, pdb] : pdbs_) *upsert().mutable_pdb() = WithStatus(pdb);
  return out;
}

std::vector<PodRecord> InMemoryCluster::Pods() const {
  absl::MutexLock lock(&mu_);
  return pods_;
}

void InMemoryCluster::ForEachPod(const std::function<void(const PodRecord&)>& visit) const {
  absl::MutexLock lock(&mu_);
  for (const PodRecord& rec : pods_) visit(rec);
}

InMemoryCluster::Progress InMemoryCluster::Summarize(const std::function<bool(const v1::Pod&)>& is_ours) const {
  absl::MutexLock lock(&mu_);
  Progress p;
  for (const PodRecord& r : pods_) {
    if (r.deleted) {
      ++p.deleted;
      continue;
    }
    ++p.pods;
    if (!r.pod.node_name().empty()) {
      ++p.bound;
      if (ResizeUnanswered(r.pod) && is_ours(r.pod)) ++p.resizing;
    } else if (r.unschedulable) ++p.unschedulable;
    else if (r.scheduling_error) ++p.errors;
    else if (r.pod.scheduling_gates_size() > 0) ++p.gated;
    else if (r.held) ++p.held;
    else if (!is_ours(r.pod)) ++p.other_scheduler;
    else ++p.pending;
  }
  return p;
}

bool InMemoryCluster::Settled(const std::function<bool(const v1::Pod&)>& is_ours) const {
  absl::MutexLock lock(&mu_);
  for (size_t index : unsettled_) {
    if (is_ours(pods_[index].pod)) return false;
  }
  return true;
}

size_t InMemoryCluster::NodeCount() const {
  absl::MutexLock lock(&mu_);
  return nodes_.size();
}

uint64_t InMemoryCluster::Generation() const {
  absl::MutexLock lock(&mu_);
  return generation_;
}

absl::Time InMemoryCluster::LastChange() const {
  absl::MutexLock lock(&mu_);
  return last_change_;
}

InMemoryCluster::ActionCounts InMemoryCluster::Counts() const {
  absl::MutexLock lock(&mu_);
  return counts_;
}

std::vector<v1::RecordEvent> InMemoryCluster::RecordedEvents() const {
  absl::MutexLock lock(&mu_);
  return events_;
}

}  // namespace podium::sim
