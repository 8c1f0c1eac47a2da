#include "framework/framework.h"

#include <algorithm>
#include <cstdio>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "logging/logger.h"

namespace podium::scheduler {
namespace {

constexpr uint32_t kMinFeasibleNodesToFind = 100;
constexpr int kMinFeasibleNodesPercentageToFind = 5;

bool IsRejection(v1::Status::Code code) {
  return code == v1::Status::UNSCHEDULABLE || code == v1::Status::UNSCHEDULABLE_AND_UNRESOLVABLE ||
         code == v1::Status::ERROR || code == v1::Status::PENDING;
}

// For the status of an extension point over several requests: the worst wins.
int Severity(sdk::Code code) {
  switch (code) {
    case sdk::Code::kError: return 4;
    case sdk::Code::kUnschedulableAndUnresolvable: return 3;
    case sdk::Code::kUnschedulable: return 2;
    case sdk::Code::kSuccess: return 0;
    default: return 1;
  }
}

std::string_view PointName(v1::ExtensionPoint point) {
  switch (point) {
    case v1::RESERVE: return "Reserve";
    case v1::PERMIT: return "Permit";
    case v1::PRE_BIND: return "PreBind";
    case v1::BIND: return "Bind";
    case v1::POST_BIND: return "PostBind";
    default: return "Unknown";
  }
}

sdk::Status ErrorStatus(std::string message) {
  return sdk::Status(sdk::Code::kError, std::move(message));
}

// A what-if's dry run names victims among the potential ones the request
// listed for its node (`asked.potential_victims`, in reprieve order, the
// first `num_pdb_violating` violating a PDB; with `without_gone`, the pods
// in `asked.gone` have left first and are no victims). Its
// num_pdb_violations is recounted from that order, as the scheduler counts
// a dry run's (the plugin's count is not taken).
absl::Status RecountWhatIfVictims(const v1::PreemptionDryRunRequest::Candidate& asked, bool without_gone,
                                  v1::NodeVictims& dry, const std::string& field) {
  if (dry.status().code() != v1::Status::SUCCESS) return absl::OkStatus();
  uint32_t violations = 0;
  absl::flat_hash_set<std::string_view> seen;
  for (const std::string& victim : dry.victims()) {
    const auto at = std::find(asked.potential_victims().begin(), asked.potential_victims().end(), victim);
    const bool gone = without_gone && std::find(asked.gone().begin(), asked.gone().end(), victim) != asked.gone().end();
    if (at == asked.potential_victims().end() || gone) {
      return absl::InvalidArgumentError(absl::StrCat(field, ".victims: pod ", victim,
                                                     " is not a potential victim on node_id ", asked.node_id()));
    }
    if (!seen.insert(victim).second) {
      return absl::InvalidArgumentError(absl::StrCat(field, ".victims: pod ", victim, " is named twice"));
    }
    if (at - asked.potential_victims().begin() < static_cast<std::ptrdiff_t>(asked.num_pdb_violating())) ++violations;
  }
  dry.set_num_pdb_violations(violations);
  return absl::OkStatus();
}

// One what-if list of an answer against the request's: every entry answers
// a node asked, once. On an error naming the entry, the list is dropped
// (batching/ then asks those nodes when it needs them).
absl::Status CheckWhatIfList(const google::protobuf::RepeatedPtrField<v1::PreemptionDryRunRequest::Candidate>& asked,
                             google::protobuf::RepeatedPtrField<v1::WhatIfNominated>& answers, const char* field) {
  absl::flat_hash_map<uint32_t, const v1::PreemptionDryRunRequest::Candidate*> by_node;
  for (const auto& c : asked) by_node.emplace(c.node_id(), &c);
  absl::flat_hash_set<uint32_t> answered;
  for (int i = 0; i < answers.size(); ++i) {
    v1::WhatIfNominated& w = *answers.Mutable(i);
    const std::string at = absl::StrCat("preemption_dry_run.", field, "[", i, "]");
    auto c = by_node.find(w.node_id());
    if (c == by_node.end() || !answered.insert(w.node_id()).second) {
      return absl::InvalidArgumentError(
          absl::StrCat(at, ".node_id: ", w.node_id(), " was not asked, or is answered twice"));
    }
    if (w.has_dry_run()) {
      if (absl::Status s = RecountWhatIfVictims(*c->second, false, *w.mutable_dry_run(), at + ".dry_run"); !s.ok()) {
        return s;
      }
    }
    if (w.has_then_gone() && w.then_gone().has_dry_run()) {
      // The node once the candidate's gone pods left: the others, in order.
      if (absl::Status s = RecountWhatIfVictims(*c->second, true, *w.mutable_then_gone()->mutable_dry_run(),
                                                at + ".then_gone.dry_run");
          !s.ok()) {
        return s;
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

uint32_t NumFeasibleNodesToFind(int percentage, uint32_t num_all_nodes) {
  if (num_all_nodes < kMinFeasibleNodesToFind || percentage >= 100) return num_all_nodes;
  int adaptive = percentage;
  if (adaptive <= 0) {
    adaptive = 50 - static_cast<int>(num_all_nodes / 125);
    if (adaptive < kMinFeasibleNodesPercentageToFind) adaptive = kMinFeasibleNodesPercentageToFind;
  }
  uint32_t num = static_cast<uint32_t>(uint64_t{num_all_nodes} * adaptive / 100);
  return std::max(num, kMinFeasibleNodesToFind);
}

RejectionStatuses::RejectionStatuses(const v1::CycleResponse& answer) {
  table_.reserve(answer.status_table_size());
  for (const v1::Status& entry : answer.status_table()) {
    table_.push_back(MakeSharedStatus(sdk::Status::FromProto(entry)));
  }
}

SharedStatus RejectionStatuses::Get(const v1::NodeStatus& rejected) const {
  return rejected.status_index() == 0 ? MakeSharedStatus(sdk::Status::FromProto(rejected.status()))
                                      : table_[rejected.status_index() - 1];
}

std::string Diagnosis::Message() const {
  // kube-scheduler's FitError.Error: "0/N nodes are available:", then each
  // part present as " %v." -- so a PostFilter message that ends in a period
  // ends in two, as kube-scheduler's events do.
  std::string message = absl::StrCat("0/", num_all_nodes, " nodes are available:");
  const std::string post = post_filter_message.empty() ? "" : absl::StrCat(" ", post_filter_message, ".");
  if (!pre_filter_message.empty()) return absl::StrCat(message, " ", pre_filter_message, ".", post);
  // Nodes sharing a status are counted together, then its reasons once.
  std::map<std::string, uint32_t> histogram;
  for (const auto& [status, nodes] : NodesPerStatus()) {
    for (const auto& reason : status->reasons()) histogram[reason] += nodes;
  }
  std::vector<std::string> parts;
  for (const auto& [reason, count] : histogram) parts.push_back(absl::StrCat(count, " ", reason));
  std::sort(parts.begin(), parts.end());
  if (parts.empty()) return absl::StrCat(message, post);
  return absl::StrCat(message, " ", absl::StrJoin(parts, ", "), ".", post);
}

absl::flat_hash_map<const sdk::Status*, uint32_t> Diagnosis::NodesPerStatus() const {
  absl::flat_hash_map<const sdk::Status*, uint32_t> per_status;
  const sdk::Status* run = nullptr;
  uint32_t run_length = 0;
  for (const auto& [node, status] : node_statuses) {
    if (status.get() == run) {
      ++run_length;
      continue;
    }
    if (run_length > 0) per_status[run] += run_length;
    run = status.get();
    run_length = 1;
  }
  if (run_length > 0) per_status[run] += run_length;
  return per_status;
}

std::pair<PostFilterResult, sdk::Status> Framework::RunPostFilter(const v1::Pod& pod,
                                                                  const Diagnosis& diagnosis) {
  auto result = RunPostFilterPlugins(pod, diagnosis);
  FinishCycle(*CurrentSetup(), last_cycle_id_);
  return result;
}

std::pair<PostFilterResult, sdk::Status> Framework::RunPostFilterPlugins(
    const v1::Pod& pod, const Diagnosis& diagnosis) {
  std::vector<std::string> reasons;
  PostFilterResult rejected;  // Work a rejecting plugin still asks for after the requeue.
  for (const auto& plugin : post_filters_) {
    const absl::Time start = absl::Now();
    auto [result, status] = plugin->PostFilter(pod, diagnosis);
    if (recorder_ != nullptr) {
      recorder_->ObservePlugin(plugin->Name(), "PostFilter", sdk::CodeName(status.code()), absl::Now() - start);
    }
    if (status.plugin().empty()) status.WithPlugin(std::string(plugin->Name()));
    if (status.IsSuccess()) return {result, status};
    if (status.code() == sdk::Code::kUnschedulableAndUnresolvable || !status.IsRejected()) {
      return {result, status};
    }
    if (!rejected.after_requeue) rejected.after_requeue = std::move(result.after_requeue);
    rejected.retry_unreported |= result.retry_unreported;
    rejected.awaiting_victims |= result.awaiting_victims;
    reasons.insert(reasons.end(), status.reasons().begin(), status.reasons().end());
  }
  return {std::move(rejected), sdk::Status(sdk::Code::kUnschedulable, std::move(reasons))};
}

Framework::Framework(ProfileSpec spec, uint64_t seed)
    : name_(spec.scheduler_name),
      recorder_(spec.recorder),
      setup_(BuildSetup(std::move(spec))),
      rng_(seed) {}

void Framework::Reconfigure(ProfileSpec spec) {
  spec.scheduler_name = name_;
  spec.recorder = recorder_;
  // What main wires into a profile, not the registrations: kept.
  if (!spec.nominated_pods) spec.nominated_pods = CurrentSetup()->spec.nominated_pods;
  if (!spec.nominated_pod_keys) spec.nominated_pod_keys = CurrentSetup()->spec.nominated_pod_keys;
  if (!spec.nominated_key_on) spec.nominated_key_on = CurrentSetup()->spec.nominated_key_on;
  if (!spec.nominations_generation) spec.nominations_generation = CurrentSetup()->spec.nominations_generation;
  if (!spec.nomination_changes) spec.nomination_changes = CurrentSetup()->spec.nomination_changes;
  if (!spec.nominated_node_of) spec.nominated_node_of = CurrentSetup()->spec.nominated_node_of;
  if (!spec.nominations_count) spec.nominations_count = CurrentSetup()->spec.nominations_count;
  std::shared_ptr<const Setup> setup = BuildSetup(std::move(spec));
  absl::MutexLock lock(&setup_mu_);
  setup_ = std::move(setup);
  ++setup_generation_;
}

std::shared_ptr<const Framework::Setup> Framework::CurrentSetup() const {
  absl::MutexLock lock(&setup_mu_);
  return setup_;
}

std::shared_ptr<const Framework::Setup> Framework::BuildSetup(ProfileSpec spec) {
  auto built = std::make_shared<Setup>();
  Setup& setup = *built;
  setup.spec = std::move(spec);
  absl::flat_hash_map<PluginProcess*, size_t> index;
  auto plan_for = [&](const std::string& plugin) -> ProcessPlan* {
    auto it = setup.spec.processes.find(plugin);
    if (it == setup.spec.processes.end()) return nullptr;
    auto [pos, inserted] = index.try_emplace(it->second, setup.plans.size());
    if (inserted) setup.plans.push_back(ProcessPlan{it->second, {}, {}, {}, {}});
    return &setup.plans[pos->second];
  };
  const std::pair<v1::ExtensionPoint, std::vector<std::string> ProcessPlan::*> phases[] = {
      {v1::PRE_FILTER, &ProcessPlan::pre_filter},
      {v1::FILTER, &ProcessPlan::filter},
      {v1::PRE_SCORE, &ProcessPlan::pre_score},
      {v1::SCORE, &ProcessPlan::score},
  };
  for (const auto& [point, member] : phases) {
    auto it = setup.spec.plugins.find(point);
    if (it == setup.spec.plugins.end()) continue;
    for (const PluginRef& ref : it->second) {
      if (ProcessPlan* plan = plan_for(ref.name)) (plan->*member).push_back(ref.name);
      if (point == v1::SCORE) setup.weights[ref.name] = ref.weight > 0 ? ref.weight : 1;
    }
  }
  // Processes that filter come first, in the order they were found.
  std::stable_partition(setup.plans.begin(), setup.plans.end(), [](const ProcessPlan& p) {
    return !p.pre_filter.empty() || !p.filter.empty();
  });
  setup.num_filter_processes =
      std::count_if(setup.plans.begin(), setup.plans.end(), [](const ProcessPlan& p) {
        return !p.pre_filter.empty() || !p.filter.empty();
      });
  absl::flat_hash_set<PluginProcess*> seen;
  for (const auto& [name, process] : setup.spec.processes) {
    if (seen.insert(process).second) setup.all_processes.push_back(process);
  }
  absl::flat_hash_set<PluginProcess*> with_state;
  for (const ProcessPlan& plan : setup.plans) with_state.insert(plan.process);
  for (v1::ExtensionPoint point : {v1::RESERVE, v1::PERMIT}) {
    for (const auto& [process, names] : RemoteRuns(setup, point, false)) with_state.insert(process);
  }
  for (v1::ExtensionPoint point : {v1::PRE_BIND, v1::BIND, v1::POST_BIND}) {
    for (const auto& [process, names] : RemoteRuns(setup, point, false)) {
      if (with_state.insert(process).second) setup.binding_only_processes.push_back(process);
    }
  }
  return built;
}

bool Framework::HasRemotePlugins(v1::ExtensionPoint point) const {
  return HasRemotePlugins(*CurrentSetup(), point);
}

bool Framework::HasRemotePlugins(const Setup& setup, v1::ExtensionPoint point) {
  auto it = setup.spec.plugins.find(point);
  if (it == setup.spec.plugins.end()) return false;
  for (const auto& ref : it->second) {
    if (setup.spec.processes.contains(ref.name)) return true;
  }
  return false;
}

bool Framework::DecidableWithoutRequest(const v1::Pod& pod) const {
  const std::shared_ptr<const Setup> setup = CurrentSetup();
  for (v1::ExtensionPoint point : {v1::RESERVE, v1::PERMIT, v1::PRE_BIND, v1::BIND, v1::POST_BIND}) {
    if (!RemoteRunsFor(*setup, point, /*reverse=*/false, pod).empty()) return false;
  }
  return true;
}

uint32_t Framework::NextStartIndex(uint32_t num_nodes) const {
  return num_nodes == 0 ? 0 : next_start_node_index_ % num_nodes;
}

absl::Status Framework::ValidateCycleAnswer(const ProcessPlan& plan, const v1::CycleRequest& request,
                                            const v1::CycleResponse& answer,
                                            const sdk::Snapshot& snapshot,
                                            bool scores_for_request_nodes,
                                            absl::Status* score_error) const {
  const bool explicit_nodes = !request.nodes().all_nodes();
  absl::flat_hash_set<uint32_t> allowed;
  if (explicit_nodes) allowed.insert(request.nodes().node_ids().begin(), request.nodes().node_ids().end());
  auto known = [&](uint32_t id) {
    return explicit_nodes ? allowed.contains(id) : snapshot.GetById(id) != nullptr;
  };
  const uint32_t num_request_nodes =
      explicit_nodes ? request.nodes().node_ids_size() : static_cast<uint32_t>(snapshot.NumNodes());
  if (answer.nodes_evaluated() > num_request_nodes) {
    return absl::InvalidArgumentError(absl::StrCat("nodes_evaluated ", answer.nodes_evaluated(),
                                                   " exceeds the ", num_request_nodes, " nodes sent"));
  }
  absl::flat_hash_set<std::string> filter_plugins(request.filter_plugins().begin(),
                                                  request.filter_plugins().end());
  // Each status_table entry is checked once, as the nodes pointing at it would be.
  for (int i = 0; i < answer.status_table_size(); ++i) {
    const v1::Status& entry = answer.status_table(i);
    if (!IsRejection(entry.code())) {
      return absl::InvalidArgumentError(
          absl::StrCat("status_table[", i, "] carries a non-rejecting status code"));
    }
    if (!entry.plugin().empty() && !filter_plugins.contains(entry.plugin())) {
      return absl::InvalidArgumentError(absl::StrCat("status_table[", i, "] names plugin \"",
                                                     entry.plugin(), "\" that the request did not name"));
    }
  }
  for (int i = 0; i < answer.rejected_size(); ++i) {
    const v1::NodeStatus& rejected = answer.rejected(i);
    if (!known(rejected.node_id())) {
      return absl::InvalidArgumentError(
          absl::StrCat("rejected node id ", rejected.node_id(), " was not in the request"));
    }
    if (rejected.status_index() != 0) {
      if (rejected.status_index() > static_cast<uint32_t>(answer.status_table_size())) {
        return absl::InvalidArgumentError(absl::StrCat(
            "rejected[", i, "].status_index ", rejected.status_index(), " (node id ",
            rejected.node_id(), ") is outside status_table (", answer.status_table_size(),
            " entries)"));
      }
      continue;
    }
    if (!IsRejection(rejected.status().code())) {
      return absl::InvalidArgumentError(absl::StrCat("rejected node id ", rejected.node_id(),
                                                     " carries a non-rejecting status code"));
    }
    if (!rejected.status().plugin().empty() && !filter_plugins.contains(rejected.status().plugin())) {
      return absl::InvalidArgumentError(absl::StrCat(
          "node id ", rejected.node_id(), " rejected by plugin \"", rejected.status().plugin(),
          "\" that the request did not name"));
    }
  }
  for (uint32_t id : answer.feasible()) {
    if (!known(id)) {
      return absl::InvalidArgumentError(absl::StrCat("feasible node id ", id, " was not in the request"));
    }
  }
  const size_t scored = scores_for_request_nodes ? request.nodes().node_ids_size()
                                                 : static_cast<size_t>(answer.feasible_size());
  absl::Status scores_ok = ValidateScores(request, answer, scored);
  if (score_error != nullptr) {
    *score_error = std::move(scores_ok);  // The caller weighs the scores apart from the verdicts.
  } else if (!scores_ok.ok()) {
    return scores_ok;
  }
  if (answer.has_what_if()) return ValidateWhatIf(request, answer);
  return absl::OkStatus();
}

absl::Status Framework::FirstFilterError(const v1::CycleResponse& answer) {
  if (answer.pre_filter_status().code() == v1::Status::ERROR) {
    const sdk::Status status = sdk::Status::FromProto(answer.pre_filter_status());
    return absl::InternalError(absl::StrCat("PreFilter plugin ", status.plugin(), ": ", status.Message()));
  }
  auto error_of = [](const v1::Status& status) {
    return absl::InternalError(absl::StrCat("Filter plugin ", status.plugin(), ": ",
                                            absl::StrJoin(status.reasons(), ", ")));
  };
  for (const v1::Status& entry : answer.status_table()) {
    if (entry.code() == v1::Status::ERROR) return error_of(entry);
  }
  for (const auto& r : answer.rejected()) {
    if (r.status_index() == 0 && r.status().code() == v1::Status::ERROR) return error_of(r.status());
  }
  return absl::OkStatus();
}

absl::Status Framework::ValidateScores(const v1::CycleRequest& request, const v1::CycleResponse& answer,
                                       size_t scored) {
  absl::flat_hash_set<std::string> score_plugins(request.score_plugins().begin(),
                                                 request.score_plugins().end());
  absl::flat_hash_set<std::string> seen;
  for (const auto& scores : answer.scores()) {
    if (!score_plugins.contains(scores.plugin())) {
      return absl::InvalidArgumentError(
          absl::StrCat("scores from plugin \"", scores.plugin(), "\" that the request did not name"));
    }
    if (!seen.insert(scores.plugin()).second) {
      return absl::InvalidArgumentError(absl::StrCat("plugin \"", scores.plugin(), "\" scored twice"));
    }
    if (static_cast<size_t>(scores.scores_size()) != scored) {
      return absl::InvalidArgumentError(absl::StrCat("plugin \"", scores.plugin(), "\" returned ",
                                                     scores.scores_size(), " scores for ", scored,
                                                     " nodes"));
    }
    for (int64_t s : scores.scores()) {
      if (s < sdk::kMinNodeScore || s > sdk::kMaxNodeScore) {
        return absl::InvalidArgumentError(absl::StrCat("plugin \"", scores.plugin(), "\" returned score ",
                                                       s, ", outside [", sdk::kMinNodeScore, ", ",
                                                       sdk::kMaxNodeScore, "]"));
      }
    }
  }
  if (answer.pre_score_status().code() == v1::Status::ERROR) {
    const sdk::Status status = sdk::Status::FromProto(answer.pre_score_status());
    return absl::InternalError(absl::StrCat("PreScore plugin ", status.plugin(), ": ", status.Message()));
  }
  return absl::OkStatus();
}

absl::Status Framework::ValidateWhatIf(const v1::CycleRequest& request, const v1::CycleResponse& answer) {
  const v1::WhatIfVerdicts& what_if = answer.what_if();
  if (request.what_if_copies() == 0) {
    return absl::InvalidArgumentError("what_if answered, but the request asked for none");
  }
  if (what_if.copies() != request.what_if_copies()) {
    return absl::InvalidArgumentError(absl::StrCat("what_if.copies ", what_if.copies(), " is not the ",
                                                   request.what_if_copies(), " asked for"));
  }
  const size_t entries = static_cast<size_t>(answer.feasible_size()) * what_if.copies();
  if (static_cast<size_t>(what_if.verdicts_size()) != entries) {
    return absl::InvalidArgumentError(absl::StrCat("what_if.verdicts has ", what_if.verdicts_size(),
                                                   " entries for ", answer.feasible_size(),
                                                   " feasible nodes times ", what_if.copies(), " copies"));
  }
  for (int i = 0; i < what_if.verdicts_size(); ++i) {
    if (!v1::WhatIfVerdicts::Verdict_IsValid(what_if.verdicts(i))) {
      return absl::InvalidArgumentError(
          absl::StrCat("what_if.verdicts[", i, "] is not a verdict (", what_if.verdicts(i), ")"));
    }
  }
  absl::flat_hash_set<std::string> score_plugins(request.score_plugins().begin(),
                                                 request.score_plugins().end());
  absl::flat_hash_set<std::string> seen;
  for (const auto& scores : what_if.scores()) {
    if (!score_plugins.contains(scores.plugin())) {
      return absl::InvalidArgumentError(absl::StrCat("what_if.scores from plugin \"", scores.plugin(),
                                                     "\" that the request did not name"));
    }
    if (!seen.insert(scores.plugin()).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("what_if.scores: plugin \"", scores.plugin(), "\" scored twice"));
    }
    if (static_cast<size_t>(scores.scores_size()) != entries) {
      return absl::InvalidArgumentError(absl::StrCat("what_if.scores: plugin \"", scores.plugin(),
                                                     "\" returned ", scores.scores_size(), " scores for ",
                                                     entries, " entries"));
    }
    for (int64_t s : scores.scores()) {
      if (s < sdk::kMinNodeScore || s > sdk::kMaxNodeScore) {
        return absl::InvalidArgumentError(absl::StrCat("what_if.scores: plugin \"", scores.plugin(),
                                                       "\" returned score ", s, ", outside [",
                                                       sdk::kMinNodeScore, ", ", sdk::kMaxNodeScore, "]"));
      }
    }
  }
  return absl::OkStatus();
}

void Framework::FillLookahead(const LookaheadRequest& from, v1::Lookahead& out) {
  out.mutable_node_ids()->Assign(from.node_ids.begin(), from.node_ids.end());
  out.mutable_after_node_ids()->Assign(from.after_node_ids.begin(), from.after_node_ids.end());
  for (const LookaheadRequest::ChainNode& chain_node : from.chain_nodes) {
    v1::ChainNode& c = *out.add_chain_nodes();
    c.set_node_id(chain_node.node_id);
    c.mutable_pods()->Assign(chain_node.pods.begin(), chain_node.pods.end());
  }
}

absl::Status Framework::TakeLookahead(const v1::CycleRequest& request, const v1::CycleResponse& answer,
                                      LookaheadAnswer& out) {
  if (!request.has_lookahead()) return absl::InvalidArgumentError("lookahead answered, but the request asked for none");
  return TakeLookaheadEntry(request, request.lookahead(), answer.lookahead(), "lookahead", out);
}

absl::Status Framework::TakeLaterLookaheads(const v1::CycleRequest& request, const v1::CycleResponse& answer,
                                            std::vector<LookaheadAnswer>& out) {
  if (answer.later_lookaheads_size() != request.later_lookaheads_size()) {
    return absl::InvalidArgumentError(absl::StrCat("later_lookaheads has ", answer.later_lookaheads_size(),
                                                   " answers for the ", request.later_lookaheads_size(),
                                                   " pods asked for"));
  }
  out.resize(answer.later_lookaheads_size());
  for (int i = 0; i < answer.later_lookaheads_size(); ++i) {
    absl::Status status = TakeLookaheadEntry(request, request.later_lookaheads(i), answer.later_lookaheads(i),
                                             absl::StrCat("later_lookaheads[", i, "]"), out[i]);
    if (!status.ok()) {
      out.clear();
      return status;
    }
  }
  return absl::OkStatus();
}

absl::Status Framework::TakeLookaheadEntry(const v1::CycleRequest& request, const v1::Lookahead& asked,
                                           const v1::LookaheadVerdicts& lookahead, const std::string& field,
                                           LookaheadAnswer& out) {
  const v1::Status::Code code = lookahead.pre_filter_status().code();
  if (code != v1::Status::SUCCESS && code != v1::Status::SKIP) {
    if (!IsRejection(code)) {
      return absl::InvalidArgumentError(absl::StrCat(field, ".pre_filter_status carries code ",
                                                     v1::Status::Code_Name(code), ", not a rejection"));
    }
    if (lookahead.verdicts_size() > 0 || lookahead.scores_size() > 0) {
      return absl::InvalidArgumentError(absl::StrCat(field, ": verdicts or scores next to a PreFilter rejection"));
    }
    out.pre_filter_rejected = true;
    return absl::OkStatus();
  }
  const size_t entries =
      static_cast<size_t>(asked.node_ids_size() + asked.after_node_ids_size() + asked.chain_nodes_size());
  if (static_cast<size_t>(lookahead.verdicts_size()) != entries) {
    return absl::InvalidArgumentError(absl::StrCat(field, ".verdicts has ", lookahead.verdicts_size(),
                                                   " entries for the ", entries, " nodes asked for"));
  }
  out.verdicts.reserve(entries);
  for (int i = 0; i < lookahead.verdicts_size(); ++i) {
    if (!v1::WhatIfVerdicts::Verdict_IsValid(lookahead.verdicts(i))) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ".verdicts[", i, "] is not a verdict (", lookahead.verdicts(i), ")"));
    }
    out.verdicts.push_back(static_cast<v1::WhatIfVerdicts::Verdict>(lookahead.verdicts(i)));
  }
  absl::flat_hash_set<std::string> score_plugins(request.score_plugins().begin(), request.score_plugins().end());
  for (const auto& scores : lookahead.scores()) {
    if (!score_plugins.contains(scores.plugin())) {
      return absl::InvalidArgumentError(absl::StrCat(field, ".scores from plugin \"", scores.plugin(),
                                                     "\" that the request did not name"));
    }
    if (static_cast<size_t>(scores.scores_size()) != entries) {
      return absl::InvalidArgumentError(absl::StrCat(field, ".scores: plugin \"", scores.plugin(),
                                                     "\" returned ", scores.scores_size(), " scores for ",
                                                     entries, " entries"));
    }
    for (int64_t s : scores.scores()) {
      if (s < sdk::kMinNodeScore || s > sdk::kMaxNodeScore) {
        return absl::InvalidArgumentError(absl::StrCat(field, ".scores: plugin \"", scores.plugin(),
                                                       "\" returned score ", s, ", outside [",
                                                       sdk::kMinNodeScore, ", ", sdk::kMaxNodeScore, "]"));
      }
    }
    auto [it, inserted] = out.scores.try_emplace(scores.plugin(), scores.scores().begin(), scores.scores().end());
    if (!inserted) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ".scores: plugin \"", scores.plugin(), "\" scored twice"));
    }
  }
  return absl::OkStatus();
}

