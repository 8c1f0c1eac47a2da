// Kept failures and kept dry runs (batching/kept_failures.h, DefaultPreemption
// ::WalkKept) must not change a decision: the same preemptors, in the same
// order, on the same cluster with the same changes between them (a node
// update, a victim deleted, a nomination cleared, PDBs added and changed),
// are scheduled once with the caches on and once with them off (batching off
// for the profile), and every step must end the same: the same node or the
// same nominated node and victims, and the same FailedScheduling message.
#include <algorithm>
#include <array>
#include <deque>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "batching/batcher.h"
#include "framework/mock_plugin_process.h"
#include "gtest/gtest.h"
#include "preemption/default_preemption.h"
#include "queue/fake_clock.h"

namespace podium::scheduler::preemption {
namespace {

int64_t Cpu(const v1::Pod& pod) {
  int64_t cpu = 0;
  for (const auto& c : pod.containers()) cpu += c.requests().milli_cpu();
  return cpu;
}

v1::Status Rejection(const std::string& reason, const std::string& plugin = "Fit") {
  v1::Status s;
  s.set_code(v1::Status::UNSCHEDULABLE);
  s.add_reasons(reason);
  s.set_plugin(plugin);
  return s;
}

// A plugin process that really runs a CPU fit on the scheduler's snapshot,
// counting nominated pods of equal or higher priority (it "mirrors"
// nominations: it reads the nominator), scores LeastAllocated, and answers
// dry runs as the SDK does (remove every potential victim, then reprieve in
// the order given; kube-scheduler's stop rule on num_candidates). It counts
// the nodes it was asked to dry-run. As "Parity" (a second filter process)
// it rejects the nodes with an odd id and lets the others through, with no
// victim needed.
class FitProcess : public PluginProcess {
 public:
  FitProcess(const Snapshot& snapshot, const Nominator& nominator, bool dry_runs_in_cycles,
             bool parity = false)
      : name_(parity ? "parity" : "host"),
        plugin_(parity ? "Parity" : "Fit"),
        snapshot_(snapshot),
        nominator_(nominator),
        dry_runs_in_cycles_(dry_runs_in_cycles),
        parity_(parity) {}

  const std::string& name() const override { return name_; }
  FailurePolicy failure_policy() const override { return FailurePolicy::kFail; }
  bool ready() const override { return true; }
  v1::Registration registration() const override {
    v1::Registration r;
    v1::PluginRegistration* p = r.add_plugins();
    p->set_name(plugin_);
    if (!parity_) p->mutable_signature()->add_parts(v1::POD_PART_RESOURCES);
    p->mutable_signature();  // Parity reads nothing of the pod.
    return r;
  }
  bool MirrorsNominatedPods() const override { return true; }
  bool RunsDryRunsInCycles() const override { return dry_runs_in_cycles_; }
  bool AnswersPreemptionWhatIf() const override { return what_ifs; }
  bool AnswersPreemptionWhatIfGone() const override { return what_ifs_gone; }
  bool AnswersNominatedChecks() const override { return nominated_checks; }
  absl::Duration timeout() const override { return absl::Seconds(1); }
  void CountInvalidAnswer() override {
    ++invalid_answers;
    if (lie != Lie::kForeignVictim) ADD_FAILURE() << "invalid answer";
  }
  void CountIgnoredFailure() override {}

  std::future<PluginAnswer> Call(v1::SchedulerToPlugin message, std::optional<uint64_t>) override {
    v1::PluginToScheduler answer;
    if (message.has_preemption_dry_run()) {
      const v1::PreemptionDryRunRequest& r = message.preemption_dry_run();
      DryRun(r, r.pod(), *answer.mutable_preemption_dry_run());
      return Answered(std::move(answer));
    }
    const v1::CycleRequest& req = message.cycle();
    ++cycles;
    std::vector<const sdk::NodeInfo*> nodes;
    if (req.nodes().all_nodes()) {
      const auto& all = snapshot_.Nodes();
      for (size_t k = 0; k < all.size(); ++k) nodes.push_back(all[(req.nodes().start_index() + k) % all.size()]);
    } else {
      for (uint32_t id : req.nodes().node_ids()) nodes.push_back(snapshot_.GetById(id));
    }
    v1::CycleResponse& out = *answer.mutable_cycle();
    const int64_t want = Cpu(req.pod());
    std::vector<const sdk::NodeInfo*> feasible;
    uint32_t evaluated = 0;
    for (const sdk::NodeInfo* node : nodes) {
      if (req.num_feasible_to_find() > 0 && feasible.size() >= req.num_feasible_to_find()) break;
      ++evaluated;
      ++nodes_filtered;
      if (parity_ ? node->id() % 2 == 1 : Free(req.pod(), *node) < want) {
        v1::NodeStatus* s = out.add_rejected();
        s->set_node_id(node->id());
        *s->mutable_status() = parity_ ? Rejection("odd node", "Parity") : Rejection("Insufficient cpu");
      } else {
        feasible.push_back(node);
        out.add_feasible(node->id());
      }
    }
    out.set_nodes_evaluated(evaluated);
    for (const auto& plugin : req.score_plugins()) {
      v1::PluginScores* s = out.add_scores();
      s->set_plugin(plugin);
      for (const sdk::NodeInfo* node : feasible) {
        const int64_t alloc = node->allocatable().milli_cpu;
        s->add_scores(parity_ ? 50 : (alloc - node->requested().milli_cpu - want) * 100 / alloc);
      }
    }
    // Other nominated pods, each on its nominated node (protocol version 6).
    for (const v1::NominatedCheck& c : req.nominated_checks()) {
      const sdk::NodeInfo* node = snapshot_.GetById(c.node_id());
      const bool fits = parity_ ? node->id() % 2 == 0 : Free(c.pod(), *node) >= Cpu(c.pod());
      out.add_nominated_checks(fits ? v1::WhatIfVerdicts::FEASIBLE : v1::WhatIfVerdicts::INFEASIBLE);
    }
    if (feasible.empty() && req.has_preemption_dry_run()) {
      ++dry_runs_in_cycle;
      DryRun(req.preemption_dry_run(), req.pod(), *out.mutable_preemption_dry_run());
    }
    return Answered(std::move(answer));
  }

  // Answers PreemptionDryRunRequest.what_if (protocol version 7).
  bool what_ifs = false;
  // Answers CycleRequest.nominated_checks (protocol version 6).
  bool nominated_checks = false;
  // Answers what_if_gone and what_if's then_gone (protocol version 8).
  bool what_ifs_gone = false;
  // Each what_if_gone answer names a pod that is not on its node (a plugin
  // process's error): the scheduler must drop the list and ask instead.
  bool bad_gone = false;
  // What-if answers that lie (a plugin process's error): every dry run's
  // num_pdb_violations says 0, or names one more pod of the node that was
  // not a potential victim (one of the pod's priority or higher).
  enum class Lie { kNone, kNoPdbViolations, kForeignVictim };
  Lie lie = Lie::kNone;
  int lies_told = 0;
  int invalid_answers = 0;
  int gone_answered = 0;
  // The nodes named in what_if_gone requests.
  std::set<std::string> gone_asked;
  // The node names of each dry-run request, in order.
  std::vector<std::set<std::string>> dry_run_requests;
  int what_ifs_answered = 0;
  int cycles = 0;
  int nodes_filtered = 0;
  int nodes_dry_run = 0;
  int dry_runs_in_cycle = 0;

 private:
  int64_t Free(const v1::Pod& pod, const sdk::NodeInfo& node) const {
    int64_t nominated = 0;
    for (const sdk::PodInfoPtr& p : nominator_.NominatedPodsFor(pod, node.name())) nominated += Cpu(*p->pod);
    return node.allocatable().milli_cpu - node.requested().milli_cpu - nominated;
  }

