// The runner of a profile's extension points. It sees plugins only through
// PluginProcess (plugin_process.h): which process serves which plugin comes
// from the handshake; the rest is kube-scheduler's framework semantics.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <ostream>
#include <optional>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/hash/hash.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "framework/extension_point_recorder.h"
#include "framework/plugin_process.h"
#include "podium/sdk/framework.h"
#include "podium/v1/objects.pb.h"

namespace podium::scheduler {

// Plugins that run inside the scheduler.
inline constexpr char kPrioritySort[] = "PrioritySort";
inline constexpr char kSchedulingGates[] = "SchedulingGates";
inline constexpr char kDefaultBinder[] = "DefaultBinder";

// status.resize of a bound pod whose in-place resize the kubelet deferred
// (the adapter maps the PodResizePending condition's reason onto it too).
inline constexpr char kDeferredResize[] = "Deferred";

// A nominated pod's key as batching fingerprints nominations (summed per
// node): its uid and resourceVersion, so any change to the pod changes it.
inline uint64_t NominationKey(std::string_view uid, std::string_view resource_version) {
  return absl::HashOf(uid, resource_version);
}

// A profile with its plugins resolved per extension point (multiPoint already
// expanded with what each plugin registered).
struct ProfileSpec {
  std::string scheduler_name = std::string(kDefaultSchedulerName);
  int percentage_of_nodes_to_score = 0;  // 0 = adaptive.
  // Signatures and opportunistic batching (batching/) for this profile's pods.
  bool opportunistic_batching = true;
  // What-if verdicts per feasible node in a signature's full cycle (batching/).
  uint32_t what_if_copies = 2;
  std::map<v1::ExtensionPoint, std::vector<PluginRef>> plugins;
  // plugin name -> the process serving it; built-ins are absent.
  absl::flat_hash_map<std::string, PluginProcess*> processes;
  // Plugins registered pod_group_members_only: their PreEnqueue, Reserve,
  // Unreserve and Permit are skipped for pods without a pod group.
  absl::flat_hash_set<std::string> pod_group_members_only;
  // Plugins registered unreserve_only: no Reserve request, only Unreserve.
  absl::flat_hash_set<std::string> unreserve_only;
  // Where the duration of every extension point is recorded (null: nowhere).
  ExtensionPointRecorder* recorder = nullptr;
  // Adds the nominated pods a cycle for `pod` must count (CycleRequest.nominated_pods).
  std::function<void(const v1::Pod& pod, const sdk::Snapshot& snapshot,
                     google::protobuf::RepeatedPtrField<v1::MirroredPod>* out)>
      nominated_pods;
  // The same nominated pods as per-node sums of their NominationKey, without
  // copying them: what opportunistic batching fingerprints per node. A node
  // may be visited more than once (the sums add up); one without a counted
  // nomination is not visited.
  std::function<void(const v1::Pod& pod, const sdk::Snapshot& snapshot,
                     const std::function<void(uint32_t node_id, uint64_t key_sum)>& visit)>
      nominated_pod_keys;
  // The sum of the NominationKey of the nominated pods a cycle for `pod`
  // counts on that node alone (0: none): what a nominated-node check's
  // verdict is kept with (batching/ "Nominated-node checks").
  std::function<uint64_t(const v1::Pod& pod, std::string_view node_name)> nominated_key_on;
  // Changes whenever a nomination does (Nominator::generation): batching reads
  // it around a cycle to take the fingerprints only for a cycle that placed
  // its pod, after it, and only when nothing changed meanwhile.
  std::function<uint64_t()> nominations_generation;
  // The nodes whose nominations of priority `priority` or more changed after
  // generation `since` (Nominator::ChangedNodesSince): returns the generation it read up to,
  // nullopt when its log no longer reaches back to `since`. A kept failure
  // re-evaluates those nodes instead of comparing fingerprints of every
  // nomination (batching/kept_failures.h).
  std::function<std::optional<uint64_t>(uint64_t since, int32_t priority,
                                        const std::function<void(std::string_view node)>& visit)>
      nomination_changes;
  // The node the pod is nominated to, "" when none (Nominator::NominatedNode).
  std::function<std::string(std::string_view uid)> nominated_node_of;
  // How many pods are nominated (Nominator::size).
  std::function<size_t()> nominations_count;
};

// The profile a pod belongs to: spec.schedulerName, default-scheduler when empty.
inline std::string_view SchedulerNameOf(const v1::Pod& pod) {
  return pod.scheduler_name().empty() ? kDefaultSchedulerName : std::string_view(pod.scheduler_name());
}

// kube-scheduler's numFeasibleNodesToFind.
uint32_t NumFeasibleNodesToFind(int percentage_of_nodes_to_score, uint32_t num_all_nodes);

// A status many nodes share: the nodes a plugin rejected for the same reason
// hold one copy (CycleResponse.status_table), not one each.
using SharedStatus = std::shared_ptr<const sdk::Status>;

inline SharedStatus MakeSharedStatus(sdk::Status status) {
  return std::make_shared<const sdk::Status>(std::move(status));
}

// The rejection statuses of a validated CycleResponse, each status_table
// entry decoded once and shared by the nodes that point at it; a status sent
// inline (protocol version 1) is decoded for its node.
class RejectionStatuses {
 public:
  explicit RejectionStatuses(const v1::CycleResponse& answer);
  SharedStatus Get(const v1::NodeStatus& rejected) const;