v1::SchedulerToPlugin Framework::NewCycleRequest(const ProcessPlan& plan, uint64_t cycle_id,
                                                bool filter, bool score) const {
  v1::SchedulerToPlugin message;
  v1::CycleRequest& request = *message.mutable_cycle();
  request.set_cycle_id(cycle_id);
  request.set_profile(name_);
  if (filter) {
    for (const auto& n : plan.pre_filter) request.add_pre_filter_plugins(n);
    for (const auto& n : plan.filter) request.add_filter_plugins(n);
  }
  if (score) {
    for (const auto& n : plan.pre_score) request.add_pre_score_plugins(n);
    for (const auto& n : plan.score) request.add_score_plugins(n);
  }
  return message;
}

absl::Status Framework::CheckCycleAnswer(const ProcessPlan& plan, const PluginAnswer& answer,
                                         const v1::CycleRequest& request,
                                         const sdk::Snapshot& snapshot,
                                         bool scores_for_request_nodes,
                                         absl::Status* score_error) const {
  if (!answer.ok()) return answer.status();
  absl::Status valid = ValidateCycleAnswer(plan, request, answer->cycle(), snapshot,
                                           scores_for_request_nodes, score_error);
  // A PreScore ERROR is the plugin's word, not an invalid answer.
  const bool invalid_scores = score_error != nullptr && !score_error->ok() &&
                              answer->cycle().pre_score_status().code() != v1::Status::ERROR;
  if (!valid.ok() || invalid_scores) {
    plan.process->CountInvalidAnswer();
    PODIUM_LOG(Warning, "Invalid plugin answer", {"endpoint", plan.process->name()},
               {"request", scores_for_request_nodes ? "score" : "cycle"},
               {"err", valid.ok() ? score_error->message() : valid.message()});
  }
  return valid;
}

