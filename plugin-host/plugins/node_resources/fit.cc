#include "plugins/node_resources/fit.h"

#include <algorithm>
#include <cmath>

#include "boost/json/array.hpp"
#include "plugins/helper/args.h"
#include "plugins/helper/events.h"
#include "plugins/helper/str.h"

namespace podium::plugins {
namespace {

constexpr std::string_view kPreFilterStateKey = "PreFilterNodeResourcesFit";
constexpr std::string_view kPreScoreStateKey = "PreScoreNodeResourcesFit";
constexpr int64_t kMaxUtilization = 100;
constexpr int64_t kMaxCustomPriorityScore = 10;

// The pod's requests as Filter checks them: scalars it requests (non-zero, not
// ignored), in name order so reasons come out stable.
struct PreFilterState : sdk::StateData {
  int64_t milli_cpu = 0;
  int64_t memory = 0;
  int64_t ephemeral_storage = 0;
  std::vector<std::pair<std::string, int64_t>> scalars;
  std::unique_ptr<sdk::StateData> Clone() const override {
    return std::make_unique<PreFilterState>(*this);
  }
};

struct PreScoreState : sdk::StateData {
  PodRequestList pod_requests;
  std::unique_ptr<sdk::StateData> Clone() const override {
    return std::make_unique<PreScoreState>(*this);
  }
};

// v1helper.IsExtendedResourceName: a domain-prefixed name outside
// kubernetes.io (hugepages-*, attachable-volumes-* are native, not extended).
bool IsExtendedResourceName(std::string_view name) {
  if (name.find('/') == std::string_view::npos) return false;
  if (name.find("kubernetes.io/") != std::string_view::npos) return false;
  return name.substr(0, 9) != "requests.";
}

PreFilterState ComputeRequests(const sdk::PodInfo& pod, const FitArgs& args) {
  PreFilterState s;
  s.milli_cpu = pod.requests.milli_cpu;
  s.memory = pod.requests.memory;
  s.ephemeral_storage = pod.requests.ephemeral_storage;
  for (const auto& [name, value] : pod.requests.scalar) {
    if (value == 0) continue;
    if (IsExtendedResourceName(name)) {
      if (args.ignored_resources.contains(name)) continue;
      if (!args.ignored_resource_groups.empty()) {
        std::string_view group = std::string_view(name).substr(0, name.find('/'));
        if (args.ignored_resource_groups.contains(absl::string_view(group.data(), group.size()))) {
          continue;
        }
      }
    }
    s.scalars.emplace_back(name, value);
  }
  std::sort(s.scalars.begin(), s.scalars.end());
  return s;
}

// fitsRequest. With `reasons` null, stops at the first shortfall.
bool Fits(const PreFilterState& req, const sdk::Resource& allocatable,
          const sdk::Resource& requested, int64_t num_pods, std::vector<std::string>* reasons) {
  bool fits = true;
  auto fail = [&](std::string reason) {
    fits = false;
    if (reasons != nullptr) reasons->push_back(std::move(reason));
    return reasons == nullptr;  // true: stop.
  };
  if (num_pods + 1 > allocatable.allowed_pod_number && fail("Too many pods")) return false;
  if (req.milli_cpu > 0 && req.milli_cpu > allocatable.milli_cpu - requested.milli_cpu &&
      fail("Insufficient cpu")) {
    return false;
  }
  if (req.memory > 0 && req.memory > allocatable.memory - requested.memory &&
      fail("Insufficient memory")) {
    return false;
  }
  if (req.ephemeral_storage > 0 &&
      req.ephemeral_storage > allocatable.ephemeral_storage - requested.ephemeral_storage &&
      fail("Insufficient ephemeral-storage")) {
    return false;
  }
  for (const auto& [name, value] : req.scalars) {
    auto a = allocatable.scalar.find(name);
    auto r = requested.scalar.find(name);
    const int64_t free = (a == allocatable.scalar.end() ? 0 : a->second) -
                         (r == requested.scalar.end() ? 0 : r->second);
    if (value > free && fail(Cat("Insufficient ", name))) return false;
  }
  return fits;
}

int64_t LeastRequestedScore(int64_t requested, int64_t capacity) {
  if (capacity == 0 || requested > capacity) return 0;
  return (capacity - requested) * sdk::kMaxNodeScore / capacity;
}

int64_t MostRequestedScore(int64_t requested, int64_t capacity) {
  if (capacity == 0) return 0;
  // Requests can exceed capacity because pods that request nothing count
  // with the non-zero defaults.
  requested = std::min(requested, capacity);
  return requested * sdk::kMaxNodeScore / capacity;
}

// helper.BuildBrokenLinearFunction over the (scaled) shape.
int64_t BrokenLinear(const std::vector<FitArgs::ShapePoint>& shape, int64_t p) {
  for (size_t i = 0; i < shape.size(); ++i) {
    if (p <= shape[i].utilization) {
      if (i == 0) return shape[0].score;
      return shape[i - 1].score + (shape[i].score - shape[i - 1].score) *
                                      (p - shape[i - 1].utilization) /
                                      (shape[i].utilization - shape[i - 1].utilization);
    }
  }
  return shape.back().score;
}

std::string CheckFitWeight(const ScoredResource& r) {
  if (r.weight <= 0 || r.weight > 100) {
    return Cat("resource weight of ", r.name, " not in valid range (0, 100]");
  }
  return "";
}

absl::Status ReadNameList(const boost::json::value& v, std::string_view path, bool is_group,
                          absl::flat_hash_set<std::string>* out) {
  const boost::json::array* list;
  if (absl::Status s = ReadArray(v, NodeResourcesFit::kName, path, &list); !s.ok()) return s;
  for (size_t i = 0; i < list->size(); ++i) {
    const std::string p = IndexPath(path, i);
    std::string name;
    if (absl::Status s = ReadString((*list)[i], NodeResourcesFit::kName, p, &name); !s.ok()) {
      return s;
    }
    if (name.empty()) return ArgsError(NodeResourcesFit::kName, p, "must not be empty");
    if (is_group && name.find('/') != std::string::npos) {
      return ArgsError(NodeResourcesFit::kName, p, "resource group name can't contain '/'");
    }
    out->insert(std::move(name));
  }
  return absl::OkStatus();
}

absl::Status ReadShape(const boost::json::value& v, std::string_view path,
                       std::vector<FitArgs::ShapePoint>* out) {
  constexpr std::string_view kPlugin = NodeResourcesFit::kName;
  const boost::json::array* list;
  if (absl::Status s = ReadArray(v, kPlugin, path, &list); !s.ok()) return s;
  if (list->empty()) return ArgsError(kPlugin, path, "at least one point must be specified");
  for (size_t i = 0; i < list->size(); ++i) {
    const std::string p = IndexPath(path, i);
    const boost::json::object* o;
    if (absl::Status s = ReadObject((*list)[i], kPlugin, p, &o); !s.ok()) return s;
    if (absl::Status s = CheckKnownFields(*o, kPlugin, p, {"utilization", "score"}); !s.ok()) {
      return s;
    }
    FitArgs::ShapePoint point;
    if (const boost::json::value* u = o->if_contains("utilization")) {
      if (absl::Status s = ReadInt(*u, kPlugin, JoinPath(p, "utilization"), &point.utilization);
          !s.ok()) {
        return s;
      }
    }
    if (const boost::json::value* sc = o->if_contains("score")) {
      if (absl::Status s = ReadInt(*sc, kPlugin, JoinPath(p, "score"), &point.score); !s.ok()) {
        return s;
      }
    }
    if (point.utilization < 0 || point.utilization > kMaxUtilization) {
      return ArgsError(kPlugin, JoinPath(p, "utilization"), "not in valid range [0, 100]");
    }
    if (point.score < 0 || point.score > kMaxCustomPriorityScore) {
      return ArgsError(kPlugin, JoinPath(p, "score"), "not in valid range [0, 10]");
    }
    if (!out->empty() && out->back().utilization >= point.utilization) {
      return ArgsError(kPlugin, JoinPath(p, "utilization"),
                       "utilization values must be sorted in increasing order");
    }
    point.score *= sdk::kMaxNodeScore / kMaxCustomPriorityScore;
    out->push_back(point);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<FitArgs> FitArgs::Parse(const boost::json::object& args) {
  constexpr std::string_view kPlugin = NodeResourcesFit::kName;
  FitArgs out;
  if (absl::Status s = CheckKnownFields(
          args, kPlugin, "", {"ignoredResources", "ignoredResourceGroups", "scoringStrategy"});
      !s.ok()) {
    return s;
  }
  if (const boost::json::value* v = args.if_contains("ignoredResources")) {
    if (absl::Status s = ReadNameList(*v, "ignoredResources", false, &out.ignored_resources);
        !s.ok()) {
      return s;
    }
  }
  if (const boost::json::value* v = args.if_contains("ignoredResourceGroups")) {
    if (absl::Status s =
            ReadNameList(*v, "ignoredResourceGroups", true, &out.ignored_resource_groups);
        !s.ok()) {
      return s;
    }
  }
  const boost::json::value* strategy_value = args.if_contains("scoringStrategy");
  if (strategy_value == nullptr) return out;
  const boost::json::object* strategy;
  if (absl::Status s = ReadObject(*strategy_value, kPlugin, "scoringStrategy", &strategy);
      !s.ok()) {
    return s;
  }
  if (absl::Status s = CheckKnownFields(*strategy, kPlugin, "scoringStrategy",
                                        {"type", "resources", "requestedToCapacityRatio"});
      !s.ok()) {
    return s;
  }
  std::string type;
  if (const boost::json::value* t = strategy->if_contains("type")) {
    if (absl::Status s = ReadString(*t, kPlugin, "scoringStrategy.type", &type); !s.ok()) return s;
  }
  if (type.empty() || type == "LeastAllocated") {
    out.strategy = Strategy::kLeastAllocated;
  } else if (type == "MostAllocated") {
    out.strategy = Strategy::kMostAllocated;
  } else if (type == "RequestedToCapacityRatio") {
    out.strategy = Strategy::kRequestedToCapacityRatio;
  } else {
    return ArgsError(kPlugin, "scoringStrategy.type", Cat("unknown value \"", type, "\""));
  }
  if (const boost::json::value* r = strategy->if_contains("resources")) {
    absl::StatusOr<std::vector<ScoredResource>> resources =
        ReadScoredResources(*r, kPlugin, "scoringStrategy.resources", &CheckFitWeight);
    if (!resources.ok()) return resources.status();
    if (!resources->empty()) out.resources = *std::move(resources);
  }
  const boost::json::value* rtc = strategy->if_contains("requestedToCapacityRatio");
  if (rtc != nullptr) {
    constexpr std::string_view kPath = "scoringStrategy.requestedToCapacityRatio";
    const boost::json::object* o;
    if (absl::Status s = ReadObject(*rtc, kPlugin, kPath, &o); !s.ok()) return s;
    if (absl::Status s = CheckKnownFields(*o, kPlugin, kPath, {"shape"}); !s.ok()) return s;
    if (const boost::json::value* shape = o->if_contains("shape")) {
      if (absl::Status s = ReadShape(*shape, JoinPath(kPath, "shape"), &out.shape); !s.ok()) {
        return s;
      }
    }
  }
  if (out.strategy == Strategy::kRequestedToCapacityRatio && out.shape.empty()) {
    return ArgsError(kPlugin, "scoringStrategy.requestedToCapacityRatio.shape",
                     "at least one point must be specified");
  }
  return out;
}

absl::StatusOr<sdk::PluginPtr> NodeResourcesFit::New(const boost::json::object& args,
                                                     sdk::Handle&) {
  absl::StatusOr<FitArgs> parsed = FitArgs::Parse(args);
  if (!parsed.ok()) return parsed.status();
  return std::make_unique<NodeResourcesFit>(*std::move(parsed));
}

std::pair<sdk::PreFilterResult, sdk::Status> NodeResourcesFit::PreFilter(sdk::CycleState& state,
                                                                         const sdk::PodInfo& pod,
                                                                         const sdk::Snapshot&) {
  state.Write(std::string(kPreFilterStateKey),
              std::make_unique<PreFilterState>(ComputeRequests(pod, args_)));
  return {sdk::PreFilterResult{}, sdk::Status::Success()};
}

sdk::Status NodeResourcesFit::Filter(sdk::CycleState& state, const sdk::PodInfo& pod,
                                     const sdk::NodeInfo& node) {
  const PreFilterState* s = state.ReadAs<PreFilterState>(kPreFilterStateKey);
  std::optional<PreFilterState> computed;
  if (s == nullptr) s = &computed.emplace(ComputeRequests(pod, args_));
  std::vector<std::string> reasons;
  if (Fits(*s, node.allocatable(), node.requested(), static_cast<int64_t>(node.pods().size()),
           &reasons)) {
    return sdk::Status::Success();
  }
  return sdk::Status(sdk::Code::kUnschedulable, std::move(reasons));
}

sdk::Status NodeResourcesFit::PreScore(sdk::CycleState& state, const sdk::PodInfo& pod,
                                       const std::vector<const sdk::NodeInfo*>& nodes) {
  auto s = std::make_unique<PreScoreState>();
  s->pod_requests = PodRequestsFor(args_.resources, pod);
  state.Write(std::string(kPreScoreStateKey), std::move(s));
  return sdk::Status::Success();
}

int64_t NodeResourcesFit::ScoreNode(const sdk::NodeInfo& node,
                                    const PodRequestList& pod_requests) const {
  int64_t node_score = 0, weight_sum = 0;
  for (size_t i = 0; i < args_.resources.size(); ++i) {
    const ScoredResource& r = args_.resources[i];
    auto [allocatable, requested] = AllocatableAndRequested(r, node, pod_requests[i]);
    if (allocatable == 0) continue;
    int64_t score = 0;
    switch (args_.strategy) {
      case FitArgs::Strategy::kLeastAllocated:
        score = LeastRequestedScore(requested, allocatable);
        break;
      case FitArgs::Strategy::kMostAllocated:
        score = MostRequestedScore(requested, allocatable);
        break;
      case FitArgs::Strategy::kRequestedToCapacityRatio:
        score = requested > allocatable
                    ? BrokenLinear(args_.shape, kMaxUtilization)
                    : BrokenLinear(args_.shape, requested * kMaxUtilization / allocatable);
        // Resources scoring 0 do not count towards the weights here.
        if (score <= 0) continue;
        break;
    }
    node_score += score * r.weight;
    weight_sum += r.weight;
  }
  if (weight_sum == 0) return 0;
  if (args_.strategy == FitArgs::Strategy::kRequestedToCapacityRatio) {
    return static_cast<int64_t>(
        std::round(static_cast<double>(node_score) / static_cast<double>(weight_sum)));
  }
  return node_score / weight_sum;
}

std::pair<int64_t, sdk::Status> NodeResourcesFit::Score(sdk::CycleState& state,
                                                        const sdk::PodInfo& pod,
                                                        const sdk::NodeInfo& node) {
  if (const auto* s = state.ReadAs<PreScoreState>(kPreScoreStateKey)) {
    return {ScoreNode(node, s->pod_requests), sdk::Status::Success()};
  }
  return {ScoreNode(node, PodRequestsFor(args_.resources, pod)), sdk::Status::Success()};
}

namespace {

// kube's haveAnyRequestedResourcesIncreased: the node now allows more pods,
// or has more of something the pod requests.
bool AnyRequestedResourceIncreased(const PreFilterState& req, const sdk::Resource& before,
                                   const sdk::Resource& after) {
  if (after.allowed_pod_number > before.allowed_pod_number) return true;
  if (req.milli_cpu > 0 && after.milli_cpu > before.milli_cpu) return true;
  if (req.memory > 0 && after.memory > before.memory) return true;
  if (req.ephemeral_storage > 0 && after.ephemeral_storage > before.ephemeral_storage) return true;
  for (const auto& [name, value] : req.scalars) {
    if (value > 0 && after.Get(name) > before.Get(name)) return true;
  }
  return false;
}

// kube's isResourceScaleDown: an assigned pod now requests less of something
// the pending pod requests.
bool ScaledDownWhatThePodRequests(const PreFilterState& req, const v1::Pod& before,
                                  const v1::Pod& after) {
  if (after.node_name().empty()) return false;  // Holds nothing on any node.
  const sdk::Resource was = sdk::PodInfo::Create(before)->requests;
  const sdk::Resource now = sdk::PodInfo::Create(after)->requests;
  if (req.milli_cpu > 0 && now.milli_cpu < was.milli_cpu) return true;
  if (req.memory > 0 && now.memory < was.memory) return true;
  if (req.ephemeral_storage > 0 && now.ephemeral_storage < was.ephemeral_storage) return true;
  for (const auto& [name, value] : req.scalars) {
    if (value > 0 && now.Get(name) < was.Get(name)) return true;
  }
  return false;
}

}  // namespace

std::vector<sdk::ClusterEventWithHint> NodeResourcesFit::EventsToRegister() const {
  FitArgs args = args_;
  auto shared_args = std::make_shared<const FitArgs>(std::move(args));
  return {
      // kube's isSchedulableAfterPodEvent: a deleted pod frees what it held
      // (bound, or nominated: its reservation goes too); a resized pod frees
      // what it gave back.
      {v1::POD, Actions(v1::DELETE, v1::UPDATE_POD_SCALE_DOWN),
       [shared_args](const v1::Pod& pod, const v1::ClusterEvent& e) {
         if ((e.action() & v1::DELETE) != 0 || !e.has_new_pod()) {
           const v1::Pod* deleted = DeletedPod(e);
           if (deleted != nullptr && deleted->node_name().empty() &&
               deleted->nominated_node_name().empty()) {
             return sdk::QueueingHint::kQueueSkip;
           }
           return sdk::QueueingHint::kQueue;
         }
         if (!e.has_old_pod()) return sdk::QueueingHint::kQueue;
         const PreFilterState req = ComputeRequests(*sdk::PodInfo::Create(pod), *shared_args);
         return ScaledDownWhatThePodRequests(req, e.old_pod(), e.new_pod())
                    ? sdk::QueueingHint::kQueue
                    : sdk::QueueingHint::kQueueSkip;
       }},
      // kube's isSchedulableAfterPodScaleDown: the pending pod itself asks
      // for less.
      {v1::UNSCHEDULED_POD, static_cast<uint32_t>(v1::UPDATE_POD_SCALE_DOWN), nullptr},
      // kube's isSchedulableAfterNodeChange: the node (empty) fits the pod,
      // and it is new or has more of something the pod requests than before.
      {v1::NODE, Actions(v1::ADD, v1::UPDATE_NODE_ALLOCATABLE),
       [shared_args](const v1::Pod& pod, const v1::ClusterEvent& e) {
         const v1::Node* now = NewNode(e);
         if (now == nullptr) return sdk::QueueingHint::kQueue;
         const PreFilterState req = ComputeRequests(*sdk::PodInfo::Create(pod), *shared_args);
         const sdk::Resource allocatable = sdk::Resource::FromProto(now->allocatable());
         if (!Fits(req, allocatable, sdk::Resource(), 0, nullptr)) {
           return sdk::QueueingHint::kQueueSkip;
         }
         const v1::Node* before = OldNode(e);
         if (before == nullptr) return sdk::QueueingHint::kQueue;
         return AnyRequestedResourceIncreased(req, sdk::Resource::FromProto(before->allocatable()),
                                              allocatable)
                    ? sdk::QueueingHint::kQueue
                    : sdk::QueueingHint::kQueueSkip;
       }},
  };
}

}  // namespace podium::plugins