 private:
  std::vector<SharedStatus> table_;
};

// What PostFilter (preemption's dry run) found on one node for the pods of
// one signature: a candidate's victims, or why the node is not one.
// PickOneNodeForPreemption's order as a key (preemption/preemption.h
// PickKeyOf): PDB violations, highest victim priority, shifted priority sum,
// victims, minus the earliest start among the most important victims.
using PreemptionPickKey = std::tuple<int64_t, int32_t, int64_t, size_t, int64_t>;

struct KeptDryRun {
  SharedStatus rejection;  // Not a candidate, and why; null for a candidate.
  std::vector<sdk::PodInfoPtr> victims;  // A candidate's, in reprieve order.
  int64_t num_pdb_violations = 0;
  // A candidate's place in PickOneNodeForPreemption's order
  // (preemption::PickKeyOf), when computed: what-ifs predict picks from it.
  std::optional<PreemptionPickKey> pick_key;
};

// The dry runs kept for a signature whose pods fit no node (batching/'s kept
// failures). An entry holds while its node stays clean: batching/ erases the
// entry of every node that changed (the batcher's dirty rules) before it hands
// the set to a pod's cycle, and drops the whole set with the failure it
// belongs to; PostFilter clears it when the PodDisruptionBudgets changed.
struct KeptDryRuns {
  absl::flat_hash_map<uint32_t, KeptDryRun> nodes;  // By node id.
  uint64_t pdbs_fingerprint = 0;  // Of the PDBs the entries were found with (PostFilter's).
};

// A node's name in a Diagnosis. Made from the snapshot's node, it shares that
// node's name (a reference count): a failed cycle names every node, and a
// string copy and free per node and attempt was a tenth of preempt-500's
// scheduling thread (the kept failure's 500 names, per preemptor).
class NodeName {
 public:
  NodeName() = default;
  explicit NodeName(const sdk::NodeInfo& node) : name_(node.shared_node(), &node.name()) {}
  explicit NodeName(std::string name) : name_(std::make_shared<const std::string>(std::move(name))) {}
  const std::string& str() const {
    static const std::string kEmpty;
    return name_ != nullptr ? *name_ : kEmpty;
  }
  operator const std::string&() const { return str(); }  // NOLINT
  operator std::string_view() const { return str(); }     // NOLINT
  friend bool operator==(const NodeName& a, std::string_view b) { return a.str() == b; }
  friend bool operator==(const NodeName& a, const NodeName& b) { return a.str() == b.str(); }
  friend std::ostream& operator<<(std::ostream& out, const NodeName& n) { return out << n.str(); }

 private:
  std::shared_ptr<const std::string> name_;
};

// A diagnosis's node -> status list: a vector, or one shared with others
// (a kept failure hands every attempt it serves the same 500 entries rather
// than a copy each), copied on the first change.
class NodeStatuses {
 public:
  using value_type = std::pair<NodeName, SharedStatus>;
  using Vector = std::vector<value_type>;
  using const_iterator = Vector::const_iterator;
  using iterator = const_iterator;

  NodeStatuses() = default;
  explicit NodeStatuses(std::shared_ptr<const Vector> shared) : shared_(std::move(shared)) {}

  const_iterator begin() const { return view().begin(); }
  const_iterator end() const { return view().end(); }
  size_t size() const { return view().size(); }
  bool empty() const { return view().empty(); }
  const value_type& operator[](size_t i) const { return view()[i]; }
  value_type& operator[](size_t i) { return Mutable()[i]; }

  void reserve(size_t n) { Mutable().reserve(n); }
  template <typename... Args>
  value_type& emplace_back(Args&&... args) {
    return Mutable().emplace_back(std::forward<Args>(args)...);
  }
  void push_back(value_type v) { Mutable().push_back(std::move(v)); }
  void clear() {
    shared_.reset();
    own_.clear();
  }

 private:
  const Vector& view() const { return shared_ != nullptr ? *shared_ : own_; }
  Vector& Mutable() {
    if (shared_ != nullptr) {
      own_ = *shared_;
      shared_.reset();
    }
    return own_;
  }

