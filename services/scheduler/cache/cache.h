// The cluster cache (kube-scheduler's internal/cache): nodes, the pods
// assigned to them (bound or assumed), a generational snapshot refreshed
// incrementally, and the delta log that keeps plugin mirrors in step.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "cache/delta_log.h"
#include "cache/snapshot.h"
#include "podium/sdk/framework.h"
#include "podium/v1/objects.pb.h"
#include "podium/v1/plugin.pb.h"

namespace podium::scheduler {

// Thread-safe: one internal lock, never held while calling out.
//
// Node ids: a node gets an id (from 1, increasing) when it is added; the id is
// never reused, so a node removed and added again under the same name gets a
// new id. Pods for a node the cache does not have (a "ghost" node, as kube
// keeps node infos without a node) are counted and become visible — in the
// snapshot and to plugin mirrors — when the node arrives; when a node is
// removed while pods remain on it, the node info stays as a ghost until its
// last pod goes.
//
// Delta log (delta_log.h): every change of the state a plugin mirror sees
// (nodes with ids, the pods on them, bound or assumed, PodDisruptionBudgets,
// PodGroups, nominations) is logged with a sequence number. ReadDelta coalesces a range of
// it to the net effect per object; the log keeps only what connected mirrors
// still need (SetMirrorPosition).
class Cache {
 public:
  struct Options {
    // The delta log never holds more entries than this, whatever the mirrors
    // need (a mirror that falls that far behind gets a reset).
    size_t max_delta_log_entries = 1 << 20;
  };

  Cache() : Cache(Options{}) {}
  explicit Cache(Options options);
  ~Cache();
  Cache(const Cache&) = delete;
  Cache& operator=(const Cache&) = delete;

  // Returns the node's id; 0 (and nothing changes) when the node has no name.
  uint32_t AddOrUpdateNode(v1::Node node);
  // NotFound when the cache has no such node.
  absl::Status RemoveNode(std::string_view name);

  // An assigned pod (node_name set) was added or updated. If the pod was
  // assumed, this confirms it (kube's "added after assume"), on the node the
  // pod names. InvalidArgument without node_name or uid. A confirmation on the
  // assumed node of a pod equal to the assumed one but for its
  // resourceVersion and conditions (the binding's own marks) leaves the
  // node's change generation where it was.
  absl::Status AddOrUpdatePod(v1::Pod pod);
  absl::Status AddOrUpdatePod(sdk::PodInfoPtr pod);
  // Removes a bound or assumed pod. NotFound when unknown.
  absl::Status RemovePod(std::string_view uid);

  // Reserves the pod on the node before binding. The cached pod is a copy with
  // node_name set. AlreadyExists if the pod is in the cache, NotFound if the
  // node is unknown. `at` (may be null) gets the node's change generations
  // around the assume (Snapshot::NodeChangeGeneration).
  struct AssumedAt {
    uint32_t node_id = 0;
    uint64_t change_generation_before = 0;
    uint64_t change_generation_after = 0;
  };
  absl::Status AssumePod(const sdk::PodInfoPtr& pod, std::string_view node_name,
                         AssumedAt* at = nullptr);
  // Drops an assumed pod (binding failed). FailedPrecondition if the pod is
  // cached but not assumed, NotFound if unknown.
  absl::Status ForgetPod(std::string_view uid);
  bool IsAssumed(std::string_view uid) const;

  // PodDisruptionBudgets and PodGroups, keyed by uid: kept for preemption and
  // gang scheduling in the scheduler, and mirrored to plugins like nodes/pods.
  // InvalidArgument without meta.uid.
  absl::Status AddOrUpdatePdb(v1::PodDisruptionBudget pdb);
  absl::Status RemovePdb(std::string_view uid);
  std::vector<std::shared_ptr<const v1::PodDisruptionBudget>> ListPdbs() const;
  absl::Status AddOrUpdatePodGroup(v1::PodGroup group);
  absl::Status RemovePodGroup(std::string_view uid);
  std::shared_ptr<const v1::PodGroup> GetPodGroup(std::string_view namespace_,
                                                  std::string_view name) const;
  // Namespaces, keyed by name (their labels are what namespaceSelectors
  // match), mirrored to plugins that ask. InvalidArgument without a name.
  absl::Status AddOrUpdateNamespace(v1::Namespace ns);
  absl::Status RemoveNamespace(std::string_view name);
  std::shared_ptr<const v1::Namespace> GetNamespace(std::string_view name) const;

  // Nominations, for plugin mirrors that keep them (MirrorScope.nominated_pods):
  // the preemption nominator reports each change. `pod` is the pending pod
  // with status.nominated_node_name set to its node; null clears it.
  void SetNomination(const std::string& uid, std::shared_ptr<const v1::Pod> pod);
  // Appends the current nominations to a reset delta.
  void AddNominations(v1::StateDelta* out) const;

  // The cached pod (assumed ones carry node_name) or null.
  sdk::PodInfoPtr GetPod(std::string_view uid) const;
  std::optional<uint32_t> NodeId(std::string_view node_name) const;

  size_t NumNodes() const;  // Nodes present (ghosts excluded).
  size_t NumPods() const;   // Bound + assumed, ghost nodes included.
  size_t NumAssumedPods() const;
  // The assumed pods' uids, under one lock: for a caller asking about many
  // pods at once (preemption's candidates) instead of IsAssumed per pod.
  absl::flat_hash_set<std::string> AssumedUids() const;

