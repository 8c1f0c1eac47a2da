#include "server/admin_service.h"

#include <chrono>
#include <deque>
#include <optional>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpcpp/alarm.h"
#include "cache/cache.h"
#include "grpc_support/async_driver.h"
#include "queue/scheduling_queue.h"
#include "remote/grpc_plugin_process.h"
#include "scheduler.h"
#include "server/access_control.h"
#include "server/cluster_service.h"
#include "server/echo.h"

namespace podium::scheduler {
namespace {

v1::QueueName ToQueueName(QueueKind kind) {
  switch (kind) {
    case QueueKind::kActive: return v1::ACTIVE;
    case QueueKind::kBackoff: return v1::BACKOFF;
    case QueueKind::kUnschedulable: return v1::UNSCHEDULABLE;
    case QueueKind::kGated: return v1::GATED;
    case QueueKind::kInFlight: return v1::IN_FLIGHT;
  }
  return v1::QUEUE_UNSPECIFIED;
}

void ToObjectRef(const v1::Pod& pod, v1::ObjectRef* out) {
  out->set_kind("Pod");
  out->set_uid(pod.meta().uid());
  out->set_namespace_(pod.meta().namespace_());
  out->set_name(pod.meta().name());
}

void FillQueuedPod(const QueuedPodSummary& s, v1::QueuedPod* out) {
  const v1::Pod& pod = *s.pod_info->pod;
  ToObjectRef(pod, out->mutable_pod());
  out->set_queue(ToQueueName(s.queue));
  out->set_priority(pod.priority());
  out->set_attempts(s.attempts);
  if (s.backoff_expiry != absl::InfinitePast()) out->set_backoff_expiry_us(absl::ToUnixMicros(s.backoff_expiry));
  out->set_enqueued_us(absl::ToUnixMicros(s.timestamp));
  for (const auto& p : s.unschedulable_plugins) out->add_unschedulable_plugins(p);
  for (const auto& p : s.pending_plugins) out->add_pending_plugins(p);
  if (s.queue == QueueKind::kGated) out->set_gated_by(s.gating_plugin);
  out->set_message(s.message);
}

void FillWaitingPod(const WaitingPodSummary& w, v1::QueuedPod* out) {
  const v1::Pod& pod = w.pod->pod();
  ToObjectRef(pod, out->mutable_pod());
  out->set_queue(v1::WAITING_ON_PERMIT);
  out->set_priority(pod.priority());
  out->set_attempts(w.pod->attempts);
  if (w.waiting_since != absl::InfinitePast()) out->set_enqueued_us(absl::ToUnixMicros(w.waiting_since));
  v1::PermitWait* wait = out->mutable_permit_wait();
  wait->set_node_name(w.node);
  if (w.waiting_since != absl::InfinitePast()) wait->set_waiting_since_us(absl::ToUnixMicros(w.waiting_since));
  for (const auto& [plugin, deadline] : w.pending) {
    v1::PermitWait::Plugin* p = wait->add_plugins();
    p->set_name(plugin);
    p->set_deadline_us(absl::ToUnixMicros(deadline));
  }
}

bool WaitingMatches(const WaitingPodSummary& w, const v1::ListQueuedPodsRequest& request) {
  if (!request.namespace_().empty() && w.pod->pod().meta().namespace_() != request.namespace_()) return false;
  return request.plugin().empty() || w.pending.contains(request.plugin());
}

void ToResourceList(const sdk::Resource& r, v1::ResourceList* out) {
  out->set_milli_cpu(r.milli_cpu);
  out->set_memory_bytes(r.memory);
  out->set_ephemeral_storage_bytes(r.ephemeral_storage);
  out->set_pods(r.allowed_pod_number);
  for (const auto& [name, value] : r.scalar) (*out->mutable_scalar())[name] = value;
}

// A bound pod's deferred resize (KEP-5836), for ExplainPod.
void FillResize(const sdk::PodInfo& info, const std::string& preemption_message, bool waiting_for_room,
                bool queued, v1::ResizeExplanation* out) {
  const v1::Pod& pod = *info.pod;
  out->set_node_name(pod.node_name());
  out->set_state(pod.resize_status());
  ToResourceList(info.requests, out->mutable_wanted());
  *out->mutable_admitted() = pod.allocated();
  out->set_preemption_message(preemption_message);
  out->set_waiting_for_room(waiting_for_room);
  out->set_queued(queued);
}

std::optional<QueueKind> ToQueueKind(v1::QueueName name) {
  switch (name) {
    case v1::ACTIVE: return QueueKind::kActive;
    case v1::BACKOFF: return QueueKind::kBackoff;
    case v1::UNSCHEDULABLE: return QueueKind::kUnschedulable;
    case v1::GATED: return QueueKind::kGated;
    case v1::IN_FLIGHT: return QueueKind::kInFlight;
    default: return std::nullopt;
  }
}

constexpr char kPageTokenPrefix[] = "offset:";

std::optional<size_t> ParsePageToken(const std::string& token) {
  if (token.empty()) return 0;
  if (token.rfind(kPageTokenPrefix, 0) != 0) return std::nullopt;
  uint64_t offset = 0;
  if (!absl::SimpleAtoi(token.substr(sizeof(kPageTokenPrefix) - 1), &offset)) return std::nullopt;
  return static_cast<size_t>(offset);
}

}  // namespace

grpc::Status AdminService::ListQueuedPods(grpc::ServerContext* ctx,
                                                       const v1::ListQueuedPodsRequest* request,
                                                       v1::ListQueuedPodsResponse* response) {
  int32_t page_size = request->page_size() > 0 ? request->page_size() : request->limit();
  if (request->page_size() < 0 || request->limit() < 0) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                  "page_size: must not be negative");
  }
  if (page_size == 0) page_size = kDefaultPageSize;
  page_size = std::min(page_size, kMaxPageSize);
  const std::optional<size_t> offset = ParsePageToken(request->page_token());
  if (!offset) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                  absl::StrCat("page_token: \"", Echo(request->page_token()),
                                               "\" is not a token this scheduler issued"));
  }
  // Pods waiting at Permit are in flight in the queue: listed once, after
  // the queue's pods, with what they wait on. The copy is taken first, under
  // WaitingPods' lock only; a pod that starts or stops waiting meanwhile may
  // be listed in flight or waiting, as paging over a live queue allows.
  const bool only_waiting = request->queue() == v1::WAITING_ON_PERMIT;
  const bool with_waiting = only_waiting || request->queue() == v1::QUEUE_UNSPECIFIED;
  const std::vector<WaitingPodSummary> waiting = scheduler_.PodsWaitingAtPermit();
  QueueListFilter filter;
  filter.queue = ToQueueKind(request->queue());
  filter.namespace_name = request->namespace_();
  filter.plugin = request->plugin();
  for (const WaitingPodSummary& w : waiting) filter.except_in_flight.insert(w.pod->uid());
  QueueListPage page;
  if (!only_waiting) page = queue_.ListPage(filter, *offset, static_cast<size_t>(page_size));
  for (const auto& s : page.pods) FillQueuedPod(s, response->add_pods());
  size_t total = page.total;
  if (with_waiting) {
    for (const WaitingPodSummary& w : waiting) {
      if (!WaitingMatches(w, *request)) continue;
      const size_t index = total++;
      if (index >= *offset && response->pods_size() < page_size) {
        FillWaitingPod(w, response->add_pods());
      }
    }
  }
  const size_t listed = static_cast<size_t>(response->pods_size());
  response->set_total(static_cast<int32_t>(std::min<size_t>(total, INT32_MAX)));
  if (*offset + listed < total) {
    response->set_next_page_token(absl::StrCat(kPageTokenPrefix, *offset + listed));
  }
  response->set_adapter_connected(cluster_ != nullptr && cluster_->adapter_connected());
  return grpc::Status::OK;
}