  std::shared_ptr<const Vector> shared_;
  Vector own_;
};

// Why a pod fits no node (kube-scheduler's FitError / Diagnosis).
struct Diagnosis {
  uint32_t num_all_nodes = 0;
  uint64_t cycle_id = 0;  // The cycle that produced it (plugin processes keep its state).
  NodeStatuses node_statuses;  // node name -> status
  std::string pre_filter_message;
  // With pre_filter_message: kUnschedulable when preemption may still help
  // on any node (a plain Unschedulable from a process that ran every
  // PreFilter: LeavesPreFilterUnschedulableToPreemption), otherwise
  // kUnschedulableAndUnresolvable (no node is a candidate).
  sdk::Code pre_filter_code = sdk::Code::kUnschedulableAndUnresolvable;
  std::string post_filter_message;  // What PostFilter (preemption) said, appended.
  absl::flat_hash_set<std::string> unschedulable_plugins;
  absl::flat_hash_set<std::string> pending_plugins;
  // The answer to the dry run PostFilterPlugin::PredictDryRun asked to ride
  // in the cycle request, when the process ran it (null otherwise).
  std::shared_ptr<const v1::PreemptionDryRunResponse> dry_run_answer;
  // The signature's kept dry runs, when batching/ keeps its failure (null
  // otherwise): PostFilter reads the clean nodes' outcomes from it, asks the
  // plugin processes only for the others, and adds what it learns.
  std::shared_ptr<KeptDryRuns> kept_dry_runs;
  // "0/10 nodes are available: 3 Insufficient cpu, 7 node(s) had untolerated taint {edge: true}."
  std::string Message() const;
  // How many nodes each rejection's object stands for: runs of one object (a
  // kept failure shares one among most nodes) cost one lookup, not one per node.
  absl::flat_hash_map<const sdk::Status*, uint32_t> NodesPerStatus() const;
};

// A PreFilter's rejection into the diagnosis: its message, its plugin, and
// whether preemption may help (a plain Unschedulable from a process that
// `ran_every_pre_filter`).
void RecordPreFilterRejection(Diagnosis& diagnosis, const sdk::Status& status, bool ran_every_pre_filter);

// Every feasible node a cycle examined with each score plugin's (normalized)
// score, aligned with `feasible`: what batching/ keeps of a canonical pod.
struct Ranking {
  std::vector<uint32_t> feasible;  // Node ids, in evaluation order.
  absl::flat_hash_map<std::string, std::vector<int64_t>> scores;  // plugin -> scores.
  uint32_t start_index = 0;  // Where the rotation started (all-nodes cycles).
  // What-if verdicts (CycleScope::what_if_copies), when the process answered
  // them: feasible[i] with j more copies of the pod is entry
  // i * what_if_copies + j - 1. Empty otherwise.
  uint32_t what_if_copies = 0;
  std::vector<v1::WhatIfVerdicts::Verdict> what_if;
  absl::flat_hash_map<std::string, std::vector<int64_t>> what_if_scores;  // plugin -> aligned with what_if.
};

// The verdicts of the pod batching/ expects to decide next, asked in this
// cycle's request (plugin protocol version 4, CycleRequest.lookahead): on
// node_ids as they are, and on each of after_node_ids with this cycle's pod
// added there.
struct LookaheadRequest {
  const v1::Pod* pod = nullptr;
  std::vector<uint32_t> node_ids;
  std::vector<uint32_t> after_node_ids;
  // A later lookahead's (protocol version 5): nodes with the chain's earlier
  // pods added (v1::ChainNode: 0 this cycle's pod, 1 the lookahead's, k + 2
  // later_lookaheads[k]'s).
  struct ChainNode {
    uint32_t node_id = 0;
    std::vector<uint32_t> pods;
  };
  std::vector<ChainNode> chain_nodes;
};

// Its answer (CycleResponse.lookahead, validated): entry k is node_ids[k],
// then after_node_ids[k - node_ids.size()], then chain_nodes in order.
struct LookaheadAnswer {
  bool pre_filter_rejected = false;  // The pod fits nowhere (then nothing else is set).
  std::vector<v1::WhatIfVerdicts::Verdict> verdicts;
  absl::flat_hash_map<std::string, std::vector<int64_t>> scores;  // plugin -> aligned with verdicts.
};

// A pod nominated to a node, to be checked there in another pod's request
// (CycleScope::nominated_checks).
struct NominatedCheckRequest {
  const v1::Pod* pod = nullptr;
  uint32_t node_id = 0;
};

// Narrows or widens a cycle (batching/): the default is kube-scheduler's cycle.
struct CycleScope {
  // Evaluate exactly these nodes: no early stop, no rotation, and every node
  // that passes is scored (even a single one). With node_ids the outcome is
  // kScheduled even when none passes (node_name empty; rejections in the
  // diagnosis) unless PreFilter rejected the pod.
  const std::vector<uint32_t>* node_ids = nullptr;
  // Fill ScheduleResult::ranking.
  bool want_ranking = false;
  // Find every feasible node (from the rotating start), not only
  // percentageOfNodesToScore's share: a ranking that serves many pods.
  bool examine_all = false;
  // With node_ids and a lone filter process that runs dry runs in cycles: the
  // request carries PostFilter's dry run of those nodes
  // (PostFilterPlugin::PredictDryRunOn), run only if none passes; its answer
  // reaches PostFilter as Diagnosis::dry_run_answer.
  bool predict_dry_run = false;
  // With predict_dry_run, when the lone filter process answers them (plugin
  // protocol version 7): the signature's kept dry runs, from which
  // PostFilterPlugin::PredictDryRunOn predicts where the next what_if_nodes
  // candidate walks will likely nominate the next pods of the signature (up
  // to twice as many nodes: a walk's pick may depend on nodes that may or
  // may not be candidates by then), each asked with
  // a copy of the pod nominated there (PreemptionDryRunRequest.what_if; the
  // answer rides in Diagnosis::dry_run_answer). batching/'s kept failures
  // serve the pod after one nominated there from it, with no request.
  const KeptDryRuns* what_if_from = nullptr;
  uint32_t what_if_nodes = 0;
  // Ask for what-if verdicts with 1 .. what_if_copies more copies of the pod
  // on each feasible node (Ranking::what_if). Honoured only for a full cycle
  // whose filter and score plugins are all served by one process that speaks
  // protocol version 3.
  uint32_t what_if_copies = 0;
  // With node_ids: the lookahead to carry. Honoured only when one process
  // serves every filter and score plugin of the profile, speaks protocol
  // version 4, and the request carries no nominated pods.
  const LookaheadRequest* lookahead = nullptr;
  // With lookahead: the pods expected after its pod, in that order (plugin
  // protocol version 5, CycleRequest.later_lookaheads). Sent only with it.
  const std::vector<LookaheadRequest>* later_lookaheads = nullptr;
  // For a nominated pod's cycle: other nominated pods, each checked on its
  // own nominated node in the same request (CycleRequest.nominated_checks,
  // protocol version 6; ScheduleResult::nominated_checks). Honoured only on
  // the nominated-node fast path, when one process serves every plugin of
  // the profile and mirrors nominations.
  const std::vector<NominatedCheckRequest>* nominated_checks = nullptr;
};

struct ScheduleResult {
  enum class Outcome { kScheduled, kUnschedulable, kError };
  Outcome outcome = Outcome::kError;
  std::string node_name;
  Ranking ranking;  // With CycleScope::want_ranking.
  uint32_t evaluated_nodes = 0;  // For the rotation of the first node.
  uint32_t feasible_nodes = 0;
  Diagnosis diagnosis;      // kUnschedulable.
  absl::Status error;       // kError.
  // CycleScope::lookahead: whether it was sent, and its answer (none when the
  // process left it unanswered or the answer was invalid: lookahead_error).
  bool lookahead_sent = false;
  std::optional<LookaheadAnswer> lookahead;
  absl::Status lookahead_error;
  // CycleScope::later_lookaheads: how many were sent, and their answers
  // (all of them, aligned, or none).
  size_t later_lookaheads_sent = 0;
  std::vector<LookaheadAnswer> later_lookaheads;
  // CycleScope::nominated_checks' verdicts, aligned with it; empty when not
  // sent, not answered, or answered invalidly (then an error was logged).
  std::vector<v1::WhatIfVerdicts::Verdict> nominated_checks;
};

// PostFilter runs inside the scheduler when a pod fits no node, as
// kube-scheduler's DefaultPreemption does; it may nominate a node where the pod
// will fit once victims are gone. The preemption issue adds DefaultPreemption.
struct PostFilterResult {
  std::string nominated_node_name;
  // Run by the scheduler once the pod is back in its queue (preemption sends
  // its victims' deletions then, so their events find the pod queued).
  std::function<void()> after_requeue;
  // The cycle's snapshot was out of date for this pod (preemption found the
  // victims it chose already gone): the pod is retried at once and this
  // attempt is not reported through the API (no PodScheduled patch, no
  // FailedScheduling event): its status would be replaced by the next cycle's.
  bool retry_unreported = false;
  // Run instead of after_requeue when the decision is not carried out (a
  // gang member's preemption when the gang cannot be placed as a whole, or
  // a preemptor deleted during its cycle): undoes what PostFilter already
  // changed (the nomination).
  std::function<void()> withdraw;
  // Not preempting because room is already being made for this pod (kube-
  // scheduler's "not eligible due to a terminating pod on the nominated
  // node"), and the room is its own: its nomination stands and its own
  // preemption's victims are still on that node. A gang counts such a member
  // towards its minimum.
  bool awaiting_victims = false;
};

class PostFilterPlugin {
 public:
  virtual ~PostFilterPlugin() = default;
  virtual std::string_view Name() const = 0;
  virtual std::pair<PostFilterResult, sdk::Status> PostFilter(const v1::Pod& pod,
                                                              const Diagnosis& diagnosis) = 0;
  // The dry run PostFilter would send first if this cycle of `pod` finds no
  // node (for a lone filter process that runs it within the cycle request:
  // CycleRequest.preemption_dry_run), or nullopt. Its answer reaches
  // PostFilter as Diagnosis::dry_run_answer.
  virtual std::optional<v1::PreemptionDryRunRequest> PredictDryRun(const v1::Pod& pod,
                                                                   uint64_t cycle_id) {
    return std::nullopt;
  }
  // The dry run of exactly `node_ids` (every one evaluated, no stop rule)
  // for a cycle narrowed to them (CycleScope::predict_dry_run), or nullopt.
  // With `what_if_from` (CycleScope::what_if_from), also what-ifs
  // (PreemptionDryRunRequest.what_if) for `node_ids` and for the likely picks
  // of the next `what_if_nodes` candidate walks; and with `what_if_gone`
  // (protocol version 8), what-ifs of pods gone
  // (PreemptionDryRunRequest.what_if_gone) for the nodes whose preemption is
  // in flight with victims still there.
  virtual std::optional<v1::PreemptionDryRunRequest> PredictDryRunOn(const v1::Pod& pod, uint64_t cycle_id,
                                                                     const std::vector<uint32_t>& node_ids,
                                                                     const KeptDryRuns* what_if_from,
                                                                     uint32_t what_if_nodes, bool what_if_gone) {
    return std::nullopt;
  }
};
using PostFilterPluginPtr = std::unique_ptr<PostFilterPlugin>;

// A pod that waits at Permit (WAIT) for the plugins in `pending`.
struct PermitOutcome {
  sdk::Status status;  // Success, Wait or a rejection.
  std::map<std::string, absl::Duration> waiting;  // plugin -> timeout.
};

class Framework {
 public:
  explicit Framework(ProfileSpec spec, uint64_t seed = std::random_device{}());

