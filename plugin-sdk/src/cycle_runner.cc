#include "cycle_runner.h"

#include <algorithm>
#include <chrono>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl_compat.h"

namespace podium::sdk::internal {

namespace {
// The code a status travels with: `recode` may turn it into ERROR.
v1::Status::Code WireCode(const Status& status, Recode recode) {
  Code code = status.code();
  if (recode == Recode::kError ||
      (recode == Recode::kFilter && !status.IsSuccess() && !status.IsRejected())) {
    code = Code::kError;
  }
  return static_cast<v1::Status::Code>(static_cast<int>(code));
}
}  // namespace

void WriteStatus(const Status& status, const std::string& plugin, Recode recode,
                 v1::Status* out) {
  out->set_code(WireCode(status, recode));
  for (const std::string& reason : status.reasons()) out->add_reasons(reason);
  out->set_plugin(plugin);
}

PodInfoPtr TakePod(v1::Pod* pod) { return PodInfo::Create(std::move(*pod)); }

namespace {
// Whether `entry` is what WriteStatus would write for (code, reasons, plugin).
bool SameStatus(const v1::Status& entry, v1::Status::Code code, const Status& status,
                const std::string& plugin) {
  if (entry.code() != code || entry.plugin() != plugin ||
      entry.reasons_size() != static_cast<int>(status.reasons().size())) {
    return false;
  }
  for (int i = 0; i < entry.reasons_size(); ++i) {
    if (entry.reasons(i) != status.reasons()[i]) return false;
  }
  return true;
}
}  // namespace

void RejectionWriter::Add(uint32_t node_id, const Status& status, const std::string& plugin,
                          Recode recode) {
  v1::NodeStatus& rejected = *out_.add_rejected();
  rejected.set_node_id(node_id);
  if (!table_) {
    WriteStatus(status, plugin, recode, rejected.mutable_status());
    return;
  }
  const v1::Status::Code wire_code = WireCode(status, recode);
  const int size = out_.status_table_size();
  int match = -1;
  if (last_ >= 0 && last_ < size && SameStatus(out_.status_table(last_), wire_code, status, plugin)) {
    match = last_;
  }
  for (int i = 0; match < 0 && i < size; ++i) {
    if (i != last_ && SameStatus(out_.status_table(i), wire_code, status, plugin)) match = i;
  }
  if (match < 0) {
    if (size >= kMaxTableSize) {
      WriteStatus(status, plugin, recode, rejected.mutable_status());
      return;
    }
    WriteStatus(status, plugin, recode, out_.add_status_table());
    match = size;
  }
  last_ = match;
  rejected.set_status_index(static_cast<uint32_t>(match) + 1);
}

namespace {
// Times the phases of a cycle request into CycleResponse.durations, so the
// scheduler can record each extension point on its own.
class PhaseTimer {
 public:
  enum Phase { kNone, kPreFilter, kFilter, kPreScore, kScore };
  explicit PhaseTimer(v1::CycleResponse& out) : out_(out) {}
  ~PhaseTimer() { Enter(kNone); }
  PhaseTimer(const PhaseTimer&) = delete;
  PhaseTimer& operator=(const PhaseTimer&) = delete;

  // Ends the current phase (if any) and starts `next`.
  void Enter(Phase next) {
    const auto now = std::chrono::steady_clock::now();
    if (phase_ != kNone) {
      const uint64_t ns = std::max<int64_t>(
          1, std::chrono::duration_cast<std::chrono::nanoseconds>(now - since_).count());
      v1::PhaseDurations& d = *out_.mutable_durations();
      switch (phase_) {
        case kPreFilter: d.set_pre_filter_ns(d.pre_filter_ns() + ns); break;
        case kFilter: d.set_filter_ns(d.filter_ns() + ns); break;
        case kPreScore: d.set_pre_score_ns(d.pre_score_ns() + ns); break;
        case kScore: d.set_score_ns(d.score_ns() + ns); break;
        case kNone: break;
      }
    }
    phase_ = next;
    since_ = now;
  }

 private:
  v1::CycleResponse& out_;
  Phase phase_ = kNone;
  std::chrono::steady_clock::time_point since_;
};

}  // namespace

namespace {
// Below this many nodes (times plugins) a request is evaluated on the calling
// thread: waking a pool thread costs more than the work.
constexpr size_t kMinParallelNodes = 256;

// What-if and lookahead verdicts evaluate nodes one by one, each with pods
// added, on a copy of the cycle's state. Only PreFilter extensions (AddPod)
// change what a node's verdict reads from it; PreScore rewrites its own
// entries for each node. So without an active extension one copy serves
// every node (a copy per node was a third of the lookahead's CPU on
// basic-5000-mixed); with one, each node gets a fresh copy.
class StateForEachNode {
 public:
  StateForEachNode(const CycleState& base, bool shared) : base_(base), shared_(shared) {}
  CycleState* Next() {
    if (!shared_ || state_ == nullptr) state_ = base_.Clone();
    return state_.get();
  }