grpc::Status AdminService::ExplainPod(grpc::ServerContext* ctx,
                                                   const v1::ExplainPodRequest* request,
                                                   v1::ExplainPodResponse* response) {
  // A pod waiting at Permit passed Filter in its current attempt: what it
  // waits on is the answer, not an earlier attempt's verdicts.
  for (const WaitingPodSummary& w : scheduler_.PodsWaitingAtPermit()) {
    const v1::ObjectMeta& meta = w.pod->pod().meta();
    if (meta.namespace_() != request->namespace_() || meta.name() != request->name()) continue;
    FillWaitingPod(w, response->mutable_pod());
    response->set_attempts(w.pod->attempts);
    response->set_nominated_node_name(w.pod->pod().nominated_node_name());
    return grpc::Status::OK;
  }
  std::optional<PodDiagnosis> last = scheduler_.LastDiagnosis(request->namespace_(), request->name());
  std::optional<QueuedPodSummary> queued;
  if (last) {
    queued = queue_.Find(last->pod_uid);
  } else {
    for (const std::string& uid : queue_.UidsOf(request->namespace_(), request->name())) {
      if ((queued = queue_.Find(uid))) break;
    }
  }
  if (queued) {
    FillQueuedPod(*queued, response->mutable_pod());
    response->set_attempts(queued->attempts);
    // An attempt that no plugin rejected failed with an error; the queue
    // keeps its message.
    if (queued->attempts > 0 && queued->unschedulable_plugins.empty() &&
        queued->pending_plugins.empty() && queued->gating_plugin.empty()) {
      response->set_last_error(queued->message);
    }
    // A bound pod is queued only for its deferred resize's preemption.
    if (!queued->pod_info->pod->node_name().empty()) {
      FillResize(*queued->pod_info, "", false, true, response->mutable_resize());
    }
  }
  if (!last) {
    if (queued) {
      response->set_message(queued->message);
      if (nominated_node_of_) response->set_nominated_node_name(nominated_node_of_(queued->pod_info->uid()));
      return grpc::Status::OK;
    }
    if (auto failed = scheduler_.FailedResizeOf(request->namespace_(), request->name())) {
      FillResize(*failed->pod, failed->message, true, false, response->mutable_resize());
      return grpc::Status::OK;
    }
    return grpc::Status(grpc::StatusCode::NOT_FOUND,
                                  absl::StrCat("pod ", Echo(request->namespace_()), "/",
                                               Echo(request->name()),
                                               " is not pending and has no recorded attempt"));
  }
  if (last->error) response->set_last_error(last->message);
  // An attempt that broke is reported as an error, not as "unschedulable".
  response->set_message(last->error ? "error: " + last->message : last->message);
  for (const auto& [node, status] : last->sample) {
    auto* verdict = response->add_nodes();
    verdict->set_node_name(node);
    status->ToProto(verdict->mutable_status());
  }
  // The nomination as it stands now (the attempt recorded the pod before
  // its own preemption nominated it).
  response->set_nominated_node_name(nominated_node_of_ ? nominated_node_of_(last->pod_uid)
                                                       : last->nominated_node_name);
  return grpc::Status::OK;
}