  // The profile as resolved now (a copy: Reconfigure may replace it).
  ProfileSpec spec() const { return CurrentSetup()->spec; }
  // The process serving `plugin` now (null: a built-in or unknown plugin).
  // Processes outlive the framework.
  PluginProcess* ProcessServing(const std::string& plugin) const {
    const auto setup = CurrentSetup();
    auto it = setup->spec.processes.find(plugin);
    return it == setup->spec.processes.end() ? nullptr : it->second;
  }
  // The same without the copy (its maps, vectors and hooks): the profile as
  // resolved now, kept alive by the pointer while Reconfigure replaces it.
  std::shared_ptr<const ProfileSpec> spec_ptr() const {
    std::shared_ptr<const Setup> setup = CurrentSetup();
    return std::shared_ptr<const ProfileSpec>(setup, &setup->spec);
  }
  const std::string& name() const { return name_; }

  // Where the profile's metrics go (null: nowhere).
  ExtensionPointRecorder* recorder() const { return recorder_; }
  // Replaces the plugins and processes of the profile (its name and recorder
  // stay): a plugin endpoint that connected late, or re-registered, is used
  // from the next call on. Calls in flight finish with what they started with.
  // Thread-safe.
  void Reconfigure(ProfileSpec spec);

  // PreFilter, Filter, PreScore, Score and host selection for one pod on the
  // given snapshot (taken at state_seq). Runs on the scheduling thread.
  //
  // The cycle ends (its plugin processes are told, SchedulerToPlugin.
  // finished_cycles) when SchedulePod fails and no PostFilter plugin will run,
  // after RunPostFilter, after RunUnreserve and after RunPostBind.
  ScheduleResult SchedulePod(const v1::Pod& pod, const sdk::Snapshot& snapshot,
                             uint64_t state_seq, uint64_t cycle_id, const CycleScope& scope = {});
  // Ends a cycle whose pod will not go on to Reserve (batching/ dropped it).
  void EndCycle(uint64_t cycle_id) const { FinishCycle(*CurrentSetup(), cycle_id); }
  // Whether a cycle of `pod` may be decided with no request to any plugin
  // process (batching/'s what-if verdicts): no remote plugin runs for it after
  // the cycle (Reserve, Unreserve, Permit, PreBind, Bind, PostBind), so none
  // can miss the cycle state its PreFilter would have left.
  bool DecidableWithoutRequest(const v1::Pod& pod) const;
  // A cycle decided that way: Reserve and Permit bring mirrors to state_seq,
  // as after SchedulePod.
  void DecidedWithoutRequest(uint64_t state_seq, uint64_t cycle_id) {
    last_state_seq_ = state_seq;
    last_cycle_id_ = cycle_id;
  }
  // Bumped by Reconfigure: what was derived from spec() and the processes'
  // registrations must be derived again.
  uint64_t setup_generation() const {
    absl::MutexLock lock(&setup_mu_);
    return setup_generation_;
  }
  // The profile's nominated-pods hook (ProfileSpec::nominated_pods), if any.
  void AddNominatedPods(const v1::Pod& pod, const sdk::Snapshot& snapshot,
                        google::protobuf::RepeatedPtrField<v1::MirroredPod>* out) const {
    std::shared_ptr<const Setup> setup = CurrentSetup();
    if (setup->spec.nominated_pods) setup->spec.nominated_pods(pod, snapshot, out);
  }
  // ProfileSpec::nominated_key_on; nullopt without the hook.
  std::optional<uint64_t> NominatedKeyOn(const v1::Pod& pod, std::string_view node_name) const {
    const std::shared_ptr<const Setup> setup = CurrentSetup();
    if (!setup->spec.nominated_key_on) return std::nullopt;
    return setup->spec.nominated_key_on(pod, node_name);
  }
  // Visits, per node, the sum of the NominationKey of the nominated pods
  // AddNominatedPods would add there; false when the profile has no key hook
  // (then AddNominatedPods is the way).
  bool ForEachNominatedPodKey(const v1::Pod& pod, const sdk::Snapshot& snapshot,
                              const std::function<void(uint32_t node_id, uint64_t key_sum)>& visit) const {
    std::shared_ptr<const Setup> setup = CurrentSetup();
    if (!setup->spec.nominated_pod_keys) return false;
    setup->spec.nominated_pod_keys(pod, snapshot, visit);
    return true;
  }

