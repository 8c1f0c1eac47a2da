#include "session.h"

#include <algorithm>
#include <chrono>
#include <exception>
#include <iostream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "boost/json/parse.hpp"
#include "absl_compat.h"

namespace podium::sdk::internal {
namespace {

// The newest protocol version this SDK speaks, and the oldest. 2 adds
// CycleResponse.status_table; 3 what-if verdicts (CycleRequest.what_if_copies);
// 4 lookahead verdicts (CycleRequest.lookahead); 5 the later pods' lookaheads
// (CycleRequest.later_lookaheads); 6 nominated-node checks of the pods
// decided next (CycleRequest.nominated_checks); 7 preemption what-ifs
// (PreemptionDryRunRequest.what_if); 8 what-ifs of pods gone
// (PreemptionDryRunRequest.what_if_gone); 9 a PreFilter's plain
// Unschedulable no longer stops the other PreFilters (the cycle's state is
// whole, for preemption's dry run).
constexpr uint32_t kProtocolVersion = 10;
constexpr uint32_t kOldestProtocolVersion = 1;
constexpr size_t kMaxResolvedLists = 256;

std::string_view PointName(ExtensionPointKind point) {
  switch (point) {
    case ExtensionPointKind::kPreEnqueue: return "PreEnqueue";
    case ExtensionPointKind::kPreFilter: return "PreFilter";
    case ExtensionPointKind::kFilter: return "Filter";
    case ExtensionPointKind::kPreScore: return "PreScore";
    case ExtensionPointKind::kScore: return "Score";
    case ExtensionPointKind::kReserve: return "Reserve";
    case ExtensionPointKind::kPermit: return "Permit";
    case ExtensionPointKind::kPreBind: return "PreBind";
    case ExtensionPointKind::kBind: return "Bind";
    case ExtensionPointKind::kPostBind: return "PostBind";
  }
  return "?";
}

}  // namespace

bool PluginInstance::Implements(ExtensionPointKind point) const {
  switch (point) {
    case ExtensionPointKind::kPreEnqueue: return pre_enqueue != nullptr;
    case ExtensionPointKind::kPreFilter: return pre_filter != nullptr;
    case ExtensionPointKind::kFilter: return filter != nullptr;
    case ExtensionPointKind::kPreScore: return pre_score != nullptr;
    case ExtensionPointKind::kScore: return score != nullptr;
    case ExtensionPointKind::kReserve: return reserve != nullptr;
    case ExtensionPointKind::kPermit: return permit != nullptr;
    case ExtensionPointKind::kPreBind: return pre_bind != nullptr;
    case ExtensionPointKind::kBind: return bind != nullptr;
    case ExtensionPointKind::kPostBind: return post_bind != nullptr;
  }
  return false;
}

class Session::HandleImpl final : public sdk::Handle {
 public:
  explicit HandleImpl(Session& session) : session_(session) {}
  const Snapshot& snapshot() const override { return session_.mirror_; }
  bool AllowWaitingPod(std::string_view pod_uid, std::string_view plugin) override {
    return session_.SendPermitDecision(pod_uid, plugin, true, "");
  }
  bool RejectWaitingPod(std::string_view pod_uid, std::string_view plugin,
                        std::string_view reason) override {
    return session_.SendPermitDecision(pod_uid, plugin, false, reason);
  }