  void DryRun(const v1::PreemptionDryRunRequest& r, const v1::Pod& pod, v1::PreemptionDryRunResponse& out) {
    const int64_t want = Cpu(pod);
    uint32_t non_violating = 0, violating = 0;
    std::set<std::string>& asked = dry_run_requests.emplace_back();
    for (const auto& c : r.candidates()) asked.insert(snapshot_.GetById(c.node_id())->name());
    for (const auto& c : r.candidates()) {
      if (r.num_candidates() > 0 && non_violating > 0 && non_violating + violating >= r.num_candidates()) break;
      ++nodes_dry_run;
      const sdk::NodeInfo* node = snapshot_.GetById(c.node_id());
      v1::NodeVictims* n = out.add_nodes();
      n->set_node_id(c.node_id());
      if (parity_) {
        if (node->id() % 2 == 1) {
          *n->mutable_status() = Rejection("odd node", "Parity");
        } else if (r.no_reprieve()) {
          for (const auto& uid : c.potential_victims()) n->add_victims(uid);
        }
        ++non_violating;
        continue;
      }
      const int64_t violations = Evaluate(c, *node, Free(pod, *node), want, r.no_reprieve(), *n);
      if (violations >= 0) (violations == 0 ? non_violating : violating)++;
    }
    if (!what_ifs) return;
    // Each node with a copy of the pod nominated there (its CPU counted).
    for (const auto& c : r.what_if()) {
      ++what_ifs_answered;
      const sdk::NodeInfo* node = snapshot_.GetById(c.node_id());
      v1::WhatIfNominated* w = out.add_what_if();
      w->set_node_id(c.node_id());
      const int64_t free = Free(pod, *node) - want;
      if (free >= want) {
        w->mutable_filter()->set_code(v1::Status::SUCCESS);
        continue;
      }
      *w->mutable_filter() = Rejection("Insufficient cpu");
      Evaluate(c, *node, free, want, r.no_reprieve(), *w->mutable_dry_run());
      TellLie(c, *node, *w->mutable_dry_run());
      if (!what_ifs_gone || c.gone_size() == 0) continue;
      // Then the pods in `gone` gone, the copy still nominated.
      v1::PreemptionDryRunRequest::Candidate after;
      after.set_node_id(c.node_id());
      *after.mutable_gone() = c.gone();
      const std::set<std::string> gone(c.gone().begin(), c.gone().end());
      for (int v = 0; v < c.potential_victims_size(); ++v) {
        if (gone.count(c.potential_victims(v)) > 0) continue;
        after.add_potential_victims(c.potential_victims(v));
        if (static_cast<uint32_t>(v) < c.num_pdb_violating()) {
          after.set_num_pdb_violating(after.num_pdb_violating() + 1);
        }
      }
      AnswerGone(after, *node, free, want, *w->mutable_then_gone());
      if (w->then_gone().has_dry_run()) TellLie(after, *node, *w->mutable_then_gone()->mutable_dry_run());
    }
    if (!what_ifs_gone) return;
    for (const auto& c : r.what_if_gone()) {
      gone_asked.insert(snapshot_.GetById(c.node_id())->name());
      v1::WhatIfNominated& w = *out.add_what_if_gone();
      AnswerGone(c, *snapshot_.GetById(c.node_id()), Free(pod, *snapshot_.GetById(c.node_id())), want, w);
      if (w.has_dry_run()) TellLie(c, *snapshot_.GetById(c.node_id()), *w.mutable_dry_run());
      if (bad_gone) w.add_gone("uid-ghost");
    }
  }

  void TellLie(const v1::PreemptionDryRunRequest::Candidate& c, const sdk::NodeInfo& node, v1::NodeVictims& n) {
    if (n.status().code() != v1::Status::SUCCESS) return;
    if (lie == Lie::kNoPdbViolations && n.num_pdb_violations() > 0) {
      n.set_num_pdb_violations(0);
      ++lies_told;
    } else if (lie == Lie::kForeignVictim) {
      for (const sdk::PodInfoPtr& p : node.pods()) {
        const bool potential = std::find(c.potential_victims().begin(), c.potential_victims().end(), p->uid()) !=
                               c.potential_victims().end();
        const bool gone = std::find(c.gone().begin(), c.gone().end(), p->uid()) != c.gone().end();
        if (potential || gone) continue;
        n.add_victims(p->uid());
        ++lies_told;
        return;
      }
    }
  }

  // A node once the pods in c.gone have left it, from `free` CPU before.
  void AnswerGone(const v1::PreemptionDryRunRequest::Candidate& c, const sdk::NodeInfo& node, int64_t free,
                  int64_t want, v1::WhatIfNominated& w) {
    ++gone_answered;
    w.set_node_id(c.node_id());
    for (const auto& uid : c.gone()) {
      w.add_gone(uid);
      for (const sdk::PodInfoPtr& p : node.pods()) {
        if (p->uid() == uid) free += Cpu(*p->pod);
      }
    }
    if (free >= want) {
      w.mutable_filter()->set_code(v1::Status::SUCCESS);
      return;
    }
    *w.mutable_filter() = Rejection("Insufficient cpu");
    if (c.potential_victims_size() > 0) Evaluate(c, node, free, want, /*no_reprieve=*/false, *w.mutable_dry_run());
  }

  // SelectVictimsOnNode from `free` CPU: the PDB violations (-1: no fit).
  int64_t Evaluate(const v1::PreemptionDryRunRequest::Candidate& c, const sdk::NodeInfo& node, int64_t free,
                   int64_t want, bool no_reprieve, v1::NodeVictims& n) const {
    n.set_node_id(c.node_id());
    std::vector<std::pair<std::string, int64_t>> potential;
    for (const auto& uid : c.potential_victims()) {
      for (const sdk::PodInfoPtr& p : node.pods()) {
        if (p->uid() == uid) potential.emplace_back(uid, Cpu(*p->pod));
      }
    }
    for (const auto& [uid, cpu] : potential) free += cpu;
    if (free < want) {
      *n.mutable_status() = Rejection("Insufficient cpu");
      return -1;
    }
    int64_t violations = 0;
    for (size_t v = 0; v < potential.size(); ++v) {
      if (!no_reprieve && free - potential[v].second >= want) {
        free -= potential[v].second;  // Reprieved.
        continue;
      }
      n.add_victims(potential[v].first);
      if (v < c.num_pdb_violating()) ++violations;
    }
    n.set_num_pdb_violations(static_cast<uint32_t>(violations));  // As the SDK answers.
    return violations;
  }