  // The profile's nominations_generation hook, if any.
  std::optional<uint64_t> NominationsGeneration() const {
    std::shared_ptr<const Setup> setup = CurrentSetup();
    if (!setup->spec.nominations_generation) return std::nullopt;
    return setup->spec.nominations_generation();
  }

  // ProfileSpec::nomination_changes; nullopt without the hook too.
  std::optional<uint64_t> NominationChangesSince(uint64_t since, int32_t priority,
                                                 const std::function<void(std::string_view node)>& visit) const {
    std::shared_ptr<const Setup> setup = CurrentSetup();
    if (!setup->spec.nomination_changes) return std::nullopt;
    return setup->spec.nomination_changes(since, priority, visit);
  }
  bool TracksNominationChanges() const { return static_cast<bool>(CurrentSetup()->spec.nomination_changes); }
  // Some pod may be nominated (true without the nominations_count hook).
  bool MayHaveNominations() const {
    std::shared_ptr<const Setup> setup = CurrentSetup();
    return !setup->spec.nominations_count || setup->spec.nominations_count() > 0;
  }
  // ProfileSpec::nominated_node_of; "" without the hook.
  std::string NominatedNodeOf(std::string_view uid) const {
    std::shared_ptr<const Setup> setup = CurrentSetup();
    return setup->spec.nominated_node_of ? setup->spec.nominated_node_of(uid) : std::string();
  }