grpc::Status AdminService::DumpCache(grpc::ServerContext* ctx,
                                                  const v1::DumpCacheRequest* request,
                                                  v1::DumpCacheResponse* response) {
  const Cache::Dumped dump = cache_.Dump(request->include_pods());
  std::map<std::string, std::vector<v1::ObjectRef>> nominated;
  if (nominations_ && request->include_pods()) nominated = nominations_();
  response->set_generation(dump.generation);
  response->set_assumed_pods(static_cast<int32_t>(dump.assumed_pods));
  for (const Cache::NodeDump& n : dump.nodes) {
    v1::CachedNode* node = response->add_nodes();
    node->set_name(n.name);
    node->set_generation(n.generation);
    if (n.allocatable) ToResourceList(*n.allocatable, node->mutable_allocatable());
    ToResourceList(n.requested, node->mutable_requested());
    // A pod's requests count no pods (kube's Resource neither): the node's
    // bound and assumed pods are what it uses of its allocatable pods. The
    // cache dumps them only with include_pods.
    if (request->include_pods()) {
      node->mutable_requested()->set_pods(static_cast<int64_t>(n.pods.size() + n.assumed_pods.size()));
    }
    for (const auto& pod : n.pods) ToObjectRef(*pod->pod, node->add_pods());
    for (const auto& pod : n.assumed_pods) ToObjectRef(*pod->pod, node->add_assumed_pods());
    if (auto it = nominated.find(n.name); it != nominated.end()) {
      for (v1::ObjectRef& ref : it->second) *node->add_nominated_pods() = std::move(ref);
    }
  }
  return grpc::Status::OK;
}

