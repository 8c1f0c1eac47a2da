#include "plugins/coscheduling/coscheduling.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "plugins/helper/args.h"
#include "plugins/helper/events.h"
#include "plugins/helper/taints.h"

namespace podium::plugins {
namespace {

std::string GroupKey(const v1::Pod& pod) { return absl::StrCat(pod.meta().namespace_(), "/", pod.pod_group()); }

int32_t MinMember(const v1::PodGroup& group) { return std::max(1, group.min_member()); }

}  // namespace

absl::StatusOr<sdk::PluginPtr> Coscheduling::New(const boost::json::object& args, sdk::Handle& handle) {
  if (absl::Status s = CheckKnownFields(args, kName, "", {"permitWaitingTimeSeconds"}); !s.ok()) return s;
  int64_t seconds = kDefaultPermitWaitingTimeSeconds;
  if (auto it = args.find("permitWaitingTimeSeconds"); it != args.end()) {
    if (absl::Status s = ReadInt(it->value(), kName, "permitWaitingTimeSeconds", &seconds); !s.ok()) return s;
    if (seconds < 1 || seconds > 900) {
      return ArgsError(kName, "permitWaitingTimeSeconds",
                       absl::StrCat("must be between 1 and 900 (the scheduler caps a Permit wait at 15 minutes), got ",
                                    seconds));
    }
  }
  return std::make_unique<Coscheduling>(handle, seconds);
}

sdk::PluginDefinition Coscheduling::Definition() {
  sdk::PluginDefinition d{std::string(kName), &Coscheduling::New};
  d.mirror.assigned_pods = true;
  d.mirror.pod_groups = true;
  d.pod_group_members_only = true;
  d.unreserve_only = true;  // Reserve does nothing; Unreserve releases the gang.
  return d;
}

sdk::Status Coscheduling::PreEnqueue(const sdk::PodInfo& pod) {
  // Without the scheduler's context: the mirror's group; the count of pods is
  // unknown here, so only the group's existence is checked.
  const v1::Pod& p = *pod.pod;
  if (p.pod_group().empty()) return sdk::Status::Success();
  Context context;
  context.pod_group = handle_.snapshot().GetPodGroup(p.meta().namespace_(), p.pod_group());
  context.pod_group_pods = UINT32_MAX;
  return PreEnqueue(pod, context);
}

sdk::Status Coscheduling::PreEnqueue(const sdk::PodInfo& pod, const Context& context) {
  const v1::Pod& p = *pod.pod;
  if (p.pod_group().empty()) return sdk::Status::Success();
  if (context.pod_group == nullptr) {
    return sdk::Status(sdk::Code::kUnschedulableAndUnresolvable,
                       absl::StrCat("waiting for pod group ", GroupKey(p), ": it does not exist"));
  }
  const int32_t min = MinMember(*context.pod_group);
  if (context.pod_group_pods < static_cast<uint32_t>(min)) {
    // No count in the message: it is the pod's SchedulingGated condition, and
    // a message that changed with every new member would patch every member
    // again each time.
    return sdk::Status(sdk::Code::kUnschedulableAndUnresolvable,
                       absl::StrCat("waiting for pod group ", GroupKey(p), ": fewer than minMember ", min,
                                    " pods exist"));
  }
  return sdk::Status::Success();
}

sdk::Status Coscheduling::Reserve(sdk::CycleState&, const sdk::PodInfo&, const std::string&) {
  return sdk::Status::Success();
}

void Coscheduling::Unreserve(sdk::CycleState&, const sdk::PodInfo& pod, const std::string&) {
  const v1::Pod& p = *pod.pod;
  if (p.pod_group().empty()) return;
  const std::string key = GroupKey(p);
  std::vector<std::string> reject;
  {
    absl::MutexLock lock(&mu_);
    auto it = waiting_.find(key);
    if (it == waiting_.end()) return;
    it->second.erase(p.meta().uid());
    reject.assign(it->second.begin(), it->second.end());
    waiting_.erase(it);
  }
  // Outside the lock: a decision goes to the stream.
  const std::string reason =
      absl::StrCat("pod group ", key, ": member ", p.meta().namespace_(), "/", p.meta().name(),
                   " gave up its place (Permit timeout, rejection or failed binding); the group is requeued together");
  for (const std::string& uid : reject) handle_.RejectWaitingPod(uid, kName, reason);
}

size_t Coscheduling::AssignedMembers(const v1::Pod& pod) const {
  size_t n = 0;
  const sdk::Snapshot& snapshot = handle_.snapshot();
  // The mirror's group index: O(the group's assigned members).
  if (snapshot.ForEachAssignedPodInGroup(pod.meta().namespace_(), pod.pod_group(),
                                         [&](const sdk::PodInfo& other, const sdk::NodeInfo&) {
                                           if (other.uid() != pod.meta().uid()) ++n;
                                         })) {
    return n;
  }
  // A snapshot without the index: every assigned pod.
  for (const sdk::NodeInfo* node : snapshot.Nodes()) {
    for (const sdk::PodInfoPtr& other : node->pods()) {
      const v1::Pod& o = *other->pod;
      if (o.pod_group() == pod.pod_group() && o.meta().namespace_() == pod.meta().namespace_() &&
          o.meta().uid() != pod.meta().uid()) {
        ++n;
      }
    }
  }
  return n;
}

sdk::PermitResult Coscheduling::Permit(sdk::CycleState&, const sdk::PodInfo& pod, const std::string&) {
  const v1::Pod& p = *pod.pod;
  if (p.pod_group().empty()) return {};
  const v1::PodGroup* group = handle_.snapshot().GetPodGroup(p.meta().namespace_(), p.pod_group());
  const std::string key = GroupKey(p);
  if (group == nullptr) {
    // Its group was deleted, or the pod joined a group that does not exist
    // after PreEnqueue let it in: as scheduler-plugins' Coscheduling, it is
    // not placed alone. It waits in the unschedulable pool until its group
    // appears (a PodGroup event its queueing hint accepts).
    sdk::PermitResult result;
    result.status = sdk::Status(sdk::Code::kUnschedulable, absl::StrCat("pod group ", key, " not found"));
    return result;
  }
  // This pod is assumed too (the mirror may not show it yet).
  if (AssignedMembers(p) + 1 >= static_cast<size_t>(MinMember(*group))) {
    std::vector<std::string> allow;
    {
      absl::MutexLock lock(&mu_);
      if (auto it = waiting_.find(key); it != waiting_.end()) {
        allow.assign(it->second.begin(), it->second.end());
        waiting_.erase(it);
      }
    }
    for (const std::string& uid : allow) handle_.AllowWaitingPod(uid, kName);
    return {};
  }
  {
    absl::MutexLock lock(&mu_);
    waiting_[key].insert(p.meta().uid());
  }
  const int64_t seconds =
      group->schedule_timeout_seconds() > 0 ? group->schedule_timeout_seconds() : permit_waiting_seconds_;
  sdk::PermitResult result;
  result.status = sdk::Status(sdk::Code::kWait, absl::StrCat("waiting for pod group ", key, " to reach minMember ",
                                                             MinMember(*group)));
  result.timeout_ms = seconds * 1000;
  return result;
}

std::vector<sdk::ClusterEventWithHint> Coscheduling::EventsToRegister() const {
  // Its group appeared or changed (minMember lowered): only its own members.
  auto same_group = [](const v1::Pod& pod, const v1::ClusterEvent& e) {
    if (!e.has_new_pod_group()) return sdk::QueueingHint::kQueue;
    const v1::ObjectMeta& m = e.new_pod_group().meta();
    return m.name() == pod.pod_group() && m.namespace_() == pod.meta().namespace_() ? sdk::QueueingHint::kQueue
                                                                                   : sdk::QueueingHint::kQueueSkip;
  };
  // A group rejected at Permit (its wait timed out) may fit once room frees
  // up: a deleted pod that held some (bound, assumed or nominated), not a
  // pending one.
  auto freed_room = [](const v1::Pod&, const v1::ClusterEvent& e) {
    const v1::Pod* deleted = DeletedPod(e);
    if (deleted != nullptr && deleted->node_name().empty() && deleted->nominated_node_name().empty()) {
      return sdk::QueueingHint::kQueueSkip;
    }
    return sdk::QueueingHint::kQueue;
  };
  // A node that can take the pod: a new one the pod may use (not cordoned,
  // or cordoned and tolerated), or one with more of some allocatable resource.
  auto more_room = [](const v1::Pod& pod, const v1::ClusterEvent& e) {
    const v1::Node* now = NewNode(e);
    if (now == nullptr) return sdk::QueueingHint::kQueue;
    if (!SchedulableFor(pod, *now)) return sdk::QueueingHint::kQueueSkip;
    const v1::Node* before = OldNode(e);
    if (before == nullptr) return sdk::QueueingHint::kQueue;
    const v1::ResourceList& a = before->allocatable();
    const v1::ResourceList& b = now->allocatable();
    bool grew = b.milli_cpu() > a.milli_cpu() || b.memory_bytes() > a.memory_bytes() ||
                b.ephemeral_storage_bytes() > a.ephemeral_storage_bytes() || b.pods() > a.pods();
    for (const auto& [name, value] : b.scalar()) {
      auto was = a.scalar().find(name);
      grew |= value > (was == a.scalar().end() ? 0 : was->second);
    }
    return grew ? sdk::QueueingHint::kQueue : sdk::QueueingHint::kQueueSkip;
  };
  return {
      {v1::POD_GROUP, Actions(v1::ADD, v1::UPDATE), same_group},
      {v1::POD, Actions(v1::DELETE), freed_room},
      {v1::NODE, Actions(v1::ADD, v1::UPDATE_NODE_ALLOCATABLE), more_room},
  };
}

size_t Coscheduling::NumWaiting(const std::string& group_key) const {
  absl::MutexLock lock(&mu_);
  auto it = waiting_.find(group_key);
  return it == waiting_.end() ? 0 : it->second.size();
}

}  // namespace podium::plugins