  // Remote PreEnqueue plugins, in order (SchedulingGates runs in the queue's
  // PreEnqueue before this). The first non-success gates the pod.
  // `pod_group` / `pod_group_pods`: what the scheduler knows of the pod's gang,
  // carried in the request (PreEnqueueRequest.pod_group, pod_group_pods).
  sdk::Status RunPreEnqueue(const v1::Pod& pod, const v1::PodGroup* pod_group = nullptr,
                            uint32_t pod_group_pods = 0) const;

  void AddPostFilterPlugin(PostFilterPluginPtr plugin) { post_filters_.push_back(std::move(plugin)); }
  bool HasPostFilterPlugins() const { return !post_filters_.empty(); }
  // kube-scheduler's RunPostFilterPlugins: the first Success wins; an
  // UnschedulableAndUnresolvable stops; other rejections are collected.
  // An unschedulable cycle that will not run PostFilter (a gang member): the
  // plugin processes may drop its state.
  void AbandonCycle(uint64_t cycle_id) { FinishCycle(*CurrentSetup(), cycle_id); }
  std::pair<PostFilterResult, sdk::Status> RunPostFilter(const v1::Pod& pod,
                                                         const Diagnosis& diagnosis);

  // Reserve and Permit bring their processes' mirrors to the state the last
  // SchedulePod ran on; this moves that point on to `state_seq` (the gang
  // pass: each member's Permit must see every member the pass assumed).
  void AdvanceBindingState(uint64_t state_seq) { last_state_seq_ = state_seq; }
  // Brings every process's mirror to `state_seq` with a state-only message
  // (none when it is there already, or mirrors nothing), waiting for no
  // answer. Scheduling thread, between cycles: no later cycle's state_seq is
  // older (a mirror taken back would cost a full resync).
  void SyncMirrors(uint64_t state_seq) const {
    for (PluginProcess* process : CurrentSetup()->all_processes) process->SendState(state_seq);
  }
  sdk::Status RunReserve(const v1::Pod& pod, const std::string& node, uint64_t cycle_id);
  void RunUnreserve(const v1::Pod& pod, const std::string& node, uint64_t cycle_id);
  PermitOutcome RunPermit(const v1::Pod& pod, const std::string& node, uint64_t cycle_id);
  sdk::Status RunPreBind(const v1::Pod& pod, const std::string& node, uint64_t cycle_id);
  // Remote Bind plugins in order; Skip from all of them (or none configured)
  // means the DefaultBinder's bind, which the caller issues.
  sdk::Status RunBindPlugins(const v1::Pod& pod, const std::string& node, uint64_t cycle_id);
  void RunPostBind(const v1::Pod& pod, const std::string& node, uint64_t cycle_id);

  bool HasRemotePlugins(v1::ExtensionPoint point) const;

 private:
  // The plugins of one process for the cycle phases.
  struct ProcessPlan {
    PluginProcess* process = nullptr;
    std::vector<std::string> pre_filter, filter, pre_score, score;
  };

  // The point's remote plugins, in order (or reversed), as runs of consecutive
  // plugins served by one process: each run travels in one request.
  using ProcessRun = std::pair<PluginProcess*, std::vector<std::string>>;

