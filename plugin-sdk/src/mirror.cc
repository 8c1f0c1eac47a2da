#include "mirror.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl_compat.h"
#include "podium/sdk/label_selector.h"

namespace podium::sdk::internal {

const NodeInfo* Mirror::Get(std::string_view node_name) const {
  auto it = nodes_by_name_.find(AsAbsl(node_name));
  return it == nodes_by_name_.end() ? nullptr : it->second;
}

const NodeInfo* Mirror::GetById(uint32_t id) const {
  auto it = nodes_.find(id);
  return it == nodes_.end() ? nullptr : it->second.get();
}

std::vector<const v1::PodDisruptionBudget*> Mirror::PodDisruptionBudgets(
    std::string_view namespace_) const {
  std::vector<const v1::PodDisruptionBudget*> out;
  for (const auto& [uid, pdb] : pdbs_) {
    if (pdb->meta().namespace_() == namespace_) out.push_back(pdb.get());
  }
  std::sort(out.begin(), out.end(), [](const auto* a, const auto* b) {
    return a->meta().name() < b->meta().name();
  });
  return out;
}

const v1::PodGroup* Mirror::GetPodGroup(std::string_view namespace_,
                                        std::string_view name) const {
  auto it = pod_group_uids_.find(absl::StrCat(AsAbsl(namespace_), "/", AsAbsl(name)));
  if (it == pod_group_uids_.end()) return nullptr;
  auto group = pod_groups_.find(it->second);
  return group == pod_groups_.end() ? nullptr : group->second.get();
}

const v1::Namespace* Mirror::GetNamespace(std::string_view name) const {
  auto it = namespaces_.find(AsAbsl(name));
  return it == namespaces_.end() ? nullptr : it->second.get();
}

std::vector<const v1::Namespace*> Mirror::Namespaces() const {
  std::vector<const v1::Namespace*> out;
  out.reserve(namespaces_.size());
  for (const auto& [name, ns] : namespaces_) out.push_back(ns.get());
  return out;
}

absl::Status Mirror::Validate(const v1::StateDelta& delta) const {
  const bool reset = delta.reset();
  absl::flat_hash_set<uint32_t> removed(delta.node_removals().begin(),
                                        delta.node_removals().end());
  absl::flat_hash_map<absl::string_view, uint32_t> upserted_names;
  absl::flat_hash_set<uint32_t> upserted;
  for (int i = 0; i < delta.node_upserts_size(); ++i) {
    const v1::MirroredNode& upsert = delta.node_upserts(i);
    if (!upsert.has_node()) {
      return absl::InvalidArgumentError(absl::StrCat("delta.node_upserts[", i, "].node: missing"));
    }
    const std::string& name = upsert.node().meta().name();
    if (name.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("delta.node_upserts[", i,
                                                     "].node.meta.name: empty (node id ",
                                                     upsert.id(), ")"));
    }
    auto [it, inserted] = upserted_names.emplace(name, upsert.id());
    if (!inserted && it->second != upsert.id()) {
      return absl::InvalidArgumentError(
          absl::StrCat("delta.node_upserts[", i, "].node.meta.name: node ", name,
                       " upserted under two ids (", it->second, " and ", upsert.id(), ")"));
    }
    if (!reset) {
      const NodeInfo* existing = Get(name);
      if (existing != nullptr && existing->id() != upsert.id() && !removed.contains(existing->id())) {
        return absl::InvalidArgumentError(
            absl::StrCat("delta.node_upserts[", i, "].node.meta.name: node ", name,
                         " is already mirrored as node id ", existing->id(), ", not ", upsert.id()));
      }
    }
    upserted.insert(upsert.id());
  }
  for (int i = 0; i < delta.pod_removals_size(); ++i) {
    if (delta.pod_removals(i).empty()) {
      return absl::InvalidArgumentError(absl::StrCat("delta.pod_removals[", i, "]: empty uid"));
    }
  }
  for (int i = 0; i < delta.pod_upserts_size(); ++i) {
    const v1::MirroredPod& upsert = delta.pod_upserts(i);
    if (!upsert.has_pod() || upsert.pod().meta().uid().empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("delta.pod_upserts[", i, "].pod.meta.uid: missing"));
    }
    const uint32_t id = upsert.node_id();
    const bool known =
        upserted.contains(id) || (!reset && nodes_.contains(id) && !removed.contains(id));
    if (!known) {
      const v1::ObjectMeta& meta = upsert.pod().meta();
      return absl::InvalidArgumentError(absl::StrCat("delta.pod_upserts[", i,
                                                     "].node_id: unknown node id ", id, " (pod ",
                                                     meta.namespace_(), "/", meta.name(), ")"));
    }
  }
  for (int i = 0; i < delta.pdb_removals_size(); ++i) {
    if (delta.pdb_removals(i).empty()) {
      return absl::InvalidArgumentError(absl::StrCat("delta.pdb_removals[", i, "]: empty uid"));
    }
  }
  for (int i = 0; i < delta.pdb_upserts_size(); ++i) {
    if (delta.pdb_upserts(i).meta().uid().empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("delta.pdb_upserts[", i, "].meta.uid: missing"));
    }
  }
  for (int i = 0; i < delta.pod_group_removals_size(); ++i) {
    if (delta.pod_group_removals(i).empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("delta.pod_group_removals[", i, "]: empty uid"));
    }
  }
  for (int i = 0; i < delta.pod_group_upserts_size(); ++i) {
    if (delta.pod_group_upserts(i).meta().uid().empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("delta.pod_group_upserts[", i, "].meta.uid: missing"));
    }
  }
  for (int i = 0; i < delta.namespace_removals_size(); ++i) {
    if (delta.namespace_removals(i).empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("delta.namespace_removals[", i, "]: empty name"));
    }
  }
  for (int i = 0; i < delta.namespace_upserts_size(); ++i) {
    if (delta.namespace_upserts(i).meta().name().empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("delta.namespace_upserts[", i, "].meta.name: missing"));
    }
  }
  for (int i = 0; i < delta.nominated_pod_removals_size(); ++i) {
    if (delta.nominated_pod_removals(i).empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("delta.nominated_pod_removals[", i, "]: empty uid"));
    }
  }
  for (int i = 0; i < delta.nominated_pod_upserts_size(); ++i) {
    const v1::Pod& pod = delta.nominated_pod_upserts(i);
    if (pod.meta().uid().empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("delta.nominated_pod_upserts[", i, "].meta.uid: missing"));
    }
    if (pod.nominated_node_name().empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("delta.nominated_pod_upserts[", i, "].nominated_node_name: empty (pod ",
                       pod.meta().namespace_(), "/", pod.meta().name(), ")"));
    }
  }
  return absl::OkStatus();
}

