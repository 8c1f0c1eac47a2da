// The plugin process's copy of the cluster, kept from the scheduler's state
// deltas (plugin.proto StateDelta): nodes by scheduler-assigned id, their
// assigned pods, the image counts ImageLocality needs, PodDisruptionBudgets
// PodGroups and Namespaces (when the registration asked for them).
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "podium/sdk/framework.h"
#include "podium/v1/plugin.pb.h"

namespace podium::sdk::internal {

class Mirror final : public Snapshot {
 public:
  Mirror() = default;
  Mirror(const Mirror&) = delete;
  Mirror& operator=(const Mirror&) = delete;

  // Applies a delta: reset, node removals, node upserts, pod removals, pod
  // upserts. The delta is validated first; an invalid one is not applied and
  // the error names the field. Objects are moved out of `delta`.
  absl::Status Apply(v1::StateDelta& delta);

  const std::vector<const NodeInfo*>& Nodes() const override { return ordered_; }
  const NodeInfo* Get(std::string_view node_name) const override;
  const NodeInfo* GetById(uint32_t id) const override;
  size_t NumNodes() const override { return ordered_.size(); }
  std::vector<const v1::PodDisruptionBudget*> PodDisruptionBudgets(
      std::string_view namespace_) const override;
  const v1::PodGroup* GetPodGroup(std::string_view namespace_,
                                  std::string_view name) const override;
  const v1::Namespace* GetNamespace(std::string_view name) const override;
  std::vector<const v1::Namespace*> Namespaces() const override;
  size_t NumNamespaces() const { return namespaces_.size(); }
  size_t NumPodDisruptionBudgets() const { return pdbs_.size(); }
  size_t NumPodGroups() const { return pod_groups_.size(); }
  std::vector<const NodeInfo*> NodesHavingPodsWithAffinity() const override {
    return with_affinity_;
  }
  std::vector<const NodeInfo*> NodesHavingPodsWithRequiredAntiAffinity() const override {
    return with_required_anti_affinity_;
  }
  // Keeps the label index from now on (built from the pods mirrored so far).
  void EnableLabelIndex();
  bool ForEachPodWithLabel(std::string_view key, std::string_view value,
                           const PodVisitor& visit) const override;
  // Logs pod changes from now on (PodChangesSince), at most max_entries
  // (older ones are dropped: their readers rebuild). An entry keeps its pod
  // version alive (a bound pod's assumed version, a deleted pod), so the log
  // stays short: a reader that syncs every cycle needs a few entries.
  void EnablePodChangeLog(size_t max_entries = kMaxPodChanges);
  bool PodChangesSince(uint64_t* cursor, const PodChangeVisitor& visit) const override;
  static constexpr size_t kMaxPodChanges = 1024;

  bool ForEachAssignedPodInGroup(std::string_view namespace_, std::string_view group,
                                 const PodVisitor& visit) const override;

  // Nominated pods (StateDelta.nominated_pod_*) on a node, of every priority,
  // each with node_name set to the node; null when none.
  const std::vector<PodInfoPtr>* NominatedPodsOn(std::string_view node_name) const;
  // Calls visit(node name, its nominated pods) for every node with nominations.
  template <typename Visit>
  void ForEachNominatedNode(Visit&& visit) const {
    for (const auto& [node, pods] : nominated_by_node_) visit(node, pods);
  }
  size_t NumNominatedPods() const { return nominated_.size(); }

  uint64_t generation() const { return generation_; }
  size_t NumPods() const { return pod_nodes_.size(); }

 private:
  absl::Status Validate(const v1::StateDelta& delta) const;
  void Clear();
  void RemoveNode(uint32_t id);
  void UpsertNode(uint32_t id, std::shared_ptr<const v1::Node> node);
  void RemovePod(const std::string& uid);
  void IndexPodLabels(const PodInfoPtr& pod, const NodeInfo* node);
  void UnindexPodLabels(const PodInfo& pod);
  void IndexPodGroup(const PodInfoPtr& pod, const NodeInfo* node);
  void UnindexPodGroup(const PodInfo& pod);
  void RemovePodGroup(const std::string& uid);
  void RemoveNomination(const std::string& uid);
  void AddImageNames(NodeInfo& node);
  void ForgetImageName(const std::string& name, uint32_t node_id);
  void RememberImageName(const std::string& name, uint32_t node_id);

