// The phases of one scheduling cycle as a plugin process runs them, on the
// session's mirror: PreFilter, Filter (from the rotated start, stopping at
// num_feasible_to_find, counting nominated pods), PreScore, Score and
// NormalizeScore for a CycleRequest, and preemption's dry run of Filter with
// pods removed or added. It keeps the cycle states until their cycle finishes.
// Not thread-safe: the session calls it for one message at a time. With a
// Parallelizer, Filter and Score of one request run over the nodes in chunks
// on several threads (plugins' Filter and Score are called concurrently for
// different nodes of one cycle; the cycle state is only read meanwhile); the
// answer is the one serial evaluation gives.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/btree_map.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "mirror.h"
#include "parallelizer.h"
#include "podium/sdk/extension_points.h"
#include "podium/sdk/framework.h"
#include "podium/v1/plugin.pb.h"

namespace podium::sdk::internal {

enum class ExtensionPointKind {
  kPreEnqueue,
  kPreFilter,
  kFilter,
  kPreScore,
  kScore,
  kReserve,
  kPermit,
  kPreBind,
  kBind,
  kPostBind,
};

// A plugin built for one stream, with its interfaces resolved once.
struct PluginInstance {
  std::string name;  // As registered (the definition's name).
  PluginPtr plugin;
  PreEnqueuePlugin* pre_enqueue = nullptr;
  PreFilterPlugin* pre_filter = nullptr;
  FilterPlugin* filter = nullptr;
  PreScorePlugin* pre_score = nullptr;
  ScorePlugin* score = nullptr;
  ReservePlugin* reserve = nullptr;
  PermitPlugin* permit = nullptr;
  PreBindPlugin* pre_bind = nullptr;
  BindPlugin* bind = nullptr;
  PostBindPlugin* post_bind = nullptr;
  std::vector<ClusterEventWithHint> events;

  bool Implements(ExtensionPointKind point) const;
};

using PluginList = std::vector<PluginInstance*>;

enum class Recode {
  kKeep,
  // Rejections keep their code, anything else that is not success is an error
  // (kube-scheduler's RunFilterPlugins).
  kFilter,
  kError,
};

// Writes a plugin's status to the wire (on the response's arena: no copies of
// the status on the heap).
void WriteStatus(const Status& status, const std::string& plugin, Recode recode, v1::Status* out);

// The pod of a request, moved out of it.
PodInfoPtr TakePod(v1::Pod* pod);

// Adds a cycle's rejected nodes to its response. With the status table
// (protocol version 2) each distinct status travels once, in
// CycleResponse.status_table, and the nodes point at it: a pod that no node
// fits (preemption's first cycle) is rejected by hundreds of nodes for the
// same reason by the same plugin. Without it every node carries its status.
class RejectionWriter {
 public:
  RejectionWriter(v1::CycleResponse& out, bool status_table) : out_(out), table_(status_table) {}
  void Add(uint32_t node_id, const Status& status, const std::string& plugin, Recode recode);

 private:
  // Beyond this many distinct statuses further ones are written inline: the
  // search for a match stays short whatever the plugins return.
  static constexpr int kMaxTableSize = 64;
  v1::CycleResponse& out_;
  const bool table_;
  int last_ = -1;  // The entry matched last (rejections come in runs).
};

class CycleRunner {
 public:
  // Beyond max_cycle_states the oldest cycle state is dropped (a safety bound
  // for a scheduler that never sends finished_cycles).
  // `parallelizer` (may be null: serial) must outlive the runner.
  CycleRunner(const Mirror& mirror, size_t max_cycle_states, Parallelizer* parallelizer = nullptr);
  CycleRunner(const CycleRunner&) = delete;
  CycleRunner& operator=(const CycleRunner&) = delete;

  // The plugin lists are the request's, resolved; objects are moved out of
  // the request. An error is a request that cannot be run at all.
  absl::Status RunCycle(const PluginList& pre_filters, const PluginList& filters,
                        const PluginList& pre_scores, const PluginList& scores,
                        v1::CycleRequest& request, v1::CycleResponse& out);
  absl::Status RunDryRunFilter(const PluginList& filters, v1::DryRunFilterRequest& request,
                               v1::DryRunFilterResponse& out);

  // The state of a cycle, created on first use (Reserve, Permit... of a cycle
  // filtered elsewhere).
  CycleState& StateFor(uint64_t cycle_id);
  CycleState* FindState(uint64_t cycle_id);
  // The scheduler finished the cycle: its state goes.
  void Finish(uint64_t cycle_id);
  // The pod of the last RunCycle (null before the first).
  const PodInfoPtr& last_cycle_pod() const { return last_cycle_pod_; }
  // Whether rejections go through CycleResponse.status_table (the stream
  // speaks protocol version 2).
  void set_status_table(bool on) { status_table_ = on; }
  // Whether CycleRequest.what_if_copies is answered (protocol version 3).
  void set_what_if(bool on) { what_if_ = on; }
  // Whether CycleRequest.lookahead is answered (protocol version 4).
  void set_lookahead(bool on) { lookahead_ = on; }
  // Whether CycleRequest.later_lookaheads is answered (protocol version 5).
  void set_later_lookaheads(bool on) { later_lookaheads_ = on; }
  // Whether CycleRequest.nominated_checks is answered (protocol version 6).
  void set_nominated_checks(bool on) { nominated_checks_ = on; }
  // CycleRequest.nominated_checks, after RunCycle answered the request's own
  // pod: each pod on its nominated node as the mirror holds it, with the
  // nominated pods that count for it there (its own cycle state, dropped
  // after). Not answered with a preemption dry run in the request (the
  // scheduler never sends both) or when switched off.
  void RunNominatedChecks(const PluginList& pre_filters, const PluginList& filters, v1::CycleRequest& request,
                          v1::CycleResponse& out);
  // The most copies a what-if request may ask for.
  static constexpr uint32_t kMaxWhatIfCopies = 8;
  size_t NumCycleStates() const { return cycle_states_.size(); }