const std::vector<PodInfoPtr>* Mirror::NominatedPodsOn(std::string_view node_name) const {
  auto it = nominated_by_node_.find(AsAbsl(node_name));
  return it == nominated_by_node_.end() ? nullptr : &it->second;
}

void Mirror::RemoveNomination(const std::string& uid) {
  auto it = nominated_.find(uid);
  if (it == nominated_.end()) return;  // Removals are idempotent.
  auto on_node = nominated_by_node_.find(it->second);
  if (on_node != nominated_by_node_.end()) {
    std::erase_if(on_node->second, [&](const PodInfoPtr& p) { return p->uid() == uid; });
    if (on_node->second.empty()) nominated_by_node_.erase(on_node);
  }
  nominated_.erase(it);
}

absl::Status Mirror::Apply(v1::StateDelta& delta) {
  if (absl::Status valid = Validate(delta); !valid.ok()) return valid;
  if (delta.reset()) {
    Clear();
    LogBarrier();
  }
  for (uint32_t id : delta.node_removals()) RemoveNode(id);
  for (v1::MirroredNode& upsert : *delta.mutable_node_upserts()) {
    UpsertNode(upsert.id(), std::make_shared<const v1::Node>(std::move(*upsert.mutable_node())));
  }
  // Node counts of images changed: tell every node that has them.
  for (const std::string& name : dirty_images_) {
    auto it = images_.find(name);
    if (it == images_.end()) continue;
    if (it->second.node_ids.empty()) {
      images_.erase(it);
      continue;
    }
    const int32_t count = static_cast<int32_t>(it->second.node_ids.size());
    for (uint32_t id : it->second.node_ids) {
      nodes_[id]->mutable_images()[name].num_nodes = count;
    }
  }
  dirty_images_.clear();
  if (order_dirty_) {
    ordered_.clear();
    ordered_.reserve(nodes_.size());
    for (const auto& [id, node] : nodes_) ordered_.push_back(node.get());
    std::sort(ordered_.begin(), ordered_.end(),
              [](const NodeInfo* a, const NodeInfo* b) { return a->id() < b->id(); });
    order_dirty_ = false;
    affinity_dirty_ = true;
  }

  for (const std::string& uid : delta.pod_removals()) RemovePod(uid);
  for (v1::MirroredPod& upsert : *delta.mutable_pod_upserts()) {
    std::string uid = upsert.pod().meta().uid();
    RemovePod(uid);
    NodeInfo& node = *nodes_[upsert.node_id()];
    PodInfoPtr pod = PodInfo::Create(std::move(*upsert.mutable_pod()));
    if (pod->affinity != nullptr) affinity_dirty_ = true;
    if (label_index_enabled_) IndexPodLabels(pod, &node);
    if (log_enabled_) LogPodChange(true, pod, &node);
    if (!pod->pod->pod_group().empty()) IndexPodGroup(pod, &node);
    node.AddPod(std::move(pod));
    pod_nodes_.emplace(std::move(uid), node.id());
  }
  for (const std::string& uid : delta.pdb_removals()) pdbs_.erase(uid);
  for (v1::PodDisruptionBudget& pdb : *delta.mutable_pdb_upserts()) {
    std::string uid = pdb.meta().uid();
    pdbs_[uid] = std::make_unique<v1::PodDisruptionBudget>(std::move(pdb));
  }
  for (const std::string& uid : delta.pod_group_removals()) RemovePodGroup(uid);
  for (v1::PodGroup& group : *delta.mutable_pod_group_upserts()) {
    std::string uid = group.meta().uid();
    RemovePodGroup(uid);
    pod_group_uids_[absl::StrCat(group.meta().namespace_(), "/", group.meta().name())] = uid;
    pod_groups_[uid] = std::make_unique<v1::PodGroup>(std::move(group));
  }
  for (const std::string& name : delta.namespace_removals()) namespaces_.erase(name);
  for (v1::Namespace& ns : *delta.mutable_namespace_upserts()) {
    std::string name = ns.meta().name();
    namespaces_[std::move(name)] = std::make_unique<v1::Namespace>(std::move(ns));
  }
  for (const std::string& uid : delta.nominated_pod_removals()) RemoveNomination(uid);
  for (v1::Pod& pod : *delta.mutable_nominated_pod_upserts()) {
    std::string uid = pod.meta().uid();
    RemoveNomination(uid);
    std::string node = pod.nominated_node_name();
    // Counted as if on the node it will take.
    pod.set_node_name(node);
    nominated_by_node_[node].push_back(PodInfo::Create(std::move(pod)));
    nominated_.emplace(std::move(uid), std::move(node));
  }
  if (affinity_dirty_) RebuildAffinityLists();
  if (delta.generation() != 0) generation_ = delta.generation();
  return absl::OkStatus();
}