grpc::Status AdminService::ListPlugins(grpc::ServerContext* ctx,
                                                    const v1::ListPluginsRequest*,
                                                    v1::ListPluginsResponse* response) {
  for (GrpcPluginProcess* endpoint : endpoints_) {
    auto* info = response->add_endpoints();
    info->set_endpoint(endpoint->name() + " (" + endpoint->address() + ")");
    info->set_state(endpoint->ready() ? v1::PluginEndpointInfo::READY : v1::PluginEndpointInfo::FAILED);
    // The endpoint's own words once it reports more than ready / not ready.
    switch (endpoint->state()) {
      case EndpointState::kReady: info->set_connection_state("READY"); break;
      case EndpointState::kConnecting: info->set_connection_state("CONNECTING"); break;
      case EndpointState::kCircuitOpen: info->set_connection_state("CIRCUIT_OPEN"); break;
    }
    const v1::Registration registration = endpoint->registration();
    for (const auto& p : registration.plugins()) *info->add_plugins() = p;
    info->set_ignorable(endpoint->failure_policy() == FailurePolicy::kIgnore);
    const PluginProcessStats stats = endpoint->stats();
    info->set_requests(stats.requests);
    info->set_errors(stats.errors);
    info->set_timeouts(stats.timeouts);
    info->set_invalid_answers(stats.invalid_answers);
    info->set_latency_p50_ms(stats.latency_p50_ms);
    info->set_latency_p99_ms(stats.latency_p99_ms);
    info->set_reconnects(stats.reconnects);
    if (!endpoint->ready()) info->set_last_error(endpoint->last_error());
  }
  return grpc::Status::OK;
}

std::optional<grpc::Status> AdminService::RefuseAnonymousChange(grpc::ServerContext* ctx,
                                                                std::string_view method) const {
  if (!require_identity_) return std::nullopt;
  const auto auth = ctx->auth_context();
  if (auth != nullptr && !auth->FindPropertyValues(kCallerUserProperty).empty()) return std::nullopt;
  return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                      absl::StrCat(std::string(method), " changes the scheduler: it needs a bearer token or a client "
                                           "certificate, and this scheduler takes neither (start it with "
                                           "--token-auth-file or --client-ca-file)"));
}

grpc::Status AdminService::SetSchedulingPaused(grpc::ServerContext* ctx, const v1::SetSchedulingPausedRequest* request,
    v1::SetSchedulingPausedResponse* response) {
  if (auto refused = RefuseAnonymousChange(ctx, "SetSchedulingPaused")) return *refused;
  scheduler_.SetPaused(request->paused());
  response->set_paused(scheduler_.paused());
  return grpc::Status::OK;
}

grpc::Status AdminService::SetLogVerbosity(grpc::ServerContext* ctx,
                                                        const v1::SetLogVerbosityRequest* request,
                                                        v1::SetLogVerbosityResponse* response) {
  if (auto refused = RefuseAnonymousChange(ctx, "SetLogVerbosity")) return *refused;
  if (request->verbosity() < 0 || request->verbosity() > kMaxLogVerbosity) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                  absl::StrCat("verbosity: ", request->verbosity(), " is not in [0, ",
                                               kMaxLogVerbosity, "]"));
  }
  const int previous = logger_.SetVerbosity(request->verbosity());
  response->set_previous(previous);
  response->set_verbosity(request->verbosity());
  logger_.Log(logging::Severity::kInfo, 0, "Log verbosity changed",
              {{"previous", previous}, {"verbosity", request->verbosity()}});
  return grpc::Status::OK;
}

grpc::Status AdminService::MovePodsToActiveQueue(grpc::ServerContext* ctx, const v1::MovePodsToActiveQueueRequest* request,
    v1::MovePodsToActiveQueueResponse* response) {
  if (auto refused = RefuseAnonymousChange(ctx, "MovePodsToActiveQueue")) return *refused;
  if (request->pods_size() > kMaxPodsPerMove) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                  absl::StrCat("pods: ", request->pods_size(), " pods, at most ",
                                               kMaxPodsPerMove, " per call"));
  }
  if (request->pods_size() == 0) {
    response->set_moved(static_cast<int32_t>(queue_.MoveAllToActiveQueue()));
  } else {
    std::vector<std::string> uids;
    for (const auto& ref : request->pods()) {
      if (!ref.uid().empty()) {
        uids.push_back(ref.uid());
        continue;
      }
      for (std::string& uid : queue_.UidsOf(ref.namespace_(), ref.name())) uids.push_back(std::move(uid));
    }
    response->set_moved(static_cast<int32_t>(queue_.Activate(uids)));
  }
  return grpc::Status::OK;
}

