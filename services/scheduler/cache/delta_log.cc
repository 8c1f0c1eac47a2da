#include "cache/delta_log.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/container/btree_map.h"

namespace podium::scheduler {

void FillMirroredPod(const DeltaLog::MirrorPod& pod, v1::MirroredPod* out) {
  out->set_node_id(pod.node_id);
  *out->mutable_pod() = *pod.pod;
  out->set_assumed(pod.assumed);
}

void DeltaLog::Append(Entry entry) {
  entry.seq = ++seq_;
  entries_.push_back(std::move(entry));
  TrimToMirrors();
  if (entries_.size() > max_entries_) Trim(seq_ - max_entries_);
}

void DeltaLog::SetMirrorPosition(const void* mirror, std::optional<uint64_t> position) {
  if (position.has_value()) {
    mirrors_[mirror] = *position;
  } else {
    mirrors_.erase(mirror);
  }
  TrimToMirrors();
}

void DeltaLog::TrimToMirrors() {
  uint64_t needed = seq_;
  for (const auto& [mirror, position] : mirrors_) needed = std::min(needed, position);
  Trim(needed);
}

void DeltaLog::Trim(uint64_t min_seq_still_needed) {
  min_seq_still_needed = std::min(min_seq_still_needed, seq_);
  if (min_seq_still_needed <= trimmed_through_) return;
  const size_t drop = std::min<uint64_t>(min_seq_still_needed - trimmed_through_, entries_.size());
  entries_.erase(entries_.begin(), entries_.begin() + static_cast<std::ptrdiff_t>(drop));
  trimmed_through_ = min_seq_still_needed;
}

void DeltaLog::Coalesce(uint64_t from_seq, uint64_t to_seq, v1::StateDelta* out) const {
  if (from_seq >= to_seq) return;
  // Net effect per object: its state before the first entry and after the last.
  absl::btree_map<uint32_t, std::pair<std::shared_ptr<const v1::Node>,
                                      std::shared_ptr<const v1::Node>>> nodes;
  std::vector<std::string> pod_order;
  absl::flat_hash_map<std::string, std::pair<MirrorPod, MirrorPod>> pods;
  using ObjPtr = std::shared_ptr<const google::protobuf::Message>;
  // uid -> (before, after), in order of first appearance.
  struct ObjectChanges {
    std::vector<std::string> order;
    absl::flat_hash_map<std::string, std::pair<ObjPtr, ObjPtr>> changes;
    void Add(const Entry& e) {
      auto [it, inserted] = changes.try_emplace(e.uid, e.obj_before, e.obj_after);
      if (inserted) {
        order.push_back(e.uid);
      } else {
        it->second.second = e.obj_after;
      }
    }
  } pdbs, groups, namespaces, nominations;
  for (uint64_t s = from_seq + 1; s <= to_seq; ++s) {
    const Entry& e = entries_[s - trimmed_through_ - 1];
    switch (e.kind) {
      case Entry::Kind::kNode: {
        auto [it, inserted] = nodes.try_emplace(e.node_id, e.node_before, e.node_after);
        if (!inserted) it->second.second = e.node_after;
        break;
      }
      case Entry::Kind::kPod: {
        auto [it, inserted] = pods.try_emplace(e.uid, e.pod_before, e.pod_after);
        if (inserted) {
          pod_order.push_back(e.uid);
        } else {
          it->second.second = e.pod_after;
        }
        break;
      }
      case Entry::Kind::kPdb:
        pdbs.Add(e);
        break;
      case Entry::Kind::kPodGroup:
        groups.Add(e);
        break;
      case Entry::Kind::kNamespace:
        namespaces.Add(e);
        break;
      case Entry::Kind::kNomination:
        nominations.Add(e);
        break;
    }
  }
  for (const std::string& uid : nominations.order) {
    const ObjPtr& after = nominations.changes.at(uid).second;
    if (after == nullptr) {
      out->add_nominated_pod_removals(uid);
    } else {
      *out->add_nominated_pod_upserts() = static_cast<const v1::Pod&>(*after);
    }
  }
  for (const std::string& uid : pdbs.order) {
    const auto& [before, after] = pdbs.changes.at(uid);
    if (after == nullptr) {
      if (before != nullptr) out->add_pdb_removals(uid);
    } else if (after != before) {
      *out->add_pdb_upserts() = static_cast<const v1::PodDisruptionBudget&>(*after);
    }
  }
  for (const std::string& uid : groups.order) {
    const auto& [before, after] = groups.changes.at(uid);
    if (after == nullptr) {
      if (before != nullptr) out->add_pod_group_removals(uid);
    } else if (after != before) {
      *out->add_pod_group_upserts() = static_cast<const v1::PodGroup&>(*after);
    }
  }
  for (const std::string& name : namespaces.order) {
    const auto& [before, after] = namespaces.changes.at(name);
    if (after == nullptr) {
      if (before != nullptr) out->add_namespace_removals(name);
    } else if (after != before) {
      *out->add_namespace_upserts() = static_cast<const v1::Namespace&>(*after);
    }
  }
  for (const auto& [id, change] : nodes) {
    const auto& [before, after] = change;
    if (after == nullptr) {
      if (before != nullptr) out->add_node_removals(id);
    } else if (after != before) {
      v1::MirroredNode* m = out->add_node_upserts();
      m->set_id(id);
      *m->mutable_node() = *after;
    }
  }
  for (const std::string& uid : pod_order) {
    const auto& [before, after] = pods.at(uid);
    if (after.pod == nullptr) {
      if (before.pod != nullptr) out->add_pod_removals(uid);
      continue;
    }
    if (before.pod == after.pod && before.node_id == after.node_id &&
        before.assumed == after.assumed) {
      continue;  // Back where it started.
    }
    // A pod that changed node is removed from the old one first.
    if (before.pod != nullptr && before.node_id != after.node_id) out->add_pod_removals(uid);
    FillMirroredPod(after, out->add_pod_upserts());
  }
}

}  // namespace podium::scheduler