void Mirror::Clear() {
  nodes_.clear();
  nodes_by_name_.clear();
  ordered_.clear();
  order_dirty_ = false;
  pod_nodes_.clear();
  images_.clear();
  dirty_images_.clear();
  pdbs_.clear();
  pod_groups_.clear();
  pod_group_uids_.clear();
  namespaces_.clear();
  nominated_.clear();
  nominated_by_node_.clear();
  with_affinity_.clear();
  with_required_anti_affinity_.clear();
  affinity_dirty_ = false;
  pods_by_label_.clear();
  pods_by_group_.clear();
  generation_ = 0;
}

void Mirror::RemovePodGroup(const std::string& uid) {
  auto it = pod_groups_.find(uid);
  if (it == pod_groups_.end()) return;
  auto by_name = pod_group_uids_.find(
      absl::StrCat(it->second->meta().namespace_(), "/", it->second->meta().name()));
  if (by_name != pod_group_uids_.end() && by_name->second == uid) pod_group_uids_.erase(by_name);
  pod_groups_.erase(it);
}

void Mirror::RemoveNode(uint32_t id) {
  auto it = nodes_.find(id);
  if (it == nodes_.end()) return;  // Removals are idempotent.
  NodeInfo& node = *it->second;
  LogBarrier();  // Log entries name this node: their readers rebuild.
  for (const PodInfoPtr& pod : node.pods()) {
    if (label_index_enabled_) UnindexPodLabels(*pod);
    if (!pod->pod->pod_group().empty()) UnindexPodGroup(*pod);
    pod_nodes_.erase(pod->uid());
  }
  for (const auto& [name, state] : node.images()) ForgetImageName(name, id);
  auto by_name = nodes_by_name_.find(node.name());
  if (by_name != nodes_by_name_.end() && by_name->second == &node) nodes_by_name_.erase(by_name);
  nodes_.erase(it);
  order_dirty_ = true;
}

