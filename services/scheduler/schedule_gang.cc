// Gangs in one pass (beyond kube-scheduler's pod-by-pod alpha): when a popped
// pod belongs to a PodGroup, its queued siblings are taken from the queue too
// and their cycles run back to back, each on the snapshot with the earlier
// members assumed. If fewer than the group's minimum fit, every assumption is
// undone and every member is requeued with one FailedScheduling message that
// says why: a gang that cannot fit is found out in one pass, not after a Permit
// timeout, and holds no room meanwhile. Members that fit go through Permit,
// where the gang's Permit plugin (Coscheduling) lets them bind together.
// A member no node takes runs PostFilter (DefaultPreemption) in the pass;
// its victims are evicted only if the gang's minimum is then reached, as a
// whole: a gang never evicts for a placement it cannot complete.
#include <algorithm>
#include <cstdio>
#include <functional>
#include <optional>

#include "absl/strings/str_cat.h"
#include "gang/gang.h"
#include "pod_ref.h"
#include "scheduler.h"

namespace podium::scheduler {

bool Scheduler::ScheduleGang(const QueuedPodInfoPtr& first) {
  const v1::Pod& pod = first->pod();
  Framework* fw = FrameworkFor(pod);
  if (fw == nullptr || cache_.IsAssumed(first->uid()) || !StillPending(first->uid())) return false;
  RefreshSnapshot();
  const v1::PodGroup* found = snapshot_.GetPodGroup(pod.meta().namespace_(), pod.pod_group());
  if (found == nullptr) return false;  // No such group: an ordinary pod.
  const v1::PodGroup group = *found;   // The snapshot may change under the pointer.
  const std::string ns = pod.meta().namespace_();
  const std::string group_name = pod.pod_group();
  const absl::Time start = clock_.Now();
  const uint64_t scheduling_cycle = queue_.scheduling_cycle();

  std::vector<QueuedPodInfoPtr> members{first};
  for (QueuedPodInfo& sibling : queue_.PopGroupMembers(
           ns, group_name, [&](const QueuedPodInfo& q) { return FrameworkFor(q.pod()) == fw; })) {
    auto qp = std::make_shared<QueuedPodInfo>(std::move(sibling));
    if (cache_.IsAssumed(qp->uid()) || !StillPending(qp->uid())) {
      queue_.Done(qp->uid());
      continue;
    }
    members.push_back(std::move(qp));
  }

  gang::PassOutcome outcome;
  outcome.members = members.size();
  // Bound or assumed members, found from the gang's own pods (the registry),
  // not by scanning every pod of the snapshot.
  outcome.assigned = gang_members_.CountAssigned(ns, group_name, [this](std::string_view uid) {
    sdk::PodInfoPtr cached = cache_.GetPod(uid);
    return cached != nullptr && !cached->pod->node_name().empty();
  });
  const size_t min = static_cast<size_t>(std::max(1, group.min_member()));
  if (outcome.members + outcome.assigned < min && gang_members_.Count(ns, group_name) >= min &&
      first->attempts <= 3) {
    // The rest exist but are not in the queue yet (PreEnqueue is letting them
    // in right now): not a failure. Back off quietly; the next member popped
    // takes these along. Past a few attempts it is reported like any misfit.
    for (const QueuedPodInfoPtr& m : members) {
      (void)queue_.AddUnschedulableIfNotPresent(*m, scheduling_cycle);
      queue_.Done(m->uid());
    }
    return true;
  }
  struct Placed {
    QueuedPodInfoPtr qp;
    std::string node;
    uint64_t cycle_id;
    sdk::PodInfoPtr assumed;
  };
  struct Failed {
    QueuedPodInfoPtr qp;
    ScheduleResult::Outcome outcome;
    std::string message;
    absl::flat_hash_set<std::string> plugins;
    std::optional<Diagnosis> diagnosis;
    // A failed PostFilter's work once the pod is requeued (a retry when its
    // victims were already gone).
    std::function<void()> after_requeue;
    bool report = true;  // !PostFilterResult::retry_unreported
    // Room is already being made for it (PostFilterResult::awaiting_victims):
    // counted towards the minimum.
    bool awaiting_victims = false;
    bool deleted = false;  // While the pass ran.
  };
  // A member no node takes now, for which PostFilter (DefaultPreemption)
  // chose victims and nominated a node (post.nominated_node_name): counted
  // towards the minimum, and carried out only if the gang can be placed as a
  // whole.
  struct Preempting {
    QueuedPodInfoPtr qp;
    Diagnosis diagnosis;
    PostFilterResult post;
  };
  std::vector<Placed> placed;
  std::vector<Failed> failed;
  std::vector<Preempting> preempting;
  const SchedulerMetrics::ProfileSeries& series = series_.at(fw);
  size_t awaiting = 0;  // Of `failed`, those whose room is on its way.
  // What the pass assumed for a member, given back.
  const auto unassume = [&](const Placed& p) {
    fw->RunUnreserve(*p.assumed->pod, p.node, p.cycle_id);
    (void)cache_.ForgetPod(p.qp->uid());
  };
  if (outcome.members + outcome.assigned >= min) {
    const size_t max_failures = outcome.members + outcome.assigned - min;
    for (const QueuedPodInfoPtr& m : members) {
      if (failed.size() - awaiting > max_failures) break;  // The minimum is out of reach.
      const v1::Pod& member = m->pod();
      uint64_t cycle_id = ++cycle_id_;
      const absl::Time member_start = clock_.Now();
      RefreshSnapshot();  // With the members placed so far assumed.
      // Through the batcher: a member's Filter and Score verdicts do not
      // depend on its group (no plugin that filters or scores reads it), so
      // the members after the first, alike in every other part, reuse its
      // ranking, with the node each earlier member took re-evaluated (or
      // answered by a what-if verdict) instead of a full cycle each.
      ScheduleResult result = batching_.SchedulePod(*fw, member, snapshot_, snapshot_.delta_seq(), cycle_id,
                                                    [this] { return ++cycle_id_; });
      (result.outcome == ScheduleResult::Outcome::kScheduled ? series.filter_success : series.filter_unschedulable)
          ->Observe(absl::ToDoubleSeconds(clock_.Now() - member_start));
      if (result.outcome == ScheduleResult::Outcome::kUnschedulable) {
        std::function<void()> after_requeue;
        bool report = true;
        bool awaiting_victims = false;
        if (!fw->HasPostFilterPlugins()) {
          fw->AbandonCycle(cycle_id);
        } else {
          // Preemption on the pass's snapshot: the members placed so far are
          // assumed there, and those preempting so far nominated, so each
          // member's victims make room beside theirs. Nothing is evicted yet.
          auto [post, status] = fw->RunPostFilter(member, result.diagnosis);
          result.diagnosis.post_filter_message = status.Message();
          if (status.IsSuccess() && !post.nominated_node_name.empty()) {
            preempting.push_back({m, std::move(result.diagnosis), std::move(post)});
            continue;
          }
          after_requeue = std::move(post.after_requeue);
          report = !post.retry_unreported;
          awaiting_victims = post.awaiting_victims;
          awaiting += awaiting_victims ? 1 : 0;
        }
        failed.push_back({m, result.outcome, result.diagnosis.Message(), result.diagnosis.unschedulable_plugins,
                          std::move(result.diagnosis), std::move(after_requeue), report, awaiting_victims});
        continue;
      }
      if (result.outcome == ScheduleResult::Outcome::kError) {
        failed.push_back({m, result.outcome, std::string(result.error.message()), {}, std::nullopt});
        continue;
      }
      absl::StatusOr<sdk::PodInfoPtr> assumed_or = Assume(member, result.node_name);
      if (!assumed_or.ok()) {
        failed.push_back(
            {m, ScheduleResult::Outcome::kError, std::string(assumed_or.status().message()), {}, std::nullopt});
        continue;
      }
      sdk::PodInfoPtr assumed = *std::move(assumed_or);
      sdk::Status reserve = fw->RunReserve(*assumed->pod, result.node_name, cycle_id);
      if (!reserve.IsSuccess()) {
        fw->RunUnreserve(*assumed->pod, result.node_name, cycle_id);
        (void)cache_.ForgetPod(m->uid());
        failed.push_back({m,
                          reserve.IsRejected() ? ScheduleResult::Outcome::kUnschedulable
                                               : ScheduleResult::Outcome::kError,
                          reserve.Message(), {reserve.plugin()}, std::nullopt});
        continue;
      }
      placed.push_back({m, result.node_name, cycle_id, std::move(assumed)});
    }
  }

  // A member deleted while the pass ran counts for nothing: what the pass
  // assumed or nominated for it is given back, and no victim is evicted for
  // it (its deletion's event found it here, out of the queue).
  const auto deleted = [&](const QueuedPodInfoPtr& m) {
    failed.push_back({m, ScheduleResult::Outcome::kUnschedulable, "deleted while its pod group was being placed", {},
                      std::nullopt, nullptr, /*report=*/false, /*awaiting_victims=*/false, /*deleted=*/true});
  };
  for (auto it = preempting.begin(); it != preempting.end();) {
    if (!DeletedWhilePreempting(it->qp->uid(), it->post)) {
      ++it;
      continue;
    }
    deleted(it->qp);
    it = preempting.erase(it);
  }
  for (auto it = placed.begin(); it != placed.end();) {
    if (StillPending(it->qp->uid())) {
      ++it;
      continue;
    }
    unassume(*it);
    deleted(it->qp);
    it = placed.erase(it);
  }
  for (Failed& f : failed) {
    if (!f.awaiting_victims || StillPending(f.qp->uid())) continue;
    f.awaiting_victims = false;
    f.deleted = true;
    --awaiting;
  }

  if (!gang::Satisfied(group, placed.size() + preempting.size() + awaiting, outcome.assigned)) {
    // None of them: give back what the pass assumed and nominated, newest
    // first; no victim is evicted for a gang that would still not fit.
    for (auto it = preempting.rbegin(); it != preempting.rend(); ++it) {
      if (it->post.withdraw) it->post.withdraw();
    }
    for (auto it = placed.rbegin(); it != placed.rend(); ++it) unassume(*it);
    outcome.placed = placed.size() + preempting.size() + awaiting;
    // The first member that fits nowhere, nor has room on its way.
    const auto misfit =
        std::find_if(failed.begin(), failed.end(), [](const Failed& f) { return !f.awaiting_victims && !f.deleted; });
    const Failed* cause = misfit == failed.end() ? nullptr : &*misfit;
    if (cause != nullptr) {
      outcome.failed_pod = PodKey(cause->qp->pod());
      outcome.failed_message = cause->message;
    }
    const std::string message = gang::UnfitMessage(group, outcome);
    // Every member waits for what would let the one that did not fit in, so
    // one event requeues the gang together.
    absl::flat_hash_set<std::string> plugins = cause != nullptr ? cause->plugins : absl::flat_hash_set<std::string>{};
    if (cause == nullptr && outcome.members + outcome.assigned < min) {
      // Too few members for the minimum: no node would help, only a new
      // member or a change to the group. They wait in the unschedulable pool
      // as rejected by the profile's gang plugins (their events: PodGroup
      // add/update, and a new member is popped with its siblings), not in
      // backoffQ, where they would be retried every few seconds for nothing.
      plugins = fw->spec().pod_group_members_only;
    }
    const ScheduleResult::Outcome kind =
        cause != nullptr && cause->outcome == ScheduleResult::Outcome::kError ? ScheduleResult::Outcome::kError
                                                                              : ScheduleResult::Outcome::kUnschedulable;
    for (const QueuedPodInfoPtr& m : members) {
      const Diagnosis* diagnosis =
          cause != nullptr && cause->qp == m && cause->diagnosis ? &*cause->diagnosis : nullptr;
      AttemptFailed(m, fw, scheduling_cycle, start, kind, message, plugins, diagnosis);
    }
    for (Failed& f : failed) {
      if (f.after_requeue) f.after_requeue();
    }
    return true;
  }
  // The gang's minimum fits: members that did not are retried on their own.
  for (Failed& f : failed) {
    AttemptFailed(f.qp, fw, scheduling_cycle, start, f.outcome, f.message, f.plugins,
                  f.diagnosis ? &*f.diagnosis : nullptr, nullptr, f.report);
    if (f.after_requeue) f.after_requeue();
  }
  // Those preempting wait for their victims as any preemptor does (held,
  // then moved by the victims' deletions); the placed members wait at Permit
  // until they are placed too.
  for (Preempting& p : preempting) {
    AttemptFailed(p.qp, fw, scheduling_cycle, start, ScheduleResult::Outcome::kUnschedulable, p.diagnosis.Message(),
                  p.diagnosis.unschedulable_plugins, &p.diagnosis, &p.post.nominated_node_name,
                  !p.post.retry_unreported);
    if (p.post.after_requeue) p.post.after_requeue();
  }
  // Permit sees every member this pass assumed (the last one's cycle ran
  // before it was assumed): the gang plugin counts the minimum at the first
  // member and allows each at once, instead of holding all but the last at
  // Permit and waking them one message each.
  RefreshSnapshot();
  fw->AdvanceBindingState(snapshot_.delta_seq());
  std::vector<BindingPod> ready;
  for (Placed& p : placed) {
    PermitAndBind(std::move(p.qp), fw, p.node, std::move(p.assumed), p.cycle_id, scheduling_cycle, start, &ready);
  }
  // Back to back: their Bind actions are coalesced into one message to the
  // adapter rather than sent one per Permit round trip.
  for (BindingPod& b : ready) Bind(std::move(b));
  return true;
}

void Scheduler::RetryGatedMembers(const std::string& namespace_, const std::string& group) {
  PostQueueWork([this, namespace_, group] { queue_.RetryGatedMembers(namespace_, group); });
}

}  // namespace podium::scheduler