 private:
  const CycleState& base_;
  const bool shared_;
  std::unique_ptr<CycleState> state_;
};
}  // namespace

CycleRunner::CycleRunner(const Mirror& mirror, size_t max_cycle_states, Parallelizer* parallelizer)
    : mirror_(mirror), max_cycle_states_(max_cycle_states), parallelizer_(parallelizer) {}

bool CycleRunner::UseParallel(size_t items) const {
  return parallelizer_ != nullptr && parallelizer_->parallelism() > 1 && items >= kMinParallelNodes;
}

bool CycleRunner::ParallelFilter(const std::vector<const NodeInfo*>& nodes, size_t start,
                                 size_t want, CycleState& state, const PodInfo& pod,
                                 const absl::flat_hash_set<const NodeInfo*>* allowed_nodes,
                                 const std::vector<std::string>& narrowing_plugins,
                                 const std::string& narrowed_by, v1::CycleResponse& out) {
  const size_t n = nodes.size();
  verdicts_.assign(n, NodeVerdict::kUnevaluated);
  outcomes_.resize(n);
  const int chunk_size = parallelizer_->ChunkSize(static_cast<int>(n));
  const int num_chunks = static_cast<int>((n + chunk_size - 1) / chunk_size);
  std::atomic<size_t> passed{0};
  auto node_at = [&](size_t position) -> const NodeInfo& {
    size_t index = start + position;
    if (index >= n) index -= n;
    return *nodes[index];
  };
  parallelizer_->ParallelFor(num_chunks, [&](int chunk) {
    const size_t begin = static_cast<size_t>(chunk) * chunk_size;
    const size_t end = std::min(n, begin + chunk_size);
    size_t chunk_passed = 0;
    for (size_t k = begin; k < end; ++k) {
      const NodeInfo& node = node_at(k);
      if (allowed_nodes != nullptr && !allowed_nodes->contains(&node)) {
        verdicts_[k] = NodeVerdict::kNarrowedOut;
        continue;
      }
      FilterOutcome outcome = RunFilters(active_filters_, state, pod, node);
      if (outcome.status.IsSuccess()) {
        verdicts_[k] = NodeVerdict::kPass;
        ++chunk_passed;
        continue;
      }
      const bool error = !outcome.status.IsRejected();
      verdicts_[k] = NodeVerdict::kRejected;
      outcomes_[k] = std::move(outcome);
      if (error) return false;  // Nothing after it counts.
    }
    const size_t total = passed.fetch_add(chunk_passed) + chunk_passed;
    return want == 0 || total < want;
  });
  // The claimed chunks are a prefix of the rotation: read it in order, as the
  // serial loop would have produced it.
  uint32_t evaluated = 0;
  bool ok = true;
  RejectionWriter rejections(out, status_table_);
  const Status narrowed(Code::kUnschedulableAndUnresolvable,
                        absl::StrCat("node(s) didn't satisfy plugin(s) [", narrowed_by, "]"));
  for (size_t k = 0; k < n && (want == 0 || feasible_.size() < want); ++k) {
    if (verdicts_[k] == NodeVerdict::kUnevaluated) break;  // Only after an early stop.
    const NodeInfo& node = node_at(k);
    ++evaluated;
    if (verdicts_[k] == NodeVerdict::kPass) {
      feasible_.push_back(&node);
      out.add_feasible(node.id());
      continue;
    }
    if (verdicts_[k] == NodeVerdict::kNarrowedOut) {
      rejections.Add(node.id(), narrowed, narrowing_plugins.front(), Recode::kKeep);
      continue;
    }
    const FilterOutcome& outcome = outcomes_[k];
    rejections.Add(node.id(), outcome.status, *outcome.plugin, Recode::kFilter);
    if (!outcome.status.IsRejected()) {
      ok = false;
      break;
    }
  }
  out.set_nodes_evaluated(evaluated);
  for (size_t k = 0; k < n; ++k) {
    if (verdicts_[k] == NodeVerdict::kRejected) outcomes_[k] = FilterOutcome{};
  }
  return ok;
}


void CycleRunner::Finish(uint64_t cycle_id) { cycle_states_.erase(cycle_id); }

CycleState& CycleRunner::StateFor(uint64_t cycle_id) {
  auto [it, inserted] = cycle_states_.try_emplace(cycle_id);
  if (!inserted) return *it->second;
  it->second = std::make_unique<CycleState>();
  CycleState& state = *it->second;
  while (cycle_states_.size() > max_cycle_states_) {
    auto oldest = cycle_states_.begin();
    if (oldest->first == cycle_id) ++oldest;
    cycle_states_.erase(oldest);
  }
  return state;
}

CycleState* CycleRunner::FindState(uint64_t cycle_id) {
  auto it = cycle_states_.find(cycle_id);
  return it == cycle_states_.end() ? nullptr : it->second.get();
}

void CycleRunner::ActiveFilters(const PluginList& filters, CycleState& state, PluginList& out) {
  out.clear();
  const auto& skipped = state.skip_filter_plugins();
  for (PluginInstance* filter : filters) {
    if (skipped.empty() || !skipped.contains(filter->name)) out.push_back(filter);
  }
}

void CycleRunner::ActiveExtensions(const PluginList& pre_filters, CycleState& state,
                               std::vector<ExtensionRef>& out) {
  out.clear();
  const auto& skipped = state.skip_filter_plugins();
  for (PluginInstance* plugin : pre_filters) {
    if (plugin->pre_filter == nullptr) continue;
    if (!skipped.empty() && skipped.contains(plugin->name)) continue;
    if (PreFilterExtensions* extensions = plugin->pre_filter->Extensions()) {
      out.push_back({extensions, &plugin->name});
    }
  }
}

CycleRunner::FilterOutcome CycleRunner::RunFilters(const PluginList& filters, CycleState& state,
                                           const PodInfo& pod, const NodeInfo& node) {
  for (PluginInstance* plugin : filters) {
    Status status = plugin->filter->Filter(state, pod, node);
    if (!status.IsSuccess()) return {std::move(status), &plugin->name};
  }
  return {};
}

// kube-scheduler's RunFilterPluginsWithNominatedPods: the node must fit with
// the nominated pods of higher or equal priority on it (they will take their
// place), and without them (pod affinity may need them absent).
void CycleRunner::CountNominatedPods(const PodInfo& pod, const std::vector<const NodeInfo*>* only) {
  counted_nominated_.clear();
  auto add = [&](const NodeInfo& node, const std::vector<PodInfoPtr>& nominated) {
    std::vector<const PodInfoPtr*>* counted = nullptr;
    for (const PodInfoPtr& other : nominated) {
      if (other->uid() == pod.uid() || other->pod->priority() < pod.pod->priority() ||
          node.FindPod(other->uid()) != nullptr) {
        continue;
      }
      if (counted == nullptr) counted = &counted_nominated_[node.id()];
      counted->push_back(&other);
    }
  };
  if (mirrored_nominations_ && only != nullptr && only->size() < mirror_.NumNominatedPods()) {
    // A request for a few nodes (a nominated node, a batch's or a kept
    // failure's changed nodes) among many nominations (a burst of
    // preemptors): only its nodes' nominations.
    for (const NodeInfo* node : *only) {
      if (counted_nominated_.contains(node->id())) continue;  // Listed twice.
      if (const std::vector<PodInfoPtr>* nominated = mirror_.NominatedPodsOn(node->name())) add(*node, *nominated);
    }
  } else if (mirrored_nominations_) {
    mirror_.ForEachNominatedNode([&](const std::string& name, const std::vector<PodInfoPtr>& nominated) {
      if (const NodeInfo* node = mirror_.Get(name)) add(*node, nominated);
    });
  } else {
    for (const auto& [id, nominated] : nominated_) {
      if (const NodeInfo* node = mirror_.GetById(id)) add(*node, nominated);
    }
  }
}

CycleRunner::FilterOutcome CycleRunner::RunFiltersWithNominatedPods(CycleState& state,
                                                            const PodInfo& pod,
                                                            const NodeInfo& node) {
  // Most nodes have no nominated pod that counts: no copy for them.
  auto counted = counted_nominated_.find(node.id());
  if (counted == counted_nominated_.end()) return RunFilters(active_filters_, state, pod, node);
  // The node with them: a scratch copy whose buffers are reused node after node.
  NodeInfo& node_with_pods = scratch_node_;
  node_with_pods = node;
  // Only PreFilter extensions (AddPod) write the state: without an active one
  // (no inter-pod affinity or spread constraint to count) the cycle's state is
  // read as it is, with no clone per node.
  std::unique_ptr<CycleState> clone;
  if (!extensions_.empty()) clone = state.Clone();
  CycleState& state_with_pods = clone != nullptr ? *clone : state;
  for (const PodInfoPtr* other : counted->second) {
    node_with_pods.AddPod(*other);
    for (const ExtensionRef& ext : extensions_) {
      Status status = ext.extensions->AddPod(state_with_pods, pod, **other, node_with_pods);
      if (!status.IsSuccess()) return {Status(Code::kError, status.reasons()), ext.plugin};
    }
  }
  FilterOutcome with_pods = RunFilters(active_filters_, state_with_pods, pod, node_with_pods);
  if (!with_pods.status.IsSuccess()) return with_pods;
  return RunFilters(active_filters_, state, pod, node);
}

absl::Status CycleRunner::RunCycle(const PluginList& pre_filters, const PluginList& filters,
                                  const PluginList& pre_scores, const PluginList& scores,
                                  v1::CycleRequest& request, v1::CycleResponse& out) {
  const v1::NodeSet& node_set = request.nodes();
  const bool all_nodes = node_set.all_nodes();
  if (!all_nodes) {
    request_nodes_.clear();
    request_nodes_.reserve(node_set.node_ids_size());
    for (int i = 0; i < node_set.node_ids_size(); ++i) {
      const NodeInfo* node = mirror_.GetById(node_set.node_ids(i));
      if (node == nullptr) {
        return absl::InvalidArgumentError(absl::StrCat(
            "cycle.nodes.node_ids[", i, "]: unknown node id ", node_set.node_ids(i)));
      }
      request_nodes_.push_back(node);
    }
  }
  const std::vector<const NodeInfo*>& nodes = all_nodes ? mirror_.Nodes() : request_nodes_;
  const uint32_t what_if_copies = what_if_ ? request.what_if_copies() : 0;
  if (what_if_copies > kMaxWhatIfCopies) {
    return absl::InvalidArgumentError(absl::StrCat("cycle.what_if_copies: ", what_if_copies,
                                                   " exceeds ", kMaxWhatIfCopies));
  }

  PodInfoPtr pod = TakePod(request.mutable_pod());
  last_cycle_pod_ = pod;
  CycleState& state = StateFor(request.cycle_id());
  PhaseTimer timer(out);

  // PreFilter.
  if (!pre_filters.empty()) timer.Enter(PhaseTimer::kPreFilter);
  std::optional<absl::flat_hash_set<std::string>> allowed_names;
  std::vector<std::string> narrowing_plugins;
  // A plain Unschedulable from a PreFilter does not stop the others (as
  // kube-scheduler since #119770): preemption may help, and its dry run
  // filters with this cycle's state, which every PreFilter must have
  // written. The last such status is the cycle's answer.
  std::optional<std::pair<Status, const std::string*>> unschedulable;
  for (PluginInstance* plugin : pre_filters) {
    auto [result, status] = plugin->pre_filter->PreFilter(state, *pod, mirror_);
    if (status.IsSkip()) {
      state.skip_filter_plugins().insert(plugin->name);
      out.add_skipped_filter_plugins(plugin->name);
      continue;
    }
    if (status.code() == Code::kUnschedulable) {
      unschedulable.emplace(std::move(status), &plugin->name);
      continue;
    }
    if (!status.IsSuccess()) {
      WriteStatus(status, plugin->name, Recode::kFilter, out.mutable_pre_filter_status());
      return absl::OkStatus();
    }
    if (!result.node_names.has_value()) continue;
    narrowing_plugins.push_back(plugin->name);
    if (!allowed_names.has_value()) {
      allowed_names = std::move(result.node_names);
    } else {
      absl::erase_if(*allowed_names,
                     [&](const std::string& name) { return !result.node_names->contains(name); });
    }
    if (allowed_names->empty()) {
      Status status(Code::kUnschedulableAndUnresolvable,
                    absl::StrCat("node(s) didn't satisfy plugin(s) [",
                                 absl::StrJoin(narrowing_plugins, " "), "] simultaneously"));
      WriteStatus(status, plugin->name, Recode::kKeep, out.mutable_pre_filter_status());
      return absl::OkStatus();
    }
  }
  if (unschedulable.has_value()) {
    WriteStatus(unschedulable->first, *unschedulable->second, Recode::kFilter, out.mutable_pre_filter_status());
    return absl::OkStatus();
  }
  absl::flat_hash_set<const NodeInfo*> allowed_nodes;
  if (allowed_names.has_value()) {
    for (const std::string& name : *allowed_names) {
      if (const NodeInfo* node = mirror_.Get(name)) allowed_nodes.insert(node);
    }
  }
  const std::string narrowed_by = absl::StrJoin(narrowing_plugins, " ");

  // Filter.
  timer.Enter(filters.empty() ? PhaseTimer::kNone : PhaseTimer::kFilter);
  ActiveFilters(filters, state, active_filters_);
  nominated_.clear();
  // Nominated pods ride in the request, or (MirrorScope.nominated_pods) the
  // mirror keeps them.
  mirrored_nominations_ = request.nominated_pods_size() == 0 && mirror_.NumNominatedPods() > 0;
  counted_nominated_.clear();
  if (request.nominated_pods_size() > 0 || mirrored_nominations_) {
    ActiveExtensions(pre_filters, state, extensions_);
    for (v1::MirroredPod& nominated : *request.mutable_nominated_pods()) {
      nominated_[nominated.node_id()].push_back(TakePod(nominated.mutable_pod()));
    }
    CountNominatedPods(*pod, all_nodes ? nullptr : &nodes);
  }
  const size_t n = nodes.size();
  const size_t start = all_nodes && n > 0 ? node_set.start_index() % n : 0;
  const size_t want = request.num_feasible_to_find();
  feasible_.clear();
  if (counted_nominated_.empty() && UseParallel(n)) {
    if (!ParallelFilter(nodes, start, want, state, *pod,
                        allowed_names.has_value() ? &allowed_nodes : nullptr, narrowing_plugins,
                        narrowed_by, out)) {
      return absl::OkStatus();
    }
  } else {
    uint32_t evaluated = 0;
    RejectionWriter rejections(out, status_table_);
    std::optional<Status> narrowed;
    for (size_t i = 0; i < n && (want == 0 || feasible_.size() < want); ++i) {
      size_t index = start + i;
      if (index >= n) index -= n;
      const NodeInfo& node = *nodes[index];
      ++evaluated;
      if (allowed_names.has_value() && !allowed_nodes.contains(&node)) {
        if (!narrowed) {
          narrowed.emplace(Code::kUnschedulableAndUnresolvable,
                           absl::StrCat("node(s) didn't satisfy plugin(s) [", narrowed_by, "]"));
        }
        rejections.Add(node.id(), *narrowed, narrowing_plugins.front(), Recode::kKeep);
        continue;
      }
      FilterOutcome outcome = counted_nominated_.empty()
                                  ? RunFilters(active_filters_, state, *pod, node)
                                  : RunFiltersWithNominatedPods(state, *pod, node);
      if (outcome.status.IsSuccess()) {
        feasible_.push_back(&node);
        out.add_feasible(node.id());
        continue;
      }
      rejections.Add(node.id(), outcome.status, *outcome.plugin, Recode::kFilter);
      // An error fails the whole cycle (kube-scheduler): stop here, no scores.
      if (!outcome.status.IsRejected()) {
        out.set_nodes_evaluated(evaluated);
        return absl::OkStatus();
      }
    }
    out.set_nodes_evaluated(evaluated);
  }

  // Errors returned above; what is left are rejections, which the scheduler
  // may not want once a node passed.
  if (request.rejections_only_when_none_feasible() && !feasible_.empty()) {
    out.clear_rejected();
    out.clear_status_table();
  }

  // PreScore, Score, NormalizeScore over the feasible nodes.
  timer.Enter(pre_scores.empty() || feasible_.empty() ? PhaseTimer::kNone
                                                          : PhaseTimer::kPreScore);
  for (PluginInstance* plugin : pre_scores) {
    if (feasible_.empty()) break;
    Status status = plugin->pre_score->PreScore(state, *pod, feasible_);
    if (status.IsSkip()) {
      state.skip_score_plugins().insert(plugin->name);
      continue;
    }
    if (!status.IsSuccess()) {
      WriteStatus(status, plugin->name, Recode::kError, out.mutable_pre_score_status());
      return absl::OkStatus();
    }
  }
  const auto& skipped_scores = state.skip_score_plugins();
  timer.Enter(scores.empty() ? PhaseTimer::kNone : PhaseTimer::kScore);
  const size_t num_feasible = feasible_.size();
  const size_t num_scores = scores.size();
  // A plugin whose PreScore returned Skip adds nothing to any node.
  score_skipped_.assign(num_scores, 0);
  for (size_t p = 0; p < num_scores; ++p) {
    score_skipped_[p] = !skipped_scores.empty() && skipped_scores.contains(scores[p]->name);
  }
  if (plugin_scores_.size() < num_scores) plugin_scores_.resize(num_scores);
  score_errors_.assign(num_scores, ScoreError{num_feasible, Status()});
  auto score_node = [&](size_t p, size_t i) {
    auto [score, status] = scores[p]->score->Score(state, *pod, *feasible_[i]);
    plugin_scores_[p][i] = NodeScore{feasible_[i], score};
    return status;
  };
  for (size_t p = 0; p < num_scores; ++p) plugin_scores_[p].resize(num_feasible);
  if (num_scores > 0 && UseParallel(num_feasible)) {
    // Every plugin's Score over the nodes in chunks, in one pass of the pool
    // (one wake-up of its threads per request, not one per plugin).
    absl::Mutex mu;
    const int chunk_size = parallelizer_->ChunkSize(static_cast<int>(num_feasible));
    const int num_chunks = static_cast<int>((num_feasible + chunk_size - 1) / chunk_size);
    parallelizer_->ParallelFor(num_chunks, [&](int chunk) {
      const size_t begin = static_cast<size_t>(chunk) * chunk_size;
      const size_t end = std::min(num_feasible, begin + chunk_size);
      for (size_t p = 0; p < num_scores; ++p) {
        if (score_skipped_[p]) continue;
        for (size_t i = begin; i < end; ++i) {
          Status status = score_node(p, i);
          if (status.IsSuccess()) continue;
          absl::MutexLock lock(&mu);
          if (i < score_errors_[p].node) score_errors_[p] = ScoreError{i, std::move(status)};
          break;
        }
      }
      // No early stop: an earlier plugin may fail in a later chunk, and the
      // answer names the first failure in plugin order, as serial scoring does.
      return true;
    });
  } else {
    for (size_t p = 0; p < num_scores; ++p) {
      if (score_skipped_[p]) continue;
      bool failed = false;
      for (size_t i = 0; i < num_feasible; ++i) {
        Status status = score_node(p, i);
        if (status.IsSuccess()) continue;
        score_errors_[p] = ScoreError{i, std::move(status)};
        failed = true;
        break;
      }
      if (failed) break;  // Serial evaluation stops at the first failure.
    }
  }
  // In plugin order, as one plugin after the other would report: the first
  // Score failure (lowest node), or NormalizeScore's, ends the scoring.
  for (size_t p = 0; p < num_scores; ++p) {
    PluginInstance* plugin = scores[p];
    v1::PluginScores& plugin_scores = *out.add_scores();
    plugin_scores.set_plugin(plugin->name);
    auto& wire = *plugin_scores.mutable_scores();
    if (score_skipped_[p]) {
      wire.Resize(static_cast<int>(num_feasible), 0);
      continue;
    }
    if (score_errors_[p].node < num_feasible) {
      out.clear_scores();
      WriteStatus(score_errors_[p].status, plugin->name, Recode::kError, out.mutable_pre_score_status());
      return absl::OkStatus();
    }
    std::vector<NodeScore>& node_scores = plugin_scores_[p];
    if (plugin->score->HasNormalizeScore() && num_feasible > 0) {
      Status status = plugin->score->NormalizeScore(state, *pod, node_scores);
      if (!status.IsSuccess()) {
        out.clear_scores();
        WriteStatus(status, plugin->name, Recode::kError, out.mutable_pre_score_status());
        return absl::OkStatus();
      }
    }
    wire.Reserve(static_cast<int>(num_feasible));
    for (const NodeScore& score : node_scores) wire.AddAlreadyReserved(score.score);
  }
  if (what_if_copies > 0 && num_feasible > 0) {
    timer.Enter(PhaseTimer::kNone);  // Not an extension point of this pod's cycle.
    ActiveExtensions(pre_filters, state, extensions_);
    RunWhatIf(what_if_copies, pre_scores, scores, state, pod, out);
  }
  // Nominated pods would count in the lookahead pod's filters: not answered
  // (the scheduler sends none then; a mirror's nominations may be newer).
  if (lookahead_ && request.has_lookahead() && request.nominated_pods_size() == 0 &&
      mirror_.NumNominatedPods() == 0) {
    timer.Enter(PhaseTimer::kNone);  // Not an extension point of this pod's cycle.
    v1::LookaheadVerdicts answer;
    std::vector<PodInfoPtr> chain = {pod};  // The pods a ChainNode may name, by position.
    if (RunLookahead(pre_filters, filters, pre_scores, scores, *request.mutable_lookahead(), chain, answer)) {
      *out.mutable_lookahead() = std::move(answer);
      // The later pods' (protocol version 5): all or none.
      if (later_lookaheads_) {
        for (v1::Lookahead& later : *request.mutable_later_lookaheads()) {
          if (!RunLookahead(pre_filters, filters, pre_scores, scores, later, chain, *out.add_later_lookaheads())) {
            out.clear_later_lookaheads();
            break;
          }
        }
      }
    }
  }
  return absl::OkStatus();
}

CycleRunner::PreFilterOutcome CycleRunner::RunPreFilters(const PluginList& pre_filters, CycleState& state,
                                                         const PodInfo& pod) const {
  PreFilterOutcome out;
  for (PluginInstance* plugin : pre_filters) {
    auto [result, status] = plugin->pre_filter->PreFilter(state, pod, mirror_);
    if (status.IsSkip()) {
      state.skip_filter_plugins().insert(plugin->name);
      continue;
    }
    if (!status.IsSuccess()) {
      const bool go_on = status.code() == Code::kUnschedulable;  // As RunCycle: the others still run.
      out.status = std::move(status);
      out.plugin = &plugin->name;
      if (go_on) continue;
      return out;
    }
    if (!result.node_names.has_value()) continue;
    if (!out.allowed.has_value()) {
      out.allowed = std::move(result.node_names);
    } else {
      absl::erase_if(*out.allowed, [&](const std::string& name) { return !result.node_names->contains(name); });
    }
  }
  return out;
}

void CycleRunner::RunNominatedChecks(const PluginList& pre_filters, const PluginList& filters,
                                     v1::CycleRequest& request, v1::CycleResponse& out) {
  using Verdict = v1::WhatIfVerdicts;
  if (!nominated_checks_ || request.nominated_checks_size() == 0 || request.has_preemption_dry_run()) return;
  // The nominations the scheduler counts are the mirror's (it sends checks
  // only to a process that mirrors them); a request that carried its own is
  // not answered.
  if (request.nominated_pods_size() > 0) return;
  mirrored_nominations_ = mirror_.NumNominatedPods() > 0;
  nominated_.clear();
  std::vector<const NodeInfo*> only(1);
  for (v1::NominatedCheck& check : *request.mutable_nominated_checks()) {
    Verdict::Verdict verdict = Verdict::UNKNOWN;
    const NodeInfo* node = mirror_.GetById(check.node_id());
    PodInfoPtr pod = TakePod(check.mutable_pod());
    // The pod's own PreFilter, as its cycle would run it (kube-scheduler's
    // fast path evaluates the nominated node after PreFilter).
    CycleState state;
    const PreFilterOutcome pre = node == nullptr ? PreFilterOutcome{Status(Code::kError, "unknown node")}
                                                 : RunPreFilters(pre_filters, state, *pod);
    if (pre.status.IsRejected() ||
        (pre.status.IsSuccess() && pre.allowed.has_value() && !pre.allowed->contains(node->name()))) {
      verdict = Verdict::INFEASIBLE;
    } else if (pre.status.IsSuccess()) {
      ActiveFilters(filters, state, active_filters_);
      ActiveExtensions(pre_filters, state, extensions_);
      only[0] = node;
      CountNominatedPods(*pod, &only);
      const FilterOutcome outcome = counted_nominated_.empty()
                                        ? RunFilters(active_filters_, state, *pod, *node)
                                        : RunFiltersWithNominatedPods(state, *pod, *node);
      verdict = outcome.status.IsSuccess()    ? Verdict::FEASIBLE
                : outcome.status.IsRejected() ? Verdict::INFEASIBLE
                                              : Verdict::UNKNOWN;  // ERROR: the scheduler asks.
    }
    out.add_nominated_checks(verdict);
  }
  counted_nominated_.clear();
}

bool CycleRunner::RunLookahead(const PluginList& pre_filters, const PluginList& filters,
                               const PluginList& pre_scores, const PluginList& scores,
                               v1::Lookahead& lookahead, std::vector<PodInfoPtr>& chain,
                               v1::LookaheadVerdicts& answer) {
  using Verdict = v1::WhatIfVerdicts;
  const int num_now = lookahead.node_ids_size();
  const int total = num_now + lookahead.after_node_ids_size() + lookahead.chain_nodes_size();
  std::vector<const NodeInfo*> nodes;
  nodes.reserve(total);
  // The pods added to each entry past the "now" ones: this request's pod
  // (after_node_ids), or the chain's pods a ChainNode names.
  std::vector<std::vector<uint32_t>> added;  // Positions in `chain`.
  added.reserve(total - num_now);
  for (uint32_t id : lookahead.node_ids()) nodes.push_back(mirror_.GetById(id));
  for (uint32_t id : lookahead.after_node_ids()) {
    nodes.push_back(mirror_.GetById(id));
    added.push_back({0});
  }
  for (const v1::ChainNode& chain_node : lookahead.chain_nodes()) {
    nodes.push_back(mirror_.GetById(chain_node.node_id()));
    for (uint32_t position : chain_node.pods()) {
      if (position >= chain.size()) return false;  // Only pods decided before this one.
    }
    added.emplace_back(chain_node.pods().begin(), chain_node.pods().end());
  }
  // A node the mirror does not hold: the scheduler's state is ahead of this
  // request's; leave the lookahead unanswered (the pod gets its own request).
  for (const NodeInfo* node : nodes) {
    if (node == nullptr) return false;
  }
  PodInfoPtr next = TakePod(lookahead.mutable_pod());
  chain.push_back(next);
  // The lookahead pod's state lives only in this request.
  CycleState state;
  const PreFilterOutcome pre = RunPreFilters(pre_filters, state, *next);
  if (!pre.status.IsSuccess()) {
    WriteStatus(pre.status, *pre.plugin, Recode::kFilter, answer.mutable_pre_filter_status());
    return true;
  }
  const std::optional<absl::flat_hash_set<std::string>>& allowed = pre.allowed;
  ActiveFilters(filters, state, active_filters_);
  ActiveExtensions(pre_filters, state, extensions_);
  answer.mutable_verdicts()->Resize(total, Verdict::UNKNOWN);
  std::vector<google::protobuf::RepeatedField<int64_t>*> wire(scores.size());
  for (size_t p = 0; p < scores.size(); ++p) {
    v1::PluginScores& plugin_scores = *answer.add_scores();
    plugin_scores.set_plugin(scores[p]->name);
    plugin_scores.mutable_scores()->Resize(total, 0);
    wire[p] = plugin_scores.mutable_scores();
  }
  auto filter = [&](CycleState& st, const NodeInfo& node, int entry) {
    if (allowed.has_value() && !allowed->contains(node.name())) {
      answer.set_verdicts(entry, Verdict::INFEASIBLE);
      return false;
    }
    const FilterOutcome outcome = RunFilters(active_filters_, st, *next, node);
    if (outcome.status.IsSuccess()) return true;
    // An ERROR leaves the node UNKNOWN: the scheduler then asks.
    if (outcome.status.IsRejected()) answer.set_verdicts(entry, Verdict::INFEASIBLE);
    return false;
  };
  // PreScore, Score and NormalizeScore over `feasible` (entries `entries`)
  // as a cycle narrowed to them would run them; false on any failure.
  std::vector<NodeScore> node_scores;
  auto score = [&](CycleState& st, const std::vector<const NodeInfo*>& feasible,
                   const std::vector<int>& entries) {
    st.skip_score_plugins().clear();
    for (PluginInstance* plugin : pre_scores) {
      Status status = plugin->pre_score->PreScore(st, *next, feasible);
      if (status.IsSkip()) {
        st.skip_score_plugins().insert(plugin->name);
      } else if (!status.IsSuccess()) {
        return false;
      }
    }
    for (size_t p = 0; p < scores.size(); ++p) {
      if (st.skip_score_plugins().contains(scores[p]->name)) continue;
      node_scores.resize(feasible.size());
      for (size_t i = 0; i < feasible.size(); ++i) {
        auto [s, status] = scores[p]->score->Score(st, *next, *feasible[i]);
        if (!status.IsSuccess()) return false;
        node_scores[i] = NodeScore{feasible[i], s};
      }
      if (scores[p]->score->HasNormalizeScore() &&
          !scores[p]->score->NormalizeScore(st, *next, node_scores).IsSuccess()) {
        return false;
      }
      for (size_t i = 0; i < feasible.size(); ++i) wire[p]->Set(entries[i], node_scores[i].score);
    }
    for (int entry : entries) answer.set_verdicts(entry, Verdict::FEASIBLE);
    return true;
  };
  // The nodes as they are now: one narrowed cycle.
  std::vector<const NodeInfo*> feasible;
  std::vector<int> entries;
  for (int k = 0; k < num_now; ++k) {
    if (filter(state, *nodes[k], k)) {
      feasible.push_back(nodes[k]);
      entries.push_back(k);
    }
  }
  if (!feasible.empty() && !score(state, feasible, entries)) {
    for (int entry : entries) answer.set_verdicts(entry, Verdict::UNKNOWN);
    for (size_t p = 0; p < scores.size(); ++p) {
      for (int entry : entries) wire[p]->Set(entry, 0);
    }
  }
  // Each node with its pods added (this request's, or the chain's), alone.
  std::vector<const NodeInfo*> one_node(1);
  std::vector<int> one_entry(1);
  StateForEachNode states(state, extensions_.empty());
  for (int k = num_now; k < total; ++k) {
    NodeInfo node = *nodes[k];
    CycleState* st = states.Next();
    bool ok = true;
    for (uint32_t position : added[k - num_now]) {
      const PodInfoPtr& pod = chain[position];
      node.AddPod(pod);
      for (const ExtensionRef& ext : extensions_) {
        if (!ext.extensions->AddPod(*st, *next, *pod, node).IsSuccess()) ok = false;
      }
    }
    if (!ok || !filter(*st, node, k)) continue;
    one_node[0] = &node;
    one_entry[0] = k;
    if (!score(*st, one_node, one_entry)) {
      for (size_t p = 0; p < scores.size(); ++p) wire[p]->Set(k, 0);
    }
  }
  return true;
}

void CycleRunner::RunWhatIf(uint32_t copies, const PluginList& pre_scores, const PluginList& scores,
                            const CycleState& state, const PodInfoPtr& pod, v1::CycleResponse& out) {
  using Verdict = v1::WhatIfVerdicts;
  const size_t n = feasible_.size();
  const int entries = static_cast<int>(n * copies);
  v1::WhatIfVerdicts& what_if = *out.mutable_what_if();
  what_if.set_copies(copies);
  what_if.mutable_verdicts()->Resize(entries, Verdict::UNKNOWN);
  std::vector<google::protobuf::RepeatedField<int64_t>*> wire(scores.size());
  for (size_t p = 0; p < scores.size(); ++p) {
    v1::PluginScores& plugin_scores = *what_if.add_scores();
    plugin_scores.set_plugin(scores[p]->name);
    plugin_scores.mutable_scores()->Resize(entries, 0);
    wire[p] = plugin_scores.mutable_scores();
  }
  // The copies: the pod under uids of its own (a node keys its pods by uid).
  std::vector<PodInfoPtr> pod_copies;
  pod_copies.reserve(copies);
  for (uint32_t j = 1; j <= copies; ++j) {
    v1::Pod copy = *pod->pod;
    copy.mutable_meta()->set_uid(absl::StrCat(pod->uid(), "/what-if-", j));
    pod_copies.push_back(PodInfo::Create(std::move(copy)));
  }
  std::vector<const NodeInfo*> one_node(1);
  std::vector<NodeScore> one_score(1);
  StateForEachNode states(state, extensions_.empty());
  for (size_t i = 0; i < n; ++i) {
    NodeInfo node = *feasible_[i];
    one_node[0] = &node;
    // The copies' AddPod accumulate in the node's state, j after j.
    CycleState* st = states.Next();
    for (uint32_t j = 1; j <= copies; ++j) {
      const int entry = static_cast<int>(i * copies + (j - 1));
      node.AddPod(pod_copies[j - 1]);
      bool failed = false;
      for (const ExtensionRef& ext : extensions_) {
        if (!ext.extensions->AddPod(*st, *pod, *pod_copies[j - 1], node).IsSuccess()) failed = true;
      }
      if (failed) break;  // This and larger j stay UNKNOWN.
      const FilterOutcome filtered = counted_nominated_.empty()
                                         ? RunFilters(active_filters_, *st, *pod, node)
                                         : RunFiltersWithNominatedPods(*st, *pod, node);
      if (!filtered.status.IsSuccess()) {
        if (!filtered.status.IsRejected()) break;  // ERROR: UNKNOWN from here on.
        what_if.set_verdicts(entry, Verdict::INFEASIBLE);
        continue;
      }
      // PreScore, Score and NormalizeScore on this node alone, as a cycle
      // that re-evaluates only this node would run them.
      st->skip_score_plugins().clear();
      bool scored = true;
      for (PluginInstance* plugin : pre_scores) {
        Status status = plugin->pre_score->PreScore(*st, *pod, one_node);
        if (status.IsSkip()) {
          st->skip_score_plugins().insert(plugin->name);
        } else if (!status.IsSuccess()) {
          scored = false;
          break;
        }
      }
      for (size_t p = 0; scored && p < scores.size(); ++p) {
        if (st->skip_score_plugins().contains(scores[p]->name)) continue;
        auto [score, status] = scores[p]->score->Score(*st, *pod, node);
        one_score[0] = NodeScore{&node, score};
        if (status.IsSuccess() && scores[p]->score->HasNormalizeScore()) {
          status = scores[p]->score->NormalizeScore(*st, *pod, one_score);
        }
        if (!status.IsSuccess()) {
          scored = false;
          break;
        }
        wire[p]->Set(entry, one_score[0].score);
      }
      if (!scored) {
        for (size_t p = 0; p < scores.size(); ++p) wire[p]->Set(entry, 0);
        break;
      }
      what_if.set_verdicts(entry, Verdict::FEASIBLE);
    }
  }
}

absl::Status CycleRunner::RunDryRunFilter(const PluginList& filters,
                                         v1::DryRunFilterRequest& request,
                                         v1::DryRunFilterResponse& out) {
  const NodeInfo* node = mirror_.GetById(request.node_id());
  if (node == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("dry_run_filter.node_id: unknown node id ", request.node_id()));
  }
  PodInfoPtr pod = TakePod(request.mutable_pod());