  const std::string name_;
  const std::string plugin_;
  const Snapshot& snapshot_;
  const Nominator& nominator_;
  const bool dry_runs_in_cycles_;
  const bool parity_;
};

class Sink : public ActionSink {
 public:
  // Every action succeeds at once (a victim's delete follows its DisruptionTarget patch).
  void Send(v1::Action action, ResultCallback on_result) override {
    actions.push_back(std::move(action));
    v1::ActionResult ok;
    ok.set_action_id(actions.size());
    ok.set_code(v1::ActionResult::OK);
    if (on_result) on_result(ok, absl::Now());
  }
  std::vector<v1::Action> actions;
};

class Handler : public ClusterEventHandler {
 public:
  void OnListBegin() override {}
  void OnObjectEvent(const v1::ObjectEvent&) override {}
  void OnListEnd() override {}
  void OnAdapterDisconnected() override {}
};

// What a user sees of one preemptor's attempt.
struct Step {
  std::string bound;       // Placed without preemption.
  std::string nominated;   // Preempted for.
  std::vector<std::string> victims;
  std::string message;     // FailedScheduling, preemption's part included.
  bool operator==(const Step& o) const {
    return bound == o.bound && nominated == o.nominated && victims == o.victims && message == o.message;
  }
};

std::ostream& operator<<(std::ostream& os, const Step& s) {
  os << "{bound=" << s.bound << " nominated=" << s.nominated << " victims=";
  for (const auto& v : s.victims) os << v << ",";
  return os << " message=\"" << s.message << "\"}";
}

// One scheduler: cache, snapshot, nominator, the profile with
// DefaultPreemption, batching on or off.
class World {
 public:
  // `parity`: a second filter process (several processes: fan-out cycles,
  // dry runs confirmed with each).
  // `change_log`: the nominator's change log wired as main wires it (kept
  // failures re-evaluate the nodes whose nominations changed); without it,
  // per-node fingerprints of every nomination are compared.
  // `what_if_nodes`: the process answers preemption what-ifs and kept
  // failures ask them for that many nodes (0: none).
  World(bool caches, bool dry_runs_in_cycles, int min_candidates, bool parity = false, bool change_log = true,
        uint32_t what_if_nodes = 0, int num_nodes = 12, bool starts_in_node_order = false)
      : host_(snapshot_, nominator_, dry_runs_in_cycles),
        parity_(snapshot_, nominator_, false, /*parity=*/true),
        batching_(batching::OpportunisticBatching::Options{.preemption_what_if_nodes = what_if_nodes}, clock_,
                  nullptr, /*seed=*/7) {
    host_.what_ifs = what_if_nodes > 0;
    ProfileSpec spec;
    spec.plugins[v1::FILTER].push_back({"Fit", 0});
    spec.plugins[v1::SCORE].push_back({"Fit", 1});
    spec.processes["Fit"] = &host_;
    if (parity) {
      spec.plugins[v1::FILTER].push_back({"Parity", 0});
      spec.processes["Parity"] = &parity_;
    }
    spec.nominated_pods = [this](const v1::Pod& pod, const sdk::Snapshot& snap,
                                 google::protobuf::RepeatedPtrField<v1::MirroredPod>* out) {
      nominator_.AddToRequest(pod, snap, out);
    };
    spec.nominated_pod_keys = [this](const v1::Pod& pod, const sdk::Snapshot& snap, const auto& visit) {
      nominator_.ForEachKey(pod, snap, visit);
    };
    spec.nominations_generation = [this] { return nominator_.generation(); };
    spec.nominated_key_on = [this](const v1::Pod& pod, std::string_view node) {
      return nominator_.KeySumOn(pod, node);
    };
    if (change_log) {
      spec.nomination_changes = [this](uint64_t since, int32_t priority, const auto& visit) {
        return nominator_.ChangedNodesSince(since, priority, visit);
      };
      spec.nominated_node_of = [this](std::string_view uid) { return nominator_.NominatedNode(uid); };
    }
    fw_ = std::make_unique<Framework>(std::move(spec), /*seed=*/3);
    fw_->AddPostFilterPlugin(std::make_unique<DefaultPreemption>(
        DefaultPreemption::Options{.min_candidate_nodes_percentage = 0,
                                   .min_candidate_nodes_absolute = min_candidates,
                                   .seed = 11},
        *fw_, snapshot_, cache_, controller_));
    batching_.SetEnabled(fw_.get(), caches);
    controller_.SetActionSink(&sink_);
    controller_.SetPodLookup([this](std::string_view uid) { return cache_.GetPod(uid) != nullptr; });
    // 12 nodes (or `num_nodes`) of 4 CPU, each full with four priority-100
    // pods of 1 CPU, each created at its own time (kube-scheduler's last
    // tie-break; `starts_in_node_order`: as preempt-500 fills its nodes, so
    // that a walk's last candidate wins).
    for (int n = 0; n < num_nodes; ++n) {
      cache_.AddOrUpdateNode(Node(n, 4000));
      for (int p = 0; p < 4; ++p) {
        v1::Pod low = Pod(absl::StrCat("low-", n, "-", p), 100, 1000);
        low.set_node_name(NodeName(n));
        (*low.mutable_meta()->mutable_labels())["app"] = absl::StrCat("low-", n % 3);
        low.set_start_time_us(
            1'000'000 + (starts_in_node_order ? n * 4 + p : (n * 7 + p * 13) % 48) * 1000);
        EXPECT_TRUE(cache_.AddOrUpdatePod(low).ok());
      }
    }
  }

  static std::string NodeName(int n) { return absl::StrCat("node-", n); }
  static v1::Node Node(int n, int64_t cpu) {
    v1::Node node;
    node.mutable_meta()->set_name(NodeName(n));
    node.mutable_meta()->set_uid("uid-" + NodeName(n));
    node.mutable_allocatable()->set_milli_cpu(cpu);
    node.mutable_allocatable()->set_pods(110);
    return node;
  }
  static v1::Pod Pod(const std::string& name, int32_t priority, int64_t cpu) {
    v1::Pod pod;
    pod.mutable_meta()->set_uid("uid-" + name);
    pod.mutable_meta()->set_namespace_("default");
    pod.mutable_meta()->set_name(name);
    pod.mutable_meta()->set_resource_version("1");
    pod.set_priority(priority);
    pod.add_containers()->mutable_requests()->set_milli_cpu(cpu);
    return pod;
  }

  // FitProcess's score of `node` for a pod of `cpu` millicores in the last
  // attempt's snapshot.
  int64_t ScoreOf(const std::string& node, int64_t cpu) const {
    const sdk::NodeInfo* n = snapshot_.Get(node);
    const int64_t alloc = n->allocatable().milli_cpu;
    return (alloc - n->requested().milli_cpu - cpu) * 100 / alloc;
  }

  // One attempt of `pod`, as the scheduling loop runs it. A preemption's
  // victims stay until Delete (they terminate), the preemptor stays
  // nominated until Bind.
  // `next`, `later`: the pods queued after it (a nominated pod's request
  // carries checks of theirs on their nominated nodes).
  Step Schedule(const v1::Pod& pod, sdk::PodInfoPtr next = nullptr, const std::vector<sdk::PodInfoPtr>& later = {}) {
    batching_.SnapshotUpdating();
    cache_.UpdateSnapshot(snapshot_);
    batching_.SnapshotUpdated(snapshot_);
    uint64_t id = ++cycle_;
    ScheduleResult r = batching_.SchedulePod(*fw_, pod, snapshot_, snapshot_.delta_seq(), id,
                                             [this] { return ++cycle_; }, std::move(next), later);
    Step step;
    if (r.outcome == ScheduleResult::Outcome::kScheduled) {
      step.bound = r.node_name;
      v1::Pod bound = pod;
      bound.set_node_name(r.node_name);
      EXPECT_TRUE(cache_.AddOrUpdatePod(bound).ok());
      fw_->EndCycle(id);
      return step;
    }
    EXPECT_EQ(r.outcome, ScheduleResult::Outcome::kUnschedulable) << r.error;
    auto [post, status] = fw_->RunPostFilter(pod, r.diagnosis);
    r.diagnosis.post_filter_message = status.Message();
    step.message = r.diagnosis.Message();
    step.nominated = post.nominated_node_name;
    const size_t before = sink_.actions.size();
    if (post.after_requeue) post.after_requeue();
    for (size_t i = before; i < sink_.actions.size(); ++i) {
      if (sink_.actions[i].has_delete_pod()) step.victims.push_back(sink_.actions[i].delete_pod().pod().uid());
    }
    std::sort(step.victims.begin(), step.victims.end());
    return step;
  }

  // The pod's deletion, as the adapter reports it.
  void Delete(const std::string& uid) {
    sdk::PodInfoPtr gone = cache_.GetPod(uid);
    ASSERT_NE(gone, nullptr) << uid;
    ASSERT_TRUE(cache_.RemovePod(uid).ok());
    v1::ObjectEvent e;
    e.set_type(v1::ObjectEvent::DELETE);
    *e.mutable_pod() = *gone->pod;
    controller_.OnObjectEvent(e);
  }

  // The nominated preemptor bound on its node (its nomination ends).
  void Bind(const v1::Pod& pod, const std::string& node) {
    v1::Pod bound = pod;
    bound.set_node_name(node);
    bound.mutable_meta()->set_resource_version("2");
    ASSERT_TRUE(cache_.AddOrUpdatePod(bound).ok());
    v1::ObjectEvent e;
    e.set_type(v1::ObjectEvent::UPSERT);
    *e.mutable_pod() = bound;
    controller_.OnObjectEvent(e);
  }

  batching::BatchStats stats() const { return batching_.stats(); }