grpc::Status AdminService::GetStatus(grpc::ServerContext* ctx,
                                                  const v1::GetStatusRequest*,
                                                  v1::SchedulerStatus* response) {
  response->set_paused(scheduler_.paused());
  response->set_log_verbosity(logger_.verbosity());
  if (cluster_ != nullptr) {
    const ClusterService::Stats s = cluster_->stats();
    response->set_adapter_connected(s.adapter_connected);
    response->set_adapter(s.adapter);
    response->set_pending_actions(s.pending_actions);
    response->set_refused_adapter_streams(s.refused_streams);
    response->set_refused_actions(s.refused_actions);
    response->set_unknown_action_results(s.unknown_results);
  }
  const batching::BatchStats batch = scheduler_.batch_stats();
  v1::BatchingStatus* b = response->mutable_batching();
  b->set_hits(batch.hits);
  b->set_misses(batch.misses);
  b->set_unsignable(batch.unsignable);
  b->set_nodes_reevaluated(batch.nodes_reevaluated);
  b->set_what_if_verdicts(batch.what_if_verdicts);
  b->set_hits_without_request(batch.hits_without_request);
  b->set_lookaheads_sent(batch.lookaheads_sent);
  b->set_lookahead_hits(batch.lookahead_hits);
  b->set_nominated_checks_sent(batch.nominated_checks_sent);
  b->set_nominated_check_hits(batch.nominated_check_hits);
  b->set_preemption_what_if_hits(batch.preemption_what_if_hits);
  b->set_preemption_what_if_gone_nodes(batch.preemption_what_if_gone_nodes);
  for (const auto& [result, n] : batch.by_outcome) (*b->mutable_pods_by_result())[result] = n;
  for (const auto& [reason, n] : batch.unsignable_reasons) (*b->mutable_unsignable_reasons())[reason] = n;
  if (response->paused()) {
    response->set_scheduling_held_because("paused by an operator");
  } else if (!response->adapter_connected()) {
    response->set_scheduling_held_because("no adapter is connected");
  } else if (!scheduler_.adapter_connected()) {
    response->set_scheduling_held_because("waiting for the adapter's complete list");
  }
  return grpc::Status::OK;
}

namespace {

v1::SchedulingDecision ToProto(const SchedulingDecision& d) {
  v1::SchedulingDecision out;
  auto* ref = out.mutable_pod();
  ref->set_kind("Pod");
  ref->set_uid(d.pod_uid);
  ref->set_namespace_(d.pod_namespace);
  ref->set_name(d.pod_name);
  switch (d.result) {
    case SchedulingDecision::Result::kScheduled: out.set_result(v1::SchedulingDecision::SCHEDULED); break;
    case SchedulingDecision::Result::kUnschedulable: out.set_result(v1::SchedulingDecision::UNSCHEDULABLE); break;
    case SchedulingDecision::Result::kError: out.set_result(v1::SchedulingDecision::ERROR); break;
  }
  out.set_node_name(d.node_name);
  out.set_nominated_node_name(d.nominated_node_name);
  out.set_message(d.message);
  out.set_attempt_ms(absl::ToDoubleMilliseconds(d.attempt));
  out.set_time_us(absl::ToUnixMicros(d.time));
  out.set_profile(d.profile);
  return out;
}

// One unary call of `Request` -> `Response`: asks gRPC for the call, runs the
// handler on the driver thread when it arrives (asking for the next one
// first), sends the answer, and deletes itself when the answer's completion
// (or the failed request, at shutdown) comes back.
template <typename Request, typename Response>
class UnaryCall final {
 public:
  using Requester = void (*)(v1::Admin::AsyncService&, grpc::ServerContext*, Request*,
                             grpc::ServerAsyncResponseWriter<Response>*, grpc::ServerCompletionQueue*, void*);
  using Handler = grpc::Status (AdminService::*)(grpc::ServerContext*, const Request*, Response*);

