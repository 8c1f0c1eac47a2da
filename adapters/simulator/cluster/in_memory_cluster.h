#pragma once

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "podium/v1/cluster.pb.h"
#include "podium/v1/objects.pb.h"

namespace podium::sim {

using Clock = std::function<absl::Time()>;

// What executing one scheduler Action did: its result, and the watch events the
// change produced (sent to the scheduler before the result).
struct ActionOutcome {
  v1::ActionResult result;
  std::vector<v1::ObjectEvent> events;
};

// How far a pod got, for the report.
struct PodRecord {
  v1::Pod pod;
  absl::Time created;                  // When the sim created it (sent it).
  std::optional<absl::Time> bound;     // When a BindPod succeeded.
  bool bound_at_load = false;          // spec.nodeName set in the input.
  bool unschedulable = false;          // PodScheduled=False, reason Unschedulable: the pod fits nowhere.
  bool scheduling_error = false;       // PodScheduled=False, reason SchedulerError: the attempt failed.
  // PodScheduled=False, reason SchedulingGated, set by the scheduler: a
  // PreEnqueue plugin holds the pod (e.g. its gang is not complete).
  bool held = false;
  std::string failed_message;          // That condition's message, or a FailedScheduling event's note.
  bool deleted = false;
  std::string delete_reason;
  // In-place resize (KEP-1287): the pod came with a pending resize request
  // (status.resize), and whether the kubelet model applied it.
  bool resize_requested = false;
  bool resize_applied = false;
};

// The in-memory cluster: nodes and pods as the API server would hold them, and
// the API semantics of the scheduler's actions (binding, preconditioned
// deletes, status patches). Thread-safe; executing is synchronous — the async
// worker lives in ActionExecutor.
class InMemoryCluster {
 public:
  explicit InMemoryCluster(Clock clock = absl::Now);

  // Adds a node or a pod (created now) and returns its UPSERT event.
  v1::ObjectEvent AddNode(v1::Node node);
  v1::ObjectEvent CreatePod(v1::Pod pod);

  ActionOutcome Execute(const v1::Action& action);

  // A test fault (k8s::kReplacesAnnotation): when the first DeletePod aimed
  // at ns/name arrives, the pod is replaced before the delete runs, as a
  // controller recreating it would: it is gone (a DELETE event; reported
  // deleted, "replaced"), and `next`, renamed to it, is created with its own
  // uid (an UPSERT). The delete then meets the new uid. Both events ride with
  // the delete's outcome, before it.
  void AddReplacement(const std::string& ns, const std::string& name, v1::Pod next);

  // Victims that terminate: with a grace period, a DeletePod marks a bound pod
  // terminating (deletionTimestamp; it keeps its resources) and the pod is gone
  // only when FinalizeTerminating runs after the grace. Zero: deletes at once.
  void SetTerminationGrace(absl::Duration grace);
  // The DELETE events (and PDB status updates) of pods whose grace expired.
  std::vector<v1::ObjectEvent> FinalizeTerminating(absl::Time now);
  size_t Terminating() const;

  // The kubelet's in-place resize, modelled: a bound pod whose spec asks for
  // more than the kubelet admitted (status.resize Deferred, the admitted
  // requests in `allocated`) is resized once its node has room for the new
  // requests beside what every other pod there holds (terminating ones
  // included); resize_status and allocated are then cleared. Checked whenever
  // a pod leaves a node; the UPSERTs ride with the change that made room.
  void ApplyDeferredResizes(const std::string& node, std::vector<v1::ObjectEvent>* events)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // PodDisruptionBudgets, with status computed as the disruption controller
  // does (disruptionsAllowed from the matching healthy pods) and kept current
  // as pods come and go: a change rides with the pod event that caused it.
  v1::ObjectEvent AddPdb(v1::PodDisruptionBudget pdb);
  // Gangs (both PodGroup APIs and Workload groups, one shape).
  v1::ObjectEvent AddPodGroup(v1::PodGroup group);
  std::vector<v1::PodGroup> PodGroups() const;  // By namespace/name.

  // A pod's state, or nullopt if it never existed.
  std::optional<PodRecord> GetPod(const std::string& ns, const std::string& name) const;
  std::vector<PodRecord> Pods() const;  // Creation order, deleted ones included.
  // The same pods without copying them, under the cluster's lock (`visit`
  // must not call back into the cluster).
  void ForEachPod(const std::function<void(const PodRecord&)>& visit) const;
  // The cluster as a list would show it now, as UPSERTs: nodes, PodGroups,
  // live pods (creation order), PodDisruptionBudgets (a reconnecting adapter's
  // relist).
  std::vector<v1::ObjectEvent> ListObjects() const;

