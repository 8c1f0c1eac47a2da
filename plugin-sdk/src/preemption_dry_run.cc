#include "preemption_dry_run.h"

#include <memory>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "session.h"

namespace podium::sdk::internal {
namespace {

struct Outcome {
  Status status;
  const std::string* plugin = nullptr;
};

class NodeDryRun {
 public:
  NodeDryRun(const PodInfo& pod, const std::vector<NamedFilter>& filters,
             const std::vector<NamedExtensions>& extensions,
             const std::vector<PodInfoPtr>& nominated)
      : pod_(pod), filters_(filters), extensions_(extensions), nominated_(nominated) {}

  Outcome Remove(CycleState& state, NodeInfo& node, const PodInfo& victim) {
    node.RemovePod(victim.uid());
    for (const NamedExtensions& ext : extensions_) {
      Status s = ext.extensions->RemovePod(state, pod_, victim, node);
      if (!s.IsSuccess()) return {Status(Code::kError, s.reasons()), ext.name};
    }
    return {};
  }
  Outcome Add(CycleState& state, NodeInfo& node, const PodInfoPtr& pod) {
    node.AddPod(pod);
    for (const NamedExtensions& ext : extensions_) {
      Status s = ext.extensions->AddPod(state, pod_, *pod, node);
      if (!s.IsSuccess()) return {Status(Code::kError, s.reasons()), ext.name};
    }
    return {};
  }
  Outcome Filter(CycleState& state, const NodeInfo& node) {
    for (const NamedFilter& f : filters_) {
      Status s = f.plugin->Filter(state, pod_, node);
      if (!s.IsSuccess()) {
        if (!s.IsRejected()) s = Status(Code::kError, s.reasons());
        return {std::move(s), f.name};
      }
    }
    return {};
  }
  // RunFilterPluginsWithNominatedPods: with the nominated pods of this node
  // (priority >= the pod's) added, then without them. kube-scheduler adds
  // them to copies of the node and the state; here they are added to the
  // candidate's own node and state and taken out again (RemovePod undoes
  // AddPod), so no copy is made per evaluation.
  Outcome Fits(CycleState& state, NodeInfo& node) {
    if (!nominated_.empty()) {
      added_.clear();
      Outcome failed;
      for (const PodInfoPtr& other : nominated_) {
        if (other->uid() == pod_.uid() || other->pod->priority() < pod_.pod->priority() ||
            node.FindPod(other->uid()) != nullptr) {
          continue;
        }
        added_.push_back(&other);
        Outcome o = Add(state, node, other);
        if (o.plugin != nullptr) {
          broken_ = o;
          break;
        }
      }
      if (broken_.plugin == nullptr && !added_.empty()) failed = Filter(state, node);
      for (auto it = added_.rbegin(); it != added_.rend(); ++it) {
        Outcome removed = Remove(state, node, ***it);
        if (removed.plugin != nullptr && broken_.plugin == nullptr) broken_ = removed;
      }
      if (broken_.plugin != nullptr) return broken_;
      if (failed.plugin != nullptr) return failed;
    }
    return Filter(state, node);
  }
  // An extension failed while nominated pods were added or taken out: the
  // state may not be what it was, so the node's evaluation ends in this error.
  const Outcome& broken() const { return broken_; }