  // What the profile resolves to: immutable, replaced whole by Reconfigure.
  struct Setup {
    ProfileSpec spec;
    // Every process with cycle plugins, in the order its first plugin appears.
    std::vector<ProcessPlan> plans;
    size_t num_filter_processes = 0;
    absl::flat_hash_map<std::string, int64_t> weights;
    // Processes that serve only PreBind/Bind/PostBind plugins of this profile:
    // they get no request with state, so a state-only message at Reserve.
    std::vector<PluginProcess*> binding_only_processes;
    std::vector<PluginProcess*> all_processes;  // Every process of the profile, once.
  };
  static std::shared_ptr<const Setup> BuildSetup(ProfileSpec spec);
  std::shared_ptr<const Setup> CurrentSetup() const;
  static bool HasRemotePlugins(const Setup& setup, v1::ExtensionPoint point);

  static std::vector<ProcessRun> RemoteRuns(const Setup& setup, v1::ExtensionPoint point,
                                            bool reverse);
  // The same without the pod_group_members_only plugins when `pod` names no group.
  static std::vector<ProcessRun> RemoteRunsFor(const Setup& setup, v1::ExtensionPoint point,
                                               bool reverse, const v1::Pod& pod);
  // Reserve/Unreserve/PreBind/Bind/PostBind: the point's remote plugins, in
  // order, one request per run of plugins served by one process.
  // state_seq: the state the processes' mirrors are brought to first (only on
  // the scheduling thread, which owns the snapshot).
  sdk::Status RunStatusPhase(v1::ExtensionPoint point, const v1::Pod& pod, const std::string& node,
                             uint64_t cycle_id, bool unreserve, bool stop_on_skip,
                             std::optional<uint64_t> state_seq = std::nullopt) const;
  sdk::Status RunStatusRuns(const std::vector<ProcessRun>& groups, v1::ExtensionPoint point,
                            const v1::Pod& pod, const std::string& node, uint64_t cycle_id,
                            bool unreserve, bool stop_on_skip,
                            std::optional<uint64_t> state_seq) const;
  PermitOutcome RunPermitPlugins(const v1::Pod& pod, const std::string& node, uint64_t cycle_id);
  // A CycleRequest for the plan's filter and/or score plugins, without pod and nodes.
  v1::SchedulerToPlugin NewCycleRequest(const ProcessPlan& plan, uint64_t cycle_id, bool filter,
                                        bool score) const;
  // The answer's error, or its validation against the request (counted and
  // logged when invalid). With `score_error`, a problem of the scores alone
  // (or a PreScore ERROR) goes there instead, so that a caller under Ignore
  // can drop the scores and keep the filter verdicts.
  absl::Status CheckCycleAnswer(const ProcessPlan& plan, const PluginAnswer& answer,
                                const v1::CycleRequest& request, const sdk::Snapshot& snapshot,
                                bool scores_for_request_nodes, absl::Status* score_error = nullptr) const;
  // Validates a CycleResponse against its request; an error names the problem.
  absl::Status ValidateCycleAnswer(const ProcessPlan& plan, const v1::CycleRequest& request,
                                   const v1::CycleResponse& answer, const sdk::Snapshot& snapshot,
                                   bool expect_scores_for_request_nodes,
                                   absl::Status* score_error = nullptr) const;
  // A plugin's ERROR status at PreFilter or Filter in the answer (the first),
  // or OK.
  static absl::Status FirstFilterError(const v1::CycleResponse& answer);
  // CycleResponse.scores (`scored` per plugin, each in range, only plugins
  // the request named, once each) and pre_score_status (not ERROR).
  static absl::Status ValidateScores(const v1::CycleRequest& request, const v1::CycleResponse& answer,
                                     size_t scored);
  // CycleResponse.what_if against CycleRequest.what_if_copies.
  static absl::Status ValidateWhatIf(const v1::CycleRequest& request, const v1::CycleResponse& answer);
  // CycleResponse.lookahead against CycleRequest.lookahead, into `out`.
  // A lookahead's nodes (not its pod) into the request.
  static void FillLookahead(const LookaheadRequest& from, v1::Lookahead& out);
  static absl::Status TakeLookahead(const v1::CycleRequest& request, const v1::CycleResponse& answer,
                                    LookaheadAnswer& out);
  // CycleResponse.later_lookaheads against CycleRequest.later_lookaheads:
  // one valid answer per pod asked, or an error (and `out` empty).
  static absl::Status TakeLaterLookaheads(const v1::CycleRequest& request, const v1::CycleResponse& answer,
                                          std::vector<LookaheadAnswer>& out);
  // One lookahead's answer against what was asked; errors name `field`.
  static absl::Status TakeLookaheadEntry(const v1::CycleRequest& request, const v1::Lookahead& asked,
                                         const v1::LookaheadVerdicts& answer, const std::string& field,
                                         LookaheadAnswer& out);
  uint32_t NextStartIndex(uint32_t num_nodes) const;
  ScheduleResult RunFilterAndScore(const Setup& setup, const v1::Pod& pod,
                                   const sdk::Snapshot& snapshot, uint64_t state_seq,
                                   uint64_t cycle_id, const CycleScope& scope,
                                   const sdk::NodeInfo* only_node = nullptr);
  // Filter plugins in more than one process: every process asked at once, the
  // answers merged as one sequential Filter would decide (fan_out.cc). With
  // scope.node_ids (a batch's re-evaluation) exactly those nodes are judged.
  ScheduleResult RunFanOut(const Setup& setup, const v1::Pod& pod, const sdk::Snapshot& snapshot,
                           uint64_t state_seq, uint64_t cycle_id, uint32_t start,
                           uint32_t to_find, const CycleScope& scope, ScheduleResult result);
  // The round-0 what-if verdicts of every filtering process, merged for the
  // final feasible nodes into `ranking` (left without them when any process's
  // are missing).
  static void MergeWhatIf(const std::vector<uint32_t>& feasible,
                          const std::vector<std::optional<v1::CycleResponse>>& answers,
                          const std::vector<bool>& ignored, uint32_t copies, Ranking& ranking);
  // A score request in flight: one process's PreScore/Score plugins over `feasible`.
  struct ScoreCall {
    const ProcessPlan* plan;
    v1::CycleRequest shape;  // What the answer is checked against.
    std::future<PluginAnswer> answer;
  };
  ScoreCall SendScoreRequest(const ProcessPlan& plan, uint64_t cycle_id,
                             const std::vector<uint32_t>& feasible, const v1::Pod& pod,
                             uint64_t state_seq);
  // Waits for every answer (timed from `sent`, as one parallel Score phase) and
  // folds the scores in; a process under Ignore that failed adds nothing. The
  // first process under Fail that failed, with its error, or nullopt.
  struct ProcessError {
    PluginProcess* process;
    absl::Status status;
  };
  std::optional<ProcessError> FoldScoreAnswers(
      std::vector<ScoreCall>& calls, absl::Time sent, const sdk::Snapshot& snapshot,
      absl::flat_hash_map<std::string, std::vector<int64_t>>& scores);
  // kube-scheduler's selectHost: weighted totals over `feasible`, ties at random.
  void SelectHost(const Setup& setup, const std::vector<uint32_t>& feasible,
                  const absl::flat_hash_map<std::string, std::vector<int64_t>>& scores,
                  const sdk::Snapshot& snapshot, ScheduleResult& result);
  std::pair<PostFilterResult, sdk::Status> RunPostFilterPlugins(const v1::Pod& pod,
                                                                const Diagnosis& diagnosis);
  // Tells every process of the profile that the cycle ended.
  static void FinishCycle(const Setup& setup, uint64_t cycle_id);