 private:
  Session& session_;
};

Session::Session(const std::vector<PluginDefinition>& definitions, std::string process_name,
                 std::shared_ptr<ResponseSink> sink, Limits limits, Parallelizer* parallelizer)
    : definitions_(definitions),
      process_name_(std::move(process_name)),
      sink_(std::move(sink)),
      handle_(std::make_unique<HandleImpl>(*this)),
      limits_(limits),
      runner_(mirror_, limits.max_cycle_states, parallelizer) {}

Session::~Session() {
  // Plugins go first: their destructors may still use the handle, the mirror
  // or the waiting pods.
  resolved_.clear();
  uncached_.clear();
  instances_by_name_.clear();
  instances_by_profile_.clear();
  instances_.clear();
}

Response::Response() : initial_block_(new char[kInitialBlockBytes]), arena_([this] {
  google::protobuf::ArenaOptions options;
  options.initial_block = initial_block_.get();
  options.initial_block_size = kInitialBlockBytes;
  options.start_block_size = kInitialBlockBytes;
  options.max_block_size = 16 * kInitialBlockBytes;
  return options;
}()) {
  message_ = google::protobuf::Arena::CreateMessage<v1::PluginToScheduler>(&arena_);
}

void Response::Reset() {
  arena_.Reset();
  message_ = google::protobuf::Arena::CreateMessage<v1::PluginToScheduler>(&arena_);
}

void Session::Handle(v1::SchedulerToPlugin& message) {
  ResponsePtr response = sink_->NewResponse();
  v1::PluginToScheduler& out = response->message();
  out.set_id(message.id());
  try {
    Dispatch(message, out);
  } catch (const std::exception& e) {
    out.set_error(absl::StrCat("plugin threw an exception: ", e.what()));
  } catch (...) {
    out.set_error("plugin threw an exception");
  }
  uncached_.clear();
  if (message.id() != 0) {
    sink_->Send(std::move(response));
  } else if (out.kind_case() == v1::PluginToScheduler::kError) {
    // Nobody waits for an answer; the error is all we can report.
    std::cerr << "podium plugin sdk: message without id: " << out.error() << "\n";
  }
}

void Session::Dispatch(v1::SchedulerToPlugin& message, v1::PluginToScheduler& out) {
  if (message.kind_case() == v1::SchedulerToPlugin::kOpen) {
    if (opened_) {
      out.set_error("open: the stream is already open");
      return;
    }
    opened_ = true;
    Open(message.open(), *out.mutable_registration());
    registered_ = out.registration().error().empty();
    return;
  }
  if (!opened_) {
    out.set_error("the first message on a Plugin.Run stream must be open");
    return;
  }
  if (!registered_) {
    out.set_error("the stream's open was refused (see its registration error)");
    return;
  }
  if (message.has_delta()) {
    if (absl::Status applied = mirror_.Apply(*message.mutable_delta()); !applied.ok()) {
      out.set_error(std::string(applied.message()));
      return;
    }
  }
  FinishCycles(message.finished_cycles());

  absl::Status handled;
  switch (message.kind_case()) {
    case v1::SchedulerToPlugin::kCycle:
      handled = RunCycle(*message.mutable_cycle(), *out.mutable_cycle());
      break;
    case v1::SchedulerToPlugin::kDryRunFilter:
      handled = RunDryRunFilter(*message.mutable_dry_run_filter(), *out.mutable_dry_run_filter());
      break;
    case v1::SchedulerToPlugin::kPreemptionDryRun:
      handled = RunPreemptionDryRun(*message.mutable_preemption_dry_run(),
                                    *out.mutable_preemption_dry_run());
      break;
    case v1::SchedulerToPlugin::kReserve:
      handled = RunReserve(*message.mutable_reserve(), *out.mutable_status());
      break;
    case v1::SchedulerToPlugin::kUnreserve:
      handled = RunUnreserve(*message.mutable_unreserve(), *out.mutable_status());
      break;
    case v1::SchedulerToPlugin::kPermit:
      handled = RunPermit(*message.mutable_permit(), *out.mutable_permit());
      break;
    case v1::SchedulerToPlugin::kPreBind:
      handled = RunBinding(ExtensionPointKind::kPreBind, *message.mutable_pre_bind(),
                           *out.mutable_status());
      break;
    case v1::SchedulerToPlugin::kBind:
      handled =
          RunBinding(ExtensionPointKind::kBind, *message.mutable_bind(), *out.mutable_status());
      break;
    case v1::SchedulerToPlugin::kPostBind:
      handled = RunBinding(ExtensionPointKind::kPostBind, *message.mutable_post_bind(),
                           *out.mutable_status());
      break;
    case v1::SchedulerToPlugin::kPreEnqueue:
      handled = RunPreEnqueue(*message.mutable_pre_enqueue(), *out.mutable_status());
      break;
    case v1::SchedulerToPlugin::kQueueingHint:
      handled = RunQueueingHint(message.queueing_hint(), *out.mutable_queueing_hint());
      break;
    case v1::SchedulerToPlugin::kOpen:  // Handled above.
      break;
    case v1::SchedulerToPlugin::KIND_NOT_SET:
      // A message that only carries state, or a request kind newer than this SDK.
      if (message.id() != 0) {
        out.set_error(absl::StrCat("request ", message.id(),
                                   ": unknown or missing request kind (this SDK speaks "
                                   "protocol version ",
                                   kProtocolVersion, ")"));
      }
      return;
  }
  if (!handled.ok()) out.set_error(std::string(handled.message()));
}

void Session::Open(const v1::Open& open, v1::Registration& out) {
  // The newest version both sides speak: the scheduler's range is
  // [protocol_version, max_protocol_version].
  const uint32_t version =
      std::min(std::max(open.max_protocol_version(), open.protocol_version()), kProtocolVersion);
  out.set_protocol_version(version);
  out.set_process_name(process_name_);
  // Nodes always (requests name nodes by their mirror id); the rest is the
  // union of what the plugins opened here need.
  v1::MirrorScope& mirror = *out.mutable_mirror();
  mirror.set_nodes(true);
  if (open.protocol_version() < kOldestProtocolVersion || open.protocol_version() > kProtocolVersion) {
    out.set_protocol_version(kProtocolVersion);
    out.set_error(absl::StrCat("open.protocol_version: ", open.protocol_version(),
                               " is not supported (this plugin process speaks ",
                               kOldestProtocolVersion, " to ", kProtocolVersion, ")"));
    return;
  }
  runner_.set_status_table(version >= 2);
  runner_.set_what_if(version >= 3);
  runner_.set_lookahead(version >= 4);
  runner_.set_later_lookaheads(version >= 5);
  runner_.set_nominated_checks(version >= 6);
  absl::flat_hash_map<absl::string_view, const PluginDefinition*> definitions;
  for (const PluginDefinition& definition : definitions_) {
    definitions.emplace(definition.name, &definition);
  }
  // No plugins named: serve every plugin this process defines, with default args.
  google::protobuf::RepeatedPtrField<v1::PluginArgs> requested = open.plugins();
  if (requested.empty()) {
    for (const PluginDefinition& definition : definitions_) requested.Add()->set_name(definition.name);
  }

  auto fail = [&](std::string error) {
    instances_by_name_.clear();
    instances_by_profile_.clear();
    instances_.clear();
    out.clear_plugins();
    out.set_error(std::move(error));
  };
  for (int i = 0; i < requested.size(); ++i) {
    const v1::PluginArgs& args = requested.Get(i);
    auto definition = definitions.find(args.name());
    if (definition == definitions.end()) {
      std::vector<std::string> served;
      for (const PluginDefinition& d : definitions_) served.push_back(d.name);
      return fail(absl::StrCat("open.plugins[", i, "].name: plugin ", args.name(),
                               " is not served by this process (it serves: ",
                               absl::StrJoin(served, ", "), ")"));
    }
    // A plugin may be listed once per distinct args, for disjoint profiles.
    const bool seen = instances_by_name_.contains(args.name());
    if (seen && args.scheduler_names().empty()) {
      return fail(absl::StrCat("open.plugins[", i, "].name: plugin ", args.name(),
                               " is listed twice (a second entry must name its profiles in "
                               "scheduler_names)"));
    }
    for (const std::string& profile : args.scheduler_names()) {
      auto by_profile = instances_by_profile_.find(profile);
      if (by_profile != instances_by_profile_.end() && by_profile->second.contains(args.name())) {
        return fail(absl::StrCat("open.plugins[", i, "].scheduler_names: plugin ", args.name(),
                                 " is listed twice for profile ", profile));
      }
    }
    boost::json::object args_object;
    if (args.args_json().find_first_not_of(" \t\r\n") != std::string::npos) {
      boost::system::error_code ec;
      boost::json::value parsed = boost::json::parse(args.args_json(), ec);
      if (ec) {
        return fail(absl::StrCat("plugin ", args.name(), ": open.plugins[", i,
                                 "].args_json: invalid JSON: ", ec.message()));
      }
      if (!parsed.is_object()) {
        return fail(absl::StrCat("plugin ", args.name(), ": open.plugins[", i,
                                 "].args_json: expected a JSON object"));
      }
      args_object = std::move(parsed.as_object());
    }
    absl::StatusOr<PluginPtr> plugin;
    try {
      plugin = definition->second->factory(args_object, *handle_);
    } catch (const std::exception& e) {
      plugin = absl::InvalidArgumentError(e.what());
    }
    if (!plugin.ok()) {
      return fail(absl::StrCat("plugin ", args.name(), ": bad args: ", plugin.status().message()));
    }
    if (*plugin == nullptr) {
      return fail(absl::StrCat("plugin ", args.name(), ": its factory returned no plugin"));
    }
    const MirrorNeeds& needs = definition->second->mirror;
    mirror.set_assigned_pods(mirror.assigned_pods() || needs.assigned_pods);
    mirror.set_pod_disruption_budgets(mirror.pod_disruption_budgets() ||
                                      needs.pod_disruption_budgets);
    mirror.set_pod_groups(mirror.pod_groups() || needs.pod_groups);
    mirror.set_namespaces(mirror.namespaces() || needs.namespaces);
    if (needs.pod_label_index) mirror_.EnableLabelIndex();  // Local to this process.
    if (needs.pod_changes) mirror_.EnablePodChangeLog();
    // Filters count nominated pods; the SDK keeps them from deltas instead of
    // reading them from every request.
    if (dynamic_cast<FilterPlugin*>(plugin->get()) != nullptr) mirror.set_nominated_pods(true);
    auto instance = std::make_unique<PluginInstance>();
    instance->name = args.name();
    instance->plugin = std::move(*plugin);
    Plugin* p = instance->plugin.get();
    instance->pre_enqueue = dynamic_cast<PreEnqueuePlugin*>(p);
    instance->pre_filter = dynamic_cast<PreFilterPlugin*>(p);
    instance->filter = dynamic_cast<FilterPlugin*>(p);
    instance->pre_score = dynamic_cast<PreScorePlugin*>(p);
    instance->score = dynamic_cast<ScorePlugin*>(p);
    instance->reserve = dynamic_cast<ReservePlugin*>(p);
    instance->permit = dynamic_cast<PermitPlugin*>(p);
    instance->pre_bind = dynamic_cast<PreBindPlugin*>(p);
    instance->bind = dynamic_cast<BindPlugin*>(p);
    instance->post_bind = dynamic_cast<PostBindPlugin*>(p);
    if (auto* enqueue = dynamic_cast<EnqueueExtensions*>(p)) {
      instance->events = enqueue->EventsToRegister();
    }

    for (const std::string& profile : args.scheduler_names()) {
      instances_by_profile_[profile][instance->name] = instance.get();
    }
    if (seen) {
      // Registered with its first entry, which also serves profiles no entry
      // names.
      instances_.push_back(std::move(instance));
      continue;
    }
    v1::PluginRegistration& reg = *out.add_plugins();
    reg.set_name(instance->name);
    reg.set_pod_group_members_only(definition->second->pod_group_members_only);
    reg.set_unreserve_only(definition->second->unreserve_only);
    const std::pair<ExtensionPointKind, v1::ExtensionPoint> points[] = {
        {ExtensionPointKind::kPreEnqueue, v1::PRE_ENQUEUE},
        {ExtensionPointKind::kPreFilter, v1::PRE_FILTER},
        {ExtensionPointKind::kFilter, v1::FILTER},
        {ExtensionPointKind::kPreScore, v1::PRE_SCORE},
        {ExtensionPointKind::kScore, v1::SCORE},
        {ExtensionPointKind::kReserve, v1::RESERVE},
        {ExtensionPointKind::kPermit, v1::PERMIT},
        {ExtensionPointKind::kPreBind, v1::PRE_BIND},
        {ExtensionPointKind::kBind, v1::BIND},
        {ExtensionPointKind::kPostBind, v1::POST_BIND},
    };
    for (const auto& [kind, wire] : points) {
      if (instance->Implements(kind)) reg.add_extension_points(wire);
    }
    for (const ClusterEventWithHint& event : instance->events) {
      v1::ClusterEventInterest& interest = *reg.add_events();
      interest.set_resource(event.resource);
      interest.set_action_mask(event.action_mask);
      interest.set_has_queueing_hint(static_cast<bool>(event.hint));
    }
    if (const auto* sign = dynamic_cast<const SignPlugin*>(p)) {
      const PodSignatureSpec spec = sign->SignatureSpec();
      v1::SignatureSpec& wire = *reg.mutable_signature();
      for (v1::PodPart part : spec.parts) wire.add_parts(part);
      for (v1::PodPart part : spec.unsignable_when_set) wire.add_unsignable_when_set(part);
      for (v1::PodPart part : spec.read_through_affinity_terms) wire.add_parts_read_through_affinity_terms(part);
      wire.set_normalizes_scores(instance->score != nullptr && instance->score->HasNormalizeScore());
    }
    instances_by_name_.emplace(instance->name, instance.get());
    instances_.push_back(std::move(instance));
  }
}

PluginInstance* Session::InstanceFor(const std::string& name, std::string_view profile) const {
  if (!instances_by_profile_.empty()) {
    auto by_profile = instances_by_profile_.find(AsAbsl(profile));
    if (by_profile != instances_by_profile_.end()) {
      auto it = by_profile->second.find(name);
      if (it != by_profile->second.end()) return it->second;
    }
  }
  auto it = instances_by_name_.find(name);
  return it == instances_by_name_.end() ? nullptr : it->second;
}

namespace {
// The profile a pod belongs to, as the scheduler picks it.
std::string_view ProfileOf(const v1::Pod& pod) {
  return pod.scheduler_name().empty() ? std::string_view("default-scheduler")
                                      : std::string_view(pod.scheduler_name());
}
}  // namespace

absl::StatusOr<const PluginList*> Session::Resolve(
    const google::protobuf::RepeatedPtrField<std::string>& names, ExtensionPointKind point,
    std::string_view field, const v1::Pod& pod) {
  const std::string_view profile = instances_by_profile_.empty() ? "" : ProfileOf(pod);
  for (const auto& list : resolved_) {
    if (list->point == point && list->names.size() == static_cast<size_t>(names.size()) &&
        list->profile == profile && std::equal(names.begin(), names.end(), list->names.begin())) {
      return &list->plugins;
    }
  }
  auto list = std::make_unique<ResolvedList>();
  list->point = point;
  list->profile = std::string(profile);
  list->names.assign(names.begin(), names.end());
  for (int i = 0; i < names.size(); ++i) {
    PluginInstance* instance = InstanceFor(names.Get(i), profile);
    if (instance == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(AsAbsl(field), "[", i, "]: plugin ", names.Get(i),
                                                     " is not served on this stream"));
    }
    if (!instance->Implements(point)) {
      return absl::InvalidArgumentError(absl::StrCat(AsAbsl(field), "[", i, "]: plugin ", names.Get(i),
                                                     " does not implement ", AsAbsl(PointName(point))));
    }
    list->plugins.push_back(instance);
  }
  auto& store = resolved_.size() < kMaxResolvedLists ? resolved_ : uncached_;
  store.push_back(std::move(list));
  return &store.back()->plugins;
}

