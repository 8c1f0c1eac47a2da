// Gangs in the scheduler core: what the one-pass placement of a PodGroup's
// members needs besides the scheduling cycle itself. Pure functions over the
// snapshot and the pods; the pass lives in ../schedule_gang.cc.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/functional/function_ref.h"
#include "absl/synchronization/mutex.h"
#include "podium/sdk/framework.h"
#include "podium/v1/objects.pb.h"

namespace podium::scheduler::gang {

// "namespace/group" of the pod's gang; empty when it names none.
std::string GroupKey(const v1::Pod& pod);
bool SameGroup(const v1::Pod& a, const v1::Pod& b);

// The pods naming each gang, pending or assigned: kept by the event thread,
// read by PreEnqueue on the queue worker (its plugin learns the count from the
// request). Thread-safe; pods without a group cost nothing.
class MemberRegistry {
 public:
  // `member` false (deleted, terminal) removes the pod.
  void Set(const v1::Pod& pod, bool member);
  size_t Count(std::string_view namespace_, std::string_view group) const;
  // Of the gang's pods, those `on_node(uid)` says are on a node (bound, or
  // assumed: waiting at Permit or binding). O(the gang's pods), not O(pods of
  // the cluster); `on_node` is called under the registry's lock.
  size_t CountAssigned(std::string_view namespace_, std::string_view group,
                       absl::FunctionRef<bool(std::string_view uid)> on_node) const;

 private:
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, absl::flat_hash_set<std::string>> members_ ABSL_GUARDED_BY(mu_);
};

// How a pass went, for the members' FailedScheduling message.
struct PassOutcome {
  size_t members = 0;  // Pending members tried in this pass.
  size_t placed = 0;   // Of them, placed before the pass stopped.
  size_t assigned = 0; // Members already bound or assumed.
  std::string failed_pod;      // "ns/name" of the member that did not fit.
  std::string failed_message;  // Its FailedScheduling message.
};

// Whether placed + assigned reach the group's minimum.
bool Satisfied(const v1::PodGroup& group, size_t placed, size_t assigned);

// The message every member of a gang that cannot be placed gets, e.g.
// `pod group batch/train (minMember 8): only 7 of 8 members can be placed
// together, so none is bound; batch/train-7: 0/7 nodes are available: ...`.
std::string UnfitMessage(const v1::PodGroup& group, const PassOutcome& outcome);

}  // namespace podium::scheduler::gang