 private:
  const PodInfo& pod_;
  const std::vector<NamedFilter>& filters_;
  const std::vector<NamedExtensions>& extensions_;
  const std::vector<PodInfoPtr>& nominated_;
  std::vector<const PodInfoPtr*> added_;
  Outcome broken_;
};

// The pod with that uid on the node, or null.
PodInfoPtr PodOn(const NodeInfo& node, const std::string& uid) {
  for (const PodInfoPtr& p : node.pods()) {
    if (p->uid() == uid) return p;
  }
  return nullptr;
}

void WriteOutcome(const Outcome& o, v1::Status* out) {
  if (o.plugin == nullptr) {
    out->set_code(v1::Status::SUCCESS);
    return;
  }
  out->set_code(static_cast<v1::Status::Code>(static_cast<int>(o.status.code())));
  for (const auto& r : o.status.reasons()) out->add_reasons(r);
  out->set_plugin(*o.plugin);
}

}  // namespace

absl::Status RunPreemptionDryRun(v1::PreemptionDryRunRequest& request, const Mirror& mirror,
                                 CycleState& base, const PodInfo& pod,
                                 const std::vector<NamedFilter>& filters,
                                 const std::vector<NamedExtensions>& extensions,
                                 v1::PreemptionDryRunResponse& out) {
  absl::flat_hash_map<uint32_t, std::vector<PodInfoPtr>> nominated;
  for (int i = 0; i < request.nominated_pods_size(); ++i) {
    v1::MirroredPod& m = *request.mutable_nominated_pods(i);
    nominated[m.node_id()].push_back(PodInfo::Create(std::move(*m.mutable_pod())));
  }
  static const std::vector<PodInfoPtr> kNone;
  // Nominated pods ride in the request, or the mirror keeps them.
  auto nominated_on = [&](uint32_t node_id, const NodeInfo& node) -> const std::vector<PodInfoPtr>& {
    if (request.nominated_pods_size() == 0) {
      const std::vector<PodInfoPtr>* on_node = mirror.NominatedPodsOn(node.name());
      return on_node == nullptr ? kNone : *on_node;
    }
    auto nom = nominated.find(node_id);
    return nom == nominated.end() ? kNone : nom->second;
  };
  auto node_of = [&](const v1::PreemptionDryRunRequest::Candidate& candidate, const char* field,
                     int c) -> absl::StatusOr<const NodeInfo*> {
    const NodeInfo* mirrored = mirror.GetById(candidate.node_id());
    if (mirrored == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("preemption_dry_run.", field, "[", c,
                                                     "].node_id: unknown node id ", candidate.node_id()));
    }
    return mirrored;
  };
  // The state one node's evaluation may write: only extensions (AddPod/
  // RemovePod) write it, so without one the cycle's state is read as it is,
  // with no clone per node; with one, a clone kept alive in `clone`.
  auto state_for = [&](std::unique_ptr<CycleState>& clone, CycleState& from) -> CycleState& {
    if (extensions.empty()) return from;
    clone = from.Clone();
    return *clone;
  };
  // One candidate, as SelectVictimsOnNode: every potential victim removed, a
  // fit check (counting `on_node`), then the reprieve in the order given.
  // `mirrored` and `from`: the node and the cycle's state it starts from.
  auto evaluate = [&](const v1::PreemptionDryRunRequest::Candidate& candidate, const char* field, int c,
                      const NodeInfo& mirrored, const std::vector<PodInfoPtr>& on_node, CycleState& from,
                      v1::NodeVictims& result) -> absl::Status {
    NodeDryRun run(pod, filters, extensions, on_node);
    NodeInfo node = mirrored;
    std::unique_ptr<CycleState> clone;
    CycleState* state = &state_for(clone, from);
    result.set_node_id(candidate.node_id());

    // Remove every potential victim.
    std::vector<PodInfoPtr> potential;
    potential.reserve(candidate.potential_victims_size());
    Outcome failed;
    // A bound pod (spec.nodeName set) is here for its deferred in-place resize
    // (KEP-5836), on its own node: what it holds now leaves the node first; it
    // is then evaluated with its spec's (resized) requests, never a victim.
    if (!pod.pod->node_name().empty() && pod.pod->node_name() == node.name()) {
      const PodInfoPtr itself = PodOn(node, pod.uid());
      if (itself != nullptr) failed = run.Remove(*state, node, *itself);
    }
    for (int v = 0; v < candidate.potential_victims_size(); ++v) {
      const std::string& uid = candidate.potential_victims(v);
      const PodInfoPtr victim = PodOn(node, uid);
      if (victim == nullptr) {
        return absl::InvalidArgumentError(absl::StrCat("preemption_dry_run.", field, "[", c,
                                                       "].potential_victims[", v, "]: pod ", uid,
                                                       " is not on node ", node.name()));
      }
      potential.push_back(victim);
      if (failed.plugin == nullptr) failed = run.Remove(*state, node, *victim);
    }
    if (failed.plugin == nullptr) failed = run.Fits(*state, node);
    if (failed.plugin != nullptr) {
      WriteOutcome(failed, result.mutable_status());
      return absl::OkStatus();
    }
    // Reprieve in the order given: a pod goes back when the pod still fits.
    const size_t num_violating = candidate.num_pdb_violating();
    uint32_t violations = 0;
    for (size_t v = 0; v < potential.size(); ++v) {
      bool reprieved = false;
      if (!request.no_reprieve()) {
        Outcome added = run.Add(*state, node, potential[v]);
        reprieved = added.plugin == nullptr && run.Fits(*state, node).plugin == nullptr;
        if (!reprieved) {
          Outcome removed = run.Remove(*state, node, *potential[v]);
          if (removed.plugin != nullptr) {
            failed = removed;
            break;
          }
        }
      }
      if (!reprieved) {
        result.add_victims(potential[v]->uid());
        if (v < num_violating) ++violations;
      }
    }
    if (failed.plugin == nullptr && run.broken().plugin != nullptr) failed = run.broken();
    if (failed.plugin != nullptr) {
      result.clear_victims();
      WriteOutcome(failed, result.mutable_status());
      return absl::OkStatus();
    }
    result.set_num_pdb_violations(violations);
    result.mutable_status()->set_code(v1::Status::SUCCESS);
    return absl::OkStatus();
  };

