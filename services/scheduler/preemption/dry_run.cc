#include "preemption/dry_run.h"

#include <algorithm>
#include <cstdio>
#include <future>
#include <optional>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "logging/logger.h"

namespace podium::scheduler::preemption {

void SetCandidate(const sdk::NodeInfo& node, const PotentialVictims& potential,
                  v1::PreemptionDryRunRequest::Candidate& c) {
  c.set_node_id(node.id());
  for (const sdk::PodInfoPtr& v : potential.pods) c.add_potential_victims(v->uid());
  c.set_num_pdb_violating(static_cast<uint32_t>(potential.num_pdb_violating));
}

namespace {

struct FilterProcess {
  PluginProcess* process = nullptr;
  std::vector<std::string> pre_filter, filter;
};

// The processes serving PreFilter or Filter plugins, in the order their first
// plugin appears in the profile.
std::vector<FilterProcess> FilterProcesses(const ProfileSpec& spec) {
  std::vector<FilterProcess> out;
  absl::flat_hash_map<PluginProcess*, size_t> index;
  for (v1::ExtensionPoint point : {v1::PRE_FILTER, v1::FILTER}) {
    auto it = spec.plugins.find(point);
    if (it == spec.plugins.end()) continue;
    for (const PluginRef& ref : it->second) {
      auto p = spec.processes.find(ref.name);
      if (p == spec.processes.end()) continue;
      auto [pos, inserted] = index.try_emplace(p->second, out.size());
      if (inserted) out.push_back(FilterProcess{p->second, {}, {}});
      (point == v1::PRE_FILTER ? out[pos->second].pre_filter : out[pos->second].filter).push_back(ref.name);
    }
  }
  return out;
}

struct NodeAnswer {
  sdk::Status status;
  std::vector<std::string> victims;
};

// What a round asked of the processes, read from the nodes it was built from
// (no copy of the request is kept): node id -> position in `nodes`.
struct RoundShape {
  const std::vector<DryRunNode>& nodes;
  const std::vector<std::vector<std::string>>* union_victims;  // Else each node's potential victims.
  absl::flat_hash_map<uint32_t, size_t> asked;

  bool IsPotentialVictim(size_t i, const std::string& uid) const {
    if (union_victims != nullptr) {
      const auto& v = (*union_victims)[i];
      return std::find(v.begin(), v.end(), uid) != v.end();
    }
    for (const sdk::PodInfoPtr& p : nodes[i].potential.pods) {
      if (p->uid() == uid) return true;
    }
    return false;
  }
};

// Checks the answer against its request: nodes in the request, each once;
// victims among the node's potential victims; a status code a filter may give.
absl::StatusOr<absl::flat_hash_map<uint32_t, NodeAnswer>> Validate(
    const RoundShape& shape, const v1::PreemptionDryRunResponse& answer) {
  absl::flat_hash_map<uint32_t, NodeAnswer> out;
  out.reserve(answer.nodes_size());
  for (int i = 0; i < answer.nodes_size(); ++i) {
    const v1::NodeVictims& n = answer.nodes(i);
    auto it = shape.asked.find(n.node_id());
    if (it == shape.asked.end()) {
      return absl::InvalidArgumentError(absl::StrCat("preemption_dry_run.nodes[", i, "]: node id ",
                                                     n.node_id(), " was not in the request"));
    }
    if (out.contains(n.node_id())) {
      return absl::InvalidArgumentError(absl::StrCat("preemption_dry_run.nodes[", i, "]: node id ",
                                                     n.node_id(), " answered twice"));
    }
    const v1::Status::Code code = n.status().code();
    if (code == v1::Status::WAIT || code == v1::Status::SKIP) {
      return absl::InvalidArgumentError(absl::StrCat("preemption_dry_run.nodes[", i,
                                                     "].status: not a filter outcome"));
    }
    NodeAnswer a;
    a.status = sdk::Status::FromProto(n.status());
    a.victims.reserve(n.victims_size());
    for (int v = 0; v < n.victims_size(); ++v) {
      if (!shape.IsPotentialVictim(it->second, n.victims(v))) {
        return absl::InvalidArgumentError(absl::StrCat("preemption_dry_run.nodes[", i, "].victims[", v,
                                                       "]: pod ", n.victims(v),
                                                       " is not a potential victim on that node"));
      }
      a.victims.push_back(n.victims(v));
    }
    out.emplace(n.node_id(), std::move(a));
  }
  return out;
}

// A round's request to one process, without the pod (and nominated pods).
void FillRequest(const FilterProcess& fp, uint64_t cycle_id, const std::vector<DryRunNode>& nodes,
                 const std::vector<std::vector<std::string>>* union_victims,
                 const std::vector<bool>* only, bool confirm, size_t num_processes,
                 uint32_t num_candidates, uint32_t have, v1::PreemptionDryRunRequest& r) {
  r.set_cycle_id(cycle_id);
  for (const auto& n : fp.pre_filter) r.add_pre_filter_plugins(n);
  for (const auto& n : fp.filter) r.add_filter_plugins(n);
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (only != nullptr && !(*only)[i]) continue;
    auto* c = r.add_candidates();
    if (union_victims != nullptr) {
      c->set_node_id(nodes[i].node->id());
      for (const auto& uid : (*union_victims)[i]) c->add_potential_victims(uid);
    } else {
      SetCandidate(*nodes[i].node, nodes[i].potential, *c);
    }
  }
  r.set_no_reprieve(confirm);
  // Only a lone process may stop early: with several, a node one process
  // accepts may fail in another.
  // It counts from zero: asking for what is still missing makes it
  // evaluate at least the nodes the rule needs (extra ones are cut below).
  r.set_num_candidates(num_processes == 1 && num_candidates > 0
                           ? (have < num_candidates ? num_candidates - have : 1)
                           : 0);
}

}  // namespace