  FakeClock clock_;
  Cache cache_;
  Snapshot snapshot_;
  Nominator nominator_{&cache_};
  Handler handler_;
  PreemptionController controller_{handler_, nominator_};
  Sink sink_;
  FitProcess host_;
  FitProcess parity_;
  batching::OpportunisticBatching batching_;
  std::unique_ptr<Framework> fw_;
  uint64_t cycle_ = 0;
};

// The same script in a world: preemptors one after another, with cluster
// changes between some of them; returns every step.
std::vector<Step> RunScript(World& w) {
  std::vector<Step> steps;
  // The last preemptor: nominated, its victims still there; one step later
  // they are gone and it is bound.
  std::optional<std::pair<v1::Pod, Step>> waiting;
  for (int i = 0; i < 30; ++i) {
    switch (i) {
      case 5:  // A node grows: the next preemptor fits there without preempting.
        w.cache_.AddOrUpdateNode(World::Node(7, 8000));
        break;
      case 8:  // A victim-to-be deleted by someone else: node-5 needs one victim now.
        w.Delete("uid-low-5-1");
        break;
      case 11:  // The waiting preemptor's nomination cleared (it will not bind).
        if (waiting) {
          w.controller_.ClearNomination(waiting->first);
          for (const std::string& uid : waiting->second.victims) w.Delete(uid);
          waiting.reset();
        }
        break;
      case 14: {  // A PDB that protects every app=low-1 pod.
        v1::PodDisruptionBudget pdb;
        pdb.mutable_meta()->set_uid("uid-pdb");
        pdb.mutable_meta()->set_namespace_("default");
        pdb.mutable_meta()->set_name("pdb");
        pdb.mutable_meta()->set_resource_version("1");
        (*pdb.mutable_selector()->mutable_match_labels())["app"] = "low-1";
        pdb.set_disruptions_allowed(0);
        EXPECT_TRUE(w.cache_.AddOrUpdatePdb(pdb).ok());
        break;
      }
      case 19: {  // The PDB allows disruptions now.
        v1::PodDisruptionBudget pdb = *w.cache_.ListPdbs().front();
        pdb.mutable_meta()->set_resource_version("2");
        pdb.set_disruptions_allowed(10);
        EXPECT_TRUE(w.cache_.AddOrUpdatePdb(pdb).ok());
        break;
      }
      default:
        break;
    }
    const v1::Pod pod = World::Pod(absl::StrCat("preemptor-", i), 1000, 2000);
    Step step = w.Schedule(pod);
    if (waiting) {
      for (const std::string& uid : waiting->second.victims) w.Delete(uid);
      w.Bind(waiting->first, waiting->second.nominated);
    }
    waiting.reset();
    if (!step.nominated.empty()) waiting.emplace(pod, step);
    steps.push_back(step);
  }
  return steps;
}

// Preemptors in bursts, as preempt-500 creates them: several in a row with
// no event between them (each nominated, its victims still there), then
// the burst's preemptions complete (victims gone, preemptors bound). A
// victim-to-be deleted by someone else, and a node that grows, mid-burst.
std::vector<Step> RunBurstScript(World& w) {
  std::vector<Step> steps;
  std::vector<std::pair<v1::Pod, Step>> waiting;
  for (int round = 0; round < 3; ++round) {
    for (int i = 0; i < 6; ++i) {
      if (round == 1 && i == 3 && w.cache_.GetPod("uid-low-5-1") != nullptr) w.Delete("uid-low-5-1");
      if (round == 2 && i == 2) w.cache_.AddOrUpdateNode(World::Node(7, 8000));
      const v1::Pod pod = World::Pod(absl::StrCat("preemptor-", round, "-", i), 1000, 2000);
      Step step = w.Schedule(pod);
      if (!step.nominated.empty()) waiting.emplace_back(pod, step);
      steps.push_back(step);
    }
    for (const auto& [pod, step] : waiting) {
      for (const std::string& uid : step.victims) {
        if (w.cache_.GetPod(uid) != nullptr) w.Delete(uid);
      }
      w.Bind(pod, step.nominated);
    }
    waiting.clear();
  }
  return steps;
}

// Preemptors one after another as the API lags behind: after each step the
// oldest pending victim is deleted (so a node is seen with some of its
// preemption's victims gone, and the next step with all of them) once more
// than `lag` are pending, and every fifth step the preemptors whose victims
// are all gone are bound; a node grows mid-way, and twice the newest
// preemptor's nomination is cleared (its victims still go). So the next
// preemptor often finds nodes whose only change is an earlier preemption's
// victims gone (what-ifs of pods gone, protocol version 8), and sometimes a
// node on its way there, or whose nominations changed too.
std::vector<Step> RunLaggingScript(World& w, size_t lag) {
  std::vector<Step> steps;
  std::deque<std::pair<v1::Pod, Step>> evicting, evicted;
  std::deque<std::string> pending;  // Victims not yet deleted, oldest first.
  for (int i = 0; i < 36; ++i) {
    if (i == 17) w.cache_.AddOrUpdateNode(World::Node(7, 8000));
    if ((i == 12 || i == 26) && !evicting.empty()) {
      w.controller_.ClearNomination(evicting.back().first);
      evicting.pop_back();
    }
    const v1::Pod pod = World::Pod(absl::StrCat("preemptor-", i), 1000, 2000);
    Step step = w.Schedule(pod);
    if (!step.nominated.empty()) {
      evicting.emplace_back(pod, step);
      pending.insert(pending.end(), step.victims.begin(), step.victims.end());
    }
    steps.push_back(step);
    if (i % 5 == 4) {
      for (const auto& [bound, its] : evicted) w.Bind(bound, its.nominated);
      evicted.clear();
    }
    if (pending.size() > lag) {
      if (w.cache_.GetPod(pending.front()) != nullptr) w.Delete(pending.front());
      pending.pop_front();
    }
    while (!evicting.empty() && std::none_of(evicting.front().second.victims.begin(),
                                             evicting.front().second.victims.end(),
                                             [&](const std::string& uid) { return w.cache_.GetPod(uid) != nullptr; })) {
      evicted.push_back(std::move(evicting.front()));
      evicting.pop_front();
    }
  }
  return steps;
}

// The burst in each world: with what-ifs and with requests only, every step
// must decide as with no caches. Returns the what-ifs world's steps.
std::vector<Step> RunBurstsAlike(World& what_if, World& asked, World& off) {
  const std::vector<Step> a = RunBurstScript(what_if);
  const std::vector<Step> b = RunBurstScript(asked);
  const std::vector<Step> c = RunBurstScript(off);
  EXPECT_EQ(a.size(), c.size());
  EXPECT_EQ(b.size(), c.size());
  for (size_t i = 0; i < std::min({a.size(), b.size(), c.size()}); ++i) {
    EXPECT_EQ(a[i], c[i]) << "what-ifs, step " << i;
    EXPECT_EQ(b[i], c[i]) << "requests only, step " << i;
  }
  return a;
}

// Preemption what-ifs (plugin protocol version 7): a preemptor after one
// nominated to a node the what-ifs covered is served with no request, and
// decides as it would with one (and as with no caches at all).
TEST(KeptVerdictsTest, WhatIfsDecideAsRequestsAndAsNoCaches) {
  for (uint32_t nodes : {16u, 2u}) {  // 2: most picks fall outside them.
    World what_if(/*caches=*/true, /*dry_runs_in_cycles=*/true, /*min_candidates=*/100, false, true, nodes);
    World asked(/*caches=*/true, /*dry_runs_in_cycles=*/true, /*min_candidates=*/100);
    World off(/*caches=*/false, /*dry_runs_in_cycles=*/true, /*min_candidates=*/100);
    SCOPED_TRACE(absl::StrCat("what-ifs of ", nodes, " nodes"));
    const std::vector<Step> a = RunBurstsAlike(what_if, asked, off);
    EXPECT_TRUE(std::any_of(a.begin(), a.end(), [](const Step& s) { return !s.victims.empty(); }));
    EXPECT_TRUE(std::any_of(a.begin(), a.end(), [](const Step& s) { return !s.bound.empty(); }));
    EXPECT_GT(what_if.host_.what_ifs_answered, 0);
    EXPECT_EQ(asked.host_.what_ifs_answered, 0);
    const uint64_t hits = what_if.stats().preemption_what_if_hits;
    if (nodes == 16) {
      // Within a burst, every preemptor after the first two (a full cycle,
      // then the first narrowed one) is served from what-ifs unless an
      // event came: fewer cycle requests than with requests only.
      EXPECT_GE(hits, 6u);
      EXPECT_EQ(what_if.host_.cycles + static_cast<int>(hits), asked.host_.cycles);
    }
  }
}

// What-ifs of pods gone (plugin protocol version 8): with the API lagging,
// nodes change between preemptors by an earlier preemption's victims
// leaving. Those nodes take the verdicts asked ahead instead of a request,
// and every step decides as with what-ifs of protocol version 7 only, as
// with requests only, and as with no caches.
TEST(KeptVerdictsTest, WhatIfsOfPodsGoneDecideAsNoCaches) {
  for (int nodes : {24, 6}) {
  for (int min_candidates : {4, 100}) {
    for (bool ordered : {false, true}) {
     for (size_t lag : {2u, 5u}) {
      SCOPED_TRACE(absl::StrCat(nodes, " nodes, ", min_candidates, " candidates, ordered ", ordered, ", lag ", lag));
      World gone(/*caches=*/true, /*dry_runs_in_cycles=*/true, min_candidates, false, true,
                 /*what_if_nodes=*/8, nodes, ordered);
      gone.host_.what_ifs_gone = true;
      World what_if(/*caches=*/true, /*dry_runs_in_cycles=*/true, min_candidates, false, true,
                    /*what_if_nodes=*/8, nodes, ordered);
      World asked(/*caches=*/true, /*dry_runs_in_cycles=*/true, min_candidates, false, true, 0, nodes, ordered);
      World off(/*caches=*/false, /*dry_runs_in_cycles=*/true, min_candidates, false, true, 0, nodes, ordered);
      const std::vector<Step> a = RunLaggingScript(gone, lag);
      const std::vector<Step> b = RunLaggingScript(what_if, lag);
      const std::vector<Step> c = RunLaggingScript(asked, lag);
      const std::vector<Step> d = RunLaggingScript(off, lag);
      ASSERT_EQ(a.size(), d.size());
      for (size_t i = 0; i < d.size(); ++i) {
        EXPECT_EQ(a[i], d[i]) << "what-ifs of pods gone, step " << i;
        EXPECT_EQ(b[i], d[i]) << "what-ifs, step " << i;
        EXPECT_EQ(c[i], d[i]) << "requests only, step " << i;
      }
      EXPECT_TRUE(std::any_of(d.begin(), d.end(), [](const Step& s) { return !s.victims.empty(); }));
      EXPECT_TRUE(std::any_of(d.begin(), d.end(), [](const Step& s) { return !s.bound.empty(); }));
      EXPECT_GT(gone.host_.gone_answered, 0);
      EXPECT_EQ(what_if.host_.gone_answered, 0);
      // Nodes took them, and fewer requests went out than without them.
      EXPECT_GT(gone.stats().preemption_what_if_gone_nodes, 0u);
      EXPECT_EQ(what_if.stats().preemption_what_if_gone_nodes, 0u);
      EXPECT_LT(gone.host_.cycles, what_if.host_.cycles);
      EXPECT_GT(gone.stats().preemption_what_if_hits, what_if.stats().preemption_what_if_hits);
     }
    }
  }
  }
}

// A plugin process whose what-ifs of pods gone name a pod not on the node:
// each such list is dropped (a warning naming the field), the nodes are
// asked instead, and every step still decides as with no caches.
TEST(KeptVerdictsTest, AnInvalidWhatIfOfPodsGoneIsDroppedAndTheNodeAsked) {
  World bad(/*caches=*/true, /*dry_runs_in_cycles=*/true, 100, false, true, /*what_if_nodes=*/8, 24, false);
  bad.host_.what_ifs_gone = true;
  bad.host_.bad_gone = true;
  World off(/*caches=*/false, /*dry_runs_in_cycles=*/true, 100, false, true, 0, 24, false);
  const std::vector<Step> a = RunLaggingScript(bad, 2);
  const std::vector<Step> d = RunLaggingScript(off, 2);
  ASSERT_EQ(a.size(), d.size());
  for (size_t i = 0; i < d.size(); ++i) EXPECT_EQ(a[i], d[i]) << "step " << i;
  EXPECT_GT(bad.host_.gone_answered, 0);
  // Only then_gone (answered right) served nodes; the invalid lists none.
  World good(/*caches=*/true, /*dry_runs_in_cycles=*/true, 100, false, true, /*what_if_nodes=*/8, 24, false);
  good.host_.what_ifs_gone = true;
  RunLaggingScript(good, 2);
  EXPECT_LT(bad.stats().preemption_what_if_gone_nodes, good.stats().preemption_what_if_gone_nodes);
}

// A what-if of pods gone holds only while the node's nominations stand. A
// preemptor of 3 CPU is nominated to a node and its three victims start
// leaving; the next preemptors (2 CPU) ask that node ahead, once they have
// left, with the 3 CPU counted. Then its nomination is cleared (it was
// deleted, say): the next preemptor's narrowed cycle asks the node again
// and takes the room (2 CPU). When the victims have all left, the node is
// exactly as the earlier answer was asked, yet 1 CPU more is free: one
// victim now makes room where that answer found none. It must not be used:
// the next preemptor preempts one pod there, as with no caches.
TEST(KeptVerdictsTest, ANominationChangedWhileVictimsLeaveIsAskedAgain) {
  World gone(/*caches=*/true, /*dry_runs_in_cycles=*/true, 100, false, true, /*what_if_nodes=*/8, 6, false);
  gone.host_.what_ifs_gone = true;
  World off(/*caches=*/false, /*dry_runs_in_cycles=*/true, 100, false, true, 0, 6, false);
  auto script = [](World& w) {
    std::vector<Step> steps;
    const v1::Pod big = World::Pod("preemptor-big", 1000, 3000);
    steps.push_back(w.Schedule(big));
    for (int i = 1; i < 5; ++i) {
      if (i == 3) w.controller_.ClearNomination(big);
      if (i == 4) {
        for (const std::string& uid : steps.front().victims) w.Delete(uid);
      }
      steps.push_back(w.Schedule(World::Pod(absl::StrCat("preemptor-", i), 1000, 2000)));
    }
    return steps;
  };
  const std::vector<Step> a = script(gone);
  const std::vector<Step> d = script(off);
  ASSERT_EQ(a.size(), d.size());
  for (size_t i = 0; i < d.size(); ++i) EXPECT_EQ(a[i], d[i]) << "step " << i;
  const std::string node = d.front().nominated;
  ASSERT_FALSE(node.empty());
  ASSERT_EQ(d.front().victims.size(), 3u);
  // The node was asked ahead while the big preemptor was nominated there.
  EXPECT_TRUE(gone.host_.gone_asked.count(node)) << node;
  EXPECT_EQ(d[3].nominated, node);
  EXPECT_TRUE(d[3].victims.empty());
  EXPECT_EQ(d[4].nominated, node);
  EXPECT_EQ(d[4].victims.size(), 1u);
}

// A what-if holds for the node as it was asked. A preemptor (x) is
// nominated to a 6-CPU node whose six pods are the newest, two of them its
// victims; the next two go to the 4-CPU nodes, and the narrowed cycle of
// the second asks the big node ahead with one more preemptor nominated
// there, x's victims still on it. Then they leave (the node takes its
// what-if of pods gone), and the next preemptor is nominated to the big
// node, now the best again. The one after it must not take the what-if
// asked before x's victims left: counting them, it finds six victims there
// where four are left, and would go to a 4-CPU node; asked again it goes to
// the big node (four victims, the newest), as with no caches.
TEST(KeptVerdictsTest, AWhatIfAskedBeforeANodesVictimsLeftIsNotUsedAfter) {
  auto world = [](bool caches) {
    auto w = std::make_unique<World>(caches, /*dry_runs_in_cycles=*/true, 100, false, true,
                                     /*what_if_nodes=*/caches ? 8 : 0, /*num_nodes=*/2, false);
    w->host_.what_ifs_gone = caches;
    w->cache_.AddOrUpdateNode(World::Node(9, 6000));
    for (int p = 0; p < 6; ++p) {
      v1::Pod low = World::Pod(absl::StrCat("low-9-", p), 100, 1000);
      low.set_node_name(World::NodeName(9));
      low.set_start_time_us(2'000'000 + p * 1000);
      EXPECT_TRUE(w->cache_.AddOrUpdatePod(low).ok());
    }
    return w;
  };
  auto script = [](World& w) {
    std::vector<Step> steps;
    steps.push_back(w.Schedule(World::Pod("preemptor-x", 1000, 2000)));
    for (int i = 0; i < 4; ++i) {
      if (i == 2) {
        for (const std::string& uid : steps.front().victims) w.Delete(uid);
      }
      steps.push_back(w.Schedule(World::Pod(absl::StrCat("preemptor-", i), 1000, 2000)));
    }
    return steps;
  };
  std::unique_ptr<World> cached = world(true);
  std::unique_ptr<World> off = world(false);
  const std::vector<Step> a = script(*cached);
  const std::vector<Step> d = script(*off);
  ASSERT_EQ(a.size(), d.size());
  for (size_t i = 0; i < d.size(); ++i) EXPECT_EQ(a[i], d[i]) << "step " << i;
  // The shape the test is about.
  EXPECT_EQ(d[0].nominated, World::NodeName(9));
  EXPECT_NE(d[1].nominated, World::NodeName(9));
  EXPECT_NE(d[2].nominated, World::NodeName(9));
  EXPECT_EQ(d[3].nominated, World::NodeName(9));
  EXPECT_EQ(d[4].nominated, World::NodeName(9));
  EXPECT_GT(cached->stats().preemption_what_if_gone_nodes, 0u);
}

// Random clusters, in lockstep: 4 to 10 nodes of 4, 6 or 8 CPU full of
// priority-100 and -200 pods of 1 or 2 CPU created at random times, walks of
// 100 candidates or of 2 to 4, and a seeded script of preemptors (mostly 2
// CPU, some 1 or 3, so several signatures share nodes) with the API lagging
// at random: some steps delete one pending victim or all of the oldest
// preemption's, try again the preemptors whose victims are all gone (their
// second attempts, each carrying checks of the ones after it on their
// nominated nodes; bound when they fit, else waiting again), or clear the
// newest nomination. Seeds past 800 also label the pods into three groups
// with one or two PDBs over them, whose allowance changes at random; seeds
// past 1 200 vary the scheduler too (a second filter process, fingerprints
// instead of the change log, dry runs outside cycles, 2 what-ifs); seeds
// past 1 500 also resize nodes and add empty ones between preemptors, and
// past 1 800 a third of the preemptors are of priority 600 (they may take
// the low pods, not the others; nominated ones of 1 000 count against
// them, theirs do not against those of 1 000). Two
// worlds run each action, one with every cache, what-if (protocol 8) and
// nominated-node check, one with none: every step must decide alike.
//
// Seed 2 failed before a node that takes its what-if of pods gone dropped
// the chain's what-if for it; seed 799 before an unused prediction gave its
// offset back; seed 919 before a pick's what-if stopped asking the node
// once its victims have left when one of them spends a PDB's budget. Round
// 35 ran 3 000 seeds, 1 500 with the scheduler varied, 3 000 with second
// attempts, 5 000 with PDBs on 4 600 and 4 000 with everything, all alike.
// Seed 1 507 failed while walks drew their offsets from a generator: the
// offsets drawn ahead for the what-ifs were dropped when the node count
// changed, and the world with caches drew more than the other. Round 36
// ran 4 500 seeds with node changes and 4 000 with mixed priorities too:
// alike but for 31 and 24 ties.
struct RandomTotals {
  uint64_t hits = 0, gone_nodes = 0, check_hits = 0, second_bound = 0, ties = 0;
  int lies_told = 0, invalid_answers = 0;
};

void RunRandomClusters(uint32_t first_seed, uint32_t last_seed, FitProcess::Lie lie, RandomTotals& totals) {
  uint64_t& hits = totals.hits;
  uint64_t& gone_nodes = totals.gone_nodes;
  uint64_t& check_hits = totals.check_hits;
  uint64_t& second_bound = totals.second_bound;
  uint64_t& ties = totals.ties;
  for (uint32_t seed = first_seed; seed <= last_seed; ++seed) {
    SCOPED_TRACE(absl::StrCat("seed ", seed));
    std::mt19937 rng(seed);
    // Seeds past 800 add PDBs (their own generator: the first 800 stay as
    // they were found).
    const bool with_pdbs = seed > 800;
    // Seeds past 1 200 also vary the scheduler: a second filter process,
    // per-node fingerprints instead of the nominator's change log, dry runs
    // outside cycles, 2 what-ifs.
    const bool varied = seed > 1200;
    const bool node_changes = seed > 1500;
    const bool mixed_priorities = seed > 1800;
    const bool parity = varied && seed % 2 == 0;
    const bool change_log = !varied || seed % 5 != 0;
    const bool dry_runs_in_cycles = !varied || seed % 3 != 0;
    const uint32_t what_if_nodes = varied && seed % 4 == 1 ? 2 : 8;
    std::mt19937 pdb_rng(seed);
    auto pdb_pick = [&](int n) { return static_cast<int>(pdb_rng() % static_cast<uint32_t>(n)); };
    auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<uint32_t>(n)); };
    const int num_nodes = 4 + pick(7);
    const int min_candidates = pick(2) == 0 ? 100 : 2 + pick(3);
    struct Low {
      std::string name;
      int node;
      int32_t priority;
      int64_t cpu;
      int64_t start;
      int group = 0;  // Label group=g<n>, which PDBs select (with_pdbs).
    };
    std::vector<std::pair<int, int64_t>> nodes;  // id, cpu
    std::vector<Low> lows;
    for (int n = 0; n < num_nodes; ++n) {
      const int64_t cpu = 4000 + 2000 * pick(3);
      nodes.emplace_back(20 + n, cpu);
      for (int64_t used = 0, p = 0; used < cpu; ++p) {
        const int64_t c = std::min<int64_t>(cpu - used, 1000 * (1 + pick(2)));
        lows.push_back(Low{absl::StrCat("low-", 20 + n, "-", p), 20 + n, pick(3) == 0 ? 200 : 100, c,
                           3'000'000 + pick(100000) * 10});
        used += c;
      }
    }
    std::vector<v1::PodDisruptionBudget> pdbs;
    if (with_pdbs) {
      for (Low& l : lows) l.group = pdb_pick(3);
      for (int g = 0, n = 1 + pdb_pick(2); g < n; ++g) {
        v1::PodDisruptionBudget& pdb = pdbs.emplace_back();
        pdb.mutable_meta()->set_uid(absl::StrCat("uid-pdb-", g));
        pdb.mutable_meta()->set_namespace_("default");
        pdb.mutable_meta()->set_name(absl::StrCat("pdb-", g));
        pdb.mutable_meta()->set_resource_version("1");
        (*pdb.mutable_selector()->mutable_match_labels())["group"] = absl::StrCat("g", g);
        pdb.set_disruptions_allowed(pdb_pick(3));
      }
    }
    auto world = [&](bool caches) {
      auto w = std::make_unique<World>(caches, dry_runs_in_cycles, min_candidates, parity, change_log,
                                       /*what_if_nodes=*/caches ? what_if_nodes : 0, /*num_nodes=*/0, false);
      w->host_.what_ifs_gone = caches;
      w->host_.nominated_checks = caches;
      w->host_.lie = caches ? lie : FitProcess::Lie::kNone;
      for (const auto& [id, cpu] : nodes) w->cache_.AddOrUpdateNode(World::Node(id, cpu));
      for (const Low& l : lows) {
        v1::Pod low = World::Pod(l.name, l.priority, l.cpu);
        low.set_node_name(World::NodeName(l.node));
        low.set_start_time_us(l.start);
        if (with_pdbs) (*low.mutable_meta()->mutable_labels())["group"] = absl::StrCat("g", l.group);
        EXPECT_TRUE(w->cache_.AddOrUpdatePod(low).ok());
      }
      for (const v1::PodDisruptionBudget& pdb : pdbs) EXPECT_TRUE(w->cache_.AddOrUpdatePdb(pdb).ok());
      return w;
    };
    std::unique_ptr<World> cached = world(true);
    std::unique_ptr<World> off = world(false);
    std::deque<std::pair<v1::Pod, Step>> evicting;  // Nominated, oldest first.
    int preempted = 0;
    bool tied = false;
    auto present = [&](const std::string& uid) { return off->cache_.GetPod(uid) != nullptr; };
    for (int i = 0; i < 30; ++i) {
      const int action = pick(10);
      if (action == 0 && !evicting.empty()) {  // The oldest preemption's victims all leave.
        for (const std::string& uid : evicting.front().second.victims) {
          if (present(uid)) {
            cached->Delete(uid);
            off->Delete(uid);
          }
        }
      } else if (action <= 2 && !evicting.empty()) {  // One pending victim leaves.
        for (const auto& [pod, step] : evicting) {
          auto it = std::find_if(step.victims.begin(), step.victims.end(), present);
          if (it == step.victims.end()) continue;
          cached->Delete(*it);
          off->Delete(*it);
          break;
        }
      } else if (action == 3) {  // Preemptors whose victims are all gone try again, then bind.
        std::vector<std::pair<v1::Pod, std::string>> ready;  // Each with its nomination.
        for (auto it = evicting.begin(); it != evicting.end();) {
          if (std::any_of(it->second.victims.begin(), it->second.victims.end(), present)) {
            ++it;
            continue;
          }
          v1::Pod second = it->first;
          second.set_nominated_node_name(it->second.nominated);
          ready.emplace_back(std::move(second), it->second.nominated);
          it = evicting.erase(it);
        }
        for (size_t r = 0; r < ready.size(); ++r) {
          // The others after it in the queue: their checks ride in its request.
          std::vector<sdk::PodInfoPtr> later;
          for (size_t k = r + 2; k < ready.size(); ++k) later.push_back(sdk::PodInfo::Create(ready[k].first));
          sdk::PodInfoPtr next = r + 1 < ready.size() ? sdk::PodInfo::Create(ready[r + 1].first) : nullptr;
          const Step a = cached->Schedule(ready[r].first, next, later);
          const Step d = off->Schedule(ready[r].first, next, later);
          ASSERT_EQ(a, d) << "second attempt of " << ready[r].first.meta().name();
          if (!d.nominated.empty()) {  // Waits on the node's other nominees' victims: again later.
            evicting.emplace_back(ready[r].first, d);
            continue;
          }
          if (d.bound.empty()) continue;
          ++second_bound;
          cached->Bind(ready[r].first, d.bound);
          off->Bind(ready[r].first, d.bound);
        }
      } else if (action == 4 && !evicting.empty()) {  // The newest nomination is cleared.
        cached->controller_.ClearNomination(evicting.back().first);
        off->controller_.ClearNomination(evicting.back().first);
        evicting.pop_back();
      } else if (action == 5 && !pdbs.empty()) {  // A PDB's allowance changes.
        v1::PodDisruptionBudget& pdb = pdbs[static_cast<size_t>(pdb_pick(static_cast<int>(pdbs.size())))];
        pdb.set_disruptions_allowed(pdb_pick(3));
        pdb.mutable_meta()->set_resource_version(absl::StrCat(std::stoi(pdb.meta().resource_version()) + 1));
        EXPECT_TRUE(cached->cache_.AddOrUpdatePdb(pdb).ok());
        EXPECT_TRUE(off->cache_.AddOrUpdatePdb(pdb).ok());
      } else if (action == 6 && node_changes) {  // A node resized, or one more (empty) node.
        const bool grow = pdb_pick(4) == 0;
        const int id = grow ? 20 + static_cast<int>(nodes.size())
                            : nodes[static_cast<size_t>(pdb_pick(static_cast<int>(nodes.size())))].first;
        const int64_t new_cpu = 2000 + 2000 * pdb_pick(4);
        if (grow) nodes.emplace_back(id, new_cpu);
        cached->cache_.AddOrUpdateNode(World::Node(id, new_cpu));
        off->cache_.AddOrUpdateNode(World::Node(id, new_cpu));
      }
      const int64_t cpu = std::array<int64_t, 6>{2000, 2000, 2000, 2000, 1000, 3000}[pick(6)];
      const int32_t priority = mixed_priorities && pdb_pick(3) == 0 ? 600 : 1000;
      const v1::Pod pod = World::Pod(absl::StrCat("preemptor-", i), priority, cpu);
      const Step a = cached->Schedule(pod);
      const Step d = off->Schedule(pod);
      // A pod that fits on two nodes of equal score: with caches the
      // batcher breaks the tie with its own draws, without them the
      // framework with its own; either pick is kube-scheduler's (a uniform
      // choice among the best), but the worlds differ from here on.
      if (a != d && !a.bound.empty() && !d.bound.empty() &&
          off->ScoreOf(a.bound, cpu) == off->ScoreOf(d.bound, cpu)) {
        ++ties;
        tied = true;
        break;
      }
      ASSERT_EQ(a, d) << "step " << i << " (" << cpu << "m)";
      if (!d.nominated.empty()) {
        evicting.emplace_back(pod, d);
        ++preempted;
      }
    }
    EXPECT_TRUE(preempted > 0 || tied);
    totals.lies_told += cached->host_.lies_told;
    totals.invalid_answers += cached->host_.invalid_answers;
    hits += cached->stats().preemption_what_if_hits;
    gone_nodes += cached->stats().preemption_what_if_gone_nodes;
    check_hits += cached->stats().nominated_check_hits;
  }
}