ScheduleResult Framework::SchedulePod(const v1::Pod& pod, const sdk::Snapshot& snapshot,
                                      uint64_t state_seq, uint64_t cycle_id,
                                      const CycleScope& scope) {
  last_cycle_id_ = cycle_id;
  phases_ = {};
  const std::shared_ptr<const Setup> setup = CurrentSetup();
  ScheduleResult result;
  // kube-scheduler's nominated-node fast path: a pod nominated to a node (by
  // preemption, or by another component through status.nominatedNodeName) is
  // tried there first; if it fits, no other node is evaluated. Not for a cycle
  // narrowed to given nodes (batching/ re-evaluating a ranking).
  const sdk::NodeInfo* nominated = pod.nominated_node_name().empty() || scope.node_ids != nullptr
                                       ? nullptr
                                       : snapshot.Get(pod.nominated_node_name());
  std::vector<v1::WhatIfVerdicts::Verdict> checks;  // Other nominated pods' (CycleScope::nominated_checks).
  if (nominated != nullptr) {
    result = RunFilterAndScore(*setup, pod, snapshot, state_seq, cycle_id,
                               CycleScope{.nominated_checks = scope.nominated_checks}, nominated);
    checks = std::move(result.nominated_checks);
  }
  if (nominated == nullptr || result.outcome == ScheduleResult::Outcome::kUnschedulable) {
    result = RunFilterAndScore(*setup, pod, snapshot, state_seq, cycle_id, scope);
  }
  result.nominated_checks = std::move(checks);
  RecordPhases();
  if (result.outcome == ScheduleResult::Outcome::kError ||
      (result.outcome == ScheduleResult::Outcome::kUnschedulable && post_filters_.empty())) {
    FinishCycle(*setup, cycle_id);
  }
  return result;
}