absl::Status Session::RunCycle(v1::CycleRequest& request, v1::CycleResponse& out) {
  auto pre_filters = Resolve(request.pre_filter_plugins(), ExtensionPointKind::kPreFilter,
                             "cycle.pre_filter_plugins", request.pod());
  if (!pre_filters.ok()) return pre_filters.status();
  auto filters =
      Resolve(request.filter_plugins(), ExtensionPointKind::kFilter, "cycle.filter_plugins", request.pod());
  if (!filters.ok()) return filters.status();
  auto pre_scores = Resolve(request.pre_score_plugins(), ExtensionPointKind::kPreScore,
                            "cycle.pre_score_plugins", request.pod());
  if (!pre_scores.ok()) return pre_scores.status();
  auto scores =
      Resolve(request.score_plugins(), ExtensionPointKind::kScore, "cycle.score_plugins", request.pod());
  if (!scores.ok()) return scores.status();

  absl::Status status = runner_.RunCycle(**pre_filters, **filters, **pre_scores, **scores, request, out);
  if (status.ok()) runner_.RunNominatedChecks(**pre_filters, **filters, request, out);
  if (!status.ok() || !request.has_preemption_dry_run() || out.feasible_size() > 0) return status;
  // Preemption's first dry run rode in the request: run it when the pod
  // passed PreFilter, fits nowhere and no filter failed with an error (the
  // one rejection with ERROR ends the list).
  if (out.pre_filter_status().code() != v1::Status::SUCCESS &&
      out.pre_filter_status().code() != v1::Status::SKIP) {
    return status;
  }
  if (out.rejected_size() > 0) {
    const v1::NodeStatus& last = out.rejected(out.rejected_size() - 1);
    const v1::Status& code_of =
        last.status_index() == 0 ? last.status() : out.status_table(static_cast<int>(last.status_index() - 1));
    if (code_of.code() == v1::Status::ERROR) return status;
  }
  const PodInfoPtr& pod = runner_.last_cycle_pod();
  if (pod == nullptr) return status;
  // A dry run that cannot run is left unanswered: the scheduler then asks on
  // its own and gets the error there.
  if (!RunPreemptionDryRun(*request.mutable_preemption_dry_run(), pod, *out.mutable_preemption_dry_run()).ok()) {
    out.clear_preemption_dry_run();
  }
  return status;
}