std::optional<v1::PreemptionDryRunRequest> FirstDryRunRequest(const ProfileSpec& spec,
                                                              uint64_t cycle_id,
                                                              const std::vector<DryRunNode>& nodes,
                                                              uint32_t num_candidates) {
  const std::vector<FilterProcess> processes = FilterProcesses(spec);
  if (processes.size() != 1 || nodes.empty()) return std::nullopt;
  v1::PreemptionDryRunRequest r;
  FillRequest(processes.front(), cycle_id, nodes, nullptr, nullptr, /*confirm=*/false, 1, num_candidates,
              /*have=*/0, r);
  return r;
}

absl::StatusOr<DryRunOutcome> RunDryRuns(
    const ProfileSpec& spec, const v1::Pod& pod, uint64_t cycle_id, uint64_t state_seq,
    const std::vector<DryRunNode>& nodes,
    const google::protobuf::RepeatedPtrField<v1::MirroredPod>& nominated, uint32_t num_candidates,
    DryRunCounts* found, const v1::PreemptionDryRunResponse* first_answer) {
  DryRunCounts local;
  DryRunCounts& counts = found != nullptr ? *found : local;
  DryRunOutcome outcome;
  const std::vector<FilterProcess> processes = FilterProcesses(spec);
  if (nodes.empty()) return outcome;

  // One round: every process gets every node (of `only`, when set). `given`:
  // the lone process's answer to this round, already there.
  auto round = [&](bool confirm, const std::vector<std::vector<std::string>>* union_victims,
                   const std::vector<bool>* only, const v1::PreemptionDryRunResponse* given)
      -> absl::StatusOr<std::vector<std::optional<absl::flat_hash_map<uint32_t, NodeAnswer>>>> {
    RoundShape shape{nodes, union_victims, {}};
    shape.asked.reserve(nodes.size());
    for (size_t i = 0; i < nodes.size(); ++i) {
      if (only == nullptr || (*only)[i]) shape.asked.emplace(nodes[i].node->id(), i);
    }
    std::vector<std::future<PluginAnswer>> calls;
    for (const FilterProcess& fp : processes) {
      if (given != nullptr) break;  // The lone process answered already.
      v1::SchedulerToPlugin message;
      v1::PreemptionDryRunRequest& r = *message.mutable_preemption_dry_run();
      FillRequest(fp, cycle_id, nodes, union_victims, only, confirm, processes.size(), num_candidates,
                  counts.non_violating + counts.violating, r);
      *r.mutable_pod() = pod;
      // A process that mirrors nominations counts them itself.
      if (!fp.process->MirrorsNominatedPods()) *r.mutable_nominated_pods() = nominated;
      calls.push_back(fp.process->Call(std::move(message), state_seq));
    }
    std::vector<std::optional<absl::flat_hash_map<uint32_t, NodeAnswer>>> answers;
    const size_t num_answers = given != nullptr ? 1 : calls.size();
    for (size_t p = 0; p < num_answers; ++p) {
      PluginProcess& process = *processes[p].process;
      PluginAnswer answer =
          given != nullptr ? PluginAnswer(v1::PluginToScheduler()) : calls[p].get();
      absl::Status error = answer.status();
      // The answer to check: the one that rode in the cycle, or this call's.
      const v1::PreemptionDryRunResponse* response = given;
      if (response == nullptr && error.ok()) {
        if (answer->kind_case() == v1::PluginToScheduler::kError) {
          error = absl::InternalError(answer->error());
        } else if (answer->kind_case() != v1::PluginToScheduler::kPreemptionDryRun) {
          error = absl::InvalidArgumentError("answer to a preemption dry run is of another kind");
          process.CountInvalidAnswer();
        } else {
          response = &answer->preemption_dry_run();
        }
      }
      absl::StatusOr<absl::flat_hash_map<uint32_t, NodeAnswer>> valid;
      if (response != nullptr) {
        valid = Validate(shape, *response);
        if (!valid.ok()) {
          error = valid.status();
          process.CountInvalidAnswer();
          PODIUM_LOG(Warning, "Invalid plugin answer", {"endpoint", process.name()},
                     {"request", given != nullptr ? "cycle.preemption_dry_run" : "preemption_dry_run"},
                     {"err", error.message()});
        }
      }
      if (!error.ok()) {
        if (process.failure_policy() == FailurePolicy::kIgnore) {
          process.CountIgnoredFailure();
          answers.emplace_back(std::nullopt);  // As if its filters let every node through.
          continue;
        }
        return absl::Status(error.code(), absl::StrCat("plugin endpoint ", process.name(),
                                                       ": preemption dry run: ", error.message()));
      }
      answers.emplace_back(std::move(*valid));
    }
    return answers;
  };

  auto first = round(false, nullptr, nullptr, processes.size() == 1 ? first_answer : nullptr);
  if (!first.ok()) return first.status();

  // Per node: fits in every process that answered; victims = the union, in
  // the potential order.
  std::vector<bool> fits(nodes.size(), false);
  std::vector<std::vector<std::string>> victims(nodes.size());
  size_t answering = 0;
  for (const auto& a : *first) answering += a.has_value();
  if (answering == 0) return outcome;  // No filter process answered: nothing to go on.
  for (size_t i = 0; i < nodes.size(); ++i) {
    const uint32_t id = nodes[i].node->id();
    bool evaluated = true;
    std::optional<sdk::Status> rejection;
    absl::flat_hash_set<std::string> chosen;
    for (const auto& answer : *first) {
      if (!answer) continue;
      auto it = answer->find(id);
      if (it == answer->end()) {
        evaluated = false;  // The process stopped before this node.
        break;
      }
      if (!it->second.status.IsSuccess()) {
        rejection = it->second.status;
        break;
      }
      chosen.insert(it->second.victims.begin(), it->second.victims.end());
    }
    if (rejection) {
      outcome.rejected.emplace_back(NodeName(*nodes[i].node), MakeSharedStatus(std::move(*rejection)));
      continue;
    }
    if (!evaluated) continue;
    for (const auto& v : nodes[i].potential.pods) {
      if (chosen.contains(v->uid())) victims[i].push_back(v->uid());
    }
    fits[i] = true;
  }

  // Several processes: confirm each union with every process.
  if (answering > 1) {
    auto confirm = round(true, &victims, &fits, nullptr);
    if (!confirm.ok()) return confirm.status();
    for (size_t i = 0; i < nodes.size(); ++i) {
      if (!fits[i]) continue;
      for (const auto& answer : *confirm) {
        if (!answer) continue;
        auto it = answer->find(nodes[i].node->id());
        if (it == answer->end() || !it->second.status.IsSuccess()) {
          fits[i] = false;
          outcome.rejected.emplace_back(
              NodeName(*nodes[i].node),
              MakeSharedStatus(it == answer->end() ? sdk::Status(sdk::Code::kUnschedulable, kNoVictims)
                                                   : it->second.status));
          break;
        }
      }
    }
  }

  // kube-scheduler's stop rule over the nodes in order.
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (counts.Enough(num_candidates)) break;
    if (!fits[i]) continue;
    if (victims[i].empty()) {
      outcome.rejected.emplace_back(
          NodeName(*nodes[i].node),
          MakeSharedStatus(sdk::Status(sdk::Code::kError,
                                       absl::StrCat("expected at least one victim pod on node \"",
                                                    nodes[i].node->name(), "\""))));
      continue;
    }
    Candidate c;
    c.node_name = nodes[i].node->name();
    absl::flat_hash_set<std::string> set(victims[i].begin(), victims[i].end());
    for (size_t k = 0; k < nodes[i].potential.pods.size(); ++k) {
      const sdk::PodInfoPtr& v = nodes[i].potential.pods[k];
      if (!set.contains(v->uid())) continue;
      c.victims.push_back(v);
      if (k < nodes[i].potential.num_pdb_violating) ++c.num_pdb_violations;
    }
    (c.num_pdb_violations == 0 ? counts.non_violating : counts.violating)++;
    outcome.candidates.push_back(std::move(c));
  }
  return outcome;
}

}  // namespace podium::scheduler::preemption