void Framework::AddPhase(Phase phase, absl::Duration duration, sdk::Code status, bool parallel) {
  PhaseTiming& t = phases_[phase];
  t.duration = parallel ? std::max(t.duration, duration) : t.duration + duration;
  if (Severity(status) > Severity(t.status)) t.status = status;
  t.ran = true;
}

void Framework::AddCyclePhases(const ProcessPlan& plan, const v1::CycleResponse& answer,
                               absl::Duration round_trip, bool filter, bool score, bool concurrent) {
  const bool parallel = concurrent || !filter;  // Score-only requests go out together.
  sdk::Code pre_filter = sdk::Code::kSuccess;
  if (answer.pre_filter_status().code() != v1::Status::SKIP) {
    pre_filter = static_cast<sdk::Code>(answer.pre_filter_status().code());
  }
  sdk::Code filter_status = sdk::Code::kSuccess;
  for (const auto& r : answer.rejected()) {
    const v1::Status& status = r.status_index() == 0
                                   ? r.status()
                                   : answer.status_table(static_cast<int>(r.status_index() - 1));
    if (status.code() == v1::Status::ERROR) filter_status = sdk::Code::kError;
  }
  if (filter_status != sdk::Code::kError && answer.feasible_size() == 0 &&
      answer.rejected_size() > 0) {
    filter_status = sdk::Code::kUnschedulable;
  }
  const sdk::Code score_status = answer.pre_score_status().code() == v1::Status::ERROR
                                     ? sdk::Code::kError
                                     : sdk::Code::kSuccess;
  if (!answer.has_durations()) {
    if (filter) {
      AddPhase(kFilterPhase, round_trip,
               pre_filter != sdk::Code::kSuccess ? pre_filter : filter_status, parallel);
    } else if (score) {
      AddPhase(kScorePhase, round_trip, score_status, parallel);
    }
    return;
  }
  const v1::PhaseDurations& d = answer.durations();
  // As the process measured them, per process (it does not time each plugin).
  if (filter && !plan.pre_filter.empty()) {
    RecordPlugins(*plan.process, plan.pre_filter, "PreFilter", pre_filter, absl::Nanoseconds(d.pre_filter_ns()));
  }
  if (filter && d.filter_ns() > 0) {
    RecordPlugins(*plan.process, plan.filter, "Filter", filter_status, absl::Nanoseconds(d.filter_ns()));
  }
  if (score && !plan.pre_score.empty() && d.pre_score_ns() > 0) {
    RecordPlugins(*plan.process, plan.pre_score, "PreScore", score_status, absl::Nanoseconds(d.pre_score_ns()));
  }
  if (score && d.score_ns() > 0) {
    RecordPlugins(*plan.process, plan.score, "Score", score_status, absl::Nanoseconds(d.score_ns()));
  }
  if (filter && !plan.pre_filter.empty()) {
    AddPhase(kPreFilterPhase, absl::Nanoseconds(d.pre_filter_ns()), pre_filter, parallel);
  }
  if (filter && d.filter_ns() > 0) {
    AddPhase(kFilterPhase, absl::Nanoseconds(d.filter_ns()), filter_status, parallel);
  }
  if (score && !plan.pre_score.empty() && d.pre_score_ns() > 0) {
    AddPhase(kPreScorePhase, absl::Nanoseconds(d.pre_score_ns()), score_status, parallel);
  }
  if (score && d.score_ns() > 0) {
    AddPhase(kScorePhase, absl::Nanoseconds(d.score_ns()), score_status, parallel);
  }
}

