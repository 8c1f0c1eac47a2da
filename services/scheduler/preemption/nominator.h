// Nominations (kube-scheduler's nominator): pending pods that preemption, or
// another component through status.nominatedNodeName, placed on a node they
// will take once victims are gone. Later cycles count them there for pods of
// equal or lower priority (CycleRequest.nominated_pods).
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/node_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "cache/cache.h"
#include "cache/snapshot.h"
#include "framework/framework.h"
#include "podium/sdk/framework.h"
#include "podium/v1/plugin.pb.h"

namespace podium::scheduler::preemption {

// Thread-safe: written by the event thread and the scheduling thread.
//
// Plugin processes that mirror nominations (MirrorScope.nominated_pods) get
// them as state deltas: every change is reported to the cache's delta log
// (lock order: Nominator::mu_ before the cache's). The others get them in
// each request (AddToRequest).
class Nominator {
 public:
  Nominator() = default;
  explicit Nominator(Cache* mirror_log) : mirror_log_(mirror_log) {}

  // Nominates the pending pod to the node (replacing an earlier nomination).
  // A pod already nominated there that counts the same (it differs only in
  // resourceVersion, conditions or status.nominatedNodeName: its own status
  // patches) is left as it is: no change, no generation bump.
  void Nominate(sdk::PodInfoPtr pod, std::string node) { Nominate(std::move(pod), std::move(node), false); }
  // Clears the pod's nomination; returns the node it had ("" when none).
  std::string Clear(std::string_view uid);
  // The node the pod is nominated to, or "".
  std::string NominatedNode(std::string_view uid) const;

  // A pod's nomination as it was before a tentative one (a gang member's
  // preemption, carried out only if the whole gang can be placed): Restore
  // puts it back.
  struct Saved {
    std::string uid;
    sdk::PodInfoPtr pod;  // Null: the pod had no nomination.
    std::string node;
    bool from_api = false;
  };
  Saved Save(std::string_view uid) const;
  // Undoes the tentative nomination to `tentative_node` made after `saved`:
  // the earlier nomination is back, or none. Left as it is when an event
  // changed the pod's nomination meanwhile (moved, or cleared as the pod was
  // deleted or bound): the event's word is newer.
  void Restore(const Saved& saved, std::string_view tentative_node);

  // What a cluster event says about nominations: a pending pod carrying
  // status.nominatedNodeName is nominated there; a pending pod without it
  // keeps the scheduler's own nomination until the patch is seen (updated
  // when it counts differently), but loses a nomination an earlier event
  // carried (the field was removed, as kube-scheduler's nominator drops it);
  // a bound, finished or deleted pod is no longer nominated.
  void OnPodEvent(const v1::Pod& pod, bool deleted);