  // Live pods by outcome. A pod is settled when bound, reported unschedulable
  // or failed with a scheduling error (it would retry; the run reports it as
  // an error), held by scheduling gates, or not this scheduler's.
  struct Progress {
    size_t pods = 0, bound = 0, unschedulable = 0, errors = 0, gated = 0, other_scheduler = 0, pending = 0,
           deleted = 0;
    size_t held = 0;  // Held by a PreEnqueue plugin (counted settled).
    // Bound with a deferred resize the scheduler has not answered yet (neither
    // applied after evictions nor PodResizePreemption=False).
    size_t resizing = 0;
    bool settled() const { return pending == 0 && resizing == 0; }
  };
  Progress Summarize(const std::function<bool(const v1::Pod&)>& is_ours) const;
  // Summarize(is_ours).settled(), without walking every pod: the run loop asks
  // every 5 ms, and the walk over 11 000 pods was a tenth of podium-sim's CPU
  // on basic-5000. Looks only at the pods that could be pending or resizing
  // (kept as they change), and stops at the first one that is ours.
  bool Settled(const std::function<bool(const v1::Pod&)>& is_ours) const;
  size_t NodeCount() const;
  // Bumped on every change; with LastChange it tells when the cluster settled.
  uint64_t Generation() const;
  absl::Time LastChange() const;

  struct ActionCounts {
    uint64_t bind = 0, delete_pod = 0, patch = 0, event = 0, failed = 0;
  };
  ActionCounts Counts() const;
  std::vector<v1::RecordEvent> RecordedEvents() const;

 private:
  ActionOutcome Bind(uint64_t id, const v1::BindPod& bind) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  ActionOutcome Delete(uint64_t id, const v1::DeletePod& del) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The live pod "ns/name" is gone: marked deleted (its delete_reason set
  // beforehand, if any), out of live_pods_ and terminating_. Returns its DELETE
  // event; PDB statuses and the node's deferred resizes are the caller's.
  v1::ObjectEvent Remove(const std::string& key) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // AddReplacement's replacement of the pod ref names, if one is waiting.
  std::vector<v1::ObjectEvent> ReplaceIfAsked(const v1::ObjectRef& ref) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  v1::ObjectEvent CreatePodLocked(v1::Pod pod) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  ActionOutcome Patch(uint64_t id, const v1::PatchPodStatus& patch) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  ActionOutcome Record(uint64_t id, const v1::RecordEvent& event) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The live pod named by ref, or an outcome carrying NOT_FOUND / CONFLICT.
  PodRecord* Lookup(uint64_t id, const v1::ObjectRef& ref, ActionOutcome* failure) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Touch(v1::ObjectMeta* meta) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RefreshUnschedulable(PodRecord* rec) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Files the pod in unsettled_ or takes it out, after any change to it.
  void Reindex(const PodRecord& rec) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Recomputes every PDB's status; appends UPSERTs for those that changed.
  void RefreshPdbs(std::vector<v1::ObjectEvent>* events) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  v1::PodDisruptionBudget WithStatus(v1::PodDisruptionBudget pdb) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Clock clock_;
  mutable absl::Mutex mu_;
  std::map<std::string, v1::Node> nodes_ ABSL_GUARDED_BY(mu_);
  std::vector<PodRecord> pods_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, size_t> live_pods_ ABSL_GUARDED_BY(mu_);  // "ns/name" -> pods_ index.
  // pods_ indexes of the live pods that are pending or resizing unless they
  // are another scheduler's: unbound and neither unschedulable, failed, gated
  // nor held; or bound with a Deferred resize the scheduler has not answered.
  std::set<size_t> unsettled_ ABSL_GUARDED_BY(mu_);
  // Pods added with a Deferred resize not applied yet (deleted ones included:
  // an upper bound). Zero: ApplyDeferredResizes has nothing to look for, and
  // a delete no longer walks every live pod under the lock.
  size_t deferred_resizes_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t resource_version_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Time last_change_ ABSL_GUARDED_BY(mu_);
  ActionCounts counts_ ABSL_GUARDED_BY(mu_);
  std::vector<v1::RecordEvent> events_ ABSL_GUARDED_BY(mu_);  // Bounded: kMaxEvents.
  absl::Duration termination_grace_ ABSL_GUARDED_BY(mu_) = absl::ZeroDuration();
  std::map<std::string, absl::Time> terminating_ ABSL_GUARDED_BY(mu_);  // "ns/name" -> gone at.
  std::map<std::string, v1::Pod> replacements_ ABSL_GUARDED_BY(mu_);   // "ns/name" -> its next incarnation.
  std::map<std::string, v1::PodDisruptionBudget> pdbs_ ABSL_GUARDED_BY(mu_);  // "ns/name" ->
  std::map<std::string, v1::PodGroup> pod_groups_ ABSL_GUARDED_BY(mu_);       // "ns/name" ->
};

}  // namespace podium::sim