void Framework::RecordPhases() {
  static constexpr std::string_view kNames[kNumPhases] = {"PreFilter", "Filter", "PreScore",
                                                          "Score"};
  for (int p = 0; p < kNumPhases; ++p) {
    if (phases_[p].ran) Record(kNames[p], phases_[p].status, phases_[p].duration);
  }
}

void Framework::Record(std::string_view point, sdk::Code status, absl::Duration duration) const {
  if (recorder_ != nullptr) recorder_->Observe(point, sdk::CodeName(status), duration);
}

void Framework::RecordPlugins(const PluginProcess& process, const std::vector<std::string>& plugins,
                              std::string_view point, sdk::Code status, absl::Duration duration) const {
  if (recorder_ == nullptr || plugins.empty()) return;
  recorder_->ObservePlugin(plugins.size() == 1 ? plugins.front() : absl::StrCat("endpoint/", process.name()),
                           point, sdk::CodeName(status), duration);
}

bool Framework::IgnoresFailure(PluginProcess& process) const {
  const bool ignore = process.failure_policy() == FailurePolicy::kIgnore;
  if (ignore) process.CountIgnoredFailure();
  if (recorder_ != nullptr) recorder_->CountFailurePolicy(process.name(), ignore ? "Ignore" : "Fail");
  return ignore;
}

void Framework::FinishCycle(const Setup& setup, uint64_t cycle_id) {
  for (PluginProcess* process : setup.all_processes) process->FinishCycle(cycle_id);
}

void RecordPreFilterRejection(Diagnosis& diagnosis, const sdk::Status& status, bool ran_every_pre_filter) {
  diagnosis.pre_filter_message = status.Message();
  diagnosis.pre_filter_code = status.code() == sdk::Code::kUnschedulable && ran_every_pre_filter
                                  ? sdk::Code::kUnschedulable
                                  : sdk::Code::kUnschedulableAndUnresolvable;
  diagnosis.unschedulable_plugins.insert(status.plugin());
}