  // A node once the pods in `gone` have left it, as their deletions would
  // leave it (RemovePod extensions run): Filter counting `on_node`, and when
  // the pod does not fit and potential victims are left, the dry run over
  // them (none of them gone).
  auto evaluate_gone = [&](const v1::PreemptionDryRunRequest::Candidate& candidate, const char* field, int c,
                           const NodeInfo& mirrored, const std::vector<PodInfoPtr>& on_node,
                           v1::WhatIfNominated& result) -> absl::Status {
    if (candidate.gone_size() == 0) {
      return absl::InvalidArgumentError(absl::StrCat("preemption_dry_run.", field, "[", c, "].gone: empty"));
    }
    NodeInfo node = mirrored;
    std::unique_ptr<CycleState> clone;
    CycleState& state = state_for(clone, base);
    NodeDryRun run(pod, filters, extensions, on_node);
    result.set_node_id(candidate.node_id());
    Outcome failed;
    for (int g = 0; g < candidate.gone_size(); ++g) {
      const std::string& uid = candidate.gone(g);
      const PodInfoPtr leaving = PodOn(node, uid);
      if (leaving == nullptr) {
        return absl::InvalidArgumentError(absl::StrCat("preemption_dry_run.", field, "[", c, "].gone[", g,
                                                       "]: pod ", uid, " is not on node ", node.name()));
      }
      result.add_gone(uid);
      if (failed.plugin == nullptr) failed = run.Remove(state, node, *leaving);
    }
    if (failed.plugin == nullptr) failed = run.Fits(state, node);
    if (failed.plugin == nullptr && run.broken().plugin != nullptr) failed = run.broken();
    WriteOutcome(failed, result.mutable_filter());
    // No potential victim left: no candidate, no dry run (as PostFilter
    // would skip the node).
    if (failed.plugin == nullptr || !failed.status.IsRejected() || candidate.potential_victims_size() == 0) {
      return absl::OkStatus();
    }
    return evaluate(candidate, field, c, node, on_node, state, *result.mutable_dry_run());
  };

  const uint32_t want = request.num_candidates();
  uint32_t non_violating = 0, violating = 0;
  for (int c = 0; c < request.candidates_size(); ++c) {
    if (want > 0 && non_violating > 0 && non_violating + violating >= want) break;
    const auto& candidate = request.candidates(c);
    absl::StatusOr<const NodeInfo*> mirrored = node_of(candidate, "candidates", c);
    if (!mirrored.ok()) return mirrored.status();
    v1::NodeVictims& result = *out.add_nodes();
    if (absl::Status s = evaluate(candidate, "candidates", c, **mirrored,
                                  nominated_on(candidate.node_id(), **mirrored), base, result);
        !s.ok()) {
      return s;
    }
    if (result.status().code() == v1::Status::SUCCESS && result.victims_size() > 0) {
      ++(result.num_pdb_violations() == 0 ? non_violating : violating);
    }
  }

  // What-ifs (protocol version 7): each node with a copy of the pod
  // nominated there, counted with the node's nominations (its priority is
  // the pod's, so it counts).
  if (request.what_if_size() > 0) {
    if (request.what_if_copy_uid().empty() || request.what_if_copy_uid() == pod.uid()) {
      return absl::InvalidArgumentError(
          "preemption_dry_run.what_if_copy_uid: must be set, and differ from the pod's uid");
    }
    v1::Pod copy = *pod.pod;
    copy.mutable_meta()->set_uid(request.what_if_copy_uid());
    copy.clear_node_name();
    const PodInfoPtr copy_info = PodInfo::Create(std::move(copy));
    std::vector<PodInfoPtr> with_copy;
    for (int c = 0; c < request.what_if_size(); ++c) {
      const auto& candidate = request.what_if(c);
      absl::StatusOr<const NodeInfo*> mirrored = node_of(candidate, "what_if", c);
      if (!mirrored.ok()) return mirrored.status();
      with_copy = nominated_on(candidate.node_id(), **mirrored);
      with_copy.push_back(copy_info);
      v1::WhatIfNominated& result = *out.add_what_if();
      result.set_node_id(candidate.node_id());
      // Filter with the copy counted, on the node as it is.
      {
        NodeDryRun run(pod, filters, extensions, with_copy);
        NodeInfo node = **mirrored;
        std::unique_ptr<CycleState> clone;
        const Outcome fits = run.Fits(state_for(clone, base), node);
        WriteOutcome(fits, result.mutable_filter());
        if (result.filter().code() == v1::Status::SUCCESS) continue;
      }
      if (absl::Status s =
              evaluate(candidate, "what_if", c, **mirrored, with_copy, base, *result.mutable_dry_run());
          !s.ok()) {
        return s;
      }
      // Protocol version 8: then the pods in `gone` gone (the victims the
      // copy would take), the copy still nominated.
      if (candidate.gone_size() == 0) continue;
      v1::PreemptionDryRunRequest::Candidate after;
      after.set_node_id(candidate.node_id());
      *after.mutable_gone() = candidate.gone();
      const absl::flat_hash_set<std::string> gone(candidate.gone().begin(), candidate.gone().end());
      uint32_t violating = 0;
      for (int v = 0; v < candidate.potential_victims_size(); ++v) {
        const std::string& uid = candidate.potential_victims(v);
        if (gone.contains(uid)) continue;
        after.add_potential_victims(uid);
        if (static_cast<uint32_t>(v) < candidate.num_pdb_violating()) ++violating;
      }
      after.set_num_pdb_violating(violating);
      if (absl::Status s = evaluate_gone(after, "what_if", c, **mirrored, with_copy, *result.mutable_then_gone());
          !s.ok()) {
        return s;
      }
    }
  }