  // For the Admin API (server/ translates): per node allocatable, requested,
  // pods and assumed pods.
  struct NodeDump {
    std::string name;
    uint64_t generation = 0;
    std::optional<sdk::Resource> allocatable;  // Absent for a ghost node.
    sdk::Resource requested;
    std::vector<sdk::PodInfoPtr> pods;          // Bound, by namespace/name/uid.
    std::vector<sdk::PodInfoPtr> assumed_pods;  // Same order.
  };
  struct Dumped {
    uint64_t generation = 0;
    size_t assumed_pods = 0;
    std::vector<NodeDump> nodes;  // Present nodes in id order, then ghosts by name.
  };
  Dumped Dump(bool include_pods) const;

  // Brings the snapshot up to date, copying only the nodes changed since its
  // generation (a recency list ordered by generation, as kube-scheduler does)
  // and dropping removed nodes, and the PodDisruptionBudgets and PodGroups when
  // they changed. Records the delta-log position.
  void UpdateSnapshot(Snapshot& snapshot) const;

  // Current delta-log position (0 before any change).
  uint64_t delta_seq() const;
  // Fills `out` with the net effect of the log entries in (from_seq, to_seq]
  // (to_seq is clamped to the current position) and returns to_seq. If entries
  // after from_seq were trimmed, `out` is instead the full state at to_seq with
  // reset = true (or, if to_seq itself is no longer reconstructible, the
  // current full state — the return value says which position it is).
  // out->generation() is set to the returned position.
  uint64_t ReadDelta(uint64_t from_seq, uint64_t to_seq, v1::StateDelta* out) const;
  // The current full state as a reset delta; returns its position.
  uint64_t FullState(v1::StateDelta* out) const;
  // Frees entries no reader needs: those with seq <= min_seq_still_needed.
  void TrimDeltaLog(uint64_t min_seq_still_needed);
  // A connected plugin mirror stands at `position` (the last delta sent to
  // it), or (nullopt) is disconnected or will be reset. The log keeps the
  // entries after the slowest connected mirror's position, and none when no
  // mirror is connected.
  void SetMirrorPosition(const void* mirror, std::optional<uint64_t> position);
  size_t delta_log_size() const;

 private:
  struct NodeItem;
  struct PodEntry {
    sdk::PodInfoPtr info;
    std::string node_name;
    bool assumed = false;
  };
  using MirrorPod = DeltaLog::MirrorPod;
  using DeltaEntry = DeltaLog::Entry;

  NodeItem* GetOrCreateItem(const std::string& name) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Touch(NodeItem* item) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Unlink(NodeItem* item) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void DeleteItemIfEmptyGhost(NodeItem* item) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  MirrorPod Visible(const PodEntry& entry) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Adds the entry to its node item (creating a ghost if needed).
  void AttachPod(const std::string& uid, PodEntry entry) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Removes the pod from its node item and the pod map; logs the removal.
  void DetachPod(const std::string& uid) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void LogNode(uint32_t id, std::shared_ptr<const v1::Node> before,
               std::shared_ptr<const v1::Node> after) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void LogPod(const std::string& uid, MirrorPod before, MirrorPod after)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void LogObject(DeltaEntry::Kind kind, const std::string& uid,
                 std::shared_ptr<const google::protobuf::Message> before,
                 std::shared_ptr<const google::protobuf::Message> after)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Append(DeltaEntry entry) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void FullStateAt(uint64_t seq, v1::StateDelta* out) const ABSL_SHARED_LOCKS_REQUIRED(mu_);

  const Options options_;
  mutable absl::Mutex mu_;
  // name -> node info (present or ghost).
  absl::flat_hash_map<std::string, std::unique_ptr<NodeItem>> nodes_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<uint32_t, NodeItem*> nodes_by_id_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, PodEntry> pods_ ABSL_GUARDED_BY(mu_);
  size_t num_assumed_ ABSL_GUARDED_BY(mu_) = 0;
  absl::flat_hash_set<std::string> assumed_uids_ ABSL_GUARDED_BY(mu_);  // num_assumed_ of them.
  absl::flat_hash_map<std::string, std::shared_ptr<const v1::PodDisruptionBudget>> pdbs_
      ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, std::shared_ptr<const v1::PodGroup>> pod_groups_
      ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, std::shared_ptr<const v1::Namespace>> namespaces_
      ABSL_GUARDED_BY(mu_);  // By name.
  absl::flat_hash_map<std::string, std::shared_ptr<const v1::Pod>> nominations_
      ABSL_GUARDED_BY(mu_);
  uint32_t next_node_id_ ABSL_GUARDED_BY(mu_) = 1;
  // Recency list of node items, most recently changed first.
  NodeItem* head_ ABSL_GUARDED_BY(mu_) = nullptr;
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  // The generation at which the last node left the set of present nodes.
  uint64_t last_removal_generation_ ABSL_GUARDED_BY(mu_) = 0;

  DeltaLog log_ ABSL_GUARDED_BY(mu_);
  // Bumped when a PodDisruptionBudget, PodGroup or Namespace changes (for
  // snapshots).
  uint64_t objects_generation_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace podium::scheduler