TEST(KeptVerdictsTest, RandomClustersDecideAsNoCaches) {
  RandomTotals totals;
  RunRandomClusters(1, 2100, FitProcess::Lie::kNone, totals);
  // Ties end a script early, rarely: the steps compared are most of them.
  EXPECT_LT(totals.ties, 2100u / 20);
  // The caches were taken, not only asked.
  EXPECT_GT(totals.hits, 0u);
  EXPECT_GT(totals.gone_nodes, 0u);
  EXPECT_GT(totals.check_hits, 0u);
  EXPECT_GT(totals.second_bound, 0u);
}

// A plugin process's what-if answers are checked against the request as a
// dry run's are: their PDB violations are recounted from the request's
// order (a process that says 0 does not make a node look better), and a
// victim that was not a potential one (a pod of the preemptor's priority
// or higher) drops the whole list, counted as an invalid answer, so the
// scheduler asks those nodes instead. Every step still decides as with no
// caches; the seeds are the random test's with PDBs. Before the scheduler
// checked what-if answers, seed 802 nominated another node on a count of 0,
// and seed 829 evicted a bound preemptor of the pod's own priority.
TEST(KeptVerdictsTest, WhatIfAnswersThatLieDecideAsNoCaches) {
  RandomTotals miscounted;
  RunRandomClusters(801, 1100, FitProcess::Lie::kNoPdbViolations, miscounted);
  EXPECT_GT(miscounted.lies_told, 0);
  EXPECT_EQ(miscounted.invalid_answers, 0);
  EXPECT_GT(miscounted.hits, 0u);
  RandomTotals foreign;
  RunRandomClusters(801, 1100, FitProcess::Lie::kForeignVictim, foreign);
  EXPECT_GT(foreign.lies_told, 0);
  EXPECT_GT(foreign.invalid_answers, 0);
}