absl::Status Session::RunDryRunFilter(v1::DryRunFilterRequest& request,
                                      v1::DryRunFilterResponse& out) {
  auto filters = Resolve(request.filter_plugins(), ExtensionPointKind::kFilter,
                         "dry_run_filter.filter_plugins", request.pod());
  if (!filters.ok()) return filters.status();
  return runner_.RunDryRunFilter(**filters, request, out);
}

absl::Status Session::RunReserve(v1::ReserveRequest& request, v1::StatusResponse& out) {
  auto plugins =
      Resolve(request.plugins(), ExtensionPointKind::kReserve, "reserve.plugins", request.pod());
  if (!plugins.ok()) return plugins.status();
  PodInfoPtr pod = TakePod(request.mutable_pod());
  CycleState& state = runner_.StateFor(request.cycle_id());
  for (PluginInstance* plugin : **plugins) {
    Status status = plugin->reserve->Reserve(state, *pod, request.node_name());
    if (!status.IsSuccess()) {
      WriteStatus(status, plugin->name, Recode::kFilter, out.add_statuses());
      break;
    }
  }
  return absl::OkStatus();
}

absl::Status Session::RunUnreserve(v1::UnreserveRequest& request, v1::StatusResponse& out) {
  auto plugins =
      Resolve(request.plugins(), ExtensionPointKind::kReserve, "unreserve.plugins", request.pod());
  if (!plugins.ok()) return plugins.status();
  PodInfoPtr pod = TakePod(request.mutable_pod());
  StopWaiting(pod->uid());
  CycleState& state = runner_.StateFor(request.cycle_id());
  for (auto it = (*plugins)->rbegin(); it != (*plugins)->rend(); ++it) {
    (*it)->reserve->Unreserve(state, *pod, request.node_name());
  }
  return absl::OkStatus();
}