  // What-ifs (protocol version 8): each node once the pods in `gone` have
  // left it, as their deletions would leave it (RemovePod extensions run),
  // counted with the node's nominations as they are.
  for (int c = 0; c < request.what_if_gone_size(); ++c) {
    const auto& candidate = request.what_if_gone(c);
    absl::StatusOr<const NodeInfo*> mirrored = node_of(candidate, "what_if_gone", c);
    if (!mirrored.ok()) return mirrored.status();
    if (absl::Status s = evaluate_gone(candidate, "what_if_gone", c, **mirrored,
                                       nominated_on(candidate.node_id(), **mirrored), *out.add_what_if_gone());
        !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

}  // namespace podium::sdk::internal

// ------------------------------------------------------------------ Session

namespace podium::sdk::internal {

absl::Status Session::RunPreemptionDryRun(v1::PreemptionDryRunRequest& request,
                                          v1::PreemptionDryRunResponse& out) {
  const PodInfoPtr pod = PodInfo::Create(std::move(*request.mutable_pod()));
  return RunPreemptionDryRun(request, pod, out);
}

absl::Status Session::RunPreemptionDryRun(v1::PreemptionDryRunRequest& request, const PodInfoPtr& pod,
                                          v1::PreemptionDryRunResponse& out) {
  auto pre_filters = Resolve(request.pre_filter_plugins(), ExtensionPointKind::kPreFilter,
                             "preemption_dry_run.pre_filter_plugins", *pod->pod);
  if (!pre_filters.ok()) return pre_filters.status();
  auto filters = Resolve(request.filter_plugins(), ExtensionPointKind::kFilter,
                         "preemption_dry_run.filter_plugins", *pod->pod);
  if (!filters.ok()) return filters.status();

  // The cycle's state after PreFilter; without it (the cycle ran elsewhere, or
  // its state was dropped) run PreFilter here, as the cycle would have.
  CycleState* base = runner_.FindState(request.cycle_id());
  std::unique_ptr<CycleState> fresh;
  if (base == nullptr) {
    fresh = std::make_unique<CycleState>();
    for (PluginInstance* plugin : **pre_filters) {
      auto [result, status] = plugin->pre_filter->PreFilter(*fresh, *pod, mirror_);
      if (status.IsSkip()) {
        fresh->skip_filter_plugins().insert(plugin->name);
      } else if (!status.IsSuccess() && status.code() != Code::kUnschedulable) {
        // No node can help: every candidate fails with this status. (A plain
        // Unschedulable is what preemption may resolve: the filters decide,
        // as they do with the cycle's state.)
        for (const auto& candidate : request.candidates()) {
          v1::NodeVictims& node = *out.add_nodes();
          node.set_node_id(candidate.node_id());
          v1::Status& s = *node.mutable_status();
          s.set_code(status.IsRejected() ? static_cast<v1::Status::Code>(static_cast<int>(status.code()))
                                         : v1::Status::ERROR);
          for (const auto& r : status.reasons()) s.add_reasons(r);
          s.set_plugin(plugin->name);
        }
        return absl::OkStatus();
      }
    }
    base = fresh.get();
  }
  std::vector<NamedFilter> active_filters;
  const auto& skipped = base->skip_filter_plugins();
  for (PluginInstance* plugin : **filters) {
    if (!skipped.contains(plugin->name)) active_filters.push_back({&plugin->name, plugin->filter});
  }
  std::vector<NamedExtensions> extensions;
  for (PluginInstance* plugin : **pre_filters) {
    if (skipped.contains(plugin->name)) continue;
    if (PreFilterExtensions* ext = plugin->pre_filter->Extensions()) {
      extensions.push_back({&plugin->name, ext});
    }
  }
  return internal::RunPreemptionDryRun(request, mirror_, *base, *pod, active_filters, extensions, out);
}

}  // namespace podium::sdk::internal
