// The adapter's events (kube-scheduler's eventhandlers.go): the cache is
// updated here, synchronously and without plugin calls; queue work, which
// may call plugins (PreEnqueue, queueing hints), goes to the queue worker in
// event order. Relists reconcile what the new list no longer carries.
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "logging/logger.h"
#include "gang/gang.h"
#include "pod_ref.h"
#include "podium/sdk/label_selector.h"
#include "queue/events.h"
#include "scheduler.h"

namespace podium::scheduler {

void Scheduler::OnListBegin() {
  relisting_ = true;
  seen_pods_.clear();
  seen_nodes_.clear();
  listed_ = 0;
  absl::MutexLock lock(&mu_);
  listing_ = true;
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
      // Through the handlers in front (the preemption controller), as a
      // watched deletion goes: its nominations and awaited victims learn of it.
      if (event_front_ != nullptr) {
        event_front_->OnObjectEvent(event);
      } else {
        HandlePod(event);
      }
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
  std::vector<std::string> gated;
  {
    absl::MutexLock lock(&mu_);
    listing_ = false;
    gated.swap(gated_while_listing_);
  }
  // Queue work after the list's own (PreEnqueue runs on the queue worker):
  // the pods asked while it arrived are asked again, with all of it in.
  if (!gated.empty()) PostQueueWork([this, gated = std::move(gated)] { queue_.RetryGated(gated); });
  absl::MutexLock lock(&mu_);
  if (!synced_) {
    PODIUM_LOG(Info, "Cluster synced", {"nodes", nodes_.size()}, {"pods", pods_.size()});
  } else if (!adapter_connected_) {
    PODIUM_LOG(Info, "Adapter relisted; scheduling resumes");
  }
  synced_ = true;
  adapter_connected_ = true;
  metrics_.SetAdapterConnected(true);
}

void Scheduler::OnAdapterDisconnected() {
  // Keep the cache: the adapter relists when it comes back, and the relist
  // reconciles what changed meanwhile. No pod is popped until then: every
  // bind would fail.
  absl::MutexLock lock(&mu_);
  adapter_connected_ = false;
  metrics_.SetAdapterConnected(false);
  PODIUM_LOG(Warning, "Adapter disconnected; scheduling pauses until it relists");
}

// kube-scheduler's label for scheduler_event_handling_duration_seconds: the
// resource (a pod as AssignedPod once it has a node, UnscheduledPod before),
// then Add, Update or Delete. Empty for objects kube-scheduler has no handler
// for (PodDisruptionBudgets, PriorityClasses): not observed.
std::string Scheduler::EventHandlingLabel(const v1::ObjectEvent& event) const {
  const bool deleted = event.type() == v1::ObjectEvent::DELETE;
  auto action = [&](bool known) -> const char* { return deleted ? "Delete" : known ? "Update" : "Add"; };
  switch (event.object_case()) {
    case v1::ObjectEvent::kPod: {
      auto it = pods_.find(event.pod().meta().uid());
      const bool was_assigned = it != pods_.end() && !it->second->node_name().empty();
      if (deleted) return absl::StrCat(was_assigned ? "AssignedPod" : "UnscheduledPod", "Delete");
      // A pod that just got its node enters kube's assigned-pod handler as an Add.
      if (!event.pod().node_name().empty()) return absl::StrCat("AssignedPod", action(was_assigned));
      return absl::StrCat("UnscheduledPod", action(it != pods_.end()));
    }
    case v1::ObjectEvent::kNode:
      return absl::StrCat("Node", action(nodes_.contains(event.node().meta().name())));
    case v1::ObjectEvent::kPodGroup: {
      const v1::ObjectMeta& meta = event.pod_group().meta();
      return absl::StrCat("PodGroup", action(cache_.GetPodGroup(meta.namespace_(), meta.name()) != nullptr));
    }
    case v1::ObjectEvent::kNamespaceObject:
      return absl::StrCat("Namespace",
                          action(cache_.GetNamespace(event.namespace_object().meta().name()) != nullptr));
    default: return "";
  }
}

void Scheduler::OnObjectEvent(const v1::ObjectEvent& event) {
  const absl::Time start = clock_.Now();
  const std::string label = EventHandlingLabel(event);
  HandleObjectEvent(event);
  if (!label.empty()) metrics_.ObserveEventHandling(label, clock_.Now() - start);
  if (relisting_ && options_.list_sync_every > 0 && ++listed_ >= options_.list_sync_every) {
    listed_ = 0;
    absl::MutexLock lock(&mu_);
    list_sync_wanted_ = true;
  }
}

void Scheduler::HandleObjectEvent(const v1::ObjectEvent& event) {
  switch (event.object_case()) {
    case v1::ObjectEvent::kPod: HandlePod(event); break;
    case v1::ObjectEvent::kNode: HandleNode(event); break;
    // Cached and mirrored to plugins now; preemption and gangs read them.
    case v1::ObjectEvent::kPdb: {
      absl::Status s = event.type() == v1::ObjectEvent::DELETE
                           ? cache_.RemovePdb(event.pdb().meta().uid())
                           : cache_.AddOrUpdatePdb(event.pdb());
      if (!s.ok()) PODIUM_LOG(Error, "Refused a PodDisruptionBudget", {"err", s.message()});
      break;
    }
    case v1::ObjectEvent::kPodGroup: {
      const v1::PodGroup& group = event.pod_group();
      const bool deleted = event.type() == v1::ObjectEvent::DELETE;
      std::shared_ptr<const v1::PodGroup> before =
          deleted ? nullptr : cache_.GetPodGroup(group.meta().namespace_(), group.meta().name());
      absl::Status s = deleted ? cache_.RemovePodGroup(group.meta().uid()) : cache_.AddOrUpdatePodGroup(group);
      if (!s.ok()) {
        PODIUM_LOG(Error, "Refused a PodGroup", {"err", s.message()});
        break;
      }
      if (deleted) break;
      // Its members held at PreEnqueue may go now; those rejected by a plugin
      // registered for PodGroup events are asked about (queueing hints).
      RetryGatedMembers(group.meta().namespace_(), group.meta().name());
      v1::ClusterEvent e;
      e.set_resource(v1::POD_GROUP);
      e.set_action(before == nullptr ? v1::ADD : v1::UPDATE);
      if (before != nullptr) *e.mutable_old_pod_group() = *before;
      *e.mutable_new_pod_group() = group;
      MoveOnEvent(std::move(e));
      break;
    }
    case v1::ObjectEvent::kNamespaceObject: HandleNamespace(event); break;
    default: break;  // PriorityClasses are resolved by the adapter.
  }
}

void Scheduler::HandleNamespace(const v1::ObjectEvent& event) {
  const v1::Namespace& ns = event.namespace_object();
  const std::string& name = ns.meta().name();
  std::shared_ptr<const v1::Namespace> before = cache_.GetNamespace(name);
  v1::ClusterEvent cluster_event;
  cluster_event.set_resource(v1::NAMESPACE);
  if (event.type() == v1::ObjectEvent::DELETE) {
    if (before == nullptr) return;
    if (absl::Status s = cache_.RemoveNamespace(name); !s.ok()) {
      PODIUM_LOG(Error, "Refused a Namespace", {"err", s.message()});
      return;
    }
    cluster_event.set_action(v1::DELETE);
    *cluster_event.mutable_old_namespace() = *before;
    MoveOnEvent(std::move(cluster_event));
    return;
  }
  if (absl::Status s = cache_.AddOrUpdateNamespace(ns); !s.ok()) {
    PODIUM_LOG(Error, "Refused a Namespace", {"err", s.message()});
    return;
  }
  // Only labels matter to scheduling (namespaceSelectors).
  if (before != nullptr) {
    if (sdk::SameStringMap(before->meta().labels(), ns.meta().labels())) return;
    cluster_event.set_action(v1::UPDATE);
    *cluster_event.mutable_old_namespace() = *before;
  } else {
    cluster_event.set_action(v1::ADD);
  }
  *cluster_event.mutable_new_namespace() = ns;
  MoveOnEvent(std::move(cluster_event));
}

void Scheduler::PostQueueWork(std::function<void()> work) {
  // Waiting for room is the back-pressure: the Cluster stream pauses reading.
  if (!queue_worker_.PostOrWait(std::move(work))) return;  // Stopped.
}

void Scheduler::MoveOnEvent(v1::ClusterEvent event) { QueueWorkHere({}, std::move(event)); }

void Scheduler::QueueWorkHere(std::string done_uid, v1::ClusterEvent event) {
  // Nothing queued before it: the queue's own part runs here (brief, under
  // the queue's lock) and only the asking of queueing hints, which may call a
  // plugin, goes to the worker. Most events move nothing and need no hint, so
  // most of them cost the worker no wake-up. Shared: the queue keeps it
  // without a copy while pods are in flight.
  auto shared = std::make_shared<const v1::ClusterEvent>(std::move(event));
  std::function<void()> hints;
  const auto here = [&] {
    DeleteAndMove(done_uid, shared, [&hints](std::function<void()> ask) { hints = std::move(ask); });
  };
  if (!queue_worker_.RunHereIfIdle(here)) {
    PostQueueWork([this, done_uid = std::move(done_uid), shared = std::move(shared)] {
      DeleteAndMove(done_uid, shared, nullptr);
    });
    return;
  }
  if (hints) PostQueueWork(std::move(hints));
}

void Scheduler::DeleteAndMove(const std::string& done_uid, std::shared_ptr<const v1::ClusterEvent> event,
                              const SchedulingQueue::HintDeferral& defer) {
  if (!done_uid.empty()) queue_.Delete(done_uid);
  queue_.MoveAllToActiveOrBackoffQueue(std::move(event), defer);
}

SchedulingQueue::HintDeferral Scheduler::HintsToQueueWorker() {
  return [this](std::function<void()> ask) { PostQueueWork(std::move(ask)); };
}

void Scheduler::HandleNode(const v1::ObjectEvent& event) {
  const v1::Node& node = event.node();
  const std::string& name = node.meta().name();
  if (relisting_) seen_nodes_.insert(name);
  auto it = nodes_.find(name);
  if (event.type() == v1::ObjectEvent::DELETE) {
    if (it == nodes_.end()) return;
    // kube moves pods on Node/Delete too: a node leaving can lower the
    // minimum of a spread constraint (PodTopologySpread's hint decides).
    v1::ClusterEvent deleted;
    deleted.set_resource(v1::NODE);
    deleted.set_action(v1::DELETE);
    *deleted.mutable_old_node() = *it->second;
    nodes_.erase(it);
    if (absl::Status s = cache_.RemoveNode(name); !s.ok()) {
      PODIUM_LOG(Error, "Removing a node failed", {"node", name}, {"err", s.message()});
    }
    MoveOnEvent(std::move(deleted));
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

void Scheduler::PodGone(const std::string& uid, const std::shared_ptr<const v1::Pod>& old) {
  diagnoses_.Erase(uid);
  gang_members_.Set(*old, false);
  {
    absl::MutexLock lock(&mu_);
    pending_uids_.erase(uid);
    bind_confirmed_.erase(uid);
  }
  // Deleted while waiting at Permit: Unreserve, forget, Done (binding pool).
  if (std::optional<BindingPod> waiting = waiting_.Remove(uid)) ReleaseDeleted(std::move(*waiting));
  // Bound, or assumed by us (waiting, binding, or bound but not yet observed):
  // what it held on its node is free again.
  sdk::PodInfoPtr cached = cache_.GetPod(uid);
  if (cached != nullptr) {
    (void)cache_.RemovePod(uid);
    v1::ClusterEvent e;
    e.set_resource(v1::POD);
    e.set_action(v1::DELETE);
    *e.mutable_old_pod() = *cached->pod;
    MoveOnEvent(std::move(e));
  }
  if (old->node_name().empty()) PostQueueWork([this, uid] { queue_.Delete(uid); });
  if (!old->node_name().empty()) RetryDeferredResizes(old->node_name());
}

void Scheduler::RetryDeferredResizes(const std::string& node) {
  absl::flat_hash_map<std::string, std::string> failed;
  {
    absl::MutexLock lock(&mu_);
    auto it = failed_resizes_.find(node);
    if (it == failed_resizes_.end()) return;
    failed = std::move(it->second);
    failed_resizes_.erase(it);
  }
  for (const auto& [uid, message] : failed) {
    auto pod = pods_.find(uid);
    if (pod == pods_.end() || pod->second->node_name() != node || pod->second->resize_status() != kDeferredResize) {
      continue;
    }
    PostQueueWork([this, info = sdk::PodInfo::Create(*pod->second)] { queue_.Add(info); });
  }
}

void Scheduler::HandlePod(const v1::ObjectEvent& event) {
  const v1::Pod& pod = event.pod();
  const std::string& uid = pod.meta().uid();
  if (relisting_) seen_pods_.insert(uid);
  auto it = pods_.find(uid);
  std::shared_ptr<const v1::Pod> old = it == pods_.end() ? nullptr : it->second;
  const bool was_assigned = old != nullptr && !old->node_name().empty();

  if (event.type() == v1::ObjectEvent::DELETE) {
    if (old == nullptr) return;
    pods_.erase(uid);
    PodGone(uid, old);
    return;
  }

  // One copy of the pod: pods_, the cache and the queue share the PodInfo's
  // (a pod the scheduler does not keep needs no PodInfo).
  const bool live = !PodTerminal(pod) && pod.meta().deletion_timestamp_us() == 0;
  const bool bound = !pod.node_name().empty();
  sdk::PodInfoPtr info = (bound && !PodTerminal(pod)) || (!bound && live && HasProfileFor(pod))
                             ? sdk::PodInfo::Create(pod)
                             : nullptr;
  pods_[uid] = info != nullptr ? info->pod : std::make_shared<const v1::Pod>(pod);
  gang_members_.Set(pod, live);
  if (bound) {
    // Bound: by us (the adapter confirms our bind) or by someone else.
    // Its in-place resize just deferred for lack of room: into the queue for
    // preemption on its node (KEP-5836).
    const bool resize_deferred = pod.resize_status() == kDeferredResize && !PodTerminal(pod) &&
                                 pod.meta().deletion_timestamp_us() == 0 && HasProfileFor(pod) &&
                                 (!was_assigned || old->resize_status() != kDeferredResize);
    sdk::PodInfoPtr resize = resize_deferred ? info : nullptr;
    diagnoses_.Erase(uid);
    {
      absl::MutexLock lock(&mu_);
      pending_uids_.erase(uid);
      bind_confirmed_.erase(uid);
    }
    if (!was_assigned) {
      // Bound by someone else while it waited at Permit: it waits no more.
      if (std::optional<BindingPod> waiting = waiting_.Remove(uid)) ReleaseDeleted(std::move(*waiting));
    }
    if (PodTerminal(pod)) {
      (void)cache_.RemovePod(uid);
    } else if (absl::Status s = cache_.AddOrUpdatePod(info); !s.ok()) {
      PODIUM_LOG(Error, "Caching a pod failed", {"pod", PodKey(pod)}, {"node", pod.node_name()},
                 {"err", s.message()});
    }
    // After the cache has it: the scheduling thread reads the pod from there.
    if (resize != nullptr && was_assigned) PostQueueWork([this, resize] { queue_.Add(resize); });
    v1::ClusterEvent e;
    e.set_resource(v1::POD);
    if (!was_assigned) {
      e.set_action(v1::ADD);
    } else {
      uint32_t actions = PodUpdateActions(*old, pod);
      if (PodTerminal(pod) && !PodTerminal(*old)) actions |= v1::DELETE;  // Frees its resources.
      if (actions == 0) return;
      e.set_action(actions);
      *e.mutable_old_pod() = *old;
    }
    *e.mutable_new_pod() = pod;
    if (!was_assigned && resize != nullptr) {
      // Out of the queue, then the event, then into it for preemption (Add
      // runs PreEnqueue plugins): one hand-off to the queue worker.
      PostQueueWork([this, uid, e = std::make_shared<const v1::ClusterEvent>(std::move(e)), resize] {
        DeleteAndMove(uid, e, nullptr);
        queue_.Add(resize);
      });
    } else if (!was_assigned) {
      QueueWorkHere(uid, std::move(e));  // Out of the queue, then the event.
    } else {
      MoveOnEvent(std::move(e));
    }
    return;
  }
  // Pending.
  if (!HasProfileFor(pod) || PodTerminal(pod) || pod.meta().deletion_timestamp_us() != 0) {
    // Not ours to schedule (any more): like a deletion for the scheduler.
    if (old != nullptr) PodGone(uid, old);
    return;
  }
  {
    absl::MutexLock lock(&mu_);
    pending_uids_.insert(uid);
  }
  // kube-scheduler's levels for these lines.
  if (old == nullptr) {
    PODIUM_VLOG(3, "Add event for unscheduled pod", {"pod", PodKey(pod)});
  } else {
    PODIUM_VLOG(4, "Update event for unscheduled pod", {"pod", PodKey(pod)});
  }
  if (old == nullptr && !pod.pod_group().empty()) {
    // A new gang member: if it is let in, so are its siblings held until
    // enough members existed (the same PreEnqueue answer).
    PostQueueWork([this, info] {
      queue_.Add(info);
      std::optional<QueuedPodSummary> queued = queue_.Find(info->uid());
      if (queued && queued->queue == QueueKind::kGated) return;
      const v1::Pod& p = *info->pod;
      queue_.RetryGatedMembers(p.meta().namespace_(), p.pod_group(), p.meta().uid());
    });
  } else if (old == nullptr) {
    PostQueueWork([this, info] { queue_.Add(info); });
  } else {
    PostQueueWork([this, old, info] { queue_.Update(*old, info); });
  }
}

}  // namespace podium::scheduler