absl::Status Session::RunPermit(v1::PermitRequest& request, v1::PermitResponse& out) {
  auto plugins = Resolve(request.plugins(), ExtensionPointKind::kPermit, "permit.plugins", request.pod());
  if (!plugins.ok()) return plugins.status();
  PodInfoPtr pod = TakePod(request.mutable_pod());
  CycleState& state = runner_.StateFor(request.cycle_id());
  for (PluginInstance* plugin : **plugins) {
    PermitResult result = plugin->permit->Permit(state, *pod, request.node_name());
    v1::PluginPermit& permit = *out.add_results();
    permit.set_plugin(plugin->name);
    Status status = std::move(result.status);
    if (!status.IsSuccess() && !status.IsWait() && !status.IsRejected()) {
      status = Status(Code::kError, status.reasons());
    }
    WriteStatus(status, plugin->name, Recode::kKeep, permit.mutable_status());
    if (status.IsWait()) {
      permit.set_timeout_ms(result.timeout_ms);
      StartWaiting(pod->uid(), plugin->name, request.cycle_id());
    } else if (!status.IsSuccess()) {
      break;  // A rejection ends Permit for this pod.
    }
  }
  return absl::OkStatus();
}

absl::Status Session::RunBinding(ExtensionPointKind point, v1::BindingRequest& request,
                                 v1::StatusResponse& out) {
  std::string field = absl::StrCat(
      point == ExtensionPointKind::kPreBind ? "pre_bind"
      : point == ExtensionPointKind::kBind  ? "bind"
                                            : "post_bind",
      ".plugins");
  auto plugins = Resolve(request.plugins(), point, field, request.pod());
  if (!plugins.ok()) return plugins.status();
  PodInfoPtr pod = TakePod(request.mutable_pod());
  StopWaiting(pod->uid());
  CycleState& state = runner_.StateFor(request.cycle_id());
  const std::string& node_name = request.node_name();
  for (PluginInstance* plugin : **plugins) {
    switch (point) {
      case ExtensionPointKind::kPreBind: {
        Status status = plugin->pre_bind->PreBind(state, *pod, node_name);
        if (!status.IsSuccess()) {
          WriteStatus(status, plugin->name, Recode::kFilter, out.add_statuses());
          return absl::OkStatus();
        }
        break;
      }
      case ExtensionPointKind::kBind: {
        // Skip passes the pod to the next bind plugin; Success means bound.
        Status status = plugin->bind->Bind(state, *pod, node_name);
        if (status.IsSuccess()) return absl::OkStatus();
        if (status.IsSkip()) {
          WriteStatus(status, plugin->name, Recode::kKeep, out.add_statuses());
          continue;
        }
        WriteStatus(status, plugin->name, Recode::kError, out.add_statuses());
        return absl::OkStatus();
      }
      default:
        plugin->post_bind->PostBind(state, *pod, node_name);
        break;
    }
  }
  return absl::OkStatus();
}