  static void Listen(AdminService& admin, v1::Admin::AsyncService& async, grpc::ServerCompletionQueue* queue,
                     Requester request, Handler handler) {
    auto* call = new UnaryCall(admin, async, queue, request, handler);
    if (!admin.StartOperation(
            [&] { request(async, &call->context_, &call->request_, &call->writer_, queue, &call->accepted_); })) {
      delete call;
    }
  }

 private:
  UnaryCall(AdminService& admin, v1::Admin::AsyncService& async, grpc::ServerCompletionQueue* queue,
            Requester request, Handler handler)
      : admin_(admin), async_(async), queue_(queue), requester_(request), handler_(handler) {}

  void OnAccepted(bool ok) {
    if (!ok) {  // The server is shutting down: the call never started.
      delete this;
      return;
    }
    Listen(admin_, async_, queue_, requester_, handler_);
    const grpc::Status status = (admin_.*handler_)(&context_, &request_, &response_);
    const bool answered = admin_.StartOperation([&] {
      if (status.ok()) {
        writer_.Finish(response_, status, &finished_);
      } else {
        writer_.FinishWithError(status, &finished_);
      }
    });
    if (!answered) delete this;  // Stopped: nothing pending on this call.
  }

  void OnFinished(bool /*ok*/) { delete this; }

  AdminService& admin_;
  v1::Admin::AsyncService& async_;
  grpc::ServerCompletionQueue* const queue_;
  const Requester requester_;
  const Handler handler_;
  grpc::ServerContext context_;
  Request request_;
  Response response_;
  grpc::ServerAsyncResponseWriter<Response> writer_{&context_};
  grpc_support::CompletionOf<UnaryCall> accepted_{this, &UnaryCall::OnAccepted};
  grpc_support::CompletionOf<UnaryCall> finished_{this, &UnaryCall::OnFinished};
};

// The two decision streams. WatchDecisions writes one decision per message,
// as it is made; WatchDecisionBatches gathers for kGather after the first
// waiting decision and writes every decision waiting (up to kMax) in one.
struct OneDecision {
  using Message = v1::SchedulingDecision;
  static constexpr absl::Duration kGather = absl::ZeroDuration();  // Written as made.
  static void Request(v1::Admin::AsyncService& async, grpc::ServerContext* context, v1::WatchDecisionsRequest* request,
                      grpc::ServerAsyncWriter<Message>* writer, grpc::ServerCompletionQueue* queue, void* tag) {
    async.RequestWatchDecisions(context, request, writer, queue, queue, tag);
  }
  // False when no decision is waiting.
  static bool Fill(DecisionQueue& queue, Message& message) {
    std::optional<SchedulingDecision> next = queue.Pop();
    if (!next) return false;
    message = ToProto(*next);
    return true;
  }
};

struct DecisionBatches {
  using Message = v1::DecisionBatch;
  static constexpr size_t kMax = 1000;  // About 100 KB.
  // A message leaves at most this long after the first decision it carries:
  // a write started for each decision as it is made (the publishing thread
  // is the scheduling loop) coalesced nothing on a busy scheduler, as each
  // write completed before the next decision.
  static constexpr absl::Duration kGather = absl::Milliseconds(5);
  static void Request(v1::Admin::AsyncService& async, grpc::ServerContext* context, v1::WatchDecisionsRequest* request,
                      grpc::ServerAsyncWriter<Message>* writer, grpc::ServerCompletionQueue* queue, void* tag) {
    async.RequestWatchDecisionBatches(context, request, writer, queue, queue, tag);
  }
  static bool Fill(DecisionQueue& queue, Message& message) {
    std::vector<SchedulingDecision> taken = queue.PopUpTo(kMax);
    if (taken.empty()) return false;
    message.Clear();
    message.mutable_decisions()->Reserve(static_cast<int>(taken.size()));
    for (const SchedulingDecision& d : taken) *message.add_decisions() = ToProto(d);
    return true;
  }
};

// WatchDecisions(Batches): streams decisions from the subscriber's bounded
// queue in the broadcaster (a slow reader loses the oldest, counted there).
// One write in flight, started by the driver or by the thread that publishes
// a decision (batches: by the driver only, when the gather alarm fires), under
// mu_. Deletes itself on the driver once every operation
// completed, after unsubscribing. Lock order: broadcaster -> mu_ -> the
// DecisionQueue.
template <typename Stream>
class DecisionWriter final {
 public:
  static void Listen(AdminService& admin, DecisionBroadcaster& broadcaster, v1::Admin::AsyncService& async,
                     grpc::ServerCompletionQueue* queue) {
    auto* call = new DecisionWriter(admin, broadcaster, async, queue);
    if (!admin.StartOperation([&] {
          Stream::Request(async, &call->context_, &call->request_, &call->writer_, queue, &call->accepted_);
        })) {
      delete call;
    }
  }