ScheduleResult Framework::RunFilterAndScore(const Setup& setup, const v1::Pod& pod,
                                            const sdk::Snapshot& snapshot, uint64_t state_seq,
                                            uint64_t cycle_id, const CycleScope& scope,
                                            const sdk::NodeInfo* only_node) {
  ScheduleResult result;
  const uint32_t num_nodes = static_cast<uint32_t>(snapshot.NumNodes());
  result.diagnosis.num_all_nodes = num_nodes;
  result.diagnosis.cycle_id = cycle_id;
  if (num_nodes == 0) {
    result.outcome = ScheduleResult::Outcome::kUnschedulable;
    result.diagnosis.pre_filter_message = "no nodes available to schedule pods";
    return result;
  }
  last_state_seq_ = state_seq;
  const auto& nodes = snapshot.Nodes();
  const bool scoped = scope.node_ids != nullptr && only_node == nullptr;
  const uint32_t start = scoped ? 0 : NextStartIndex(num_nodes);
  const uint32_t to_find = only_node != nullptr ? 1
                           : scoped             ? 0
                           : scope.examine_all  ? num_nodes
                                                : NumFeasibleNodesToFind(setup.spec.percentage_of_nodes_to_score, num_nodes);
  // Several filtering processes are asked at once, for the rotation or for a
  // batch's few nodes to re-evaluate alike; only a nominated node goes process
  // by process below.
  if (setup.num_filter_processes > 1 && only_node == nullptr) {
    return RunFanOut(setup, pod, snapshot, state_seq, cycle_id, start, to_find, scope, std::move(result));
  }
  const bool combined = setup.num_filter_processes == 1;

  auto fail = [&](PluginProcess& process, const absl::Status& status) {
    result.outcome = ScheduleResult::Outcome::kError;
    result.error = absl::Status(status.code(), EndpointMessage(process.name(), status.message()));
    return result;
  };

  // The feasible nodes (ids in evaluation order) and, where they were scored in
  // the same request, their scores per plugin.
  std::vector<uint32_t> feasible;
  bool all_nodes = true;  // `feasible` not yet narrowed by any process.
  if (only_node != nullptr) {
    feasible.push_back(only_node->id());
    all_nodes = false;
  } else if (scoped) {
    feasible = *scope.node_ids;
    all_nodes = false;
  }
  uint32_t evaluated = num_nodes;
  absl::flat_hash_map<std::string, std::vector<int64_t>> scores;
  absl::flat_hash_map<uint32_t, SharedStatus> rejected;

  for (size_t i = 0; i < setup.num_filter_processes; ++i) {
    const ProcessPlan& plan = setup.plans[i];
    const bool last = i + 1 == setup.num_filter_processes;
    v1::SchedulerToPlugin message =
        NewCycleRequest(plan, cycle_id, /*filter=*/true, /*score=*/combined);
    v1::CycleRequest& request = *message.mutable_cycle();
    if (all_nodes) {
      request.mutable_nodes()->set_all_nodes(true);
      request.mutable_nodes()->set_start_index(start);
    } else {
      request.mutable_nodes()->mutable_node_ids()->Assign(feasible.begin(), feasible.end());
    }
    // Only the last filtering process stops early: before it, a node that
    // passes may still fail elsewhere.
    request.set_num_feasible_to_find(last ? to_find : 0);
    // The last process's rejections matter only when nothing passes (then
    // they explain the pod); an earlier process's always may.
    request.set_rejections_only_when_none_feasible(last);
    // What-if verdicts, for a batch's ranking: only where this one request
    // filters and scores the pod for the whole profile.
    if (scope.what_if_copies > 0 && setup.plans.size() == 1 && combined && all_nodes && !scoped &&
        only_node == nullptr && plan.process->AnswersWhatIf()) {
      request.set_what_if_copies(scope.what_if_copies);
    }
    // The next pod's lookahead verdicts (batching/): where this one request
    // filters and scores for the whole profile, with no nominated pod in it.
    const bool lookahead = scope.lookahead != nullptr && setup.plans.size() == 1 && combined && scoped &&
                           plan.process->AnswersLookahead();
    if (lookahead) FillLookahead(*scope.lookahead, *request.mutable_lookahead());
    v1::CycleRequest shape = request;  // What the answer is checked against.
    *request.mutable_pod() = pod;
    if (setup.spec.nominated_pods && !plan.process->MirrorsNominatedPods()) {
      setup.spec.nominated_pods(pod, snapshot, request.mutable_nominated_pods());
    }
    if (lookahead && request.nominated_pods_size() == 0) {
      *request.mutable_lookahead()->mutable_pod() = *scope.lookahead->pod;
      result.lookahead_sent = true;
      if (scope.later_lookaheads != nullptr && !scope.later_lookaheads->empty() &&
          plan.process->AnswersLaterLookaheads()) {
        for (const LookaheadRequest& later : *scope.later_lookaheads) {
          v1::Lookahead& la = *request.add_later_lookaheads();
          FillLookahead(later, la);
          *shape.mutable_later_lookaheads()->Add() = la;  // Without the pod, as the first's.
          *la.mutable_pod() = *later.pod;
        }
        result.later_lookaheads_sent = scope.later_lookaheads->size();
      }
    } else {
      request.clear_lookahead();
    }
    // Other nominated pods' checks on their nodes ride with a nominated pod's
    // (the pods popped next, when preemptors come back in a run).
    size_t checks_sent = 0;
    if (only_node != nullptr && scope.nominated_checks != nullptr && !scope.nominated_checks->empty() &&
        setup.plans.size() == 1 && combined && request.nominated_pods_size() == 0 &&
        plan.process->MirrorsNominatedPods() && plan.process->AnswersNominatedChecks()) {
      for (const NominatedCheckRequest& check : *scope.nominated_checks) {
        v1::NominatedCheck& c = *request.add_nominated_checks();
        *c.mutable_pod() = *check.pod;
        c.set_node_id(check.node_id);
      }
      checks_sent = scope.nominated_checks->size();
    }
    // Preemption's first dry run rides along when the pod will likely fit
    // nowhere (the last full cycle found nothing): one round trip fewer per
    // preemptor. Only with a lone filter process that counts nominations
    // itself, as the dry run would be sent to it alone.
    bool dry_run_attached = false;
    google::protobuf::RepeatedPtrField<v1::PreemptionDryRunRequest::Candidate> what_if_asked, what_if_gone_asked;
    if (setup.num_filter_processes == 1 && only_node == nullptr && !post_filters_.empty() &&
        plan.process->RunsDryRunsInCycles() && plan.process->MirrorsNominatedPods() &&
        (scoped ? scope.predict_dry_run : last_cycle_found_none_)) {
      // A narrowed cycle (batching/ re-evaluating a kept failure's changed
      // nodes) carries the dry run of those nodes.
      const bool what_if = scoped && scope.what_if_from != nullptr && plan.process->AnswersPreemptionWhatIf();
      auto predicted = scoped ? post_filters_.front()->PredictDryRunOn(
                                    pod, cycle_id, *scope.node_ids, what_if ? scope.what_if_from : nullptr,
                                    what_if ? scope.what_if_nodes : 0,
                                    what_if && plan.process->AnswersPreemptionWhatIfGone())
                              : post_filters_.front()->PredictDryRun(pod, cycle_id);
      if (predicted) {
        // Kept to check the what-ifs' answers against (their victims and
        // PDB counts).
        what_if_asked = predicted->what_if();
        what_if_gone_asked = predicted->what_if_gone();
        *request.mutable_preemption_dry_run() = std::move(*predicted);
        dry_run_attached = true;
      }
    }
    const absl::Time sent = absl::Now();
    PluginAnswer answer = plan.process->Call(std::move(message), state_seq).get();
    const absl::Duration round_trip = absl::Now() - sent;
    absl::Status score_error;
    const absl::Status valid = CheckCycleAnswer(plan, answer, shape, snapshot, false, &score_error);
    if (valid.ok()) {
      AddCyclePhases(plan, answer->cycle(), round_trip, /*filter=*/true, /*score=*/combined);
    } else {
      AddPhase(kFilterPhase, round_trip, sdk::Code::kError);
    }
    if (!valid.ok()) {
      if (IgnoresFailure(*plan.process)) {
        continue;  // As if its plugins had let every node through.
      }
      return fail(*plan.process, valid);
    }
    // A plugin ERROR at PreFilter or Filter, as an invalid answer: decided by
    // the endpoint's failurePolicy (Ignore: as if its plugins let every node
    // through).
    if (absl::Status error = FirstFilterError(answer->cycle()); !error.ok()) {
      if (IgnoresFailure(*plan.process)) continue;
      return fail(*plan.process, error);
    }
    if (!score_error.ok()) {
      // Bad scores (or a PreScore ERROR) cost only the scores: under Ignore
      // its filter verdicts stand and its score plugins add nothing.
      if (!IgnoresFailure(*plan.process)) return fail(*plan.process, score_error);
      answer->mutable_cycle()->clear_scores();
    }
    if (result.lookahead_sent && answer->cycle().has_lookahead()) {
      // A bad lookahead costs only itself: the pod's own answer stands.
      LookaheadAnswer taken;
      absl::Status taken_ok = TakeLookahead(shape, answer->cycle(), taken);
      if (taken_ok.ok()) {
        result.lookahead = std::move(taken);
        // The later pods': all or none, valid or dropped (the first stands).
        if (result.later_lookaheads_sent > 0 && answer->cycle().later_lookaheads_size() > 0) {
          absl::Status later_ok = TakeLaterLookaheads(shape, answer->cycle(), result.later_lookaheads);
          if (!later_ok.ok()) {
            plan.process->CountInvalidAnswer();
            result.lookahead_error = absl::Status(
                later_ok.code(), EndpointMessage(plan.process->name(), later_ok.message()));
            PODIUM_LOG(Warning, "Dropped an invalid lookahead answer", {"endpoint", plan.process->name()},
                       {"error", later_ok.message()});
          }
        }
      } else {
        plan.process->CountInvalidAnswer();
        result.lookahead_error = absl::Status(
            taken_ok.code(), EndpointMessage(plan.process->name(), taken_ok.message()));
        PODIUM_LOG(Warning, "Dropped an invalid lookahead answer", {"endpoint", plan.process->name()},
                   {"error", taken_ok.message()});
      }
    }
    if (checks_sent > 0 && answer->cycle().nominated_checks_size() > 0) {
      // A bad answer costs only the checks: the pod's own answer stands.
      const auto& verdicts = answer->cycle().nominated_checks();
      const bool known = std::all_of(verdicts.begin(), verdicts.end(), [](int v) {
        return v == v1::WhatIfVerdicts::UNKNOWN || v == v1::WhatIfVerdicts::FEASIBLE ||
               v == v1::WhatIfVerdicts::INFEASIBLE;
      });
      if (static_cast<size_t>(verdicts.size()) == checks_sent && known) {
        for (int v : verdicts) result.nominated_checks.push_back(static_cast<v1::WhatIfVerdicts::Verdict>(v));
      } else {
        plan.process->CountInvalidAnswer();
        PODIUM_LOG(Warning, "Dropped an invalid nominated_checks answer", {"endpoint", plan.process->name()},
                   {"error", absl::StrCat("cycle.nominated_checks: ", verdicts.size(), " verdicts for ",
                                          checks_sent, " checks", known ? "" : ", or an unknown verdict")});
      }
    }
    if (dry_run_attached && answer->cycle().feasible_size() == 0 &&
        answer->cycle().has_preemption_dry_run()) {
      v1::PreemptionDryRunResponse* dry_run = answer->mutable_cycle()->mutable_preemption_dry_run();
      // A bad what-if list costs only itself: the dry run's own answer stands.
      for (auto [asked, answers, field] :
           {std::tuple{&what_if_asked, dry_run->mutable_what_if(), "what_if"},
            std::tuple{&what_if_gone_asked, dry_run->mutable_what_if_gone(), "what_if_gone"}}) {
        if (answers->empty()) continue;
        if (absl::Status s = CheckWhatIfList(*asked, *answers, field); !s.ok()) {
          plan.process->CountInvalidAnswer();
          PODIUM_LOG(Warning, "Dropped an invalid preemption what-if", {"endpoint", plan.process->name()},
                     {"error", s.message()});
          answers->Clear();
        }
      }
      result.diagnosis.dry_run_answer = std::make_shared<const v1::PreemptionDryRunResponse>(std::move(*dry_run));
    }
    const v1::CycleResponse& cycle = answer->cycle();
    if (cycle.pre_filter_status().code() != v1::Status::SUCCESS &&
        cycle.pre_filter_status().code() != v1::Status::SKIP) {
      const sdk::Status status = sdk::Status::FromProto(cycle.pre_filter_status());
      result.outcome = ScheduleResult::Outcome::kUnschedulable;
      RecordPreFilterRejection(result.diagnosis, status,
                               plan.process->LeavesPreFilterUnschedulableToPreemption());
      return result;
    }
    const RejectionStatuses statuses(cycle);
    for (const auto& r : cycle.rejected()) rejected[r.node_id()] = statuses.Get(r);
    if (last) {
      // Where the evaluation stopped, in the rotation over all nodes.
      if (all_nodes) {
        evaluated = cycle.nodes_evaluated();
      } else if (cycle.nodes_evaluated() > 0 && cycle.nodes_evaluated() < feasible.size()) {
        const uint32_t last_id = feasible[cycle.nodes_evaluated() - 1];
        for (uint32_t k = 0; k < num_nodes; ++k) {
          if (nodes[(start + k) % num_nodes]->id() == last_id) {
            evaluated = k + 1;
            break;
          }
        }
      }
    }
    feasible.assign(cycle.feasible().begin(), cycle.feasible().end());
    all_nodes = false;
    for (const auto& s : cycle.scores()) {
      scores[s.plugin()].assign(s.scores().begin(), s.scores().end());
    }
    if (scope.want_ranking && cycle.has_what_if() && cycle.what_if().copies() > 0) {
      const v1::WhatIfVerdicts& what_if = cycle.what_if();
      result.ranking.what_if_copies = what_if.copies();
      result.ranking.what_if.reserve(what_if.verdicts_size());
      for (int v : what_if.verdicts()) {
        result.ranking.what_if.push_back(static_cast<v1::WhatIfVerdicts::Verdict>(v));
      }
      for (const auto& s : what_if.scores()) {
        result.ranking.what_if_scores[s.plugin()].assign(s.scores().begin(), s.scores().end());
      }
    }
  }
  if (all_nodes && !scoped) {
    // No process filtered (none configured, or all ignored): every node fits.
    feasible.reserve(num_nodes);
    for (uint32_t k = 0; k < std::min(num_nodes, to_find); ++k) {
      feasible.push_back(nodes[(start + k) % num_nodes]->id());
    }
    evaluated = static_cast<uint32_t>(feasible.size());
  }
  if (only_node != nullptr) {
    evaluated = 1;  // The rotation is not moved by the nominated node.
  } else if (scoped) {
    evaluated = static_cast<uint32_t>(scope.node_ids->size());
  } else {
    next_start_node_index_ = (start + evaluated) % num_nodes;
  }
  result.evaluated_nodes = evaluated;
  result.ranking.start_index = start;

  if (only_node == nullptr && !scoped) last_cycle_found_none_ = feasible.empty();
  if (feasible.empty()) {
    result.outcome = ScheduleResult::Outcome::kUnschedulable;
    result.diagnosis.node_statuses.reserve(result.diagnosis.node_statuses.size() + rejected.size());
    for (auto& [id, status] : rejected) {
      if (const sdk::NodeInfo* node = snapshot.GetById(id)) {
        result.diagnosis.unschedulable_plugins.insert(status->plugin());
        result.diagnosis.node_statuses.emplace_back(NodeName(*node), std::move(status));
      }
    }
    if (scoped) result.outcome = ScheduleResult::Outcome::kScheduled;  // Nothing passed; not a verdict.
    return result;
  }
  result.feasible_nodes = static_cast<uint32_t>(feasible.size());

  // Score with every process whose score plugins did not run above. A single
  // feasible node needs no scores (kube-scheduler skips them too).
  if (feasible.size() > 1 || scoped) {
    std::vector<ScoreCall> calls;
    const absl::Time sent = absl::Now();
    for (size_t i = combined ? 1 : 0; i < setup.plans.size(); ++i) {
      const ProcessPlan& plan = setup.plans[i];
      if (plan.score.empty() && plan.pre_score.empty()) continue;
      calls.push_back(SendScoreRequest(plan, cycle_id, feasible, pod, state_seq));
    }
    if (auto failed = FoldScoreAnswers(calls, sent, snapshot, scores)) {
      return fail(*failed->process, failed->status);
    }
  }

  SelectHost(setup, feasible, scores, snapshot, result);
  if (scope.want_ranking) {
    result.ranking.feasible = std::move(feasible);
    result.ranking.scores = std::move(scores);
  }
  return result;
}

