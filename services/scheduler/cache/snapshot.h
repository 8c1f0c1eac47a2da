// The scheduler's view of the cluster for one scheduling cycle: a clone of the
// cache's NodeInfos, refreshed incrementally by Cache::UpdateSnapshot.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/btree_map.h"
#include "absl/container/flat_hash_map.h"
#include "podium/sdk/framework.h"

namespace podium::scheduler {

// Not thread-safe: owned by the scheduling thread, written only by
// Cache::UpdateSnapshot between cycles.
class Snapshot final : public sdk::Snapshot {
 public:
  Snapshot() = default;
  Snapshot(const Snapshot&) = delete;
  Snapshot& operator=(const Snapshot&) = delete;

  // Every node, in ascending id order: the index a node has here is the index
  // it has in a plugin's mirror at delta_seq().
  const std::vector<const sdk::NodeInfo*>& Nodes() const override { return nodes_; }
  const sdk::NodeInfo* Get(std::string_view node_name) const override;
  const sdk::NodeInfo* GetById(uint32_t id) const override;
  size_t NumNodes() const override { return nodes_.size(); }
  std::vector<const v1::PodDisruptionBudget*> PodDisruptionBudgets(
      std::string_view namespace_) const override;
  const v1::PodGroup* GetPodGroup(std::string_view namespace_,
                                  std::string_view name) const override;
  const v1::Namespace* GetNamespace(std::string_view name) const override;
  std::vector<const v1::Namespace*> Namespaces() const override;
  // Every PodDisruptionBudget, PodGroup and Namespace (what a reset delta carries).
  const std::vector<std::shared_ptr<const v1::PodDisruptionBudget>>& pdbs() const { return pdbs_; }
  const std::vector<std::shared_ptr<const v1::PodGroup>>& pod_groups() const { return pod_groups_; }
  const std::vector<std::shared_ptr<const v1::Namespace>>& namespaces() const { return namespaces_; }

  // The cache generation this snapshot reflects (0 = never updated).
  uint64_t generation() const { return generation_; }
  // The cache's delta-log position this snapshot corresponds to: send plugin
  // mirrors deltas up to this sequence number before a cycle that uses it.
  uint64_t delta_seq() const { return delta_seq_; }
  // How many NodeInfos the last UpdateSnapshot copied (observability/tests).
  size_t last_update_copied() const { return last_update_copied_; }
  // The ids of the nodes the last UpdateSnapshot copied (added or changed),
  // and a counter bumped whenever nodes were added or removed: what reused
  // scheduling results (batching/) must look at again.
  const std::vector<uint32_t>& last_update_changed() const { return last_update_changed_; }
  uint64_t membership_generation() const { return membership_generation_; }
  // The cache generation of the node's last change that was more than the
  // confirmation of an assumed pod (Cache::AddOrUpdatePod): equal values
  // mean the node is, to any plugin, as it was (0 for an unknown id).
  uint64_t NodeChangeGeneration(uint32_t id) const {
    auto it = change_generations_.find(id);
    return it == change_generations_.end() ? 0 : it->second;
  }
  // Bumped when PDBs or pod groups changed.
  uint64_t objects_generation() const { return objects_generation_; }

 private:
  friend class Cache;

  void RebuildIndex();

  absl::btree_map<uint32_t, std::unique_ptr<sdk::NodeInfo>> by_id_;
  absl::flat_hash_map<std::string, const sdk::NodeInfo*> by_name_;
  absl::flat_hash_map<uint32_t, const sdk::NodeInfo*> by_id_index_;
  std::vector<const sdk::NodeInfo*> nodes_;
  std::vector<std::shared_ptr<const v1::PodDisruptionBudget>> pdbs_;
  absl::flat_hash_map<std::string, std::vector<const v1::PodDisruptionBudget*>> pdbs_by_namespace_;
  std::vector<std::shared_ptr<const v1::PodGroup>> pod_groups_;
  absl::flat_hash_map<std::string, const v1::PodGroup*> pod_groups_by_name_;  // namespace/name
  std::vector<std::shared_ptr<const v1::Namespace>> namespaces_;
  absl::flat_hash_map<std::string, const v1::Namespace*> namespaces_by_name_;
  uint64_t objects_generation_ = 0;  // Of pdbs_, pod_groups_ and namespaces_.
  uint64_t generation_ = 0;
  uint64_t delta_seq_ = 0;
  size_t last_update_copied_ = 0;
  std::vector<uint32_t> last_update_changed_;
  absl::flat_hash_map<uint32_t, uint64_t> change_generations_;
  uint64_t membership_generation_ = 0;
};

}  // namespace podium::scheduler