 private:
  DecisionWriter(AdminService& admin, DecisionBroadcaster& broadcaster, v1::Admin::AsyncService& async,
                 grpc::ServerCompletionQueue* queue)
      : admin_(admin), broadcaster_(broadcaster), async_(async), queue_(queue) {
    // Before the call is requested, as gRPC requires.
    context_.AsyncNotifyWhenDone(&call_done_);
  }

  void OnAccepted(bool ok) {
    if (!ok) {  // The server is shutting down: the call never started (no call-done tag).
      delete this;
      return;
    }
    Listen(admin_, broadcaster_, async_, queue_);
    {
      absl::MutexLock lock(&mu_);
      call_pending_ = true;
    }
    auto subscription = broadcaster_.Subscribe([this] {
      absl::MutexLock lock(&mu_);
      MaybeWrite();
    });
    bool done = false;
    {
      absl::MutexLock lock(&mu_);
      if (subscription.ok()) {
        id_ = subscription->id;
        decisions_ = subscription->queue;
        MaybeWrite();
      } else {
        FinishLocked(grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, std::string(subscription.status().message())));
      }
      done = DoneLocked();
    }
    if (done) Forget();
  }

  void OnWriteDone(bool ok) {
    bool done = false;
    {
      absl::MutexLock lock(&mu_);
      writing_ = false;
      // As in Cluster.Sync: the status may have been decided while this
      // write was in flight (the watcher went away), and waited for it.
      if (!ok) FinishLocked(grpc::Status::CANCELLED);
      if (finished_) {
        StartFinishLocked();  // It waited for this write.
      } else {
        MaybeWrite();
      }
      done = DoneLocked();
    }
    if (done) Forget();
  }

  void OnGathered(bool ok) {
    bool done = false;
    {
      absl::MutexLock lock(&mu_);
      alarm_pending_ = false;
      if (ok) MaybeWrite(/*gathered=*/true);
      done = DoneLocked();
    }
    if (done) Forget();
  }

  void OnFinished(bool /*ok*/) {
    bool done = false;
    {
      absl::MutexLock lock(&mu_);
      finish_pending_ = false;
      done = DoneLocked();
    }
    if (done) Forget();
  }

  // The watcher went away (cancelled, deadline) or the call ended.
  void OnCallDone(bool /*ok*/) {
    bool done = false;
    {
      absl::MutexLock lock(&mu_);
      call_pending_ = false;
      if (context_.IsCancelled()) FinishLocked(grpc::Status::CANCELLED);
      done = DoneLocked();
    }
    if (done) Forget();
  }