Framework::ScoreCall Framework::SendScoreRequest(const ProcessPlan& plan, uint64_t cycle_id,
                                                 const std::vector<uint32_t>& feasible,
                                                 const v1::Pod& pod, uint64_t state_seq) {
  v1::SchedulerToPlugin message = NewCycleRequest(plan, cycle_id, /*filter=*/false, /*score=*/true);
  message.mutable_cycle()->mutable_nodes()->mutable_node_ids()->Assign(feasible.begin(), feasible.end());
  v1::CycleRequest shape = message.cycle();
  *message.mutable_cycle()->mutable_pod() = pod;
  return {&plan, std::move(shape), plan.process->Call(std::move(message), state_seq)};
}

std::optional<Framework::ProcessError> Framework::FoldScoreAnswers(
    std::vector<ScoreCall>& calls, absl::Time sent, const sdk::Snapshot& snapshot,
    absl::flat_hash_map<std::string, std::vector<int64_t>>& scores) {
  for (auto& [plan, shape, future] : calls) {
    PluginAnswer answer = future.get();
    const absl::Duration round_trip = absl::Now() - sent;
    absl::Status score_error;
    absl::Status valid = CheckCycleAnswer(*plan, answer, shape, snapshot, true, &score_error);
    if (valid.ok()) {
      AddCyclePhases(*plan, answer->cycle(), round_trip, /*filter=*/false, /*score=*/true);
    } else {
      AddPhase(kScorePhase, round_trip, sdk::Code::kError, /*parallel=*/true);
    }
    if (valid.ok()) valid = std::move(score_error);
    if (!valid.ok()) {
      if (IgnoresFailure(*plan->process)) continue;  // Its plugins add nothing to the totals.
      return ProcessError{plan->process, std::move(valid)};
    }
    for (const auto& s : answer->cycle().scores()) {
      scores[s.plugin()].assign(s.scores().begin(), s.scores().end());
    }
  }
  return std::nullopt;
}

void Framework::SelectHost(const Setup& setup, const std::vector<uint32_t>& feasible,
                           const absl::flat_hash_map<std::string, std::vector<int64_t>>& scores,
                           const sdk::Snapshot& snapshot, ScheduleResult& result) {
  // Weighted totals; ties broken at random, as kube-scheduler's selectHost.
  std::vector<std::pair<const std::vector<int64_t>*, int64_t>> weighted;
  weighted.reserve(scores.size());
  for (const auto& [plugin, values] : scores) {
    auto w = setup.weights.find(plugin);
    weighted.emplace_back(&values, w == setup.weights.end() ? 1 : w->second);
  }
  size_t best = 0;
  int64_t best_score = -1;
  int ties = 0;
  for (size_t k = 0; k < feasible.size(); ++k) {
    int64_t total = 0;
    for (const auto& [values, weight] : weighted) {
      if (k < values->size()) total += (*values)[k] * weight;
    }
    if (total > best_score) {
      best_score = total;
      best = k;
      ties = 1;
    } else if (total == best_score) {
      ++ties;
      if (std::uniform_int_distribution<int>(0, ties - 1)(rng_) == 0) best = k;
    }
  }
  const sdk::NodeInfo* chosen = snapshot.GetById(feasible[best]);
  if (chosen == nullptr) {
    result.outcome = ScheduleResult::Outcome::kError;
    result.error = absl::InternalError("selected node vanished from the snapshot");
    return;
  }
  result.outcome = ScheduleResult::Outcome::kScheduled;
  result.node_name = chosen->name();
}

std::vector<Framework::ProcessRun> Framework::RemoteRuns(const Setup& setup,
                                                         v1::ExtensionPoint point, bool reverse) {
  std::vector<ProcessRun> runs;
  auto it = setup.spec.plugins.find(point);
  if (it == setup.spec.plugins.end()) return runs;
  std::vector<PluginRef> refs = it->second;
  if (reverse) std::reverse(refs.begin(), refs.end());
  for (const auto& ref : refs) {
    auto p = setup.spec.processes.find(ref.name);
    if (p == setup.spec.processes.end()) continue;  // Built in (SchedulingGates, DefaultBinder).
    if (runs.empty() || runs.back().first != p->second) runs.push_back({p->second, {}});
    runs.back().second.push_back(ref.name);
  }
  return runs;
}

std::vector<Framework::ProcessRun> Framework::RemoteRunsFor(const Setup& setup, v1::ExtensionPoint point,
                                                            bool reverse, const v1::Pod& pod) {
  std::vector<ProcessRun> runs = RemoteRuns(setup, point, reverse);
  if (!pod.pod_group().empty() || setup.spec.pod_group_members_only.empty()) return runs;
  std::vector<ProcessRun> kept;
  for (auto& [process, names] : runs) {
    names.erase(std::remove_if(names.begin(), names.end(),
                               [&](const std::string& n) { return setup.spec.pod_group_members_only.contains(n); }),
                names.end());
    if (names.empty()) continue;
    if (!kept.empty() && kept.back().first == process) {
      kept.back().second.insert(kept.back().second.end(), names.begin(), names.end());
    } else {
      kept.push_back({process, std::move(names)});
    }
  }
  return kept;
}

sdk::Status Framework::RunStatusPhase(v1::ExtensionPoint point, const v1::Pod& pod,
                                      const std::string& node, uint64_t cycle_id, bool unreserve,
                                      bool stop_on_skip, std::optional<uint64_t> state_seq) const {
  // Unreserve runs the Reserve plugins in reverse order.
  const bool member_scoped = point == v1::RESERVE;
  const std::shared_ptr<const Setup> setup = CurrentSetup();
  std::vector<ProcessRun> groups = member_scoped ? RemoteRunsFor(*setup, point, /*reverse=*/unreserve, pod)
                                                 : RemoteRuns(*setup, point, /*reverse=*/unreserve);
  if (point == v1::RESERVE && !unreserve && !setup->spec.unreserve_only.empty()) {
    // Their Reserve would succeed and change nothing: no round trip for it.
    for (auto& [process, names] : groups) {
      names.erase(std::remove_if(names.begin(), names.end(),
                                 [&](const std::string& n) { return setup->spec.unreserve_only.contains(n); }),
                  names.end());
    }
    groups.erase(std::remove_if(groups.begin(), groups.end(), [](const ProcessRun& r) { return r.second.empty(); }),
                 groups.end());
  }
  if (groups.empty()) return stop_on_skip ? sdk::Status(sdk::Code::kSkip) : sdk::Status::Success();
  const absl::Time start = absl::Now();
  sdk::Status status = RunStatusRuns(groups, point, pod, node, cycle_id, unreserve, stop_on_skip,
                                     state_seq);
  Record(unreserve ? "Unreserve" : PointName(point), status.code(), absl::Now() - start);
  return status;
}

