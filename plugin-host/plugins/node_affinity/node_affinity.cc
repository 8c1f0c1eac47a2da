#include "plugins/node_affinity/node_affinity.h"

#include "plugins/helper/args.h"
#include "plugins/helper/events.h"
#include "plugins/helper/normalize.h"

namespace podium::plugins {
namespace {

constexpr std::string_view kPreFilterStateKey = "PreFilterNodeAffinity";
constexpr std::string_view kPreScoreStateKey = "PreScoreNodeAffinity";

struct PreFilterState : sdk::StateData {
  RequiredNodeAffinity required;
  std::unique_ptr<sdk::StateData> Clone() const override {
    return std::make_unique<PreFilterState>(*this);
  }
};

struct PreScoreState : sdk::StateData {
  CompiledPreferredTerms preferred;
  std::unique_ptr<sdk::StateData> Clone() const override {
    return std::make_unique<PreScoreState>(*this);
  }
};

const google::protobuf::RepeatedPtrField<v1::PreferredSchedulingTerm>* PodPreferredTerms(
    const v1::Pod& pod) {
  if (!pod.has_affinity() || !pod.affinity().has_node_affinity()) return nullptr;
  const auto& terms = pod.affinity().node_affinity().preferred();
  return terms.empty() ? nullptr : &terms;
}

CompiledPreferredTerms CompilePodPreferred(const v1::Pod& pod) {
  const auto* terms = PodPreferredTerms(pod);
  if (terms == nullptr) return CompiledPreferredTerms();
  return CompiledPreferredTerms::Compile(*terms);
}

}  // namespace

absl::StatusOr<sdk::PluginPtr> NodeAffinity::New(const boost::json::object& args, sdk::Handle&) {
  if (absl::Status s = CheckKnownFields(args, kName, "", {"addedAffinity"}); !s.ok()) return s;
  std::shared_ptr<const CompiledNodeSelector> required;
  CompiledPreferredTerms preferred;
  if (const boost::json::value* added = args.if_contains("addedAffinity")) {
    const boost::json::object* o;
    if (absl::Status s = ReadObject(*added, kName, "addedAffinity", &o); !s.ok()) return s;
    constexpr std::string_view kRequired = "requiredDuringSchedulingIgnoredDuringExecution";
    constexpr std::string_view kPreferred = "preferredDuringSchedulingIgnoredDuringExecution";
    if (absl::Status s = CheckKnownFields(*o, kName, "addedAffinity", {kRequired, kPreferred});
        !s.ok()) {
      return s;
    }
    if (const boost::json::value* r = o->if_contains(kRequired)) {
      const std::string path = JoinPath("addedAffinity", kRequired);
      v1::NodeSelector selector;
      if (absl::Status s = ReadNodeSelector(*r, kName, path, &selector); !s.ok()) return s;
      auto compiled =
          std::make_shared<CompiledNodeSelector>(CompiledNodeSelector::Compile(selector, path));
      if (absl::Status s = compiled->error(); !s.ok())
        return ArgsError(kName, "", std::string(s.message()));
      required = std::move(compiled);
    }
    if (const boost::json::value* p = o->if_contains(kPreferred)) {
      const std::string path = JoinPath("addedAffinity", kPreferred);
      google::protobuf::RepeatedPtrField<v1::PreferredSchedulingTerm> terms;
      if (absl::Status s = ReadPreferredSchedulingTerms(*p, kName, path, &terms); !s.ok()) return s;
      preferred = CompiledPreferredTerms::Compile(terms, path);
      if (absl::Status s = preferred.error(); !s.ok())
        return ArgsError(kName, "", std::string(s.message()));
    }
  }
  return std::make_unique<NodeAffinity>(std::move(required), std::move(preferred));
}

std::pair<sdk::PreFilterResult, sdk::Status> NodeAffinity::PreFilter(sdk::CycleState& state,
                                                                     const sdk::PodInfo& pod_info,
                                                                     const sdk::Snapshot&) {
  const v1::Pod& pod = *pod_info.pod;
  const bool has_required = pod.has_affinity() && pod.affinity().has_node_affinity() &&
                            pod.affinity().node_affinity().has_required();
  if (!has_required && added_required_ == nullptr && pod.node_selector().empty()) {
    return {sdk::PreFilterResult{}, sdk::Status(sdk::Code::kSkip)};
  }
  auto s = std::make_unique<PreFilterState>();
  s->required = RequiredNodeAffinity::ForPod(pod);
  state.Write(std::string(kPreFilterStateKey), std::move(s));
  if (!has_required || pod.affinity().node_affinity().required().terms().empty()) {
    return {sdk::PreFilterResult{}, sdk::Status::Success()};
  }

  // Terms are ORed: the pod can only go to named nodes when every term names
  // nodes (metadata.name In ...); a term's name requirements are ANDed.
  std::optional<absl::flat_hash_set<std::string>> node_names;
  for (const v1::NodeSelectorTerm& term : pod.affinity().node_affinity().required().terms()) {
    std::optional<absl::flat_hash_set<std::string>> term_names;
    for (const v1::NodeSelectorRequirement& r : term.match_fields()) {
      if (r.key() != "metadata.name" || r.operator_() != v1::NodeSelectorRequirement::IN) continue;
      absl::flat_hash_set<std::string> values(r.values().begin(), r.values().end());
      if (!term_names.has_value()) {
        term_names = std::move(values);
      } else {
        for (auto it = term_names->begin(); it != term_names->end();) {
          if (!values.contains(*it)) {
            term_names->erase(it++);
          } else {
            ++it;
          }
        }
      }
    }
    if (!term_names.has_value()) return {sdk::PreFilterResult{}, sdk::Status::Success()};
    if (!node_names.has_value()) node_names.emplace();
    node_names->insert(term_names->begin(), term_names->end());
  }
  if (node_names.has_value() && node_names->empty()) {
    return {sdk::PreFilterResult{},
            sdk::Status(sdk::Code::kUnschedulableAndUnresolvable, std::string(kReasonConflict))};
  }
  sdk::PreFilterResult result;
  result.node_names = std::move(node_names);
  return {std::move(result), sdk::Status::Success()};
}

sdk::Status NodeAffinity::Filter(sdk::CycleState& state, const sdk::PodInfo& pod,
                                 const sdk::NodeInfo& node) {
  if (added_required_ != nullptr && !added_required_->Matches(node.node())) {
    return sdk::Status(sdk::Code::kUnschedulableAndUnresolvable, std::string(kReasonEnforced));
  }
  bool match;
  if (const auto* s = state.ReadAs<PreFilterState>(kPreFilterStateKey)) {
    match = s->required.Matches(node.node());
  } else {
    // PreFilter skipped (nothing to check) or not run.
    match = RequiredNodeAffinity::ForPod(*pod.pod).Matches(node.node());
  }
  if (match) return sdk::Status::Success();
  return sdk::Status(sdk::Code::kUnschedulableAndUnresolvable, std::string(kReasonPod));
}

sdk::Status NodeAffinity::PreScore(sdk::CycleState& state, const sdk::PodInfo& pod,
                                   const std::vector<const sdk::NodeInfo*>& nodes) {
  if (nodes.empty()) return sdk::Status::Success();
  CompiledPreferredTerms preferred = CompilePodPreferred(*pod.pod);
  if (preferred.empty() && added_preferred_.empty()) return sdk::Status(sdk::Code::kSkip);
  auto s = std::make_unique<PreScoreState>();
  s->preferred = std::move(preferred);
  state.Write(std::string(kPreScoreStateKey), std::move(s));
  return sdk::Status::Success();
}

std::pair<int64_t, sdk::Status> NodeAffinity::Score(sdk::CycleState& state, const sdk::PodInfo& pod,
                                                    const sdk::NodeInfo& node) {
  int64_t score = added_preferred_.Score(node.node());
  if (const auto* s = state.ReadAs<PreScoreState>(kPreScoreStateKey)) {
    score += s->preferred.Score(node.node());
  } else {
    score += CompilePodPreferred(*pod.pod).Score(node.node());
  }
  return {score, sdk::Status::Success()};
}

sdk::Status NodeAffinity::NormalizeScore(sdk::CycleState&, const sdk::PodInfo&,
                                         std::vector<sdk::NodeScore>& scores) {
  DefaultNormalizeScore(sdk::kMaxNodeScore, /*reverse=*/false, scores);
  return sdk::Status::Success();
}

std::vector<sdk::ClusterEventWithHint> NodeAffinity::EventsToRegister() const {
  std::shared_ptr<const CompiledNodeSelector> added = added_required_;
  return {{v1::NODE, Actions(v1::ADD, v1::UPDATE_NODE_LABEL),
           [added](const v1::Pod& pod, const v1::ClusterEvent& e) {
             const v1::Node* now = NewNode(e);
             if (now == nullptr) return sdk::QueueingHint::kQueue;
             if (added != nullptr && !added->Matches(*now)) return sdk::QueueingHint::kQueueSkip;
             RequiredNodeAffinity required = RequiredNodeAffinity::ForPod(pod);
             if (!required.Matches(*now)) return sdk::QueueingHint::kQueueSkip;
             // Already matching before the update: this node was not why the
             // pod failed.
             const v1::Node* before = OldNode(e);
             if (before != nullptr && required.Matches(*before) &&
                 (added == nullptr || added->Matches(*before))) {
               return sdk::QueueingHint::kQueueSkip;
             }
             return sdk::QueueingHint::kQueue;
           }}};
}

}  // namespace podium::plugins