  // Nominated pods on `node_name` (every node when empty) with priority at
  // least `pod`'s, other than `pod` itself.
  std::vector<sdk::PodInfoPtr> NominatedPodsFor(const v1::Pod& pod, std::string_view node_name) const;
  // Nominated pods on `node_name` with priority below `pod`'s: preempting there
  // takes their room (kube-scheduler clears their nomination).
  std::vector<sdk::PodInfoPtr> LowerPriorityNominated(const v1::Pod& pod, std::string_view node_name) const;
  // The same for every node the snapshot has, as the contract carries them.
  void AddToRequest(const v1::Pod& pod, const sdk::Snapshot& snapshot,
                    google::protobuf::RepeatedPtrField<v1::MirroredPod>* out) const;
  // Per node, the sum of the NominationKey (framework.h) of what AddToRequest
  // adds there, without copying the pods: one call per node with a counted
  // nomination. The keys are kept with the nominations, so the walk reads no
  // pod. `visit` runs under the nominator's lock: keep it cheap.
  void ForEachKey(const v1::Pod& pod, const sdk::Snapshot& snapshot,
                  const std::function<void(uint32_t node_id, uint64_t key_sum)>& visit) const;
  // The sum of the keys ForEachKey visits `node_name` with (0: none counted).
  uint64_t KeySumOn(const v1::Pod& pod, std::string_view node_name) const;
  size_t size() const;
  // Every nomination, node name -> its nominated pods (Admin DumpCache).
  std::map<std::string, std::vector<v1::ObjectRef>> ByNode() const;
  // Bumped by every change to a nomination (added, moved, updated, cleared):
  // equal before and after a computation means no nomination changed meanwhile.
  uint64_t generation() const { return generation_.load(std::memory_order_acquire); }
  // Visits each node whose nominations of priority `priority` or more (those
  // a pod of that priority counts) changed (a nomination added, moved away
  // or there, updated or cleared) after generation `since`, and returns
  // the generation it read up to: what a kept failure re-evaluates costs the
  // changes since its cycle, not a walk over every nomination. A node may be
  // visited more than once. nullopt when the log no longer reaches back to
  // `since` (it keeps the last kMaxChangeLog changes). `visit` runs under
  // the nominator's lock: keep it cheap.
  std::optional<uint64_t> ChangedNodesSince(uint64_t since, int32_t priority,
                                            const std::function<void(std::string_view node)>& visit) const;
  static constexpr size_t kMaxChangeLog = 8192;

 private:
  struct Nomination {
    sdk::PodInfoPtr pod;
    std::string node;
    // An event carried this nomination (status.nominatedNodeName == node):
    // the API has it, so an event without the field means it was removed.
    bool from_api = false;
  };
  void Nominate(sdk::PodInfoPtr pod, std::string node, bool from_api);
  using Entry = std::pair<const std::string, Nomination>;  // uid -> nomination
  // A nomination as its node's list holds it: what ForEachKey reads.
  struct OnNode {
    const Entry* entry;
    int32_t priority;
    uint64_t key;  // NominationKey(uid, resourceVersion)
  };
  // The sum of the keys of a node's nominations that a pod of `priority`
  // counts (its own, `own`, excluded); nullopt when it counts none.
  static std::optional<uint64_t> CountedKeySum(const std::vector<OnNode>& on_node, int32_t priority,
                                               const Entry* own);
  // Reports the pod's nomination (or its absence) to the mirror log, and
  // logs the nodes Set and Unlink touched under the new generation.
  void Mirror(const std::string& uid, const Nomination* n) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Sets the uid's nomination (added or moved), keeping by_node_ in step.
  Entry& Set(const std::string& uid, sdk::PodInfoPtr pod, std::string node) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Takes the entry off its node's list.
  void Unlink(const Entry& e) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Drops the entry from by_uid_ and by_node_.
  void Erase(absl::node_hash_map<std::string, Nomination>::iterator it) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  Cache* const mirror_log_ = nullptr;
  mutable absl::Mutex mu_;
  // Node-based: by_node_ points into it.
  absl::node_hash_map<std::string, Nomination> by_uid_ ABSL_GUARDED_BY(mu_);
  // Node name -> its nominations. A cycle's walk (ForEachKey, once per
  // preemptor and per kept ranking) resolves each node once instead of once
  // per nomination, and a node's nominations are found without a walk.
  absl::flat_hash_map<std::string, std::vector<OnNode>> by_node_ ABSL_GUARDED_BY(mu_);
  std::atomic<uint64_t> generation_{0};
  // A node a change touched, with the priority of the nomination it added
  // or took away there.
  struct Change {
    uint64_t generation;
    std::string node;
    int32_t priority;
  };
  // Nodes touched by the change being made (Set, Unlink), logged by Mirror.
  std::vector<Change> touched_ ABSL_GUARDED_BY(mu_);
  // The last kMaxChangeLog node changes, oldest first; every change after
  // generation change_floor_ is in it.
  std::deque<Change> changes_ ABSL_GUARDED_BY(mu_);
  uint64_t change_floor_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace podium::scheduler::preemption