// Walks that stop early (3, 4 or 6 candidates of 12 to 40 nodes): where a
// walk stops, and so its pick, depends on whether the nodes changed or
// nominated to since are still candidates, which the request that asks the
// what-ifs cannot know yet; the what-ifs ask the picks for each case. With
// the starts in node order (as preempt-500 fills its nodes) the latest-start
// tie-break picks a walk's last candidate. Every world decides as the others
// at every step: the random offsets are drawn in the same order whether or
// not a cycle predicted its dry run, and a walk with no prediction takes the
// offset drawn for it.
TEST(KeptVerdictsTest, WhatIfsDecideAsNoCachesWhenWalksStopEarly) {
  for (int nodes : {12, 24, 40}) {
    for (int min_candidates : {3, 4, 6}) {
      for (bool ordered : {false, true}) {
        SCOPED_TRACE(absl::StrCat(nodes, " nodes, ", min_candidates, " candidates, ordered ", ordered));
        World what_if(/*caches=*/true, /*dry_runs_in_cycles=*/true, min_candidates, false, true,
                      /*what_if_nodes=*/8, nodes, ordered);
        World asked(/*caches=*/true, /*dry_runs_in_cycles=*/true, min_candidates, false, true, 0, nodes, ordered);
        World off(/*caches=*/false, /*dry_runs_in_cycles=*/true, min_candidates, false, true, 0, nodes, ordered);
        RunBurstsAlike(what_if, asked, off);
        const uint64_t hits = what_if.stats().preemption_what_if_hits;
        EXPECT_GT(hits, 0u);
        EXPECT_EQ(what_if.host_.cycles + static_cast<int>(hits), asked.host_.cycles);
      }
    }
  }
}

