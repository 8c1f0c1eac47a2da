// Nominations (kube-scheduler's nominator): pending pods that preemption, or
// another component through status.nominatedNodeName, placed on a node they
// will take once victims are gone. Later cycles count them there for pods of
// equal or lower priority (CycleRequest.nominated_pods).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "cache/snapshot.h"
#include "podium/sdk/framework.h"
#include "podium/v1/plugin.pb.h"

namespace podium::scheduler::preemption {

// Thread-safe: written by the event thread and the scheduling thread.
class Nominator {
 public:
  // Nominates the pending pod to the node (replacing an earlier nomination).
  void Nominate(sdk::PodInfoPtr pod, std::string node);
  // Clears the pod's nomination; returns the node it had ("" when none).
  std::string Clear(std::string_view uid);
  // The node the pod is nominated to, or "".
  std::string NominatedNode(std::string_view uid) const;

  // What a cluster event says about nominations: a pending pod carrying
  // status.nominatedNodeName is nominated there (a pending pod without it keeps
  // the scheduler's own nomination until the patch is seen), a bound, finished
  // or deleted pod is no longer nominated.
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
  size_t size() const;

 private:
  struct Nomination {
    sdk::PodInfoPtr pod;
    std::string node;
  };
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, Nomination> by_uid_ ABSL_GUARDED_BY(mu_);
};

}  // namespace podium::scheduler::preemption
