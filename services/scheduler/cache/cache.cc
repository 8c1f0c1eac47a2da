#include "cache/cache.h"

#include <algorithm>
#include <utility>

#include "absl/container/btree_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "queue/events.h"

namespace podium::scheduler {

struct Cache::NodeItem {
  std::string name;
  uint32_t id = 0;  // 0: ghost (pods but no node).
  std::shared_ptr<const v1::Node> node;
  std::optional<sdk::NodeInfo> info;  // Present nodes only.
  absl::flat_hash_set<std::string> pod_uids;
  uint64_t generation = 0;
  // The generation of the last change that was more than a confirmation of
  // an assumed pod (Snapshot::NodeChangeGeneration).
  uint64_t change_generation = 0;
  NodeItem* prev = nullptr;
  NodeItem* next = nullptr;
  bool linked = false;
};

namespace {

// Abseil here is built with its own string_view type.
absl::string_view AV(std::string_view s) { return absl::string_view(s.data(), s.size()); }

// The bound pod is the assumed one as any plugin sees it: only the marks the
// binding itself leaves differ (resourceVersion, the PodScheduled condition,
// status.startTime once its kubelet acknowledged it).
// Compared on every bound-pod event: generated code (SamePodExcept), not
// MessageDifferencer's reflection (5.7 % of the scheduler's samples on
// basic-5000 in round 12).
bool SameButBinding(const v1::Pod& assumed, const v1::Pod& bound) {
  if (assumed.meta().uid() != bound.meta().uid()) return false;
  return SamePodExcept(assumed, bound, {v1::Pod::kConditionsFieldNumber, v1::Pod::kStartTimeUsFieldNumber},
                       {v1::ObjectMeta::kResourceVersionFieldNumber});
}

}  // namespace

// ---- Snapshot ----

const sdk::NodeInfo* Snapshot::Get(std::string_view node_name) const {
  auto it = by_name_.find(AV(node_name));
  return it == by_name_.end() ? nullptr : it->second;
}

const sdk::NodeInfo* Snapshot::GetById(uint32_t id) const {
  // Called for every node id a plugin answers with: a hash lookup, not the btree.
  auto it = by_id_index_.find(id);
  return it == by_id_index_.end() ? nullptr : it->second;
}

std::vector<const v1::PodDisruptionBudget*> Snapshot::PodDisruptionBudgets(
    std::string_view namespace_) const {
  auto it = pdbs_by_namespace_.find(AV(namespace_));
  return it == pdbs_by_namespace_.end() ? std::vector<const v1::PodDisruptionBudget*>{}
                                        : it->second;
}

const v1::PodGroup* Snapshot::GetPodGroup(std::string_view namespace_,
                                          std::string_view name) const {
  auto it = pod_groups_by_name_.find(absl::StrCat(AV(namespace_), "/", AV(name)));
  return it == pod_groups_by_name_.end() ? nullptr : it->second;
}

const v1::Namespace* Snapshot::GetNamespace(std::string_view name) const {
  auto it = namespaces_by_name_.find(AV(name));
  return it == namespaces_by_name_.end() ? nullptr : it->second;
}

std::vector<const v1::Namespace*> Snapshot::Namespaces() const {
  std::vector<const v1::Namespace*> out;
  out.reserve(namespaces_.size());
  for (const auto& ns : namespaces_) out.push_back(ns.get());
  return out;
}

void Snapshot::RebuildIndex() {
  nodes_.clear();
  nodes_.reserve(by_id_.size());
  by_name_.clear();
  by_name_.reserve(by_id_.size());
  by_id_index_.clear();
  by_id_index_.reserve(by_id_.size());
  for (const auto& [id, info] : by_id_) {
    nodes_.push_back(info.get());
    by_name_[info->name()] = info.get();
    by_id_index_[id] = info.get();
  }
}

// ---- Cache ----

Cache::Cache(Options options) : options_(options), log_(options.max_delta_log_entries) {}

Cache::~Cache() = default;

Cache::NodeItem* Cache::GetOrCreateItem(const std::string& name) {
  auto& slot = nodes_[name];
  if (slot == nullptr) {
    slot = std::make_unique<NodeItem>();
    slot->name = name;
  }
  return slot.get();
}

void Cache::Touch(NodeItem* item) {
  item->generation = ++generation_;
  item->change_generation = item->generation;
  if (head_ == item) return;
  Unlink(item);
  item->next = head_;
  if (head_ != nullptr) head_->prev = item;
  head_ = item;
  item->linked = true;
}

void Cache::Unlink(NodeItem* item) {
  if (!item->linked) return;
  if (item->prev != nullptr) item->prev->next = item->next;
  if (item->next != nullptr) item->next->prev = item->prev;
  if (head_ == item) head_ = item->next;
  item->prev = item->next = nullptr;
  item->linked = false;
}

void Cache::DeleteItemIfEmptyGhost(NodeItem* item) {
  if (item->id != 0 || !item->pod_uids.empty()) return;
  Unlink(item);
  nodes_.erase(item->name);  // Destroys item.
}

Cache::MirrorPod Cache::Visible(const PodEntry& entry) const {
  auto it = nodes_.find(entry.node_name);
  if (it == nodes_.end() || it->second->id == 0) return {};
  return MirrorPod{entry.info->pod, it->second->id, entry.assumed};
}

void Cache::AttachPod(const std::string& uid, PodEntry entry) {
  NodeItem* item = GetOrCreateItem(entry.node_name);
  item->pod_uids.insert(uid);
  if (item->info.has_value()) item->info->AddPod(entry.info);
  Touch(item);
  if (entry.assumed) {
    ++num_assumed_;
    assumed_uids_.insert(uid);
  }
  pods_[uid] = std::move(entry);
}

void Cache::DetachPod(const std::string& uid) {
  auto it = pods_.find(uid);
  if (it == pods_.end()) return;
  auto node_it = nodes_.find(it->second.node_name);
  if (node_it != nodes_.end()) {
    NodeItem* item = node_it->second.get();
    item->pod_uids.erase(uid);
    if (item->info.has_value()) item->info->RemovePod(uid);
    Touch(item);
    DeleteItemIfEmptyGhost(item);
  }
  if (it->second.assumed) {
    --num_assumed_;
    assumed_uids_.erase(uid);
  }
  pods_.erase(it);
}

void Cache::Append(DeltaEntry entry) {
  if (entry.kind == DeltaEntry::Kind::kPdb || entry.kind == DeltaEntry::Kind::kPodGroup ||
      entry.kind == DeltaEntry::Kind::kNamespace) {
    ++objects_generation_;
  }
  log_.Append(std::move(entry));
}

void Cache::SetMirrorPosition(const void* mirror, std::optional<uint64_t> position) {
  absl::MutexLock lock(&mu_);
  log_.SetMirrorPosition(mirror, position);
}

void Cache::LogNode(uint32_t id, std::shared_ptr<const v1::Node> before,
                    std::shared_ptr<const v1::Node> after) {
  DeltaEntry entry;
  entry.kind = DeltaEntry::Kind::kNode;
  entry.node_id = id;
  entry.node_before = std::move(before);
  entry.node_after = std::move(after);
  Append(std::move(entry));
}

void Cache::LogPod(const std::string& uid, MirrorPod before, MirrorPod after) {
  if (before.pod == nullptr && after.pod == nullptr) return;  // Invisible both times.
  DeltaEntry entry;
  entry.kind = DeltaEntry::Kind::kPod;
  entry.uid = uid;
  entry.pod_before = std::move(before);
  entry.pod_after = std::move(after);
  Append(std::move(entry));
}

void Cache::LogObject(DeltaEntry::Kind kind, const std::string& uid,
                      std::shared_ptr<const google::protobuf::Message> before,
                      std::shared_ptr<const google::protobuf::Message> after) {
  DeltaEntry entry;
  entry.kind = kind;
  entry.uid = uid;
  entry.obj_before = std::move(before);
  entry.obj_after = std::move(after);
  Append(std::move(entry));
}

absl::Status Cache::AddOrUpdatePdb(v1::PodDisruptionBudget pdb) {
  if (pdb.meta().uid().empty()) return absl::InvalidArgumentError("PodDisruptionBudget has no meta.uid");
  auto ptr = std::make_shared<const v1::PodDisruptionBudget>(std::move(pdb));
  const std::string uid = ptr->meta().uid();
  absl::MutexLock lock(&mu_);
  auto& slot = pdbs_[uid];
  std::shared_ptr<const v1::PodDisruptionBudget> before = std::move(slot);
  slot = ptr;
  LogObject(DeltaEntry::Kind::kPdb, uid, std::move(before), std::move(ptr));
  return absl::OkStatus();
}

absl::Status Cache::RemovePdb(std::string_view uid_view) {
  std::string uid(uid_view);
  absl::MutexLock lock(&mu_);
  auto it = pdbs_.find(uid);
  if (it == pdbs_.end()) return absl::NotFoundError(absl::StrCat("PodDisruptionBudget ", uid, " is not in the cache"));
  LogObject(DeltaEntry::Kind::kPdb, uid, std::move(it->second), nullptr);
  pdbs_.erase(it);
  return absl::OkStatus();
}

void Cache::SetNomination(const std::string& uid, std::shared_ptr<const v1::Pod> pod) {
  absl::MutexLock lock(&mu_);
  std::shared_ptr<const v1::Pod> before;
  if (auto it = nominations_.find(uid); it != nominations_.end()) {
    before = std::move(it->second);
    if (pod == nullptr) nominations_.erase(it);
  }
  if (pod == nullptr && before == nullptr) return;
  if (pod != nullptr) nominations_[uid] = pod;
  LogObject(DeltaEntry::Kind::kNomination, uid, std::move(before), std::move(pod));
}

void Cache::AddNominations(v1::StateDelta* out) const {
  absl::ReaderMutexLock lock(&mu_);
  for (const auto& [uid, pod] : nominations_) *out->add_nominated_pod_upserts() = *pod;
}

std::vector<std::shared_ptr<const v1::PodDisruptionBudget>> Cache::ListPdbs() const {
  absl::ReaderMutexLock lock(&mu_);
  std::vector<std::shared_ptr<const v1::PodDisruptionBudget>> out;
  out.reserve(pdbs_.size());
  for (const auto& [uid, pdb] : pdbs_) out.push_back(pdb);
  return out;
}

absl::Status Cache::AddOrUpdatePodGroup(v1::PodGroup group) {
  if (group.meta().uid().empty()) return absl::InvalidArgumentError("PodGroup has no meta.uid");
  auto ptr = std::make_shared<const v1::PodGroup>(std::move(group));
  const std::string uid = ptr->meta().uid();
  absl::MutexLock lock(&mu_);
  auto& slot = pod_groups_[uid];
  std::shared_ptr<const v1::PodGroup> before = std::move(slot);
  slot = ptr;
  LogObject(DeltaEntry::Kind::kPodGroup, uid, std::move(before), std::move(ptr));
  return absl::OkStatus();
}

absl::Status Cache::RemovePodGroup(std::string_view uid_view) {
  std::string uid(uid_view);
  absl::MutexLock lock(&mu_);
  auto it = pod_groups_.find(uid);
  if (it == pod_groups_.end()) return absl::NotFoundError(absl::StrCat("PodGroup ", uid, " is not in the cache"));
  LogObject(DeltaEntry::Kind::kPodGroup, uid, std::move(it->second), nullptr);
  pod_groups_.erase(it);
  return absl::OkStatus();
}

std::shared_ptr<const v1::PodGroup> Cache::GetPodGroup(std::string_view namespace_,
                                                       std::string_view name) const {
  absl::ReaderMutexLock lock(&mu_);
  for (const auto& [uid, group] : pod_groups_) {
    if (group->meta().namespace_() == namespace_ && group->meta().name() == name) return group;
  }
  return nullptr;
}

absl::Status Cache::AddOrUpdateNamespace(v1::Namespace ns) {
  if (ns.meta().name().empty()) return absl::InvalidArgumentError("Namespace has no meta.name");
  auto ptr = std::make_shared<const v1::Namespace>(std::move(ns));
  const std::string name = ptr->meta().name();
  absl::MutexLock lock(&mu_);
  auto& slot = namespaces_[name];
  std::shared_ptr<const v1::Namespace> before = std::move(slot);
  slot = ptr;
  LogObject(DeltaEntry::Kind::kNamespace, name, std::move(before), std::move(ptr));
  return absl::OkStatus();
}

absl::Status Cache::RemoveNamespace(std::string_view name_view) {
  std::string name(name_view);
  absl::MutexLock lock(&mu_);
  auto it = namespaces_.find(name);
  if (it == namespaces_.end()) {
    return absl::NotFoundError(absl::StrCat("Namespace ", name, " is not in the cache"));
  }
  LogObject(DeltaEntry::Kind::kNamespace, name, std::move(it->second), nullptr);
  namespaces_.erase(it);
  return absl::OkStatus();
}

std::shared_ptr<const v1::Namespace> Cache::GetNamespace(std::string_view name) const {
  absl::ReaderMutexLock lock(&mu_);
  auto it = namespaces_.find(std::string(name));
  return it == namespaces_.end() ? nullptr : it->second;
}

uint32_t Cache::AddOrUpdateNode(v1::Node node) {
  if (node.meta().name().empty()) return 0;
  absl::MutexLock lock(&mu_);
  auto ptr = std::make_shared<const v1::Node>(std::move(node));
  NodeItem* item = GetOrCreateItem(ptr->meta().name());
  if (item->id != 0) {
    std::shared_ptr<const v1::Node> before = std::move(item->node);
    item->node = ptr;
    item->info->SetNode(ptr);
    Touch(item);
    LogNode(item->id, std::move(before), ptr);
    return item->id;
  }
  // A new node, or the node of a ghost: pods already counted become visible.
  item->id = next_node_id_++;
  item->node = ptr;
  item->info.emplace(item->id, ptr);
  for (const std::string& uid : item->pod_uids) item->info->AddPod(pods_.at(uid).info);
  nodes_by_id_[item->id] = item;
  Touch(item);
  LogNode(item->id, nullptr, ptr);
  for (const std::string& uid : item->pod_uids) LogPod(uid, {}, Visible(pods_.at(uid)));
  return item->id;
}

absl::Status Cache::RemoveNode(std::string_view name) {
  absl::MutexLock lock(&mu_);
  auto it = nodes_.find(AV(name));
  if (it == nodes_.end() || it->second->id == 0) {
    return absl::NotFoundError(absl::StrCat("node \"", AV(name), "\" is not in the cache"));
  }
  NodeItem* item = it->second.get();
  // The pods stay counted on a ghost; mirrors see them go with the node.
  for (const std::string& uid : item->pod_uids) LogPod(uid, Visible(pods_.at(uid)), {});
  LogNode(item->id, item->node, nullptr);
  nodes_by_id_.erase(item->id);
  item->id = 0;
  item->node = nullptr;
  item->info.reset();
  Touch(item);
  last_removal_generation_ = generation_;
  DeleteItemIfEmptyGhost(item);
  return absl::OkStatus();
}

absl::Status Cache::AddOrUpdatePod(v1::Pod pod) {
  if (pod.meta().uid().empty()) return absl::InvalidArgumentError("pod has no meta.uid");
  return AddOrUpdatePod(sdk::PodInfo::Create(std::move(pod)));
}

absl::Status Cache::AddOrUpdatePod(sdk::PodInfoPtr pod) {
  if (pod == nullptr || pod->pod == nullptr) return absl::InvalidArgumentError("null pod");
  const std::string& uid = pod->uid();
  const v1::Pod& p = *pod->pod;
  if (uid.empty()) return absl::InvalidArgumentError("pod has no meta.uid");
  if (p.node_name().empty()) {
    return absl::InvalidArgumentError(absl::StrCat("pod ", p.meta().namespace_(), "/",
                                                   p.meta().name(), " has no node_name"));
  }
  // The comparison with the assumed pod copies and serializes both: made
  // before the writer lock (the scheduling thread's IsAssumed and AssumePod
  // wait for it), and again under it only if the entry changed meanwhile.
  sdk::PodInfoPtr previous;
  bool same_as_assumed = false;
  {
    absl::ReaderMutexLock lock(&mu_);
    if (auto it = pods_.find(uid); it != pods_.end() && it->second.assumed && it->second.node_name == p.node_name()) {
      previous = it->second.info;
    }
  }
  if (previous != nullptr) same_as_assumed = SameButBinding(*previous->pod, p);
  sdk::PodInfoPtr replaced;  // Freed after the lock is released, not under it.
  absl::MutexLock lock(&mu_);
  MirrorPod before;
  // A confirmation that changes nothing a plugin sees keeps the node's
  // change generation (batching's what-if verdicts stay good).
  std::optional<uint64_t> keep_change_generation;
  if (auto it = pods_.find(uid); it != pods_.end()) {
    before = Visible(it->second);
    if (it->second.assumed && it->second.node_name == p.node_name() &&
        (it->second.info == previous ? same_as_assumed : SameButBinding(*it->second.info->pod, p))) {
      if (auto node = nodes_.find(it->second.node_name); node != nodes_.end()) {
        keep_change_generation = node->second->change_generation;
      }
    }
    replaced = it->second.info;
    DetachPod(uid);
  }
  std::string node_name = p.node_name();
  AttachPod(uid, PodEntry{std::move(pod), std::move(node_name), false});
  if (keep_change_generation) nodes_.at(p.node_name())->change_generation = *keep_change_generation;
  LogPod(uid, std::move(before), Visible(pods_.at(uid)));
  return absl::OkStatus();
}

absl::Status Cache::RemovePod(std::string_view uid_view) {
  std::string uid(uid_view);
  absl::MutexLock lock(&mu_);
  auto it = pods_.find(uid);
  if (it == pods_.end()) {
    return absl::NotFoundError(absl::StrCat("pod ", uid, " is not in the cache"));
  }
  MirrorPod before = Visible(it->second);
  DetachPod(uid);
  LogPod(uid, std::move(before), {});
  return absl::OkStatus();
}

absl::Status Cache::AssumePod(const sdk::PodInfoPtr& pod, std::string_view node_name,
                             AssumedAt* at) {
  if (pod == nullptr || pod->pod == nullptr) return absl::InvalidArgumentError("null pod");
  const std::string& uid = pod->uid();
  // The copies are made before the lock (the event thread waits for it).
  auto assumed_pod = std::make_shared<v1::Pod>(*pod->pod);
  assumed_pod->set_node_name(std::string(node_name));
  auto info = std::make_shared<sdk::PodInfo>(*pod);
  info->pod = std::move(assumed_pod);
  absl::MutexLock lock(&mu_);
  if (pods_.contains(uid)) {
    return absl::AlreadyExistsError(absl::StrCat("pod ", uid, " is already in the cache"));
  }
  auto node_it = nodes_.find(AV(node_name));
  if (node_it == nodes_.end() || node_it->second->id == 0) {
    return absl::NotFoundError(absl::StrCat("node \"", AV(node_name), "\" is not in the cache"));
  }
  NodeItem* item = node_it->second.get();
  const uint64_t change_before = item->change_generation;
  AttachPod(uid, PodEntry{std::move(info), std::string(node_name), true});
  if (at != nullptr) *at = AssumedAt{item->id, change_before, item->change_generation};
  LogPod(uid, {}, Visible(pods_.at(uid)));
  return absl::OkStatus();
}

absl::Status Cache::ForgetPod(std::string_view uid_view) {
  std::string uid(uid_view);
  absl::MutexLock lock(&mu_);
  auto it = pods_.find(uid);
  if (it == pods_.end()) {
    return absl::NotFoundError(absl::StrCat("pod ", uid, " is not in the cache"));
  }
  if (!it->second.assumed) {
    return absl::FailedPreconditionError(
        absl::StrCat("pod ", uid, " is bound, not assumed; only assumed pods can be forgotten"));
  }
  MirrorPod before = Visible(it->second);
  DetachPod(uid);
  LogPod(uid, std::move(before), {});
  return absl::OkStatus();
}

bool Cache::IsAssumed(std::string_view uid) const {
  absl::ReaderMutexLock lock(&mu_);
  auto it = pods_.find(AV(uid));
  return it != pods_.end() && it->second.assumed;
}

sdk::PodInfoPtr Cache::GetPod(std::string_view uid) const {
  absl::ReaderMutexLock lock(&mu_);
  auto it = pods_.find(AV(uid));
  return it == pods_.end() ? nullptr : it->second.info;
}

std::optional<uint32_t> Cache::NodeId(std::string_view node_name) const {
  absl::ReaderMutexLock lock(&mu_);
  auto it = nodes_.find(AV(node_name));
  if (it == nodes_.end() || it->second->id == 0) return std::nullopt;
  return it->second->id;
}

size_t Cache::NumNodes() const {
  absl::ReaderMutexLock lock(&mu_);
  return nodes_by_id_.size();
}

size_t Cache::NumPods() const {
  absl::ReaderMutexLock lock(&mu_);
  return pods_.size();
}

size_t Cache::NumAssumedPods() const {
  absl::ReaderMutexLock lock(&mu_);
  return num_assumed_;
}

absl::flat_hash_set<std::string> Cache::AssumedUids() const {
  absl::ReaderMutexLock lock(&mu_);
  return assumed_uids_;
}

Cache::Dumped Cache::Dump(bool include_pods) const {
  absl::ReaderMutexLock lock(&mu_);
  Dumped out;
  out.generation = generation_;
  out.assumed_pods = num_assumed_;
  // Present nodes in id order, then ghosts by name.
  std::vector<const NodeItem*> items;
  items.reserve(nodes_.size());
  for (const auto& [name, item] : nodes_) items.push_back(item.get());
  std::sort(items.begin(), items.end(), [](const NodeItem* a, const NodeItem* b) {
    if ((a->id == 0) != (b->id == 0)) return a->id != 0;
    if (a->id != b->id) return a->id < b->id;
    return a->name < b->name;
  });
  out.nodes.reserve(items.size());
  for (const NodeItem* item : items) {
    NodeDump& node = out.nodes.emplace_back();
    node.name = item->name;
    node.generation = item->generation;
    if (item->info.has_value()) {
      node.allocatable = item->info->allocatable();
      node.requested = item->info->requested();
    } else {
      for (const std::string& uid : item->pod_uids) node.requested.Add(pods_.at(uid).info->requests);
    }
    if (!include_pods) continue;
    std::vector<const PodEntry*> pods;
    for (const std::string& uid : item->pod_uids) pods.push_back(&pods_.at(uid));
    std::sort(pods.begin(), pods.end(), [](const PodEntry* a, const PodEntry* b) {
      const auto& ma = a->info->pod->meta();
      const auto& mb = b->info->pod->meta();
      return std::tie(ma.namespace_(), ma.name(), ma.uid()) <
             std::tie(mb.namespace_(), mb.name(), mb.uid());
    });
    for (const PodEntry* pod : pods) (pod->assumed ? node.assumed_pods : node.pods).push_back(pod->info);
  }
  return out;
}

void Cache::UpdateSnapshot(Snapshot& snapshot) const {
  absl::ReaderMutexLock lock(&mu_);
  bool membership_changed = false;
  size_t copied = 0;
  snapshot.last_update_changed_.clear();
  for (const NodeItem* item = head_; item != nullptr && item->generation > snapshot.generation_;
       item = item->next) {
    if (item->id == 0) continue;  // A ghost: its removal from the snapshot is handled below.
    auto it = snapshot.by_id_.find(item->id);
    if (it == snapshot.by_id_.end()) {
      snapshot.by_id_.emplace(item->id, std::make_unique<sdk::NodeInfo>(*item->info));
      membership_changed = true;
    } else {
      *it->second = *item->info;  // In place: pointers into the snapshot stay valid.
    }
    snapshot.last_update_changed_.push_back(item->id);
    snapshot.change_generations_[item->id] = item->change_generation;
    ++copied;
  }
  if (last_removal_generation_ > snapshot.generation_) {
    for (auto it = snapshot.by_id_.begin(); it != snapshot.by_id_.end();) {
      if (nodes_by_id_.contains(it->first)) {
        ++it;
      } else {
        snapshot.change_generations_.erase(it->first);
        it = snapshot.by_id_.erase(it);
        membership_changed = true;
      }
    }
  }
  if (membership_changed) {
    snapshot.RebuildIndex();
    ++snapshot.membership_generation_;
  }
  snapshot.generation_ = generation_;
  if (snapshot.objects_generation_ != objects_generation_ || snapshot.generation_ == 0) {
    snapshot.pdbs_.clear();
    snapshot.pdbs_by_namespace_.clear();
    for (const auto& [uid, pdb] : pdbs_) {
      snapshot.pdbs_.push_back(pdb);
      snapshot.pdbs_by_namespace_[pdb->meta().namespace_()].push_back(pdb.get());
    }
    snapshot.pod_groups_.clear();
    snapshot.pod_groups_by_name_.clear();
    for (const auto& [uid, group] : pod_groups_) {
      snapshot.pod_groups_.push_back(group);
      snapshot.pod_groups_by_name_[absl::StrCat(group->meta().namespace_(), "/",
                                                group->meta().name())] = group.get();
    }
    snapshot.namespaces_.clear();
    snapshot.namespaces_by_name_.clear();
    for (const auto& [name, ns] : namespaces_) {
      snapshot.namespaces_.push_back(ns);
      snapshot.namespaces_by_name_[name] = ns.get();
    }
    snapshot.objects_generation_ = objects_generation_;
  }
  snapshot.delta_seq_ = log_.seq();
  snapshot.last_update_copied_ = copied;
}

uint64_t Cache::delta_seq() const {
  absl::ReaderMutexLock lock(&mu_);
  return log_.seq();
}

size_t Cache::delta_log_size() const {
  absl::ReaderMutexLock lock(&mu_);
  return log_.size();
}

void Cache::TrimDeltaLog(uint64_t min_seq_still_needed) {
  absl::MutexLock lock(&mu_);
  log_.Trim(min_seq_still_needed);
}

uint64_t Cache::FullState(v1::StateDelta* out) const {
  absl::ReaderMutexLock lock(&mu_);
  FullStateAt(log_.seq(), out);
  return log_.seq();
}

void Cache::FullStateAt(uint64_t seq, v1::StateDelta* out) const {
  out->Clear();
  out->set_reset(true);
  out->set_generation(seq);
  // Objects changed after `seq` are rolled back to their state before the
  // first such change.
  absl::flat_hash_map<uint32_t, std::shared_ptr<const v1::Node>> node_undo;
  absl::flat_hash_map<std::string, MirrorPod> pod_undo;
  absl::flat_hash_map<std::string, std::shared_ptr<const google::protobuf::Message>> pdb_undo,
      group_undo, namespace_undo;
  log_.ForEachAfter(seq, [&](const DeltaEntry& e) {
    switch (e.kind) {
      case DeltaEntry::Kind::kNode:
        node_undo.try_emplace(e.node_id, e.node_before);
        break;
      case DeltaEntry::Kind::kPod:
        pod_undo.try_emplace(e.uid, e.pod_before);
        break;
      case DeltaEntry::Kind::kPdb:
        pdb_undo.try_emplace(e.uid, e.obj_before);
        break;
      case DeltaEntry::Kind::kPodGroup:
        group_undo.try_emplace(e.uid, e.obj_before);
        break;
      case DeltaEntry::Kind::kNamespace:
        namespace_undo.try_emplace(e.uid, e.obj_before);
        break;
      case DeltaEntry::Kind::kNomination:
        break;  // Sent as they are now (DeltaLog::Coalesce).
    }
  });
  absl::btree_map<uint32_t, std::shared_ptr<const v1::Node>> nodes;
  for (const auto& [id, item] : nodes_by_id_) {
    if (!node_undo.contains(id)) nodes.emplace(id, item->node);
  }
  for (const auto& [id, node] : node_undo) {
    if (node != nullptr) nodes.emplace(id, node);
  }
  for (const auto& [id, node] : nodes) {
    v1::MirroredNode* m = out->add_node_upserts();
    m->set_id(id);
    *m->mutable_node() = *node;
  }
  for (const auto& [uid, entry] : pods_) {
    if (pod_undo.contains(uid)) continue;
    MirrorPod visible = Visible(entry);
    if (visible.pod != nullptr) {
      FillMirroredPod(visible, out->add_pod_upserts());
    }
  }
  for (const auto& [uid, pod] : pod_undo) {
    if (pod.pod != nullptr) FillMirroredPod(pod, out->add_pod_upserts());
  }
  for (const auto& [uid, pdb] : pdbs_) {
    if (!pdb_undo.contains(uid)) *out->add_pdb_upserts() = *pdb;
  }
  for (const auto& [uid, pdb] : pdb_undo) {
    if (pdb != nullptr) {
      *out->add_pdb_upserts() = static_cast<const v1::PodDisruptionBudget&>(*pdb);
    }
  }
  for (const auto& [uid, group] : pod_groups_) {
    if (!group_undo.contains(uid)) *out->add_pod_group_upserts() = *group;
  }
  for (const auto& [uid, group] : group_undo) {
    if (group != nullptr) *out->add_pod_group_upserts() = static_cast<const v1::PodGroup&>(*group);
  }
  for (const auto& [name, ns] : namespaces_) {
    if (!namespace_undo.contains(name)) *out->add_namespace_upserts() = *ns;
  }
  for (const auto& [name, ns] : namespace_undo) {
    if (ns != nullptr) *out->add_namespace_upserts() = static_cast<const v1::Namespace&>(*ns);
  }
  for (const auto& [uid, pod] : nominations_) *out->add_nominated_pod_upserts() = *pod;
}

uint64_t Cache::ReadDelta(uint64_t from_seq, uint64_t to_seq, v1::StateDelta* out) const {
  absl::ReaderMutexLock lock(&mu_);
  to_seq = std::min(to_seq, log_.seq());
  if (from_seq < log_.trimmed_through()) {
    // The reader is behind what the log keeps: send everything.
    if (to_seq < log_.trimmed_through()) to_seq = log_.seq();
    FullStateAt(to_seq, out);
    return to_seq;
  }
  out->Clear();
  out->set_generation(to_seq);
  log_.Coalesce(from_seq, to_seq, out);
  return to_seq;
}

}  // namespace podium::scheduler