  // `gathered`: the gather alarm fired (a stream that gathers writes only then).
  void MaybeWrite(bool gathered = false) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (writing_ || finished_ || decisions_ == nullptr) return;
    if (Stream::kGather > absl::ZeroDuration() && !gathered) {
      if (!alarm_pending_ && decisions_->size() > 0) {
        alarm_pending_ = admin_.StartOperation([&] {
          alarm_.Set(queue_, std::chrono::system_clock::now() + absl::ToChronoMicroseconds(Stream::kGather),
                     &gathered_);
        });
      }
      return;
    }
    if (!Stream::Fill(*decisions_, current_)) return;
    writing_ = admin_.StartOperation([&] { writer_.Write(current_, &written_); });
  }

  void FinishLocked(grpc::Status status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (finished_) return;
    finished_ = true;
    status_ = std::move(status);
    if (alarm_pending_) alarm_.Cancel();  // Its tag still comes (not ok).
    StartFinishLocked();
  }

  // The async API allows one write-side operation at a time.
  void StartFinishLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (!finished_ || finish_started_ || writing_) return;
    finish_pending_ = admin_.StartOperation([&] { writer_.Finish(status_, &finished_tag_); });
    finish_started_ = true;  // Or given up: stopped.
  }

  // Every operation completed and none will start (the status was sent, or
  // the service stopped).
  bool DoneLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (done_ || writing_ || finish_pending_ || call_pending_ || alarm_pending_) return false;
    if (!finish_started_ && !admin_.stopped()) return false;
    done_ = true;
    return true;
  }

  // Once Unsubscribe returns no notification runs (they run under the
  // broadcaster's lock), so the writer can go.
  void Forget() ABSL_LOCKS_EXCLUDED(mu_) {
    uint64_t id = 0;
    {
      absl::MutexLock lock(&mu_);
      id = id_;
    }
    if (id != 0) broadcaster_.Unsubscribe(id);
    delete this;
  }

  AdminService& admin_;
  DecisionBroadcaster& broadcaster_;
  v1::Admin::AsyncService& async_;
  grpc::ServerCompletionQueue* const queue_;
  grpc::ServerContext context_;
  v1::WatchDecisionsRequest request_;
  grpc::ServerAsyncWriter<typename Stream::Message> writer_{&context_};
  grpc_support::CompletionOf<DecisionWriter> accepted_{this, &DecisionWriter::OnAccepted};
  grpc_support::CompletionOf<DecisionWriter> written_{this, &DecisionWriter::OnWriteDone};
  grpc_support::CompletionOf<DecisionWriter> finished_tag_{this, &DecisionWriter::OnFinished};
  grpc_support::CompletionOf<DecisionWriter> call_done_{this, &DecisionWriter::OnCallDone};
  grpc_support::CompletionOf<DecisionWriter> gathered_{this, &DecisionWriter::OnGathered};
  grpc::Alarm alarm_;
  absl::Mutex mu_;
  uint64_t id_ ABSL_GUARDED_BY(mu_) = 0;
  std::shared_ptr<DecisionQueue> decisions_ ABSL_GUARDED_BY(mu_);
  typename Stream::Message current_ ABSL_GUARDED_BY(mu_);
  grpc::Status status_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool alarm_pending_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;  // status_ decided.
  bool finish_started_ ABSL_GUARDED_BY(mu_) = false;
  bool finish_pending_ ABSL_GUARDED_BY(mu_) = false;
  bool call_pending_ ABSL_GUARDED_BY(mu_) = false;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace

void AdminService::Start(grpc::ServerCompletionQueue* queue) {
#define PODIUM_ADMIN_UNARY(M, Req, Resp)                                                                     \
  UnaryCall<v1::Req, v1::Resp>::Listen(                                                                \
      *this, async_, queue,                                                                            \
      +[](v1::Admin::AsyncService& async, grpc::ServerContext* context, v1::Req* request,              \
          grpc::ServerAsyncResponseWriter<v1::Resp>* writer, grpc::ServerCompletionQueue* cq,          \
          void* tag) { async.Request##M(context, request, writer, cq, cq, tag); },                     \
      &AdminService::M)
  PODIUM_ADMIN_UNARY(ListQueuedPods, ListQueuedPodsRequest, ListQueuedPodsResponse);
  PODIUM_ADMIN_UNARY(ExplainPod, ExplainPodRequest, ExplainPodResponse);
  PODIUM_ADMIN_UNARY(DumpCache, DumpCacheRequest, DumpCacheResponse);
  PODIUM_ADMIN_UNARY(ListPlugins, ListPluginsRequest, ListPluginsResponse);
  PODIUM_ADMIN_UNARY(SetSchedulingPaused, SetSchedulingPausedRequest, SetSchedulingPausedResponse);
  PODIUM_ADMIN_UNARY(MovePodsToActiveQueue, MovePodsToActiveQueueRequest, MovePodsToActiveQueueResponse);
  PODIUM_ADMIN_UNARY(GetStatus, GetStatusRequest, SchedulerStatus);
  PODIUM_ADMIN_UNARY(SetLogVerbosity, SetLogVerbosityRequest, SetLogVerbosityResponse);
#undef PODIUM_ADMIN_UNARY
  DecisionWriter<OneDecision>::Listen(*this, scheduler_.decisions(), async_, queue);
  DecisionWriter<DecisionBatches>::Listen(*this, scheduler_.decisions(), async_, queue);
}

void AdminService::Stop() {
  absl::MutexLock lock(&calls_mu_);
  calls_stopped_ = true;
}

}  // namespace podium::scheduler