absl::Status Session::RunPreEnqueue(v1::PreEnqueueRequest& request, v1::StatusResponse& out) {
  auto plugins =
      Resolve(request.plugins(), ExtensionPointKind::kPreEnqueue, "pre_enqueue.plugins", request.pod());
  if (!plugins.ok()) return plugins.status();
  PodInfoPtr pod = TakePod(request.mutable_pod());
  PreEnqueuePlugin::Context context;
  if (request.has_pod_group()) context.pod_group = &request.pod_group();
  context.pod_group_pods = request.pod_group_pods();
  for (PluginInstance* plugin : **plugins) {
    Status status = plugin->pre_enqueue->PreEnqueue(*pod, context);
    if (!status.IsSuccess()) {
      WriteStatus(status, plugin->name, Recode::kFilter, out.add_statuses());
      break;
    }
  }
  return absl::OkStatus();
}

absl::Status Session::RunQueueingHint(const v1::QueueingHintRequest& request,
                                      v1::QueueingHintResponse& out) {
  const v1::ClusterEvent& event = request.event();
  for (int i = 0; i < request.queries_size(); ++i) {
    const v1::HintQuery& query = request.queries(i);
    auto it = instances_by_name_.find(query.plugin());
    if (it == instances_by_name_.end()) {
      return absl::InvalidArgumentError(absl::StrCat("queueing_hint.queries[", i,
                                                     "].plugin: plugin ", query.plugin(),
                                                     " is not served on this stream"));
    }
    v1::HintAnswer& answer = *out.add_answers();
    answer.set_plugin(it->second->name);
    for (const v1::Pod& pod : query.pods()) {
      // Each pod asks the instance of its own profile.
      const PluginInstance& plugin = *InstanceFor(query.plugin(), ProfileOf(pod));
      // Queue unless every registration that matches the event says skip; with
      // no matching registration, queue (the scheduler asked, so be safe).
      bool matched = false;
      bool queue = false;
      for (const ClusterEventWithHint& registered : plugin.events) {
        if (registered.resource != event.resource() ||
            (registered.action_mask & event.action()) == 0) {
          continue;
        }
        matched = true;
        if (!registered.hint || registered.hint(pod, event) == QueueingHint::kQueue) {
          queue = true;
          break;
        }
      }
      answer.add_queue(queue || !matched);
    }
  }
  return absl::OkStatus();
}