  CycleState* base = FindState(request.cycle_id());
  if (base == nullptr) {
    // No state for this cycle (it was dropped, or filtering ran elsewhere): run
    // the PreFilter of the filter plugins that have one, as the cycle would.
    base = &StateFor(request.cycle_id());
    for (PluginInstance* plugin : filters) {
      if (plugin->pre_filter == nullptr) continue;
      auto [result, status] = plugin->pre_filter->PreFilter(*base, *pod, mirror_);
      if (status.IsSkip()) {
        base->skip_filter_plugins().insert(plugin->name);
      } else if (!status.IsSuccess() && status.code() != Code::kUnschedulable) {
        // A plain Unschedulable leaves the node to the filters, as the cycle
        // leaves it to preemption.
        WriteStatus(status, plugin->name, Recode::kFilter, out.mutable_status());
        cycle_states_.erase(request.cycle_id());
        return absl::OkStatus();
      }
    }
  }
  std::unique_ptr<CycleState> state = base->Clone();
  ActiveExtensions(filters, *state, extensions_);
  NodeInfo dry_node = *node;
  for (int i = 0; i < request.remove_pod_uids_size(); ++i) {
    const std::string& uid = request.remove_pod_uids(i);
    PodInfoPtr victim;
    for (const PodInfoPtr& p : dry_node.pods()) {
      if (p->uid() == uid) {
        victim = p;
        break;
      }
    }
    if (victim == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("dry_run_filter.remove_pod_uids[", i,
                                                     "]: pod ", uid, " is not on node ",
                                                     dry_node.name()));
    }
    dry_node.RemovePod(uid);
    for (const ExtensionRef& ext : extensions_) {
      Status status = ext.extensions->RemovePod(*state, *pod, *victim, dry_node);
      if (!status.IsSuccess()) {
        WriteStatus(status, *ext.plugin, Recode::kError, out.mutable_status());
        return absl::OkStatus();
      }
    }
  }
  for (v1::Pod& added : *request.mutable_add_pods()) {
    PodInfoPtr info = TakePod(&added);
    dry_node.AddPod(info);
    for (const ExtensionRef& ext : extensions_) {
      Status status = ext.extensions->AddPod(*state, *pod, *info, dry_node);
      if (!status.IsSuccess()) {
        WriteStatus(status, *ext.plugin, Recode::kError, out.mutable_status());
        return absl::OkStatus();
      }
    }
  }
  ActiveFilters(filters, *state, active_filters_);
  FilterOutcome outcome = RunFilters(active_filters_, *state, *pod, dry_node);
  if (outcome.plugin == nullptr) {
    out.mutable_status()->set_code(v1::Status::SUCCESS);
  } else {
    WriteStatus(outcome.status, *outcome.plugin, Recode::kFilter, out.mutable_status());
  }
  return absl::OkStatus();
}

}  // namespace podium::sdk::internal