TEST(KeptVerdictsTest, CachesOnAndOffDecideTheSameWithTheStopRule) {
  // Three candidates are enough: the walk from the random offset stops
  // early, so kept and fresh outcomes meet in the stop rule. No dry run
  // rides in cycles: both worlds draw one offset per PostFilter.
  World on(/*caches=*/true, /*dry_runs_in_cycles=*/false, /*min_candidates=*/3);
  World off(/*caches=*/false, /*dry_runs_in_cycles=*/false, /*min_candidates=*/3);
  const std::vector<Step> with = RunScript(on);
  const std::vector<Step> without = RunScript(off);
  ASSERT_EQ(with.size(), without.size());
  for (size_t i = 0; i < with.size(); ++i) EXPECT_EQ(with[i], without[i]) << "preemptor-" << i;
  // The script covers what it claims: preemptions, a placement without one,
  // and preemptors that fit nowhere at the end.
  EXPECT_TRUE(std::any_of(with.begin(), with.end(), [](const Step& s) { return !s.victims.empty(); }));
  EXPECT_TRUE(std::any_of(with.begin(), with.end(), [](const Step& s) { return !s.bound.empty(); }));
  EXPECT_TRUE(with.back().nominated.empty() && with.back().bound.empty());
  // And the caches were used: kept failures served, fewer nodes filtered and dry-run.
  EXPECT_GT(on.stats().by_outcome["hit_unschedulable"], 10u);
  EXPECT_LT(on.host_.nodes_filtered, off.host_.nodes_filtered);
  EXPECT_LT(on.host_.nodes_dry_run, off.host_.nodes_dry_run);
}