void Mirror::UpsertNode(uint32_t id, std::shared_ptr<const v1::Node> node) {
  auto it = nodes_.find(id);
  if (it == nodes_.end()) {
    auto info = std::make_unique<NodeInfo>(id, std::move(node));
    nodes_by_name_[info->name()] = info.get();
    for (const v1::ContainerImage& image : info->node().images()) {
      for (const std::string& name : image.names()) RememberImageName(name, id);
    }
    AddImageNames(*info);
    nodes_.emplace(id, std::move(info));
    order_dirty_ = true;
    return;
  }
  NodeInfo& info = *it->second;
  // Pods counted by the node's labels (topology domains) count elsewhere now.
  if (log_enabled_ && !SameStringMap(info.node().meta().labels(), node->meta().labels())) LogBarrier();
  if (info.name() != node->meta().name()) {
    auto by_name = nodes_by_name_.find(info.name());
    if (by_name != nodes_by_name_.end() && by_name->second == &info) nodes_by_name_.erase(by_name);
    nodes_by_name_[node->meta().name()] = &info;
  }
  // Only image names that appear or disappear change counts (a node update
  // without image changes must not touch every node that shares its images).
  absl::flat_hash_set<absl::string_view> new_names;
  for (const v1::ContainerImage& image : node->images()) {
    for (const std::string& name : image.names()) new_names.insert(name);
  }
  for (const auto& [name, state] : info.images()) {
    if (!new_names.contains(name)) ForgetImageName(name, id);
  }
  for (absl::string_view name : new_names) {
    if (!info.images().contains(name)) RememberImageName(std::string(name), id);
  }
  info.SetNode(std::move(node));
  AddImageNames(info);
}

// Rebuilds the node's images map from its node object and the current counts.
void Mirror::AddImageNames(NodeInfo& node) {
  auto& images = node.mutable_images();
  images.clear();
  for (const v1::ContainerImage& image : node.node().images()) {
    for (const std::string& name : image.names()) {
      auto it = images_.find(name);
      const int32_t count = it == images_.end() ? 0 : static_cast<int32_t>(it->second.node_ids.size());
      images[name] = ImageState{.size_bytes = image.size_bytes(), .num_nodes = count};
    }
  }
}

void Mirror::ForgetImageName(const std::string& name, uint32_t node_id) {
  auto it = images_.find(name);
  if (it == images_.end()) return;
  it->second.node_ids.erase(node_id);
  dirty_images_.insert(name);
}

void Mirror::RememberImageName(const std::string& name, uint32_t node_id) {
  images_[name].node_ids.insert(node_id);
  dirty_images_.insert(name);
}

void Mirror::RemovePod(const std::string& uid) {
  auto it = pod_nodes_.find(uid);
  if (it == pod_nodes_.end()) return;
  auto node = nodes_.find(it->second);
  if (node != nodes_.end()) {
    const PodInfo* pod = node->second->FindPod(uid);
    if (pod != nullptr && pod->affinity != nullptr) affinity_dirty_ = true;
    if (pod != nullptr && label_index_enabled_) UnindexPodLabels(*pod);
    if (pod != nullptr && log_enabled_) {
      for (const PodInfoPtr& p : node->second->pods()) {
        if (p.get() == pod) LogPodChange(false, p, node->second.get());
      }
    }
    if (pod != nullptr && !pod->pod->pod_group().empty()) UnindexPodGroup(*pod);
    node->second->RemovePod(uid);
  }
  pod_nodes_.erase(it);
}

void Mirror::RebuildAffinityLists() {
  with_affinity_.clear();
  with_required_anti_affinity_.clear();
  for (const NodeInfo* node : ordered_) {
    if (!node->pods_with_affinity().empty()) with_affinity_.push_back(node);
    if (!node->pods_with_required_anti_affinity().empty()) {
      with_required_anti_affinity_.push_back(node);
    }
  }
  affinity_dirty_ = false;
}