 private:
  struct ExtensionRef {
    PreFilterExtensions* extensions;
    const std::string* plugin;
  };

  // Filter plugins not skipped by PreFilter, in order, into `out`.
  static void ActiveFilters(const PluginList& filters, CycleState& state, PluginList& out);
  static void ActiveExtensions(const PluginList& pre_filters, CycleState& state,
                               std::vector<ExtensionRef>& out);
  // PreFilter of a pod on a state of its own (a lookahead's, a nominated
  // check's): skips are recorded in the state; `status` is the first result
  // that is neither success nor skip (then the rest do not run), with its
  // plugin; `allowed` the intersection of the node sets plugins narrowed to
  // (none when no plugin narrowed).
  struct PreFilterOutcome {
    Status status;
    const std::string* plugin = nullptr;
    std::optional<absl::flat_hash_set<std::string>> allowed;
  };
  PreFilterOutcome RunPreFilters(const PluginList& pre_filters, CycleState& state, const PodInfo& pod) const;
  // A filter outcome and the plugin that produced it (null on success).
  struct FilterOutcome {
    Status status;
    const std::string* plugin = nullptr;
  };
  static FilterOutcome RunFilters(const PluginList& filters, CycleState& state,
                                  const PodInfo& pod, const NodeInfo& node);
  FilterOutcome RunFiltersWithNominatedPods(CycleState& state, const PodInfo& pod,
                                            const NodeInfo& node);

  // Filter over nodes[start...] (rotated) until `want` (0: all) pass, on the
  // parallelizer; writes `out` and feasible_ exactly as the serial loop does.
  // Returns false when the cycle stopped at an error.
  bool ParallelFilter(const std::vector<const NodeInfo*>& nodes, size_t start, size_t want,
                      CycleState& state, const PodInfo& pod,
                      const absl::flat_hash_set<const NodeInfo*>* allowed_nodes,
                      const std::vector<std::string>& narrowing_plugins,
                      const std::string& narrowed_by, v1::CycleResponse& out);
  bool UseParallel(size_t items) const;
  // CycleRequest.what_if_copies for every node of feasible_, after the
  // cycle's own scores (state is the cycle's, only cloned from).
  void RunWhatIf(uint32_t copies, const PluginList& pre_scores, const PluginList& scores,
                 const CycleState& state, const PodInfoPtr& pod, v1::CycleResponse& out);

  // One lookahead of the request (CycleRequest.lookahead or one of its
  // later_lookaheads), after the cycle of the request's pod, into `answer`.
  // `chain`: the request's pod, then the pods of the lookaheads run before
  // this one (ChainNode.pods' positions); this one's pod is appended. False,
  // with `answer` untouched, when it cannot be answered (a node the mirror
  // does not hold, a ChainNode naming a pod not before it).
  bool RunLookahead(const PluginList& pre_filters, const PluginList& filters,
                    const PluginList& pre_scores, const PluginList& scores, v1::Lookahead& lookahead,
                    std::vector<PodInfoPtr>& chain, v1::LookaheadVerdicts& answer);

  const Mirror& mirror_;
  const size_t max_cycle_states_;
  Parallelizer* const parallelizer_;
  bool status_table_ = false;
  bool what_if_ = false;
  bool lookahead_ = false;
  bool later_lookaheads_ = false;
  bool nominated_checks_ = false;
  PodInfoPtr last_cycle_pod_;
  // Cycle ids grow, so the smallest id is the oldest cycle.
  absl::btree_map<uint64_t, std::unique_ptr<CycleState>> cycle_states_;

  // Scratch reused across requests (no per-node allocations on the hot path).
  PluginList active_filters_;
  std::vector<ExtensionRef> extensions_;
  std::vector<const NodeInfo*> request_nodes_;
  std::vector<const NodeInfo*> feasible_;
  // A node with its nominated pods added (RunFiltersWithNominatedPods; never
  // used from the parallel filter).
  NodeInfo scratch_node_;
  // Per score plugin: its scores of feasible_, and its first failure (node
  // index; feasible_.size() when none).
  std::vector<std::vector<NodeScore>> plugin_scores_;
  struct ScoreError {
    size_t node;
    Status status;
  };
  std::vector<ScoreError> score_errors_;
  std::vector<uint8_t> score_skipped_;
  // Nominated pods per node id, when the request carried them; otherwise
  // (mirrored_nominations_) the mirror's, by node name.
  absl::flat_hash_map<uint32_t, std::vector<PodInfoPtr>> nominated_;
  bool mirrored_nominations_ = false;
  // Per node id, the nominated pods this cycle's pod must count there
  // (priority >= its own, not itself, not already on the node), in their
  // order: worked out once per cycle from the few nodes with nominations,
  // not once per node evaluated.
  absl::flat_hash_map<uint32_t, std::vector<const PodInfoPtr*>> counted_nominated_;
  // `only`: the request's nodes when it lists them (null: every node).
  void CountNominatedPods(const PodInfo& pod, const std::vector<const NodeInfo*>* only);
  // Per position of the rotation, for parallel filtering.
  enum class NodeVerdict : uint8_t { kUnevaluated, kPass, kNarrowedOut, kRejected };
  std::vector<NodeVerdict> verdicts_;
  std::vector<FilterOutcome> outcomes_;
};

}  // namespace podium::sdk::internal