  struct ImageNodes {
    absl::flat_hash_set<uint32_t> node_ids;
  };

  uint64_t generation_ = 0;
  absl::flat_hash_map<uint32_t, std::unique_ptr<NodeInfo>> nodes_;
  absl::flat_hash_map<std::string, NodeInfo*> nodes_by_name_;
  std::vector<const NodeInfo*> ordered_;  // Ascending id.
  bool order_dirty_ = false;
  absl::flat_hash_map<std::string, uint32_t> pod_nodes_;  // Pod uid -> node id.
  // Image name -> the nodes that have it; ImageState.num_nodes is its size.
  absl::flat_hash_map<std::string, ImageNodes> images_;
  // Image names whose node count changed during the current Apply.
  absl::flat_hash_set<std::string> dirty_images_;
  // By uid, as the scheduler keys them.
  absl::flat_hash_map<std::string, std::unique_ptr<v1::PodDisruptionBudget>> pdbs_;
  absl::flat_hash_map<std::string, std::unique_ptr<v1::PodGroup>> pod_groups_;
  // namespace/name -> uid.
  absl::flat_hash_map<std::string, std::string> pod_group_uids_;
  // By name, as the scheduler keys them.
  absl::flat_hash_map<std::string, std::unique_ptr<v1::Namespace>> namespaces_;
  // Nominations: uid -> nominated node name, and the pods per node name.
  absl::flat_hash_map<std::string, std::string> nominated_;
  absl::flat_hash_map<std::string, std::vector<PodInfoPtr>> nominated_by_node_;
  // Nodes with pods that carry (anti-)affinity terms, rebuilt at the end of an
  // Apply that added or removed such a pod or a node (InterPodAffinity's
  // PreFilter/PreScore then look at these nodes only).
  void RebuildAffinityLists();
  bool affinity_dirty_ = false;
  std::vector<const NodeInfo*> with_affinity_;
  std::vector<const NodeInfo*> with_required_anti_affinity_;
  // An index of assigned pods: key -> the pods under it by uid (a view into
  // the pod the entry holds), with their node.
  struct LabelledPod {
    PodInfoPtr pod;
    const NodeInfo* node;
  };
  using PodIndex = absl::flat_hash_map<std::string, absl::flat_hash_map<std::string_view, LabelledPod>>;
  // Enters the pod under `key` (replacing an older version's entry), or takes
  // this pod's own entry out (a newer pod with the uid keeps its own).
  static void AddToIndex(PodIndex& index, std::string key, const PodInfoPtr& pod, const NodeInfo* node);
  static void RemoveFromIndex(PodIndex& index, const std::string& key, const PodInfo& pod);
  bool label_index_enabled_ = false;
  // "key=value" (neither may contain '=').
  PodIndex pods_by_label_;
  // "namespace/group": only pods that name a pod group pay for it.
  PodIndex pods_by_group_;
  // The pod change log: entry i has sequence number log_first_ + i; a
  // cursor below log_barrier_ (reset, node removed or relabelled) must
  // rebuild. Sequence numbers start at 1, so a cursor of 0 always rebuilds.
  struct LoggedChange {
    bool added;
    PodInfoPtr pod;
    const NodeInfo* node;
  };
  void LogPodChange(bool added, PodInfoPtr pod, const NodeInfo* node);
  void LogBarrier();
  bool log_enabled_ = false;
  size_t log_max_ = kMaxPodChanges;
  std::deque<LoggedChange> log_;
  uint64_t log_first_ = 1;
  uint64_t log_barrier_ = 1;
};

}  // namespace podium::sdk::internal
