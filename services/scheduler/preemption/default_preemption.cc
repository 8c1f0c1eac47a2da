#include "preemption/default_preemption.h"

#include <algorithm>

#include "absl/hash/hash.h"
#include "absl/strings/str_cat.h"
#include "logging/logger.h"
#include "pod_ref.h"
#include "preemption/dry_run.h"

namespace podium::scheduler::preemption {
namespace {

sdk::Status Unschedulable(std::string message) {
  return sdk::Status(sdk::Code::kUnschedulable, absl::StrCat("preemption: ", message));
}

// A kept candidate's pick key: the one computed when it was kept, else now
// (an outcome not kept, or taken from a what-if).
PickKey KeyOf(const KeptDryRun& outcome) {
  return outcome.pick_key ? *outcome.pick_key : PickKeyOf(outcome.victims, outcome.num_pdb_violations);
}

}  // namespace

// ------------------------------------------------------------ controller

void PreemptionController::Send(v1::Action action, ActionSink::ResultCallback on_result) {
  if (sink_ == nullptr) return;
  if (!on_result) on_result = [](const v1::ActionResult&, absl::Time) {};
  sink_->Send(std::move(action), std::move(on_result));
}

void PreemptionController::ClearNomination(const v1::Pod& pod) {
  nominator_.Clear(pod.meta().uid());
  v1::Action clear;
  *clear.mutable_patch_pod_status()->mutable_pod() = PodRef(pod);
  clear.mutable_patch_pod_status()->set_nominated_node_name("");
  Send(std::move(clear), nullptr);
}

bool PreemptionController::InFlight(std::string_view uid) const {
  absl::MutexLock lock(&mu_);
  return in_flight_.contains(absl::string_view(uid.data(), uid.size()));
}

size_t PreemptionController::NumInFlight() const {
  absl::MutexLock lock(&mu_);
  return in_flight_.size();
}

void PreemptionController::Execute(const v1::Pod& preemptor, const std::string& node,
                                   const std::vector<sdk::PodInfoPtr>& victims,
                                   const std::vector<sdk::PodInfoPtr>& lower_nominated) {
  const std::string uid = preemptor.meta().uid();
  // Held first: a victim seen gone from here on releases it.
  if (queue_.hold) queue_.hold(uid, kWaitingForPreemption);
  absl::flat_hash_set<std::string> evicted_by_other;
  {
    absl::MutexLock lock(&mu_);
    Preemption& p = in_flight_[uid];
    p.node = node;
    p.resize = !preemptor.node_name().empty();
    for (const auto& v : victims) {
      p.victims.insert(v->uid());
      // Two preemptions can choose the same victim (the second one's cycle
      // ran before it saw the first one's nomination or eviction): both
      // wait for its deletion, and only the first one evicts it.
      std::vector<std::string>& waiting = victim_of_[v->uid()];
      if (std::find(waiting.begin(), waiting.end(), uid) != waiting.end()) continue;
      if (!waiting.empty()) evicted_by_other.insert(v->uid());
      waiting.push_back(uid);
    }
    p.shares_an_eviction = !evicted_by_other.empty();
    preemptors_[uid] = preemptor;
  }
  // A victim whose deletion the cache saw before it was registered above
  // would never be reported gone: count it now. (The cache drops a pod before
  // the controller hears of its deletion, so no deletion falls in between.)
  std::vector<std::string> already_gone;
  if (present_) {
    for (const auto& v : victims) {
      if (!present_(v->uid())) already_gone.push_back(v->uid());
    }
  }
  for (const auto& gone : already_gone) VictimGone(gone);
  // Lower-priority pods nominated here may no longer fit: their nomination goes.
  for (const auto& other : lower_nominated) ClearNomination(*other->pod);

  const std::string scheduler_name =
      preemptor.scheduler_name().empty() ? std::string(kDefaultSchedulerName) : preemptor.scheduler_name();
  // Cluster protocol 2: a victim's DisruptionTarget rides in its DeletePod.
  const bool patch_in_delete = sink_ != nullptr && sink_->ProtocolVersion() >= 2;
  // The API calls' bookkeeping holds one count for this loop itself: a
  // result may come back (on the driver thread) before the loop ends.
  {
    absl::MutexLock lock(&mu_);
    api_calls_[uid] = ApiCalls{absl::Now(), 1};
  }
  int calls = 0;  // Victims whose calls were sent.
  auto count_call = [this, &uid, &calls] {
    ++calls;
    absl::MutexLock lock(&mu_);
    if (auto it = api_calls_.find(uid); it != api_calls_.end()) ++it->second.pending;
  };
  for (const auto& victim : victims) {
    const v1::Pod& pod = *victim->pod;
    const std::string victim_uid = pod.meta().uid();
    if (std::find(already_gone.begin(), already_gone.end(), victim_uid) != already_gone.end()) continue;
    // Already terminating (an earlier preemption's delete went through, e.g.
    // before the adapter reconnected): no second delete, no second event; its
    // deletion is awaited like any other's (kube-scheduler skips it too).
    if (pod.meta().deletion_timestamp_us() != 0) continue;
    // Being evicted by another preemption still in flight: the same, seen
    // from here (its delete is on its way, no DeletionTimestamp seen yet).
    if (evicted_by_other.contains(victim_uid)) continue;
    v1::Action event;
    auto* e = event.mutable_record_event();
    *e->mutable_regarding() = PodRef(pod);
    e->set_type("Normal");
    e->set_reason("Preempted");
    e->set_action("Preempting");
    e->set_note(absl::StrCat("Preempted by pod ", uid, " on node ", node));
    // A victim waiting at Permit is not bound: its wait ends with a rejection
    // (kube-scheduler's waitingPod.Reject), nothing goes through the API.
    if (waiting_.reject &&
        waiting_.reject(victim_uid, kDefaultPreemption, "preempted", [this, victim_uid] { VictimGone(victim_uid); })) {
      Send(std::move(event), nullptr);
      continue;
    }
    // DisruptionTarget first, then the delete with the uid precondition.
    v1::PodCondition condition;
    condition.set_type(kDisruptionTarget);
    condition.set_status("True");
    condition.set_reason(kPreemptionByScheduler);
    condition.set_message(absl::StrCat(scheduler_name, ": preempting to accommodate a higher priority pod"));
    v1::Action del;
    *del.mutable_delete_pod()->mutable_pod() = PodRef(pod);
    del.mutable_delete_pod()->set_reason(
        absl::StrCat("Preempted by ", PodKey(preemptor), " on node ", node));
    auto on_delete = [this, uid, victim_uid](const v1::ActionResult& r, absl::Time) {
      const bool ok = r.code() == v1::ActionResult::OK || r.code() == v1::ActionResult::NOT_FOUND;
      MarkIfGoneFromApi(victim_uid, r);
      ApiCallReturned(uid, ok);
      if (r.code() == v1::ActionResult::NOT_FOUND) return VictimGone(victim_uid);
      if (r.code() != v1::ActionResult::OK) return ActionFailed(uid, victim_uid, r);
      // Done when its deletion is seen (a grace period may hold it a while).
    };
    if (patch_in_delete) {
      // One action: the adapter patches, and deletes only if the patch
      // succeeded (DeletePod.disruption_target), as kube-scheduler's
      // PreemptPod does; no round trip through the scheduler in between.
      *del.mutable_delete_pod()->mutable_disruption_target() = std::move(condition);
      count_call();
      Send(std::move(del), std::move(on_delete));
      Send(std::move(event), nullptr);
      continue;
    }
    v1::Action patch;
    auto* p = patch.mutable_patch_pod_status();
    *p->mutable_pod() = PodRef(pod);
    *p->add_conditions() = std::move(condition);
    count_call();
    Send(std::move(patch), [this, uid, victim_uid, del = std::move(del), on_delete = std::move(on_delete)](
                               const v1::ActionResult& r, absl::Time) mutable {
      MarkIfGoneFromApi(victim_uid, r);
      if (r.code() != v1::ActionResult::OK) ApiCallReturned(uid, r.code() == v1::ActionResult::NOT_FOUND);
      if (r.code() == v1::ActionResult::NOT_FOUND) return VictimGone(victim_uid);
      if (r.code() != v1::ActionResult::OK) return ActionFailed(uid, victim_uid, r);
      Send(std::move(del), std::move(on_delete));
    });
    Send(std::move(event), nullptr);
  }
  // The loop's own count; a preemption that sent no call is not observed,
  // and holds the preemptor no longer (kube-scheduler starts no goroutine).
  if (calls > 0) {
    ApiCallReturned(uid, true);
    return;
  }
  bool unhold = false;
  {
    absl::MutexLock lock(&mu_);
    api_calls_.erase(uid);
    unhold = HeldOnlyForItsCalls(uid);
  }
  if (unhold && queue_.unhold) queue_.unhold(uid);
}

bool PreemptionController::HeldOnlyForItsCalls(const std::string& preemptor_uid) const {
  auto it = in_flight_.find(preemptor_uid);
  return it != in_flight_.end() && !it->second.shares_an_eviction;
}

void PreemptionController::ApiCallReturned(const std::string& preemptor_uid, bool ok) {
  std::optional<absl::Duration> took;
  bool unhold = false;
  {
    absl::MutexLock lock(&mu_);
    auto it = api_calls_.find(preemptor_uid);
    if (it == api_calls_.end()) return;  // Already failed.
    if (ok && --it->second.pending > 0) return;
    took = absl::Now() - it->second.sent;
    api_calls_.erase(it);
    // Victims still terminating: the calls are done, the hold ends.
    unhold = ok && HeldOnlyForItsCalls(preemptor_uid);
  }
  if (api_calls_observer_) api_calls_observer_(ok ? "success" : "error", *took);
  if (unhold && queue_.unhold) queue_.unhold(preemptor_uid);
}

void PreemptionController::VictimGone(const std::string& victim_uid) {
  std::vector<std::string> done;
  {
    absl::MutexLock lock(&mu_);
    auto v = victim_of_.find(victim_uid);
    if (v == victim_of_.end()) return;
    const std::vector<std::string> waiting = std::move(v->second);
    victim_of_.erase(v);
    for (const std::string& preemptor : waiting) {
      auto it = in_flight_.find(preemptor);
      if (it == in_flight_.end()) continue;
      it->second.victims.erase(victim_uid);
      if (!it->second.victims.empty()) continue;
      in_flight_.erase(it);
      preemptors_.erase(preemptor);
      done.push_back(preemptor);
    }
  }
  // Every victim is gone: the preemptor is tried again now, not after backoff.
  for (const std::string& uid : done) Release(uid, /*to_active=*/true);
}

void PreemptionController::MarkIfGoneFromApi(const std::string& victim_uid, const v1::ActionResult& result) {
  if (result.code() != v1::ActionResult::NOT_FOUND && result.code() != v1::ActionResult::CONFLICT) return;
  // Only while the cache still shows it (checked outside mu_: the cache's
  // lock is not taken under ours). A deletion seen in between leaves an
  // entry no uid will match again.
  if (present_ && !present_(victim_uid)) return;
  absl::MutexLock lock(&mu_);
  if (gone_from_api_.size() >= kMaxGoneFromApi) gone_from_api_.clear();
  gone_from_api_.insert(victim_uid);
}

bool PreemptionController::GoneFromApi(std::string_view victim_uid) const {
  absl::MutexLock lock(&mu_);
  return gone_from_api_.contains(absl::string_view(victim_uid.data(), victim_uid.size()));
}

void PreemptionController::Release(const std::string& uid, bool to_active) {
  if (queue_.release && queue_.release(uid, to_active)) return;
  if (to_active && activate_) activate_({uid});  // Not held (e.g. a resize's pod): straight to activeQ.
}

void PreemptionController::Forget(absl::flat_hash_map<std::string, Preemption>::iterator it) {
  for (const auto& v : it->second.victims) {
    auto w = victim_of_.find(v);
    if (w == victim_of_.end()) continue;
    w->second.erase(std::remove(w->second.begin(), w->second.end(), it->first), w->second.end());
    if (w->second.empty()) victim_of_.erase(w);
  }
  preemptors_.erase(it->first);
  in_flight_.erase(it);
}

void PreemptionController::ActionFailed(const std::string& preemptor_uid, const std::string& victim_uid,
                                        const v1::ActionResult& result) {
  std::vector<v1::Pod> failed;
  {
    absl::MutexLock lock(&mu_);
    // The preemption that sent the action, and any other waiting for the
    // same victim (it sent nothing for it and would wait forever).
    std::vector<std::string> uids = {preemptor_uid};
    if (auto w = victim_of_.find(victim_uid); w != victim_of_.end()) {
      for (const std::string& other : w->second) {
        if (other != preemptor_uid) uids.push_back(other);
      }
    }
    for (const std::string& uid : uids) {
      auto it = in_flight_.find(uid);
      if (it == in_flight_.end()) continue;  // Already failed (or done).
      auto p = preemptors_.find(uid);
      if (p != preemptors_.end()) failed.push_back(std::move(p->second));
      Forget(it);
    }
  }
  for (const v1::Pod& preemptor : failed) {
    PODIUM_LOG(Warning, "Preemption failed", {"pod", PodKey(preemptor)},
               {"result", v1::ActionResult::Code_Name(result.code())}, {"err", result.message()});
    ClearNomination(preemptor);
    // Back where a failed attempt goes: backoffQ, then another try.
    Release(preemptor.meta().uid(), /*to_active=*/false);
  }
}

void PreemptionController::OnObjectEvent(const v1::ObjectEvent& event) {
  if (event.object_case() != v1::ObjectEvent::kPod) {
    scheduler_->OnObjectEvent(event);
    return;
  }
  const v1::Pod& pod = event.pod();
  const bool deleted = event.type() == v1::ObjectEvent::DELETE;
  nominator_.OnPodEvent(pod, deleted);
  // The scheduler first: the cache must not hold a victim when its preemptor
  // is activated below.
  scheduler_->OnObjectEvent(event);
  const bool finished = pod.phase() == v1::SUCCEEDED || pod.phase() == v1::FAILED;
  if (deleted) {
    // Again, now that the scheduler no longer counts the pod pending: a
    // PostFilter that nominated it in between (it still looked pending)
    // would otherwise leave a nomination nothing clears.
    nominator_.OnPodEvent(pod, deleted);
    absl::MutexLock lock(&mu_);
    gone_from_api_.erase(pod.meta().uid());  // The cache has caught up.
  }
  if (deleted || finished) VictimGone(pod.meta().uid());
  if (deleted || !pod.node_name().empty()) {
    // The preemptor itself is placed or gone: nothing to wait for. (A resizing
    // one is placed already: it waits until its resize is no longer deferred.)
    bool ended = false;
    {
      absl::MutexLock lock(&mu_);
      auto it = in_flight_.find(pod.meta().uid());
      if (it != in_flight_.end() &&
          (deleted || !it->second.resize || pod.resize_status() != kDeferredResize)) {
        Forget(it);
        ended = true;
      }
    }
    // A resize that went through while held: its next cycle finds nothing to do.
    if (ended && !deleted) Release(pod.meta().uid(), /*to_active=*/true);
  }
}

// ------------------------------------------------------------ plugin

DefaultPreemption::DefaultPreemption(Options options, const Framework& framework,
                                     const Snapshot& snapshot, const Cache& cache,
                                     PreemptionController& controller)
    : options_(options),
      framework_(framework),
      snapshot_(snapshot),
      cache_(cache),
      controller_(controller) {}

std::vector<DryRunNode> DefaultPreemption::NextChunk(const v1::Pod& pod,
                                                     const std::vector<const sdk::NodeInfo*>& potential,
                                                     uint32_t offset, uint32_t chunk_size, uint32_t end,
                                                     uint32_t& k,
                                                     const Pdbs& pdbs,
                                                     const absl::flat_hash_set<std::string>& assumed,
                                                     std::vector<const sdk::NodeInfo*>* without_victims) const {
  const uint32_t n = static_cast<uint32_t>(potential.size());
  std::vector<DryRunNode> chunk;
  chunk.reserve(std::min(chunk_size, n - k));
  for (; k < end && chunk.size() < chunk_size; ++k) {
    const sdk::NodeInfo* node = potential[(offset + k) % n];
    std::vector<sdk::PodInfoPtr> lower = LowerPriorityPods(pod, *node, assumed);
    if (lower.empty()) {
      if (without_victims != nullptr) without_victims->push_back(node);
      continue;
    }
    chunk.push_back(DryRunNode{node, OrderPotentialVictims(std::move(lower), pdbs)});
  }
  return chunk;
}

std::vector<sdk::PodInfoPtr> DefaultPreemption::LowerPriorityPods(
    const v1::Pod& pod, const sdk::NodeInfo& node, const absl::flat_hash_set<std::string>& assumed) const {
  std::vector<sdk::PodInfoPtr> lower;
  for (const sdk::PodInfoPtr& p : node.pods()) {
    // An assumed pod is a victim while it waits at Permit (it is then
    // rejected there); once past Permit its binding is under way: left be.
    if (PodPriority(*p->pod) < PodPriority(pod) && p->uid() != pod.meta().uid() &&
        (assumed.empty() || !assumed.contains(p->uid()) || controller_.WaitingAtPermit(p->uid()))) {
      lower.push_back(p);
    }
  }
  return lower;
}

std::optional<v1::PreemptionDryRunRequest> DefaultPreemption::PredictDryRunOn(
    const v1::Pod& pod, uint64_t cycle_id, const std::vector<uint32_t>& node_ids, const KeptDryRuns* what_if_from,
    uint32_t what_if_nodes, bool what_if_gone) {
  dirty_prediction_.reset();
  const std::string& uid = pod.meta().uid();
  // As PredictDryRun: only for a pod PostFilter would take to a dry run.
  if (node_ids.empty() || !pod.node_name().empty() || !pod.nominated_node_name().empty() ||
      controller_.InFlight(uid) || !controller_.nominator().NominatedNode(uid).empty() ||
      !PodEligibleToPreemptOthers(pod, snapshot_, "", nullptr).empty()) {
    return std::nullopt;
  }
  const Pdbs pdbs = cache_.ListPdbs();
  const absl::flat_hash_set<std::string> assumed = cache_.AssumedUids();
  std::vector<DryRunNode> chunk;
  for (uint32_t id : node_ids) {
    const sdk::NodeInfo* node = snapshot_.GetById(id);
    if (node == nullptr) continue;
    std::vector<sdk::PodInfoPtr> lower = LowerPriorityPods(pod, *node, assumed);
    if (!lower.empty()) chunk.push_back(DryRunNode{node, OrderPotentialVictims(std::move(lower), pdbs)});
  }
  if (chunk.empty()) return std::nullopt;
  std::optional<v1::PreemptionDryRunRequest> request =
      FirstDryRunRequest(*framework_.spec_ptr(), cycle_id, chunk, /*num_candidates=*/0);
  if (!request) return std::nullopt;
  dirty_prediction_ = PredictionOf(uid, cycle_id, 0, 0, chunk);
  if (what_if_from != nullptr && what_if_nodes > 0) {
    // Where this pod and the next of its signature will likely be nominated:
    // the nodes changed here, and the picks of the next candidate walks.
    // Their offsets are looked up now, and each walk's pick is predicted from
    // the kept outcomes (their nodes are clean; each node is taken at most
    // once: one nominated there makes it worse). Two kinds of node may or
    // may not be candidates when the walk comes: a node changed here (its
    // outcome comes with this answer) and an earlier walk's pick (with a
    // preemptor nominated there). That moves where the walk stops, and with
    // it the pick (the latest-start tie-break favours the nodes near the
    // end: preempt-500 fills its nodes in order), so a walk with u such
    // nodes asks its picks for 0..u of them being candidates; at most twice
    // `what_if_nodes` picks in all. A PDB change since they were kept makes
    // PostFilter forget them; the what-ifs are then simply not used.
    const std::vector<const sdk::NodeInfo*>& potential = snapshot_.Nodes();
    const uint32_t n = static_cast<uint32_t>(potential.size());
    const uint32_t num_candidates =
        NumCandidates(n, options_.min_candidate_nodes_percentage, options_.min_candidate_nodes_absolute);
    absl::flat_hash_map<uint32_t, bool> changed;  // Node id -> a PDB-violating pod among its potential victims.
    for (const DryRunNode& c : chunk) changed.emplace(c.node->id(), c.potential.num_pdb_violating > 0);
    absl::flat_hash_set<uint32_t> predicted;
    std::vector<uint32_t> best;
    const size_t max_predicted = 2 * static_cast<size_t>(what_if_nodes);
    struct Step {
      bool uncertain;  // Changed here, or an earlier walk's pick: a candidate or not.
      bool violating;
      std::optional<uint32_t> best;  // The best pickable node up to here.
    };
    auto best_so_far = [](const std::optional<std::pair<PickKey, uint32_t>>& pick) {
      return pick ? std::optional<uint32_t>(pick->second) : std::nullopt;
    };
    std::vector<Step> steps;
    for (uint32_t i = 0; n > 0 && i < what_if_nodes && best.size() < max_predicted; ++i) {
      const uint32_t offset = OffsetOf(UpcomingWalk(i), n);
      // The walk as far as it goes with no uncertain node a candidate.
      DryRunCounts known;
      steps.clear();
      std::optional<std::pair<PickKey, uint32_t>> pick;
      for (uint32_t k = 0; k < n && !known.Enough(num_candidates); ++k) {
        const uint32_t id = potential[(offset + k) % n]->id();
        if (auto c = changed.find(id); c != changed.end()) {
          steps.push_back(Step{true, c->second, best_so_far(pick)});
          continue;
        }
        auto it = what_if_from->nodes.find(id);
        if (it == what_if_from->nodes.end() || it->second.rejection != nullptr || it->second.victims.empty()) continue;
        const KeptDryRun& outcome = it->second;
        if (predicted.contains(id)) {
          // An earlier walk's pick: with a preemptor nominated there it may
          // no longer be a candidate.
          steps.push_back(Step{true, outcome.num_pdb_violations != 0, best_so_far(pick)});
          continue;
        }
        (outcome.num_pdb_violations == 0 ? known.non_violating : known.violating)++;
        const PickKey key = KeyOf(outcome);
        if (!pick || key < pick->first) pick.emplace(key, id);
        steps.push_back(Step{false, outcome.num_pdb_violations != 0, best_so_far(pick)});
      }
      // Where it stops, and what it picks, when the first m uncertain nodes
      // are candidates (which ones matters less than how many).
      std::vector<uint32_t> picks;
      const size_t num_uncertain =
          static_cast<size_t>(std::count_if(steps.begin(), steps.end(), [](const Step& s) { return s.uncertain; }));
      for (size_t m = 0; m <= num_uncertain; ++m) {
        DryRunCounts found;
        size_t uncertain_seen = 0;
        std::optional<uint32_t> at_end;
        for (const Step& step : steps) {
          if (found.Enough(num_candidates)) break;
          if (step.uncertain && uncertain_seen++ >= m) continue;
          (step.violating ? found.violating : found.non_violating)++;
          at_end = step.best;
        }
        if (at_end && std::find(picks.begin(), picks.end(), *at_end) == picks.end()) {
          picks.push_back(*at_end);
        }
      }
      for (uint32_t id : picks) {
        if (best.size() < max_predicted && predicted.insert(id).second) best.push_back(id);
      }
    }
    for (const DryRunNode& changed_node : chunk) {
      SetCandidate(*changed_node.node, changed_node.potential, *request->add_what_if());
    }
    for (uint32_t id : best) {
      const sdk::NodeInfo* node = snapshot_.GetById(id);
      if (node == nullptr) continue;
      std::vector<sdk::PodInfoPtr> lower = LowerPriorityPods(pod, *node, assumed);
      if (lower.empty()) continue;
      v1::PreemptionDryRunRequest::Candidate& c = *request->add_what_if();
      SetCandidate(*node, OrderPotentialVictims(std::move(lower), pdbs), c);
      // A pod nominated to a pick takes its kept victims: with what-ifs of
      // pods gone, also ask the node once they have left.
      if (!what_if_gone) continue;
      auto kept = what_if_from->nodes.find(id);
      if (kept == what_if_from->nodes.end() || kept->second.rejection != nullptr) continue;
      // The answer keeps this request's PDB order for the pods left; a victim
      // that spends a PDB's budget would change it (another pod may no
      // longer violate): not asked then.
      if (std::any_of(kept->second.victims.begin(), kept->second.victims.end(),
                      [&](const sdk::PodInfoPtr& v) { return SpendsAPdbBudget(*v->pod, pdbs); })) {
        continue;
      }
      for (const sdk::PodInfoPtr& v : kept->second.victims) c.add_gone(v->uid());
    }
    request->set_what_if_copy_uid(absl::StrCat(uid, "/what-if"));
  }
  if (what_if_from != nullptr && what_if_gone) {
    // The nodes of this plugin's preemptions whose victims the snapshot still
    // holds, once those have left: their deletions change those nodes, and
    // the next pods of the signature find them so (batching/kept_failures.h,
    // "What-ifs of pods gone"). A node with no lower-priority pod left is no
    // candidate then: only its verdict is asked. A preemption is forgotten
    // once none of its victims is here, or once it failed (neither in flight
    // nor its preemptor nominated).
    constexpr size_t kMaxGone = 64;
    for (auto entry = evicting_.begin(); entry != evicting_.end();) {
      const sdk::NodeInfo* node = snapshot_.Get(entry->first);
      std::vector<std::string> here;
      std::vector<Evicting>& preemptions = entry->second;
      for (auto e = preemptions.begin(); e != preemptions.end();) {
        std::vector<std::string> present;
        if (node != nullptr) {
          for (const std::string& victim : e->victims) {
            if (node->FindPod(victim) != nullptr) present.push_back(victim);
          }
        }
        const bool failed = !controller_.InFlight(e->preemptor_uid) &&
                            controller_.nominator().NominatedNode(e->preemptor_uid).empty();
        if (present.empty() || failed) {
          e = preemptions.erase(e);
          continue;
        }
        here.insert(here.end(), present.begin(), present.end());
        ++e;
      }
      if (preemptions.empty()) {
        evicting_.erase(entry++);
        continue;
      }
      ++entry;
      if (static_cast<size_t>(request->what_if_gone_size()) >= kMaxGone) continue;
      std::sort(here.begin(), here.end());
      here.erase(std::unique(here.begin(), here.end()), here.end());
      std::vector<sdk::PodInfoPtr> lower = LowerPriorityPods(pod, *node, assumed);
      lower.erase(std::remove_if(lower.begin(), lower.end(),
                                 [&](const sdk::PodInfoPtr& p) {
                                   return std::binary_search(here.begin(), here.end(), p->uid());
                                 }),
                  lower.end());
      v1::PreemptionDryRunRequest::Candidate& c = *request->add_what_if_gone();
      SetCandidate(*node, OrderPotentialVictims(std::move(lower), pdbs), c);
      for (std::string& uid_gone : here) c.add_gone(std::move(uid_gone));
    }
  }
  return request;
}

absl::Status DefaultPreemption::WalkKept(const v1::Pod& pod, const Diagnosis& diagnosis, KeptDryRuns& kept,
                                         const std::vector<const sdk::NodeInfo*>& potential, uint32_t offset,
                                         uint32_t num_candidates, const Pdbs& pdbs,
                                         const absl::flat_hash_set<std::string>& assumed,
                                         const google::protobuf::RepeatedPtrField<v1::MirroredPod>& nominated_pods,
                                         const ProfileSpec& spec, const Prediction* answered, Diagnosis& failure,
                                         std::vector<Candidate>& candidates) {
  // Victim order and PDB violations follow the PDBs: kept outcomes found
  // with others are forgotten.
  uint64_t pdbs_fingerprint = pdbs.size();
  for (const auto& pdb : pdbs) {
    pdbs_fingerprint = absl::HashOf(pdbs_fingerprint, pdb.get(), pdb->meta().uid(), pdb->meta().resource_version());
  }
  if (kept.pdbs_fingerprint != pdbs_fingerprint) {
    kept.nodes.clear();
    kept.pdbs_fingerprint = pdbs_fingerprint;
  }
  // A node holding an assumed pod is neither read from nor kept: whether
  // that pod waits at Permit changes without the node changing.
  auto keepable = [&assumed](const sdk::NodeInfo& node) {
    if (assumed.empty()) return true;
    for (const sdk::PodInfoPtr& p : node.pods()) {
      if (assumed.contains(p->uid())) return false;
    }
    return true;
  };
  // Outcomes found in this walk, kept or not.
  absl::flat_hash_map<uint32_t, KeptDryRun> fresh;
  auto ask = [&](const std::vector<DryRunNode>& nodes,
                 const v1::PreemptionDryRunResponse* given) -> absl::Status {
    // Every node evaluated (no stop rule): the rule is applied over the walk below.
    absl::StatusOr<DryRunOutcome> part = RunDryRuns(spec, pod, diagnosis.cycle_id, snapshot_.delta_seq(), nodes,
                                                    nominated_pods, /*num_candidates=*/0, nullptr, given);
    if (!part.ok()) return part.status();
    absl::flat_hash_map<std::string_view, const sdk::NodeInfo*> by_name;
    for (const DryRunNode& n : nodes) by_name.emplace(n.node->name(), n.node);
    auto put = [&](const std::string& name, KeptDryRun outcome) {
      auto it = by_name.find(name);
      if (it == by_name.end()) return;
      if (keepable(*it->second)) {
        KeptDryRun& k = kept.nodes[it->second->id()];
        k = outcome;
        if (k.rejection == nullptr) k.pick_key = PickKeyOf(k.victims, k.num_pdb_violations);
      }
      fresh[it->second->id()] = std::move(outcome);
    };
    for (Candidate& c : part->candidates) put(c.node_name, KeptDryRun{nullptr, std::move(c.victims), c.num_pdb_violations});
    for (auto& [name, status] : part->rejected) put(name, KeptDryRun{std::move(status), {}, 0});
    return absl::OkStatus();
  };
  // The answer that rode in the cycle, for the nodes it was made for, if
  // they are still what was predicted.
  if (answered != nullptr && diagnosis.dry_run_answer != nullptr) {
    std::vector<DryRunNode> chunk;
    for (const Prediction::Node& p : answered->nodes) {
      const sdk::NodeInfo* node = snapshot_.GetById(p.id);
      std::vector<sdk::PodInfoPtr> lower;
      if (node != nullptr) lower = LowerPriorityPods(pod, *node, assumed);
      if (lower.empty()) {
        chunk.clear();
        break;
      }
      DryRunNode c{node, OrderPotentialVictims(std::move(lower), pdbs)};
      if (c.potential.num_pdb_violating != p.num_pdb_violating ||
          !std::equal(c.potential.pods.begin(), c.potential.pods.end(), p.victims.begin(), p.victims.end(),
                      [](const sdk::PodInfoPtr& v, const std::string& u) { return v->uid() == u; })) {
        chunk.clear();
        break;
      }
      chunk.push_back(std::move(c));
    }
    if (!chunk.empty()) {
      if (absl::Status s = ask(chunk, diagnosis.dry_run_answer.get()); !s.ok()) return s;
    }
  }
  auto outcome_of = [&](const sdk::NodeInfo& node, bool keep) -> const KeptDryRun* {
    if (auto f = fresh.find(node.id()); f != fresh.end()) return &f->second;
    if (!keep) return nullptr;
    auto k = kept.nodes.find(node.id());
    return k == kept.nodes.end() ? nullptr : &k->second;
  };

  const uint32_t n = static_cast<uint32_t>(potential.size());
  const uint32_t chunk_size = num_candidates > 0 ? num_candidates : n;
  DryRunCounts found;
  SharedStatus no_victims;
  struct Slot {
    const sdk::NodeInfo* node;
    bool keep;
    bool no_victims;
  };
  std::vector<Slot> segment;
  std::vector<DryRunNode> unknown;
  struct Best {
    PickKey key;
    const sdk::NodeInfo* node;
    bool keep;
  };
  std::optional<Best> best;  // The node of the best candidate so far (a later answer may move the maps).
  uint32_t k = 0;
  while (k < n && !found.Enough(num_candidates)) {
    // The next run of nodes: up to chunk_size of them to ask, and no further
    // than the stop rule could hold if every one asked were a candidate.
    segment.clear();
    unknown.clear();
    DryRunCounts optimistic = found;
    for (; k < n && unknown.size() < chunk_size && !optimistic.Enough(num_candidates); ++k) {
      const sdk::NodeInfo* node = potential[(offset + k) % n];
      const bool keep = keepable(*node);
      if (const KeptDryRun* known = outcome_of(*node, keep)) {
        segment.push_back(Slot{node, keep, false});
        if (known->rejection == nullptr) (known->num_pdb_violations == 0 ? optimistic.non_violating : optimistic.violating)++;
        continue;
      }
      std::vector<sdk::PodInfoPtr> lower = LowerPriorityPods(pod, *node, assumed);
      segment.push_back(Slot{node, keep, lower.empty()});
      if (lower.empty()) continue;
      unknown.push_back(DryRunNode{node, OrderPotentialVictims(std::move(lower), pdbs)});
      ++optimistic.non_violating;
    }
    if (!unknown.empty()) {
      if (absl::Status s = ask(unknown, nullptr); !s.ok()) return s;
    }
    // kube-scheduler's stop rule over the nodes in order.
    for (const Slot& slot : segment) {
      if (found.Enough(num_candidates)) break;
      if (slot.no_victims) {
        if (no_victims == nullptr) {
          no_victims = MakeSharedStatus(sdk::Status(sdk::Code::kUnschedulableAndUnresolvable, kNoVictims));
        }
        failure.node_statuses.emplace_back(NodeName(*slot.node), no_victims);
        continue;
      }
      const KeptDryRun* outcome = outcome_of(*slot.node, slot.keep);
      if (outcome == nullptr) continue;  // Not evaluated (a process that failed under Ignore).
      if (outcome->rejection != nullptr) {
        failure.node_statuses.emplace_back(NodeName(*slot.node), outcome->rejection);
        continue;
      }
      (outcome->num_pdb_violations == 0 ? found.non_violating : found.violating)++;
      // Only the best candidate is built: PickOneNodeForPreemption's order
      // is the pick key's, and of equal keys the first in the walk wins.
      const PickKey key = KeyOf(*outcome);
      if (!best || key < best->key) best = Best{key, slot.node, slot.keep};
    }
  }
  if (best) {
    // The maps hold still now (no more answers): the outcome is read once.
    const KeptDryRun* outcome = outcome_of(*best->node, best->keep);
    Candidate& c = candidates.emplace_back();
    c.node_name = best->node->name();
    c.victims = outcome->victims;
    c.num_pdb_violations = outcome->num_pdb_violations;
  }
  return absl::OkStatus();
}

std::optional<v1::PreemptionDryRunRequest> DefaultPreemption::PredictDryRun(const v1::Pod& pod,
                                                                            uint64_t cycle_id) {
  if (prediction_) {  // No PostFilter came for it (the pod fit): its offset was not used.
    ReturnWalk(prediction_->walk);
    prediction_.reset();
  }
  const std::string& uid = pod.meta().uid();
  // Only for a pod PostFilter would take straight to the dry run: pending,
  // not nominated, not preempting already, eligible.
  if (!pod.node_name().empty() || !pod.nominated_node_name().empty() || controller_.InFlight(uid) ||
      !controller_.nominator().NominatedNode(uid).empty() ||
      !PodEligibleToPreemptOthers(pod, snapshot_, "", nullptr).empty()) {
    return std::nullopt;
  }
  const std::vector<const sdk::NodeInfo*>& potential = snapshot_.Nodes();
  const uint32_t n = static_cast<uint32_t>(potential.size());
  if (n == 0) return std::nullopt;
  const uint64_t walk = TakeWalk();
  const uint32_t offset = OffsetOf(walk, n);
  const uint32_t num_candidates =
      NumCandidates(n, options_.min_candidate_nodes_percentage, options_.min_candidate_nodes_absolute);
  const uint32_t chunk_size = num_candidates > 0 ? num_candidates : n;
  const Pdbs pdbs = cache_.ListPdbs();
  const absl::flat_hash_set<std::string> assumed = cache_.AssumedUids();
  // One chunk at most: when its nodes have no lower-priority pod at all (a
  // pod that cannot preempt anyone), no prediction, rather than a scan of
  // every node that PostFilter would repeat.
  uint32_t k = 0;
  std::vector<DryRunNode> chunk =
      NextChunk(pod, potential, offset, chunk_size, std::min(n, chunk_size), k, pdbs, assumed, nullptr);
  // No prediction: the walk is given back, the next PostFilter's as if not
  // taken (a pod's walk is the same whether or not its cycle predicted).
  auto none = [&]() -> std::optional<v1::PreemptionDryRunRequest> {
    ReturnWalk(walk);
    return std::nullopt;
  };
  // Nodes without victims among them: PostFilter's chunk would reach further.
  if (chunk.size() < chunk_size && k < n) return none();
  if (chunk.empty()) return none();
  std::optional<v1::PreemptionDryRunRequest> request =
      FirstDryRunRequest(*framework_.spec_ptr(), cycle_id, chunk, num_candidates);
  if (!request) return none();
  prediction_ = PredictionOf(uid, cycle_id, n, walk, chunk);
  return request;
}

uint64_t DefaultPreemption::UpcomingWalk(size_t i) const {
  return i < returned_walks_.size() ? returned_walks_[i] : next_walk_ + (i - returned_walks_.size());
}

uint64_t DefaultPreemption::TakeWalk() {
  if (returned_walks_.empty()) return next_walk_++;
  const uint64_t walk = returned_walks_.front();
  returned_walks_.pop_front();
  return walk;
}

void DefaultPreemption::ReturnWalk(uint64_t walk) { returned_walks_.push_front(walk); }

uint32_t DefaultPreemption::OffsetOf(uint64_t walk, uint32_t n) const {
  // splitmix64 of (seed, walk): a uniform 64-bit value per walk, then scaled
  // to [0, n) by a 128-bit multiply (bias below 2^-32 for any n here).
  uint64_t z = options_.seed + (walk + 1) * 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  z ^= z >> 31;
  return static_cast<uint32_t>((static_cast<unsigned __int128>(z) * n) >> 64);
}

DefaultPreemption::Prediction DefaultPreemption::PredictionOf(const std::string& uid, uint64_t cycle_id,
                                                              uint32_t num_potential, uint64_t walk,
                                                              const std::vector<DryRunNode>& chunk) {
  Prediction prediction{uid, cycle_id, num_potential, walk, {}};
  prediction.nodes.reserve(chunk.size());
  for (const DryRunNode& c : chunk) {
    Prediction::Node& node = prediction.nodes.emplace_back();
    node.id = c.node->id();
    node.num_pdb_violating = c.potential.num_pdb_violating;
    for (const sdk::PodInfoPtr& v : c.potential.pods) node.victims.push_back(v->uid());
  }
  return prediction;
}

bool DefaultPreemption::OwnVictimsOn(std::string_view preemptor_uid, const std::string& node) const {
  auto it = evicting_.find(node);
  const sdk::NodeInfo* info = snapshot_.Get(node);
  if (it == evicting_.end() || info == nullptr) return false;
  for (const Evicting& e : it->second) {
    if (e.preemptor_uid != preemptor_uid) continue;
    for (const std::string& victim : e.victims) {
      if (info->FindPod(victim) != nullptr) return true;
    }
  }
  return false;
}

std::pair<PostFilterResult, sdk::Status> DefaultPreemption::PostFilter(const v1::Pod& pod,
                                                                       const Diagnosis& diagnosis) {
  const std::string& uid = pod.meta().uid();
  Nominator& nominator = controller_.nominator();
  // kube-scheduler counts every PostFilter call of DefaultPreemption.
  if (ExtensionPointRecorder* recorder = framework_.recorder()) recorder->CountPreemptionAttempt();
  // The dry run predicted for this cycle, if any (see below). Its walk is
  // this attempt's; when this attempt walks nothing (the pod is not
  // eligible, no node could help, the prediction does not hold), it is
  // given back, as if not taken: a walk's offset is the same whether or not
  // a cycle predicted, or a cache decided the cycle without one.
  std::optional<Prediction> prediction = std::move(prediction_);
  prediction_.reset();
  bool walked = false;  // The walk below took this attempt's offset.
  const auto give_back = [&] {
    if (walked || !prediction) return;
    ReturnWalk(prediction->walk);
    prediction.reset();
  };
  // 1) Eligibility.
  const std::string own_nomination = nominator.NominatedNode(uid);
  // Not eligible while room is made for it. A gang counts the member as
  // placed only while its own nomination stands and its own victims are still
  // on that node: not for another's victims on a node someone hinted, nor
  // once a higher-priority pod took the room.
  const auto waiting = [&] {
    PostFilterResult r;
    r.awaiting_victims = !own_nomination.empty() && OwnVictimsOn(uid, own_nomination);
    return r;
  };
  if (controller_.InFlight(uid)) {
    give_back();
    return {waiting(), Unschedulable(kNotEligibleTerminating)};
  }
  std::string nominated = own_nomination;
  if (nominated.empty() && pod.node_name().empty()) nominated = pod.nominated_node_name();
  const sdk::Status* nominated_status = nullptr;
  for (const auto& [name, status] : diagnosis.node_statuses) {
    if (name == nominated) nominated_status = status.get();
  }
  if (std::string why = PodEligibleToPreemptOthers(pod, snapshot_, nominated, nominated_status); !why.empty()) {
    give_back();
    if (why == kNotEligibleTerminating) return {waiting(), Unschedulable(why)};
    return {{}, Unschedulable(why)};
  }

  // 2) Candidates. A bound pod is here for its deferred resize (KEP-5836):
  // its own node is the only candidate, and it stays there.
  const bool resize = !pod.node_name().empty();
  Diagnosis failure;
  failure.num_all_nodes = static_cast<uint32_t>(snapshot_.NumNodes());
  std::vector<const sdk::NodeInfo*> potential;
  if (resize) {
    failure.num_all_nodes = 1;
    if (const sdk::NodeInfo* own = snapshot_.Get(pod.node_name())) potential.push_back(own);
  } else {
    potential = NodesWherePreemptionMightHelp(snapshot_, diagnosis, &failure.node_statuses);
  }
  const auto no_candidates = [&]() -> std::pair<PostFilterResult, sdk::Status> {
    give_back();
    // Preemption cannot help: a nomination the pod had is cleared.
    if (!nominated.empty()) controller_.ClearNomination(pod);
    return {{}, Unschedulable(failure.Message())};
  };
  if (potential.empty()) return no_candidates();

  const uint32_t n = static_cast<uint32_t>(potential.size());
  // The prediction, made over every node, holds when every node is still a
  // potential one (then the walk taken for it is this attempt's); its
  // answer is used below if the first chunk is the same.
  if (prediction && (prediction->pod_uid != uid || prediction->cycle_id != diagnosis.cycle_id ||
                     prediction->num_potential != n || n != snapshot_.NumNodes())) {
    give_back();
  }
  std::optional<Prediction> dirty_prediction = std::move(dirty_prediction_);
  dirty_prediction_.reset();
  if (dirty_prediction && (dirty_prediction->pod_uid != uid || dirty_prediction->cycle_id != diagnosis.cycle_id)) {
    dirty_prediction.reset();
  }
  const uint32_t offset = OffsetOf(prediction ? prediction->walk : TakeWalk(), n);
  walked = true;
  const uint32_t num_candidates =
      NumCandidates(n, options_.min_candidate_nodes_percentage, options_.min_candidate_nodes_absolute);
  const auto pdbs = cache_.ListPdbs();
  const std::shared_ptr<const ProfileSpec> spec_ptr = framework_.spec_ptr();
  const ProfileSpec& spec = *spec_ptr;
  google::protobuf::RepeatedPtrField<v1::MirroredPod> nominated_pods;
  // Only for processes that do not mirror nominations (dry_run.cc).
  if (std::any_of(spec.processes.begin(), spec.processes.end(),
                  [](const auto& p) { return !p.second->MirrorsNominatedPods(); })) {
    nominator.AddToRequest(pod, snapshot_, &nominated_pods);
  }
  // The nodes go to the dry run a chunk of num_candidates at a time, from the
  // random offset on, until kube-scheduler's stop rule holds: on a cluster
  // where most nodes would do, one chunk ends it, and neither the victim
  // lists of the other nodes are built nor are they sent.
  DryRunOutcome dry;
  DryRunCounts found;
  SharedStatus no_victims;  // One status for every node without lower-priority pods.
  const uint32_t chunk_size = num_candidates > 0 ? num_candidates : n;  // 0: every node.
  // One cache lock for every pod of every chunk, not one per pod. Only this
  // (the scheduling) thread assumes pods, so none is added meanwhile.
  const absl::flat_hash_set<std::string> assumed = cache_.AssumedUids();
  uint32_t k = 0;
  std::vector<const sdk::NodeInfo*> without_victims;
  bool first_chunk = true;
  if (diagnosis.kept_dry_runs != nullptr && !resize) {
    // The signature's kept dry runs: the same walk, asking only for the nodes
    // whose outcome is not kept.
    const Prediction* answered = dirty_prediction ? &*dirty_prediction : prediction ? &*prediction : nullptr;
    if (absl::Status s = WalkKept(pod, diagnosis, *diagnosis.kept_dry_runs, potential, offset, num_candidates, pdbs,
                                  assumed, nominated_pods, spec, answered, failure, dry.candidates);
        !s.ok()) {
      return {{}, sdk::Status(sdk::Code::kError, absl::StrCat("preemption: ", s.message()))};
    }
    k = n;
  }
  while (k < n && !found.Enough(num_candidates)) {
    without_victims.clear();
    std::vector<DryRunNode> chunk =
        NextChunk(pod, potential, offset, chunk_size, n, k, pdbs, assumed, &without_victims);
    for (const sdk::NodeInfo* node : without_victims) {
      if (no_victims == nullptr) {
        no_victims = MakeSharedStatus(sdk::Status(sdk::Code::kUnschedulableAndUnresolvable, kNoVictims));
      }
      failure.node_statuses.emplace_back(NodeName(*node), no_victims);
    }
    if (chunk.empty()) continue;
    // The answer that rode in the cycle, for exactly this chunk.
    const v1::PreemptionDryRunResponse* answered = nullptr;
    if (first_chunk && prediction && diagnosis.dry_run_answer != nullptr &&
        prediction->nodes.size() == chunk.size() &&
        std::equal(chunk.begin(), chunk.end(), prediction->nodes.begin(),
                   [](const DryRunNode& c, const Prediction::Node& p) {
                     return c.node->id() == p.id && c.potential.num_pdb_violating == p.num_pdb_violating &&
                            std::equal(c.potential.pods.begin(), c.potential.pods.end(), p.victims.begin(),
                                       p.victims.end(),
                                       [](const sdk::PodInfoPtr& v, const std::string& u) { return v->uid() == u; });
                   })) {
      answered = diagnosis.dry_run_answer.get();
    }
    first_chunk = false;
    absl::StatusOr<DryRunOutcome> part = RunDryRuns(spec, pod, diagnosis.cycle_id, snapshot_.delta_seq(), chunk,
                                                    nominated_pods, num_candidates, &found, answered);
    if (!part.ok()) {
      return {{}, sdk::Status(sdk::Code::kError, absl::StrCat("preemption: ", part.status().message()))};
    }
    for (auto& r : part->rejected) failure.node_statuses.push_back(std::move(r));
    for (auto& c : part->candidates) dry.candidates.push_back(std::move(c));
  }
  if (dry.candidates.empty()) return no_candidates();

  // 3) The best candidate.
  Candidate& best = dry.candidates[PickOneNodeForPreemption(dry.candidates)];
  // The cycle's snapshot is older than the cache: a chosen victim is already
  // gone (an earlier preemption of this pod finished while its filters ran).
  // Nothing is evicted again; the pod is tried at once on the current state.
  for (const sdk::PodInfoPtr& v : best.victims) {
    const bool cached = cache_.GetPod(v->uid()) != nullptr;
    if (cached && !controller_.GoneFromApi(v->uid())) continue;
    PostFilterResult retry;
    // Only its own, out-of-date view failed: the user is told nothing
    // (a second PodScheduled patch would exceed 2 x victims + 2 API calls).
    retry.retry_unreported = true;
    if (cached) {
      // The API said it is gone; the cache has not seen it go yet. Its
      // deletion event, on its way, moves the pod (queueing hints): a
      // retry now would find the same stale view.
      return {std::move(retry), Unschedulable(kVictimsGoneFromApi)};
    }
    retry.after_requeue = [&controller = controller_, uid] { controller.Activate(uid); };
    return {std::move(retry), Unschedulable(kVictimsAlreadyGone)};
  }
  std::stable_sort(best.victims.begin(), best.victims.end(),
                   [](const sdk::PodInfoPtr& a, const sdk::PodInfoPtr& b) { return MoreImportantPod(*a->pod, *b->pod); });
  std::vector<sdk::PodInfoPtr> lower_nominated = nominator.LowerPriorityNominated(pod, best.node_name);
  if (!resize) {
    constexpr size_t kMaxEvictingNodes = 1024;  // Bounds what failed preemptions leave.
    if (evicting_.size() >= kMaxEvictingNodes) evicting_.clear();
    Evicting& e = evicting_[best.node_name].emplace_back(Evicting{pod.meta().uid(), {}});
    for (const sdk::PodInfoPtr& v : best.victims) e.victims.push_back(v->uid());
    std::sort(e.victims.begin(), e.victims.end());
  }
  // A resizing pod is already counted on its node with its new requests: no nomination.
  PostFilterResult result;
  if (!resize) {
    Nominator::Saved before = nominator.Save(uid);
    nominator.Nominate(sdk::PodInfo::Create(pod), best.node_name);
    result.withdraw = [this, before = std::move(before), node = best.node_name] {
      controller_.nominator().Restore(before, node);
      auto e = evicting_.find(node);
      if (e == evicting_.end()) return;
      // The one this PostFilter added: the last of this pod's there.
      auto& list = e->second;
      auto mine = std::find_if(list.rbegin(), list.rend(), [&](const Evicting& x) { return x.preemptor_uid == before.uid; });
      if (mine != list.rend()) list.erase(std::next(mine).base());
      if (list.empty()) evicting_.erase(e);
    };
  }

  // 4) Carried out once the preemptor is back in the queue.
  if (!resize) result.nominated_node_name = best.node_name;
  // Observed when carried out: a gang's decision may be withdrawn instead.
  result.after_requeue = [&controller = controller_, recorder = framework_.recorder(), pod, node = best.node_name,
                          victims = std::move(best.victims), lower = std::move(lower_nominated)] {
    if (recorder != nullptr) recorder->ObservePreemptionVictims(static_cast<int>(victims.size()));
    controller.Execute(pod, node, victims, lower);
  };
  return {std::move(result), sdk::Status::Success()};
}

absl::StatusOr<std::optional<DefaultPreemption::Options>> PreemptionOptionsFor(const ProfileConfig& profile,
                                                                              size_t index) {
  auto disables = [](const std::vector<std::string>& disabled) {
    return std::find(disabled.begin(), disabled.end(), kDefaultPreemption) != disabled.end() ||
           std::find(disabled.begin(), disabled.end(), "*") != disabled.end();
  };
  if (disables(profile.multi_point.disabled)) return std::nullopt;
  if (auto it = profile.per_point.find("postFilter"); it != profile.per_point.end() && disables(it->second.disabled)) {
    return std::nullopt;
  }
  DefaultPreemption::Options options;
  auto args = profile.plugin_args.find(kDefaultPreemption);
  if (args == profile.plugin_args.end()) return options;
  const std::string prefix = absl::StrCat("profiles[", index, "].pluginConfig[DefaultPreemption].args.");
  for (const auto& [key, value] : args->second) {
    const std::string name(key);
    if (name == "apiVersion" || name == "kind") continue;
    int* field = name == "minCandidateNodesPercentage" ? &options.min_candidate_nodes_percentage
                 : name == "minCandidateNodesAbsolute" ? &options.min_candidate_nodes_absolute
                                                       : nullptr;
    if (field == nullptr) return absl::InvalidArgumentError(absl::StrCat(prefix, name, ": unknown field"));
    if (!value.is_int64() || value.as_int64() < 0 || value.as_int64() > 1000000) {
      return absl::InvalidArgumentError(absl::StrCat(prefix, name, ": must be a non-negative integer"));
    }
    *field = static_cast<int>(value.as_int64());
  }
  if (options.min_candidate_nodes_percentage > 100) {
    return absl::InvalidArgumentError(absl::StrCat(prefix, "minCandidateNodesPercentage: must be in [0, 100]"));
  }
  if (options.min_candidate_nodes_percentage == 0 && options.min_candidate_nodes_absolute == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        prefix, "minCandidateNodesAbsolute: cannot be zero at the same time as minCandidateNodesPercentage"));
  }
  return options;
}

}  // namespace podium::scheduler::preemption