bool Session::SendPermitDecision(std::string_view pod_uid, std::string_view plugin, bool allow,
                                 std::string_view reason) {
  {
    absl::MutexLock lock(&waiting_mu_);
    auto it = waiting_.find(AsAbsl(pod_uid));
    if (it == waiting_.end()) return false;
    if (!allow || (it->second.plugins.erase(AsAbsl(plugin)) > 0 && it->second.plugins.empty())) {
      waiting_by_cycle_.erase({it->second.cycle_id, it->first});
      waiting_.erase(it);
    }
  }
  ResponsePtr response = sink_->NewResponse();
  v1::PluginToScheduler& message = response->message();
  message.set_id(0);
  v1::PermitDecision& decision = *message.mutable_permit_decision();
  decision.set_pod_uid(std::string(pod_uid));
  decision.set_plugin(std::string(plugin));
  decision.set_allow(allow);
  if (!allow) decision.set_reason(std::string(reason));
  return sink_->Send(std::move(response));
}

void Session::StartWaiting(const std::string& pod_uid, const std::string& plugin,
                           uint64_t cycle_id) {
  absl::MutexLock lock(&waiting_mu_);
  auto [it, inserted] = waiting_.try_emplace(pod_uid);
  if (inserted) {
    it->second.cycle_id = cycle_id;
    waiting_by_cycle_.emplace(cycle_id, pod_uid);
    // The safety bound: drop the pod that has waited longest, never them all.
    while (waiting_.size() > limits_.max_waiting_pods && !waiting_by_cycle_.empty()) {
      auto oldest = waiting_by_cycle_.begin();
      if (oldest->second == pod_uid) break;
      waiting_.erase(oldest->second);
      waiting_by_cycle_.erase(oldest);
    }
  }
  it = waiting_.find(pod_uid);
  it->second.plugins.insert(plugin);
}

void Session::StopWaiting(const std::string& pod_uid) {
  absl::MutexLock lock(&waiting_mu_);
  auto it = waiting_.find(pod_uid);
  if (it == waiting_.end()) return;
  waiting_by_cycle_.erase({it->second.cycle_id, pod_uid});
  waiting_.erase(it);
}

void Session::FinishCycles(const google::protobuf::RepeatedField<uint64_t>& cycle_ids) {
  if (cycle_ids.empty()) return;
  for (uint64_t cycle_id : cycle_ids) runner_.Finish(cycle_id);
  absl::MutexLock lock(&waiting_mu_);
  for (uint64_t cycle_id : cycle_ids) {
    auto it = waiting_by_cycle_.lower_bound({cycle_id, std::string()});
    while (it != waiting_by_cycle_.end() && it->first == cycle_id) {
      waiting_.erase(it->second);
      it = waiting_by_cycle_.erase(it);
    }
  }
}

size_t Session::NumWaitingPods() {
  absl::MutexLock lock(&waiting_mu_);
  return waiting_.size();
}

}  // namespace podium::sdk::internal