TEST(KeptVerdictsTest, CachesOnAndOffDecideTheSameWithDryRunsInCycles) {
  // Every node is a candidate to look at (100 >= 12), so the offset does not
  // change the decision; the changed nodes' dry runs ride in the narrowed
  // cycles with the caches on, the first chunk's in the full cycles without.
  World on(/*caches=*/true, /*dry_runs_in_cycles=*/true, /*min_candidates=*/100);
  World off(/*caches=*/false, /*dry_runs_in_cycles=*/true, /*min_candidates=*/100);
  const std::vector<Step> with = RunScript(on);
  const std::vector<Step> without = RunScript(off);
  ASSERT_EQ(with.size(), without.size());
  for (size_t i = 0; i < with.size(); ++i) EXPECT_EQ(with[i], without[i]) << "preemptor-" << i;
  EXPECT_GT(on.stats().by_outcome["hit_unschedulable"], 10u);
  EXPECT_GT(on.host_.dry_runs_in_cycle, 0);
  EXPECT_LT(on.host_.nodes_dry_run, off.host_.nodes_dry_run);
}

TEST(KeptVerdictsTest, CachesOnAndOffDecideTheSameWithTwoFilterProcesses) {
  // Odd nodes are rejected by a second process: cycles fan out to both, and
  // each dry run's union of victims is confirmed with both.
  World on(/*caches=*/true, /*dry_runs_in_cycles=*/false, /*min_candidates=*/3, /*parity=*/true);
  World off(/*caches=*/false, /*dry_runs_in_cycles=*/false, /*min_candidates=*/3, /*parity=*/true);
  const std::vector<Step> with = RunScript(on);
  const std::vector<Step> without = RunScript(off);
  ASSERT_EQ(with.size(), without.size());
  for (size_t i = 0; i < with.size(); ++i) EXPECT_EQ(with[i], without[i]) << "preemptor-" << i;
  EXPECT_TRUE(std::any_of(with.begin(), with.end(), [](const Step& s) { return !s.victims.empty(); }));
  EXPECT_GT(on.stats().by_outcome["hit_unschedulable"], 10u);
  EXPECT_LT(on.host_.nodes_dry_run, off.host_.nodes_dry_run);
}

TEST(KeptVerdictsTest, CachesOnAndOffDecideTheSameWithFingerprintsInsteadOfTheChangeLog) {
  World on(/*caches=*/true, /*dry_runs_in_cycles=*/false, /*min_candidates=*/3, /*parity=*/false,
           /*change_log=*/false);
  World off(/*caches=*/false, /*dry_runs_in_cycles=*/false, /*min_candidates=*/3, /*parity=*/false,
            /*change_log=*/false);
  const std::vector<Step> with = RunScript(on);
  const std::vector<Step> without = RunScript(off);
  ASSERT_EQ(with.size(), without.size());
  for (size_t i = 0; i < with.size(); ++i) EXPECT_EQ(with[i], without[i]) << "preemptor-" << i;
  EXPECT_GT(on.stats().by_outcome["hit_unschedulable"], 10u);
  EXPECT_LT(on.host_.nodes_filtered, off.host_.nodes_filtered);
}

TEST(KeptVerdictsTest, EachChangeReasksTheDryRunOfExactlyItsNode) {
  // Every node is walked (100 candidates wanted of 12), no dry run rides in
  // cycles: each PostFilter's requests show which outcomes were not kept.
  World w(/*caches=*/true, /*dry_runs_in_cycles=*/false, /*min_candidates=*/100);
  int next = 0;
  std::vector<Step> steps;
  // Schedules a preemptor; returns the nodes its PostFilter dry-ran.
  auto preempt = [&] {
    const size_t before = w.host_.dry_run_requests.size();
    steps.push_back(w.Schedule(World::Pod(absl::StrCat("preemptor-", next++), 1000, 2000)));
    std::set<std::string> asked;
    for (size_t i = before; i < w.host_.dry_run_requests.size(); ++i) {
      asked.insert(w.host_.dry_run_requests[i].begin(), w.host_.dry_run_requests[i].end());
    }
    return asked;
  };
  auto all = [] {
    std::set<std::string> out;
    for (int n = 0; n < 12; ++n) out.insert(World::NodeName(n));
    return out;
  };
  // The profile's first pod is not kept; the second's failure is, and its
  // PostFilter asks (and keeps) every node.
  EXPECT_EQ(preempt(), all());
  EXPECT_EQ(preempt(), all());
  ASSERT_EQ(w.stats().by_outcome["miss_new"], 2u);
  // Its nomination: only that node is asked again (victims still there).
  const std::string first = steps.back().nominated;
  ASSERT_FALSE(first.empty());
  EXPECT_EQ(preempt(), std::set<std::string>{first});
  EXPECT_EQ(w.stats().by_outcome["hit_unschedulable"], 1u);
  const std::string second = steps.back().nominated;
  // A pod deleted by someone else on node-4 (not yet nominated to).
  ASSERT_NE(second, "node-4");
  ASSERT_NE(first, "node-4");
  w.Delete(absl::StrCat("uid-low-4-", 0));
  EXPECT_EQ(preempt(), (std::set<std::string>{second, "node-4"}));
  const std::string third = steps.back().nominated;
  // The first preemptor's nomination cleared.
  w.controller_.ClearNomination(World::Pod("preemptor-1", 1000, 2000));
  EXPECT_EQ(preempt(), (std::set<std::string>{third, first}));
  const std::string fourth = steps.back().nominated;
  // A node update that leaves it full: that node.
  const std::string grown = fourth == "node-9" ? "node-10" : "node-9";
  w.cache_.AddOrUpdateNode(World::Node(grown == "node-9" ? 9 : 10, 4500));
  EXPECT_EQ(preempt(), (std::set<std::string>{fourth, grown}));
  // A higher-priority pod nominated to node-11: counted by these pods there.
  const std::string fifth = steps.back().nominated;
  v1::Pod vip = World::Pod("vip", 2000, 100);
  w.nominator_.Nominate(sdk::PodInfo::Create(vip), "node-11");
  EXPECT_EQ(preempt(), (std::set<std::string>{fifth, "node-11"}));
  // A lower-priority one is not: only the last preemptor's node.
  const std::string sixth = steps.back().nominated;
  w.nominator_.Nominate(sdk::PodInfo::Create(World::Pod("low-nominee", 10, 100)), "node-8");
  EXPECT_EQ(preempt(), std::set<std::string>{sixth});
  // A PDB: every node again.
  v1::PodDisruptionBudget pdb;
  pdb.mutable_meta()->set_uid("uid-pdb");
  pdb.mutable_meta()->set_namespace_("default");
  pdb.mutable_meta()->set_name("pdb");
  (*pdb.mutable_selector()->mutable_match_labels())["app"] = "low-2";
  ASSERT_TRUE(w.cache_.AddOrUpdatePdb(pdb).ok());
  const std::set<std::string> after_pdb = preempt();
  EXPECT_EQ(w.stats().by_outcome["miss_invalidated"], 1u);
  for (const Step& s : steps) EXPECT_TRUE(s.bound.empty()) << s;
  // Every node that still has a victim to offer.
  EXPECT_GE(after_pdb.size(), 10u);
}

}  // namespace
}  // namespace podium::scheduler::preemption
