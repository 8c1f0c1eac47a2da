#include "preemption/nominator.h"

namespace podium::scheduler::preemption {
namespace {
absl::string_view AV(std::string_view s) { return absl::string_view(s.data(), s.size()); }
}  // namespace

void Nominator::Mirror(const std::string& uid, const Nomination* n) {
  generation_.fetch_add(1, std::memory_order_acq_rel);  // Every change passes here.
  if (mirror_log_ == nullptr) return;
  if (n == nullptr) {
    mirror_log_->SetNomination(uid, nullptr);
    return;
  }
  auto pod = std::make_shared<v1::Pod>(*n->pod->pod);
  pod->set_nominated_node_name(n->node);
  mirror_log_->SetNomination(uid, std::move(pod));
}

void Nominator::Nominate(sdk::PodInfoPtr pod, std::string node) {
  absl::MutexLock lock(&mu_);
  std::string uid = pod->uid();
  // An assumed pod counts on its node already: an event that still carries
  // its nominatedNodeName (the patch's, arriving after the assume) must not
  // count it a second time there (kube-scheduler skips updates of assumed
  // pods). Checked under mu_, so an assume racing with this event clears
  // after it (Scheduler's assumed hook -> Clear).
  if (mirror_log_ != nullptr && mirror_log_->IsAssumed(uid)) {
    if (auto it = by_uid_.find(uid); it != by_uid_.end()) {
      Mirror(it->first, nullptr);
      by_uid_.erase(it);
    }
    return;
  }
  Nomination& n = by_uid_[uid];
  n = Nomination{std::move(pod), std::move(node)};
  Mirror(uid, &n);
}

std::string Nominator::Clear(std::string_view uid) {
  absl::MutexLock lock(&mu_);
  auto it = by_uid_.find(AV(uid));
  if (it == by_uid_.end()) return "";
  std::string node = std::move(it->second.node);
  Mirror(it->first, nullptr);
  by_uid_.erase(it);
  return node;
}

std::string Nominator::NominatedNode(std::string_view uid) const {
  absl::MutexLock lock(&mu_);
  auto it = by_uid_.find(AV(uid));
  return it == by_uid_.end() ? "" : it->second.node;
}

void Nominator::OnPodEvent(const v1::Pod& pod, bool deleted) {
  const bool finished = pod.phase() == v1::SUCCEEDED || pod.phase() == v1::FAILED;
  if (deleted || finished || !pod.node_name().empty() || pod.meta().deletion_timestamp_us() != 0) {
    Clear(pod.meta().uid());
    return;
  }
  if (pod.nominated_node_name().empty()) {
    // Keep the pod up to date (priority, requests) under its nomination.
    absl::MutexLock lock(&mu_);
    auto it = by_uid_.find(pod.meta().uid());
    if (it != by_uid_.end()) {
      it->second.pod = sdk::PodInfo::Create(pod);
      Mirror(it->first, &it->second);
    }
    return;
  }
  Nominate(sdk::PodInfo::Create(pod), pod.nominated_node_name());
}

std::vector<sdk::PodInfoPtr> Nominator::NominatedPodsFor(const v1::Pod& pod,
                                                         std::string_view node_name) const {
  std::vector<sdk::PodInfoPtr> out;
  absl::MutexLock lock(&mu_);
  for (const auto& [uid, n] : by_uid_) {
    if (uid == pod.meta().uid() || n.pod->pod->priority() < pod.priority()) continue;
    if (!node_name.empty() && n.node != node_name) continue;
    out.push_back(n.pod);
  }
  return out;
}

std::vector<sdk::PodInfoPtr> Nominator::LowerPriorityNominated(const v1::Pod& pod,
                                                               std::string_view node_name) const {
  std::vector<sdk::PodInfoPtr> out;
  absl::MutexLock lock(&mu_);
  for (const auto& [uid, n] : by_uid_) {
    if (uid != pod.meta().uid() && n.node == node_name && n.pod->pod->priority() < pod.priority()) {
      out.push_back(n.pod);
    }
  }
  return out;
}

void Nominator::AddToRequest(const v1::Pod& pod, const sdk::Snapshot& snapshot,
                             google::protobuf::RepeatedPtrField<v1::MirroredPod>* out) const {
  absl::MutexLock lock(&mu_);
  for (const auto& [uid, n] : by_uid_) {
    if (uid == pod.meta().uid() || n.pod->pod->priority() < pod.priority()) continue;
    const sdk::NodeInfo* node = snapshot.Get(n.node);
    if (node == nullptr) continue;
    v1::MirroredPod* m = out->Add();
    m->set_node_id(node->id());
    *m->mutable_pod() = *n.pod->pod;
    m->mutable_pod()->set_node_name(n.node);
  }
}

void Nominator::ForEachKey(const v1::Pod& pod, const sdk::Snapshot& snapshot,
                           const std::function<void(uint32_t node_id, std::string_view uid,
                                                    std::string_view resource_version)>& visit) const {
  absl::MutexLock lock(&mu_);
  for (const auto& [uid, n] : by_uid_) {
    if (uid == pod.meta().uid() || n.pod->pod->priority() < pod.priority()) continue;
    const sdk::NodeInfo* node = snapshot.Get(n.node);
    if (node == nullptr) continue;
    visit(node->id(), uid, n.pod->pod->meta().resource_version());
  }
}

size_t Nominator::size() const {
  absl::MutexLock lock(&mu_);
  return by_uid_.size();
}

}  // namespace podium::scheduler::preemption
