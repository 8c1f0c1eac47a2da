// The cycle of a profile whose filter plugins live in more than one plugin
// process: every process gets its request at once (filter, and score when it
// has score plugins), and the answers are merged so that the result is the one
// kube-scheduler's sequential Filter would give (the first nodes, in the
// rotation from the start index, that pass every filter plugin, until
// numFeasibleNodesToFind), then scored over exactly those nodes.
//
// Round 0 asks every filtering process about all nodes from the start index,
// each stopping when its own plugins found enough nodes, and scoring what they
// found. When the processes agree (the common case: their filters pass the same
// nodes), the merge is final and every process already scored exactly the
// final nodes: N processes cost one round trip. When they disagree, further
// filter rounds ask each process only about the nodes another process already
// judged and it did not, until the prefix of the rotation is decided; then the
// processes whose round-0 scores were over another set of nodes score the
// final nodes (one more round trip, all processes at once).
//
// A batch's re-evaluation (CycleScope::node_ids: the few nodes that changed
// since its ranking) is the same merge over that list instead of the rotation:
// every process judges every listed node in round 0, so N processes cost one
// round trip there too, plus one score round when their verdicts differ.
#include <algorithm>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "framework/framework.h"

namespace podium::scheduler {
namespace {

enum Verdict : uint8_t { kUnknown = 0, kPass = 1, kReject = 2 };

}  // namespace

ScheduleResult Framework::RunFanOut(const Setup& setup, const v1::Pod& pod,
                                    const sdk::Snapshot& snapshot, uint64_t state_seq,
                                    uint64_t cycle_id, uint32_t start, uint32_t to_find,
                                    const CycleScope& scope, ScheduleResult result) {
  const auto& nodes = snapshot.Nodes();
  // The sequence judged: the rotation over every node from `start`, or the
  // scope's list, every node of which is judged (nothing passed is no verdict).
  const std::vector<uint32_t>* listed = scope.node_ids;
  const uint32_t num_nodes = static_cast<uint32_t>(listed != nullptr ? listed->size() : nodes.size());
  if (listed != nullptr) to_find = num_nodes;
  absl::flat_hash_map<uint32_t, uint32_t> listed_position;
  if (listed != nullptr) {
    for (uint32_t k = 0; k < num_nodes; ++k) listed_position.emplace((*listed)[k], k);
  }
  const size_t num_filter = setup.num_filter_processes;
  // What-if verdicts: asked in round 0 of a full cycle when every process of
  // the profile filters (so each judges every node there) and answers them;
  // merged below as the cycle merges, or not used at all.
  bool what_if = scope.what_if_copies > 0 && listed == nullptr && setup.plans.size() == num_filter;
  for (size_t p = 0; what_if && p < num_filter; ++p) what_if = setup.plans[p].process->AnswersWhatIf();

  auto fail = [&](PluginProcess& process, const absl::Status& status) {
    result.outcome = ScheduleResult::Outcome::kError;
    result.error = absl::Status(status.code(), EndpointMessage(process.name(), status.message()));
    return result;
  };
  // Nodes() is in ascending id order: a node's position in the rotation.
  auto position_of = [&](uint32_t id) -> int64_t {
    if (listed != nullptr) {
      auto found = listed_position.find(id);
      return found == listed_position.end() ? -1 : static_cast<int64_t>(found->second);
    }
    auto it = std::lower_bound(nodes.begin(), nodes.end(), id,
                               [](const sdk::NodeInfo* n, uint32_t v) { return n->id() < v; });
    if (it == nodes.end() || (*it)->id() != id) return -1;
    const uint32_t index = static_cast<uint32_t>(it - nodes.begin());
    return index >= start ? index - start : index + num_nodes - start;
  };
  auto id_at = [&](uint32_t position) {
    if (listed != nullptr) return (*listed)[position];
    uint32_t index = start + position;
    if (index >= num_nodes) index -= num_nodes;
    return nodes[index]->id();
  };

  // verdicts[p * num_nodes + position]; a node any process rejected is out.
  std::vector<uint8_t> verdicts(num_filter * num_nodes, kUnknown);
  std::vector<uint8_t> rejected_anywhere(num_nodes, 0);
  std::vector<bool> ignored(num_filter, false);
  // The rejection a diagnosis shows: that of the first process in plugin order.
  absl::flat_hash_map<uint32_t, std::pair<size_t, SharedStatus>> rejected;
  // Round 0's answers, for their scores.
  std::vector<std::optional<v1::CycleResponse>> first_answers(num_filter);

  struct Call {
    size_t plan;
    v1::CycleRequest shape;
    std::future<PluginAnswer> answer;
    absl::Time sent;
  };
  std::vector<uint32_t> feasible;  // Ids in rotation order.
  uint32_t evaluated = num_nodes;
  uint32_t decided = 0;  // Positions [0, decided) are decided.
  for (int round = 0;; ++round) {
    // Whose verdicts are still missing for the nodes another process judged:
    // ask only about those first; extend the rotation when none is missing.
    uint32_t judged_end = decided;
    for (size_t p = 0; p < num_filter && round > 0; ++p) {
      if (ignored[p]) continue;
      for (uint32_t k = num_nodes; k > judged_end; --k) {
        if (verdicts[p * num_nodes + k - 1] != kUnknown) {
          judged_end = k;
          break;
        }
      }
    }
    std::vector<std::vector<uint32_t>> candidates(num_filter);
    if (round > 0) {
      bool any_missing = false;
      for (size_t p = 0; p < num_filter; ++p) {
        if (ignored[p]) continue;
        for (uint32_t k = decided; k < judged_end; ++k) {
          if (!rejected_anywhere[k] && verdicts[p * num_nodes + k] == kUnknown) {
            candidates[p].push_back(id_at(k));
          }
        }
        any_missing |= !candidates[p].empty();
      }
      if (!any_missing) {
        for (size_t p = 0; p < num_filter; ++p) {
          if (ignored[p]) continue;
          for (uint32_t k = judged_end; k < num_nodes; ++k) {
            if (!rejected_anywhere[k] && verdicts[p * num_nodes + k] == kUnknown) {
              candidates[p].push_back(id_at(k));
            }
          }
        }
      }
    }
    const uint32_t need = to_find - static_cast<uint32_t>(feasible.size());
    std::vector<Call> calls;
    for (size_t p = 0; p < num_filter; ++p) {
      if (ignored[p] || (round > 0 && candidates[p].empty())) continue;
      const ProcessPlan& plan = setup.plans[p];
      const bool score = round == 0 && (!plan.score.empty() || !plan.pre_score.empty());
      v1::SchedulerToPlugin message = NewCycleRequest(plan, cycle_id, /*filter=*/true, score);
      v1::CycleRequest& request = *message.mutable_cycle();
      if (round == 0 && listed != nullptr) {
        request.mutable_nodes()->mutable_node_ids()->Assign(listed->begin(), listed->end());
      } else if (round == 0) {
        request.mutable_nodes()->set_all_nodes(true);
        request.mutable_nodes()->set_start_index(start);
      } else {
        request.mutable_nodes()->mutable_node_ids()->Assign(candidates[p].begin(),
                                                            candidates[p].end());
      }
      request.set_num_feasible_to_find(need);
      if (round == 0 && what_if) request.set_what_if_copies(scope.what_if_copies);
      v1::CycleRequest shape = request;
      *request.mutable_pod() = pod;
      if (setup.spec.nominated_pods && !plan.process->MirrorsNominatedPods()) {
        setup.spec.nominated_pods(pod, snapshot, request.mutable_nominated_pods());
      }
      const absl::Time sent = absl::Now();
      calls.push_back({p, std::move(shape), plan.process->Call(std::move(message), state_seq), sent});
    }

    // Collect every answer before acting on any: they all ran.
    // (plan, status, soft: a plain Unschedulable that leaves preemption a
    // chance). As kube-scheduler's PreFilter loop: the first hard rejection
    // in plan order, else the last soft one.
    std::optional<std::tuple<size_t, sdk::Status, bool>> pre_filter_rejection;
    for (Call& call : calls) {
      const ProcessPlan& plan = setup.plans[call.plan];
      PluginAnswer answer = call.answer.get();
      const absl::Duration round_trip = absl::Now() - call.sent;
      const bool scored = round == 0 && call.shape.score_plugins_size() + call.shape.pre_score_plugins_size() > 0;
      absl::Status score_error;
      absl::Status valid = CheckCycleAnswer(plan, answer, call.shape, snapshot, false, &score_error);
      if (valid.ok() && round > 0 && answer->cycle().feasible_size() + answer->cycle().rejected_size() == 0) {
        // Asked about nodes with something left to find: an answer about none
        // of them would leave the rotation undecided forever.
        plan.process->CountInvalidAnswer();
        valid = absl::InvalidArgumentError("answered about none of the nodes sent");
      }
      if (valid.ok()) {
        AddCyclePhases(plan, answer->cycle(), round_trip, /*filter=*/true, scored, /*concurrent=*/true);
      } else {
        AddPhase(kFilterPhase, round_trip, sdk::Code::kError, /*parallel=*/true);
        if (IgnoresFailure(*plan.process)) {
          ignored[call.plan] = true;  // As if its plugins had let every node through.
          continue;
        }
        return fail(*plan.process, valid);
      }
      // A plugin ERROR at PreFilter or Filter: decided by the failurePolicy,
      // before any of the answer's verdicts count.
      if (absl::Status error = FirstFilterError(answer->cycle()); !error.ok()) {
        if (IgnoresFailure(*plan.process)) {
          ignored[call.plan] = true;
          continue;
        }
        return fail(*plan.process, error);
      }
      v1::CycleResponse& cycle = *answer->mutable_cycle();
      if (!score_error.ok()) {
        // Bad scores cost only the scores: its verdicts stand.
        if (!IgnoresFailure(*plan.process)) return fail(*plan.process, score_error);
        cycle.clear_scores();
        cycle.mutable_pre_score_status()->Clear();
      }
      if (cycle.pre_filter_status().code() != v1::Status::SUCCESS &&
          cycle.pre_filter_status().code() != v1::Status::SKIP) {
        sdk::Status status = sdk::Status::FromProto(cycle.pre_filter_status());
        const bool soft = status.code() == sdk::Code::kUnschedulable &&
                          plan.process->LeavesPreFilterUnschedulableToPreemption();
        bool take = !pre_filter_rejection.has_value();
        if (!take) {
          const auto& [p, taken, taken_soft] = *pre_filter_rejection;
          take = soft != taken_soft ? !soft : (soft ? call.plan > p : call.plan < p);
        }
        if (take) pre_filter_rejection.emplace(call.plan, std::move(status), soft);
        continue;
      }
      const RejectionStatuses statuses(cycle);
      for (const auto& r : cycle.rejected()) {
        SharedStatus status = statuses.Get(r);
        const int64_t k = position_of(r.node_id());
        if (k < 0) continue;  // Validated above; cannot happen.
        verdicts[call.plan * num_nodes + k] = kReject;
        rejected_anywhere[k] = 1;
        auto [it, inserted] = rejected.try_emplace(r.node_id(), call.plan, status);
        if (!inserted && call.plan < it->second.first) it->second = {call.plan, std::move(status)};
      }
      for (uint32_t id : cycle.feasible()) {
        const int64_t k = position_of(id);
        if (k >= 0) verdicts[call.plan * num_nodes + k] = kPass;
      }
      if (round == 0) first_answers[call.plan] = std::move(cycle);
    }
    if (pre_filter_rejection) {
      const auto& [p, status, soft] = *pre_filter_rejection;
      result.outcome = ScheduleResult::Outcome::kUnschedulable;
      RecordPreFilterRejection(result.diagnosis, status, soft);
      return result;
    }

    // Extend the decided prefix: a node is out when anyone rejected it, in
    // when every process (not ignored) let it through.
    bool done = false;
    for (; decided < num_nodes; ++decided) {
      const uint32_t k = decided;
      if (rejected_anywhere[k]) continue;
      bool all_pass = true;
      for (size_t p = 0; p < num_filter && all_pass; ++p) {
        all_pass = ignored[p] || verdicts[p * num_nodes + k] == kPass;
      }
      if (!all_pass) break;
      feasible.push_back(id_at(k));
      if (feasible.size() >= to_find) {
        evaluated = k + 1;
        done = true;
        break;
      }
    }
    if (done || decided >= num_nodes) break;
  }
  result.evaluated_nodes = evaluated;
  if (listed == nullptr) next_start_node_index_ = (start + evaluated) % num_nodes;

  if (feasible.empty()) {
    result.outcome = ScheduleResult::Outcome::kUnschedulable;
    for (auto& [id, entry] : rejected) {
      if (const sdk::NodeInfo* node = snapshot.GetById(id)) {
        result.diagnosis.unschedulable_plugins.insert(entry.second->plugin());
        result.diagnosis.node_statuses.emplace_back(NodeName(*node), std::move(entry.second));
      }
    }
    if (listed != nullptr) result.outcome = ScheduleResult::Outcome::kScheduled;  // Nothing passed; not a verdict.
    return result;
  }
  result.feasible_nodes = static_cast<uint32_t>(feasible.size());

  // Scores: from round 0 where a process scored exactly the final nodes, else
  // one request per process with score plugins, all at once.
  absl::flat_hash_map<std::string, std::vector<int64_t>> scores;
  // A batch's ranking needs the scores even of a single node.
  if (feasible.size() > 1 || listed != nullptr) {
    std::vector<ScoreCall> calls;
    const absl::Time sent = absl::Now();
    for (size_t i = 0; i < setup.plans.size(); ++i) {
      const ProcessPlan& plan = setup.plans[i];
      if (plan.score.empty() && plan.pre_score.empty()) continue;
      if (i < num_filter) {
        if (ignored[i]) continue;
        const std::optional<v1::CycleResponse>& first = first_answers[i];
        if (first && first->feasible_size() == static_cast<int>(feasible.size()) &&
            std::equal(feasible.begin(), feasible.end(), first->feasible().begin())) {
          if (first->pre_score_status().code() == v1::Status::ERROR) {
            const sdk::Status status = sdk::Status::FromProto(first->pre_score_status());
            if (IgnoresFailure(*plan.process)) {
              continue;
            }
            return fail(*plan.process, absl::InternalError(absl::StrCat(
                                           "PreScore plugin ", status.plugin(), ": ", status.Message())));
          }
          for (const auto& s : first->scores()) {
            scores[s.plugin()].assign(s.scores().begin(), s.scores().end());
          }
          continue;
        }
      }
      calls.push_back(SendScoreRequest(plan, cycle_id, feasible, pod, state_seq));
    }
    if (auto failed = FoldScoreAnswers(calls, sent, snapshot, scores)) {
      return fail(*failed->process, failed->status);
    }
  }
  SelectHost(setup, feasible, scores, snapshot, result);
  if (scope.want_ranking) {
    if (what_if) MergeWhatIf(feasible, first_answers, ignored, scope.what_if_copies, result.ranking);
    result.ranking.feasible = std::move(feasible);
    result.ranking.scores = std::move(scores);
    result.ranking.start_index = start;
  }
  return result;
}

void Framework::MergeWhatIf(const std::vector<uint32_t>& feasible,
                            const std::vector<std::optional<v1::CycleResponse>>& answers,
                            const std::vector<bool>& ignored, uint32_t copies, Ranking& ranking) {
  using V = v1::WhatIfVerdicts;
  // Every process's verdicts, or none: a process that was ignored, or whose
  // round-0 answer has no verdicts or did not find a final node feasible,
  // leaves the ranking without what-if.
  std::vector<absl::flat_hash_map<uint32_t, int>> index(answers.size());
  for (size_t p = 0; p < answers.size(); ++p) {
    if (ignored[p] || !answers[p] || !answers[p]->has_what_if() || answers[p]->what_if().copies() != copies) return;
    for (int i = 0; i < answers[p]->feasible_size(); ++i) index[p].emplace(answers[p]->feasible(i), i);
  }
  const size_t entries = feasible.size() * copies;
  std::vector<V::Verdict> merged(entries, V::FEASIBLE);
  absl::flat_hash_map<std::string, std::vector<int64_t>> scores;
  for (size_t p = 0; p < answers.size(); ++p) {
    const v1::WhatIfVerdicts& w = answers[p]->what_if();
    for (const auto& s : w.scores()) scores[s.plugin()].assign(entries, 0);
    for (size_t i = 0; i < feasible.size(); ++i) {
      auto at = index[p].find(feasible[i]);
      if (at == index[p].end()) return;
      for (uint32_t j = 0; j < copies; ++j) {
        const V::Verdict v = static_cast<V::Verdict>(w.verdicts(at->second * static_cast<int>(copies) + j));
        V::Verdict& m = merged[i * copies + j];
        // Infeasible anywhere is infeasible; else unknown anywhere is unknown.
        if (v == V::INFEASIBLE || m == V::INFEASIBLE) {
          m = V::INFEASIBLE;
        } else if (v == V::UNKNOWN) {
          m = V::UNKNOWN;
        }
      }
    }
  }
  for (size_t p = 0; p < answers.size(); ++p) {
    const v1::WhatIfVerdicts& w = answers[p]->what_if();
    for (const auto& s : w.scores()) {
      std::vector<int64_t>& out = scores[s.plugin()];
      for (size_t i = 0; i < feasible.size(); ++i) {
        const int at = index[p].at(feasible[i]);
        for (uint32_t j = 0; j < copies; ++j) {
          if (merged[i * copies + j] == V::FEASIBLE) out[i * copies + j] = s.scores(at * static_cast<int>(copies) + j);
        }
      }
    }
  }
  ranking.what_if_copies = copies;
  ranking.what_if = std::move(merged);
  ranking.what_if_scores = std::move(scores);
}

}  // namespace podium::scheduler