  // The cycle phases of the SchedulePod running now (scheduling thread): how
  // long each took and its worst status, recorded once per phase at the end.
  enum Phase { kPreFilterPhase, kFilterPhase, kPreScorePhase, kScorePhase, kNumPhases };
  struct PhaseTiming {
    absl::Duration duration;
    sdk::Code status = sdk::Code::kSuccess;
    bool ran = false;
  };
  // Sequential requests add up; parallel ones (score) take the longest.
  void AddPhase(Phase phase, absl::Duration duration, sdk::Code status, bool parallel = false);
  // A cycle answer's phases: as the process reported them (durations), or the
  // whole round trip as Filter (Score for a score-only request).
  // `concurrent`: the request ran alongside others of the same phase.
  void AddCyclePhases(const ProcessPlan& plan, const v1::CycleResponse& answer,
                      absl::Duration round_trip, bool filter, bool score, bool concurrent = false);
  void RecordPhases();
  void Record(std::string_view point, sdk::Code status, absl::Duration duration) const;
  // scheduler_plugin_execution_duration_seconds for one process's share of a
  // point: labelled with the plugin when the process ran one plugin there,
  // else "endpoint/NAME" (the process times phases, not plugins).
  void RecordPlugins(const PluginProcess& process, const std::vector<std::string>& plugins,
                     std::string_view point, sdk::Code status, absl::Duration duration) const;
  // A process failed: applies its failure policy. True for Ignore (counted on
  // the process), false for Fail; both counted through the recorder.
  bool IgnoresFailure(PluginProcess& process) const;

  const std::string name_;
  ExtensionPointRecorder* const recorder_;
  mutable absl::Mutex setup_mu_;
  std::shared_ptr<const Setup> setup_ ABSL_GUARDED_BY(setup_mu_);
  uint64_t setup_generation_ ABSL_GUARDED_BY(setup_mu_) = 0;
  std::vector<PostFilterPluginPtr> post_filters_;
  uint32_t next_start_node_index_ = 0;
  // The last full cycle found no node: the next one likely finds none either
  // (a burst of preemptors), so it carries PostFilter's predicted dry run.
  bool last_cycle_found_none_ = false;
  // The state the last SchedulePod ran on: Reserve and Permit (same thread,
  // same cycle) bring their processes' mirrors there too.
  std::optional<uint64_t> last_state_seq_;
  uint64_t last_cycle_id_ = 0;  // Of the last SchedulePod, for RunPostFilter.
  std::array<PhaseTiming, kNumPhases> phases_;
  std::mt19937_64 rng_;
};

using FrameworkPtr = std::unique_ptr<Framework>;

}  // namespace podium::scheduler