sdk::Status Framework::RunStatusRuns(const std::vector<ProcessRun>& groups,
                                     v1::ExtensionPoint point, const v1::Pod& pod,
                                     const std::string& node, uint64_t cycle_id, bool unreserve,
                                     bool stop_on_skip, std::optional<uint64_t> state_seq) const {
  bool all_skipped = true;
  for (auto& [process, names] : groups) {
    v1::SchedulerToPlugin message;
    v1::BindingRequest* binding = nullptr;
    switch (unreserve ? v1::EXTENSION_POINT_UNSPECIFIED : point) {
      case v1::RESERVE: {
        auto* r = message.mutable_reserve();
        r->set_cycle_id(cycle_id), *r->mutable_pod() = pod, r->set_node_name(node);
        for (auto& n : names) r->add_plugins(n);
        break;
      }
      case v1::PRE_BIND: binding = message.mutable_pre_bind(); break;
      case v1::BIND: binding = message.mutable_bind(); break;
      case v1::POST_BIND: binding = message.mutable_post_bind(); break;
      default: {  // Unreserve.
        auto* r = message.mutable_unreserve();
        r->set_cycle_id(cycle_id), *r->mutable_pod() = pod, r->set_node_name(node);
        for (auto& n : names) r->add_plugins(n);
      }
    }
    if (binding != nullptr) {
      binding->set_cycle_id(cycle_id);
      *binding->mutable_pod() = pod;
      binding->set_node_name(node);
      for (auto& n : names) binding->add_plugins(n);
    }
    const absl::Time call_start = absl::Now();
    PluginAnswer answer = process->Call(std::move(message), state_seq).get();
    if (recorder_ != nullptr) {
      // The round trip: these requests carry no time of their own.
      sdk::Code code = answer.ok() ? sdk::Code::kSuccess : sdk::Code::kError;
      if (answer.ok()) {
        for (const auto& st : answer->status().statuses()) {
          if (st.code() != v1::Status::SUCCESS) code = static_cast<sdk::Code>(st.code());
          if (st.code() != v1::Status::SUCCESS && st.code() != v1::Status::SKIP) break;
        }
      }
      RecordPlugins(*process, names, unreserve ? "Unreserve" : PointName(point), code, absl::Now() - call_start);
    }
    if (!answer.ok()) {
      if (IgnoresFailure(*process)) {
        continue;
      }
      return ErrorStatus(EndpointMessage(process->name(), answer.status().message()));
    }
    bool group_skipped = false;
    for (const auto& s : answer->status().statuses()) {
      sdk::Status status = sdk::Status::FromProto(s);
      if (status.IsSkip()) {
        group_skipped = true;
        continue;
      }
      if (!status.IsSuccess()) return status;
    }
    if (!group_skipped || !stop_on_skip) all_skipped = false;
    if (stop_on_skip && !group_skipped) return sdk::Status::Success();
  }
  if (stop_on_skip && all_skipped) return sdk::Status(sdk::Code::kSkip);
  return sdk::Status::Success();
}

sdk::Status Framework::RunPreEnqueue(const v1::Pod& pod, const v1::PodGroup* pod_group,
                                     uint32_t pod_group_pods) const {
  for (const auto& [process, names] :
       RemoteRunsFor(*CurrentSetup(), v1::PRE_ENQUEUE, /*reverse=*/false, pod)) {
    v1::SchedulerToPlugin message;
    auto* request = message.mutable_pre_enqueue();
    *request->mutable_pod() = pod;
    for (auto& n : names) request->add_plugins(n);
    if (!pod.pod_group().empty()) {
      if (pod_group != nullptr) *request->mutable_pod_group() = *pod_group;
      request->set_pod_group_pods(pod_group_pods);
    }
    PluginAnswer answer = process->Call(std::move(message), std::nullopt).get();
    if (!answer.ok()) {
      if (IgnoresFailure(*process)) {
        continue;
      }
      // Fail closed: the pod stays gated until it is updated or the plugin answers.
      sdk::Status status(sdk::Code::kError, EndpointMessage(process->name(), answer.status().message()));
      status.WithPlugin(names.front());
      return status;
    }
    for (const auto& s : answer->status().statuses()) {
      sdk::Status status = sdk::Status::FromProto(s);
      if (!status.IsSuccess()) return status;
    }
  }
  return sdk::Status::Success();
}

sdk::Status Framework::RunReserve(const v1::Pod& pod, const std::string& node, uint64_t cycle_id) {
  if (last_state_seq_) {
    for (PluginProcess* process : CurrentSetup()->binding_only_processes) {
      process->SendState(*last_state_seq_);
    }
  }
  return RunStatusPhase(v1::RESERVE, pod, node, cycle_id, false, false, last_state_seq_);
}

void Framework::RunUnreserve(const v1::Pod& pod, const std::string& node, uint64_t cycle_id) {
  RunStatusPhase(v1::RESERVE, pod, node, cycle_id, /*unreserve=*/true, false);
  FinishCycle(*CurrentSetup(), cycle_id);
}

PermitOutcome Framework::RunPermit(const v1::Pod& pod, const std::string& node, uint64_t cycle_id) {
  const absl::Time start = absl::Now();
  PermitOutcome outcome = RunPermitPlugins(pod, node, cycle_id);
  if (HasRemotePlugins(v1::PERMIT)) Record("Permit", outcome.status.code(), absl::Now() - start);
  return outcome;
}

PermitOutcome Framework::RunPermitPlugins(const v1::Pod& pod, const std::string& node,
                                          uint64_t cycle_id) {
  PermitOutcome outcome;
  const std::shared_ptr<const Setup> current = CurrentSetup();
  const Setup& setup = *current;
  auto it = setup.spec.plugins.find(v1::PERMIT);
  if (it == setup.spec.plugins.end()) return outcome;
  absl::flat_hash_map<PluginProcess*, std::vector<std::string>> by_process;
  std::vector<PluginProcess*> order;
  for (const auto& ref : it->second) {
    auto p = setup.spec.processes.find(ref.name);
    if (p == setup.spec.processes.end()) continue;
    if (pod.pod_group().empty() && setup.spec.pod_group_members_only.contains(ref.name)) continue;
    auto [pos, inserted] = by_process.try_emplace(p->second);
    if (inserted) order.push_back(p->second);
    pos->second.push_back(ref.name);
  }
  std::vector<std::pair<PluginProcess*, std::future<PluginAnswer>>> calls;
  for (PluginProcess* process : order) {
    v1::SchedulerToPlugin message;
    auto* r = message.mutable_permit();
    r->set_cycle_id(cycle_id), *r->mutable_pod() = pod, r->set_node_name(node);
    for (auto& n : by_process[process]) r->add_plugins(n);
    calls.emplace_back(process, process->Call(std::move(message), last_state_seq_));
  }
  for (auto& [process, future] : calls) {
    PluginAnswer answer = future.get();
    if (!answer.ok()) {
      if (IgnoresFailure(*process)) {
        continue;
      }
      outcome.status = ErrorStatus(EndpointMessage(process->name(), answer.status().message()));
      return outcome;
    }
    for (const auto& r : answer->permit().results()) {
      sdk::Status status = sdk::Status::FromProto(r.status());
      if (status.plugin().empty()) status.WithPlugin(r.plugin());
      if (status.IsWait()) {
        outcome.waiting[r.plugin()] = absl::Milliseconds(std::max<int64_t>(0, r.timeout_ms()));
      } else if (!status.IsSuccess()) {
        outcome.status = std::move(status);
        outcome.waiting.clear();
        return outcome;
      }
    }
  }
  if (!outcome.waiting.empty()) outcome.status = sdk::Status(sdk::Code::kWait);
  return outcome;
}

sdk::Status Framework::RunPreBind(const v1::Pod& pod, const std::string& node, uint64_t cycle_id) {
  return RunStatusPhase(v1::PRE_BIND, pod, node, cycle_id, false, false);
}

sdk::Status Framework::RunBindPlugins(const v1::Pod& pod, const std::string& node,
                                      uint64_t cycle_id) {
  if (!HasRemotePlugins(v1::BIND)) return sdk::Status(sdk::Code::kSkip);
  return RunStatusPhase(v1::BIND, pod, node, cycle_id, false, true);
}

void Framework::RunPostBind(const v1::Pod& pod, const std::string& node, uint64_t cycle_id) {
  RunStatusPhase(v1::POST_BIND, pod, node, cycle_id, false, false);
  FinishCycle(*CurrentSetup(), cycle_id);
}

}  // namespace podium::scheduler