void Mirror::AddToIndex(PodIndex& index, std::string key, const PodInfoPtr& pod, const NodeInfo* node) {
  auto& pods = index[std::move(key)];
  pods.erase(pod->uid());  // An entry of an older version would keep a key into it.
  pods.emplace(pod->uid(), LabelledPod{pod, node});
}

void Mirror::RemoveFromIndex(PodIndex& index, const std::string& key, const PodInfo& pod) {
  auto it = index.find(key);
  if (it == index.end()) return;
  auto entry = it->second.find(pod.uid());
  // Only this pod's own entry: a newer pod with the uid keeps its own.
  if (entry != it->second.end() && entry->second.pod.get() == &pod) it->second.erase(entry);
  if (it->second.empty()) index.erase(it);
}

void Mirror::EnableLabelIndex() {
  if (label_index_enabled_) return;
  label_index_enabled_ = true;
  for (const auto& [id, node] : nodes_) {
    for (const PodInfoPtr& pod : node->pods()) IndexPodLabels(pod, node.get());
  }
}

void Mirror::IndexPodLabels(const PodInfoPtr& pod, const NodeInfo* node) {
  for (const auto& [key, value] : pod->pod->meta().labels()) {
    AddToIndex(pods_by_label_, absl::StrCat(key, "=", value), pod, node);
  }
}

void Mirror::UnindexPodLabels(const PodInfo& pod) {
  for (const auto& [key, value] : pod.pod->meta().labels()) {
    RemoveFromIndex(pods_by_label_, absl::StrCat(key, "=", value), pod);
  }
}

bool Mirror::ForEachPodWithLabel(std::string_view key, std::string_view value, const PodVisitor& visit) const {
  if (!label_index_enabled_) return false;
  auto it = pods_by_label_.find(absl::StrCat(AsAbsl(key), "=", AsAbsl(value)));
  if (it == pods_by_label_.end()) return true;
  for (const auto& [uid, labelled] : it->second) visit(*labelled.pod, *labelled.node);
  return true;
}

void Mirror::IndexPodGroup(const PodInfoPtr& pod, const NodeInfo* node) {
  AddToIndex(pods_by_group_, absl::StrCat(pod->pod->meta().namespace_(), "/", pod->pod->pod_group()), pod, node);
}

void Mirror::UnindexPodGroup(const PodInfo& pod) {
  RemoveFromIndex(pods_by_group_, absl::StrCat(pod.pod->meta().namespace_(), "/", pod.pod->pod_group()), pod);
}

bool Mirror::ForEachAssignedPodInGroup(std::string_view namespace_, std::string_view group,
                                       const PodVisitor& visit) const {
  auto it = pods_by_group_.find(absl::StrCat(AsAbsl(namespace_), "/", AsAbsl(group)));
  if (it == pods_by_group_.end()) return true;
  for (const auto& [uid, member] : it->second) visit(*member.pod, *member.node);
  return true;
}

void Mirror::EnablePodChangeLog(size_t max_entries) {
  log_max_ = std::max<size_t>(max_entries, 1);
  if (log_enabled_) return;
  log_enabled_ = true;
  LogBarrier();  // Nothing logged before now.
}

void Mirror::LogPodChange(bool added, PodInfoPtr pod, const NodeInfo* node) {
  log_.push_back({added, std::move(pod), node});
  while (log_.size() > log_max_) {
    log_.pop_front();
    ++log_first_;
  }
}

void Mirror::LogBarrier() {
  // One past the end: a cursor that was current is now behind the barrier.
  log_first_ += log_.size() + 1;
  log_.clear();
  log_barrier_ = log_first_;
}

bool Mirror::PodChangesSince(uint64_t* cursor, const PodChangeVisitor& visit) const {
  const uint64_t end = log_first_ + log_.size();
  const bool known = log_enabled_ && *cursor >= log_barrier_ && *cursor >= log_first_ && *cursor <= end;
  if (known) {
    for (size_t i = *cursor - log_first_; i < log_.size(); ++i) {
      visit(PodChange{.added = log_[i].added, .pod = log_[i].pod.get(), .node = log_[i].node});
    }
  }
  *cursor = end;
  return known;
}

}  // namespace podium::sdk::internal
