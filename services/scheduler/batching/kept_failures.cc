#include "batching/kept_failures.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "logging/logger.h"

namespace podium::scheduler::batching {
namespace {

// Bounds the failures kept per profile (as Options::max_batches_per_profile
// bounds the rankings).
constexpr size_t kMaxFailuresPerProfile = 64;

// A status a narrowed cycle keeps as a node's verdict.
bool IsRejection(const v1::Status& s) {
  return s.code() == v1::Status::UNSCHEDULABLE || s.code() == v1::Status::UNSCHEDULABLE_AND_UNRESOLVABLE;
}

}  // namespace

void KeptFailures::NodesChanged(const std::vector<uint32_t>& ids) {
  if (ids.empty()) return;
  for (auto& [fw, failures] : profiles_) {
    for (auto& [key, failure] : failures) {
      if (!failure.invalidated) failure.dirty.insert(ids.begin(), ids.end());
    }
  }
}

void KeptFailures::InvalidateAll() {
  for (auto& [fw, failures] : profiles_) {
    for (auto& [key, failure] : failures) {
      failure.invalidated = true;
      failure.dirty.clear();
    }
  }
}

void KeptFailures::Forget(const Framework* fw, const std::string& key) {
  auto p = profiles_.find(fw);
  if (p != profiles_.end()) p->second.erase(key);
}

size_t KeptFailures::size() const {
  size_t n = 0;
  for (const auto& [fw, failures] : profiles_) n += failures.size();
  return n;
}

KeptFailures::Outcome KeptFailures::Serve(Framework& fw, const std::string& key, const v1::Pod& pod,
                                          const Snapshot& snapshot, uint64_t state_seq, uint64_t cycle_id,
                                          const Fingerprints& nominated,
                                          std::optional<uint64_t> snapshot_generation, ScheduleResult& result,
                                          bool& ran_cycle) {
  ran_cycle = false;
  auto p = profiles_.find(&fw);
  if (p == profiles_.end()) return Outcome::kNone;
  auto it = p->second.find(key);
  if (it == p->second.end()) return Outcome::kNone;
  Failure& failure = it->second;
  const size_t num_nodes = snapshot.NumNodes();
  if (failure.invalidated || failure.statuses.size() != num_nodes) {
    p->second.erase(it);
    return Outcome::kInvalidated;
  }
  if (clock_.Now() - failure.created > max_age_ ||
      TooManyChanged(failure.dirty.size(), num_nodes)) {
    p->second.erase(it);
    return Outcome::kStale;
  }
  ResolveGone(fw, failure, pod, snapshot);
  if (ServeFromWhatIf(fw, failure, pod, snapshot)) {
    Diagnose(failure, snapshot, cycle_id, result);
    return Outcome::kServed;
  }
  failure.chain.reset();
  // Nodes whose nominated pods (as this pod counts them) changed.
  auto mark = [&](std::string_view name) {
    if (const sdk::NodeInfo* node = name.empty() ? nullptr : snapshot.Get(name)) failure.dirty.insert(node->id());
  };
  std::optional<uint64_t> generation;
  std::string own_node;
  absl::flat_hash_map<uint32_t, uint64_t> fingerprints;
  if (failure.generation) {
    generation = fw.NominationChangesSince(*failure.generation, pod.priority(), mark);
    if (!generation) {  // The log no longer reaches back to its cycle.
      p->second.erase(it);
      return Outcome::kStale;
    }
    own_node = fw.NominatedNodeOf(pod.meta().uid());
    mark(own_node);
    mark(failure.own_node);
  } else {
    fingerprints = nominated();
    ForEachChangedNomination(failure.nominated, fingerprints, [&](uint32_t node) { failure.dirty.insert(node); });
  }
  std::vector<uint32_t> nodes;
  nodes.reserve(failure.dirty.size());
  for (uint32_t id : failure.dirty) {
    if (!failure.statuses.contains(id)) continue;  // Not a node of this snapshot.
    nodes.push_back(id);
    failure.dry_runs->nodes.erase(id);
  }
  std::sort(nodes.begin(), nodes.end());
  // Even with no node to re-evaluate, the pod's cycle runs PreFilter in its
  // processes: PostFilter's dry runs read the cycle's state.
  CycleScope scope{.node_ids = &nodes, .predict_dry_run = true};
  if (what_if_nodes_ > 0 && failure.generation) {
    scope.what_if_from = failure.dry_runs.get();
    scope.what_if_nodes = what_if_nodes_;
  }
  ScheduleResult narrowed = fw.SchedulePod(pod, snapshot, state_seq, cycle_id, scope);
  ran_cycle = true;
  if (narrowed.outcome != ScheduleResult::Outcome::kScheduled) {
    p->second.erase(it);
    return Outcome::kRefused;
  }
  if (!narrowed.node_name.empty() || narrowed.feasible_nodes > 0) {
    p->second.erase(it);
    return Outcome::kFeasible;
  }
  const Diagnosis& fresh = narrowed.diagnosis;
  if (!fresh.pre_filter_message.empty() || !fresh.pending_plugins.empty() ||
      fresh.node_statuses.size() != nodes.size()) {
    p->second.erase(it);
    return Outcome::kRefused;
  }
  for (const auto& [name, status] : fresh.node_statuses) {
    const sdk::NodeInfo* node = snapshot.Get(name);
    if (node == nullptr || !failure.statuses.contains(node->id())) {
      p->second.erase(it);
      return Outcome::kRefused;
    }
    SetStatus(failure, node->id(), Intern(failure, status));
  }
  failure.dirty.clear();
  if (generation) {
    failure.generation = snapshot_generation ? std::min(*generation, *snapshot_generation) : *generation;
    failure.own_node = std::move(own_node);
    const v1::PreemptionDryRunResponse* what_ifs = fresh.dry_run_answer.get();
    if (what_ifs != nullptr && (what_ifs->what_if_size() > 0 || what_ifs->what_if_gone_size() > 0) &&
        failure.own_node.empty() && *failure.generation == *generation) {
      TakeWhatIfs(failure, *what_ifs, snapshot, pod.meta().uid(), *generation);
      TakeGoneWhatIfs(failure, *what_ifs, snapshot, *generation);
    }
  } else {
    failure.nominated = std::move(fingerprints);
  }
  std::shared_ptr<const v1::PreemptionDryRunResponse> answer = std::move(narrowed.diagnosis.dry_run_answer);
  Diagnose(failure, snapshot, cycle_id, result);
  result.diagnosis.dry_run_answer = std::move(answer);
  return Outcome::kServed;
}

void KeptFailures::Diagnose(Failure& failure, const Snapshot& snapshot, uint64_t cycle_id,
                            ScheduleResult& result) {
  const size_t num_nodes = snapshot.NumNodes();
  // The diagnosis a full cycle would have given.
  result = ScheduleResult{};
  result.outcome = ScheduleResult::Outcome::kUnschedulable;
  result.evaluated_nodes = static_cast<uint32_t>(num_nodes);
  Diagnosis& d = result.diagnosis;
  d.num_all_nodes = static_cast<uint32_t>(num_nodes);
  d.cycle_id = cycle_id;
  if (failure.diagnosis == nullptr) {
    auto statuses = std::make_shared<NodeStatuses::Vector>();
    statuses->reserve(num_nodes);
    failure.diagnosis_index.clear();
    failure.diagnosis_index.reserve(num_nodes);
    failure.diagnosis_plugins.clear();
    const sdk::Status* last = nullptr;
    for (const sdk::NodeInfo* node : snapshot.Nodes()) {
      const SharedStatus& status = failure.statuses.at(node->id());
      if (status.get() != last) failure.diagnosis_plugins.insert(status->plugin());  // Mostly one shared status.
      last = status.get();
      failure.diagnosis_index.emplace(node->id(), static_cast<uint32_t>(statuses->size()));
      statuses->emplace_back(NodeName(*node), status);
    }
    failure.diagnosis = std::move(statuses);
  }
  d.node_statuses = NodeStatuses(failure.diagnosis);
  d.unschedulable_plugins = failure.diagnosis_plugins;
  d.kept_dry_runs = failure.dry_runs;
}

bool KeptFailures::ParseWhatIf(const v1::WhatIfNominated& w, const sdk::NodeInfo& node, Failure::WhatIf& out,
                               std::string& invalid) {
  // Only what a narrowed cycle would have kept: a rejection, then a dry
  // run that found victims or a reason. Anything else (the pod would fit,
  // an error) leaves the node to a request.
  if (!IsRejection(w.filter())) return false;
  const v1::NodeVictims& dry = w.dry_run();
  out.status = MakeSharedStatus(sdk::Status::FromProto(w.filter()));
  if (dry.status().code() == v1::Status::SUCCESS) {
    if (dry.victims_size() == 0) return false;
    for (const std::string& victim : dry.victims()) {
      sdk::PodInfoPtr found;
      for (const sdk::PodInfoPtr& p : node.pods()) {
        if (p->uid() == victim) found = p;
      }
      if (found == nullptr) {
        invalid = absl::StrCat("dry_run.victims: pod ", victim, " is not on node ", node.name());
        return false;
      }
      out.dry_run.victims.push_back(std::move(found));
    }
    out.dry_run.num_pdb_violations = dry.num_pdb_violations();
    return true;
  }
  if (!IsRejection(dry.status())) return false;
  out.dry_run.rejection = MakeSharedStatus(sdk::Status::FromProto(dry.status()));
  return true;
}

namespace {

// An answer that names what is not there is the plugin process's error:
// said once per answer, and that entry is not used (its node is asked
// again when it matters).
void DropInvalidWhatIf(const char* field, int i, const std::string& what) {
  PODIUM_LOG(Warning, "Dropped an invalid preemption what-if",
             {"field", absl::StrCat("preemption_dry_run.", field, "[", i, "]")}, {"error", what});
}

// Visits each entry of a what-if list with its node: `take(w, node, invalid)`
// keeps it (true), leaves the node to a request (false), or says why it is
// invalid. An entry naming an unknown node or one answered before, or an
// invalid one, ends the visit with false: nothing of that list is used.
template <typename Take>
bool ForEachWhatIf(const google::protobuf::RepeatedPtrField<v1::WhatIfNominated>& list, const char* field,
                   const absl::flat_hash_map<uint32_t, SharedStatus>& statuses, const Snapshot& snapshot,
                   Take take) {
  absl::flat_hash_set<uint32_t> answered;
  for (int i = 0; i < list.size(); ++i) {
    const v1::WhatIfNominated& w = list.Get(i);
    const sdk::NodeInfo* node = snapshot.GetById(w.node_id());
    if (node == nullptr || !statuses.contains(w.node_id()) || !answered.insert(w.node_id()).second) {
      DropInvalidWhatIf(field, i, absl::StrCat("node_id ", w.node_id(), " is unknown or answered twice"));
      return false;
    }
    std::string invalid;
    if (!take(w, *node, invalid) && !invalid.empty()) {
      DropInvalidWhatIf(field, i, invalid);
      return false;
    }
  }
  return true;
}

}  // namespace

void KeptFailures::TakeWhatIfs(Failure& failure, const v1::PreemptionDryRunResponse& answer,
                               const Snapshot& snapshot, const std::string& uid, uint64_t generation) {
  Failure::Chain chain{uid, generation, {}};
  const bool valid = ForEachWhatIf(answer.what_if(), "what_if", failure.statuses, snapshot,
                [&](const v1::WhatIfNominated& w, const sdk::NodeInfo& node, std::string& invalid) {
                  Failure::WhatIf what_if;
                  if (!ParseWhatIf(w, node, what_if, invalid)) return false;
                  if (w.has_then_gone()) {
                    auto then_gone = std::make_shared<Failure::GoneWhatIf>();
                    if (ParseGoneWhatIf(w.then_gone(), node, *then_gone, invalid)) {
                      then_gone->objects_generation = snapshot.objects_generation();
                      what_if.then_gone = std::move(then_gone);
                    } else if (!invalid.empty()) {
                      invalid = absl::StrCat("then_gone.", invalid);
                      return false;
                    }
                  }
                  chain.nodes.emplace(w.node_id(), std::move(what_if));
                  return true;
                });
  if (valid && !chain.nodes.empty()) failure.chain = std::move(chain);
}

bool KeptFailures::ParseGoneWhatIf(const v1::WhatIfNominated& w, const sdk::NodeInfo& node,
                                   Failure::GoneWhatIf& out, std::string& invalid) {
  // The node once the gone pods left it: each of them must be there now.
  out.node = node.shared_node();
  out.remaining = node.pods();
  if (w.gone_size() == 0) {
    invalid = "gone: empty";
    return false;
  }
  for (const std::string& uid : w.gone()) {
    auto at = std::find_if(out.remaining.begin(), out.remaining.end(),
                           [&](const sdk::PodInfoPtr& p) { return p->uid() == uid; });
    if (at == out.remaining.end()) {
      invalid = absl::StrCat("gone: pod ", uid, " is not on node ", node.name());
      return false;
    }
    out.remaining.erase(at);
  }
  if (!w.has_dry_run()) {
    // Only a verdict: a node left with no candidate.
    if (!IsRejection(w.filter())) return false;
    out.what_if.status = MakeSharedStatus(sdk::Status::FromProto(w.filter()));
    out.no_candidate = true;
  } else {
    if (!ParseWhatIf(w, node, out.what_if, invalid)) return false;
    // Victims of the node once they left: none of the gone pods.
    for (const sdk::PodInfoPtr& victim : out.what_if.dry_run.victims) {
      if (std::find(out.remaining.begin(), out.remaining.end(), victim) == out.remaining.end()) {
        invalid = absl::StrCat("dry_run.victims: pod ", victim->uid(), " is gone");
        return false;
      }
    }
  }
  std::sort(out.remaining.begin(), out.remaining.end());
  return true;
}

void KeptFailures::TakeGoneWhatIfs(Failure& failure, const v1::PreemptionDryRunResponse& answer,
                                   const Snapshot& snapshot, uint64_t generation) {
  // Bounded: entries no change ever matched are dropped with the rest.
  constexpr size_t kMaxGone = 256;
  if (failure.gone.size() > kMaxGone) failure.gone.clear();
  std::vector<std::pair<uint32_t, Failure::GoneWhatIf>> taken;
  const bool valid =
      ForEachWhatIf(answer.what_if_gone(), "what_if_gone", failure.statuses, snapshot,
                    [&](const v1::WhatIfNominated& w, const sdk::NodeInfo& node, std::string& invalid) {
                      Failure::GoneWhatIf entry;
                      if (!ParseGoneWhatIf(w, node, entry, invalid)) return false;
                      entry.generation = generation;
                      entry.objects_generation = snapshot.objects_generation();
                      taken.emplace_back(w.node_id(), std::move(entry));
                      return true;
                    });
  if (!valid) return;
  for (auto& [id, entry] : taken) failure.gone.insert_or_assign(id, std::move(entry));
}

void KeptFailures::ResolveGone(Framework& fw, Failure& failure, const v1::Pod& pod, const Snapshot& snapshot) {
  if (failure.gone.empty() || failure.dirty.empty()) return;
  // Nodes whose nominations changed since a generation, per generation asked.
  absl::flat_hash_map<uint64_t, std::optional<absl::flat_hash_set<std::string>>> renominated;
  std::vector<sdk::PodInfoPtr> now;
  for (auto it = failure.dirty.begin(); it != failure.dirty.end();) {
    const uint32_t id = *it;
    auto entry = failure.gone.find(id);
    const sdk::NodeInfo* node = snapshot.GetById(id);
    if (entry == failure.gone.end() || node == nullptr || node->shared_node() != entry->second.node ||
        node->pods().size() != entry->second.remaining.size() ||
        entry->second.objects_generation != snapshot.objects_generation()) {
      ++it;
      continue;
    }
    now = node->pods();
    std::sort(now.begin(), now.end());
    if (now != entry->second.remaining) {
      ++it;
      continue;
    }
    // Answered as no candidate: so it must be for this pod (a pod of lower
    // priority there would be a potential victim).
    if (entry->second.no_candidate &&
        std::any_of(now.begin(), now.end(),
                    [&](const sdk::PodInfoPtr& p) { return p->pod->priority() < pod.priority(); })) {
      ++it;
      continue;
    }
    auto [changed, inserted] = renominated.try_emplace(entry->second.generation);
    if (inserted) {
      changed->second.emplace();
      if (!fw.NominationChangesSince(entry->second.generation, pod.priority(),
                                     [&](std::string_view name) { changed->second->emplace(name); })) {
        changed->second.reset();  // The log no longer reaches back to it.
      }
    }
    if (!changed->second || changed->second->contains(node->name())) {
      ++it;
      continue;
    }
    // The node as the narrowed cycle would find it, and its dry run as
    // PostFilter would ask it.
    SetStatus(failure, id, Intern(failure, entry->second.what_if.status));
    if (entry->second.no_candidate) {
      failure.dry_runs->nodes.erase(id);
    } else {
      failure.dry_runs->nodes[id] = std::move(entry->second.what_if.dry_run);
    }
    failure.gone.erase(entry);
    failure.dirty.erase(it++);
    // A what-if the chain holds for the node was asked before its pods
    // left: it no longer describes the node (it would count them).
    if (failure.chain) failure.chain->nodes.erase(id);
    ++what_if_gone_nodes_;
  }
}

bool KeptFailures::ServeFromWhatIf(Framework& fw, Failure& failure, const v1::Pod& pod, const Snapshot& snapshot) {
  // Nothing but the last pod's nomination may have changed since it was
  // served: no node (the snapshot's changes), no other nomination (one
  // change to the nominations, on its node), no nomination of this pod.
  if (!failure.chain || !failure.generation || *failure.generation != failure.chain->generation ||
      !failure.dirty.empty() || !failure.own_node.empty()) {
    return false;
  }
  Failure::Chain& chain = *failure.chain;
  const std::string node_name = fw.NominatedNodeOf(chain.last_uid);
  if (node_name.empty() || !fw.NominatedNodeOf(pod.meta().uid()).empty()) return false;
  bool other = false;
  const std::optional<uint64_t> now = fw.NominationChangesSince(
      chain.generation, pod.priority(), [&](std::string_view changed) { other |= changed != node_name; });
  if (!now || *now != chain.generation + 1 || other) return false;
  const sdk::NodeInfo* node = snapshot.Get(node_name);
  if (node == nullptr) return false;
  auto it = chain.nodes.find(node->id());
  if (it == chain.nodes.end()) return false;
  // The node as the narrowed cycle would have found it, and its dry run as
  // PostFilter would have asked it.
  SetStatus(failure, node->id(), Intern(failure, it->second.status));
  failure.dry_runs->nodes[node->id()] = std::move(it->second.dry_run);
  // Its victims' deletions come next: the node after them, with this pod
  // nominated there (the nominations as of now).
  if (it->second.then_gone != nullptr) {
    it->second.then_gone->generation = *now;
    failure.gone.insert_or_assign(node->id(), std::move(*it->second.then_gone));
  }
  chain.nodes.erase(it);
  chain.last_uid = pod.meta().uid();
  chain.generation = *now;
  failure.generation = *now;
  ++what_if_hits_;
  return true;
}

void KeptFailures::SetStatus(Failure& failure, uint32_t node, SharedStatus status) {
  SharedStatus& kept = failure.statuses[node];
  if (failure.diagnosis != nullptr) {
    auto at = failure.diagnosis_index.find(node);
    // use_count 1: no attempt's diagnosis holds the list (only this thread
    // hands it out), so it can change under nobody.
    if (at != failure.diagnosis_index.end() && failure.diagnosis.use_count() == 1 && kept != nullptr &&
        kept->plugin() == status->plugin()) {
      (*failure.diagnosis)[at->second].second = status;
    } else {
      failure.diagnosis.reset();
    }
  }
  kept = std::move(status);
}

SharedStatus KeptFailures::Intern(Failure& failure, SharedStatus status) {
  // Bounded: a failure whose nodes are rejected in many ways keeps the rest as they come.
  constexpr size_t kMaxDistinct = 16;
  for (const SharedStatus& known : failure.distinct) {
    if (known == status) return status;
    if (known->code() == status->code() && known->plugin() == status->plugin() &&
        known->reasons() == status->reasons()) {
      return known;
    }
  }
  if (failure.distinct.size() < kMaxDistinct) failure.distinct.push_back(status);
  return status;
}

void KeptFailures::Remember(const Framework& fw, const std::string& key, const v1::Pod& pod,
                            ScheduleResult& result, const Snapshot& snapshot, std::optional<uint64_t> generation,
                            const Fingerprints& nominated) {
  const Diagnosis& d = result.diagnosis;
  Failures& failures = profiles_[&fw];
  failures.erase(key);
  if (result.outcome != ScheduleResult::Outcome::kUnschedulable || !d.pre_filter_message.empty() ||
      !d.pending_plugins.empty() || d.num_all_nodes != snapshot.NumNodes() ||
      d.node_statuses.size() != snapshot.NumNodes()) {
    return;
  }
  Failure failure;
  failure.statuses.reserve(d.node_statuses.size());
  for (const auto& [name, status] : d.node_statuses) {
    const sdk::NodeInfo* node = snapshot.Get(name);
    if (node == nullptr || !failure.statuses.emplace(node->id(), Intern(failure, status)).second) return;
  }
  if (failure.statuses.size() != snapshot.NumNodes()) return;
  if (generation && fw.TracksNominationChanges()) {
    failure.generation = generation;
    failure.own_node = fw.NominatedNodeOf(pod.meta().uid());
  } else {
    failure.nominated = nominated();
  }
  failure.dry_runs = std::make_shared<KeptDryRuns>();
  failure.created = clock_.Now();
  if (failures.size() >= kMaxFailuresPerProfile) {
    auto oldest = failures.begin();
    for (auto f = failures.begin(); f != failures.end(); ++f) {
      if (f->second.created < oldest->second.created) oldest = f;
    }
    failures.erase(oldest);
  }
  result.diagnosis.kept_dry_runs = failure.dry_runs;
  failures.emplace(key, std::move(failure));
}

}  // namespace podium::scheduler::batching
