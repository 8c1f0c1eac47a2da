#include "server/admin_service.h"

#include <deque>

#include "absl/synchronization/mutex.h"
#include "cache/cache.h"
#include "queue/scheduling_queue.h"
#include "remote/grpc_plugin_process.h"
#include "scheduler.h"

namespace podium::scheduler {
namespace {

grpc::ServerUnaryReactor* Done(grpc::CallbackServerContext* ctx, grpc::Status status = grpc::Status::OK) {
  auto* reactor = ctx->DefaultReactor();
  reactor->Finish(status);
  return reactor;
}

v1::QueueName ToQueueName(QueueKind kind) {
  switch (kind) {
    case QueueKind::kActive: return v1::ACTIVE;
    case QueueKind::kBackoff: return v1::BACKOFF;
    case QueueKind::kUnschedulable: return v1::UNSCHEDULABLE;
    case QueueKind::kGated: return v1::GATED;
  }
  return v1::QUEUE_UNSPECIFIED;
}

void FillQueuedPod(const QueuedPodSummary& s, v1::QueuedPod* out) {
  const v1::Pod& pod = *s.pod_info->pod;
  auto* ref = out->mutable_pod();
  ref->set_kind("Pod");
  ref->set_uid(pod.meta().uid());
  ref->set_namespace_(pod.meta().namespace_());
  ref->set_name(pod.meta().name());
  out->set_queue(ToQueueName(s.queue));
  out->set_priority(pod.priority());
  out->set_attempts(s.attempts);
  if (s.backoff_expiry != absl::InfinitePast()) out->set_backoff_expiry_us(absl::ToUnixMicros(s.backoff_expiry));
  out->set_enqueued_us(absl::ToUnixMicros(s.timestamp));
  for (const auto& p : s.unschedulable_plugins) out->add_unschedulable_plugins(p);
  for (const auto& p : s.pending_plugins) out->add_pending_plugins(p);
  out->set_message(s.message);
}

}  // namespace

grpc::ServerUnaryReactor* AdminService::ListQueuedPods(grpc::CallbackServerContext* ctx,
                                                       const v1::ListQueuedPodsRequest* request,
                                                       v1::ListQueuedPodsResponse* response) {
  int total = 0;
  for (const auto& s : queue_.List()) {
    if (request->queue() != v1::QUEUE_UNSPECIFIED && ToQueueName(s.queue) != request->queue()) continue;
    if (!request->namespace_().empty() && s.pod_info->pod->meta().namespace_() != request->namespace_()) continue;
    ++total;
    if (request->limit() > 0 && response->pods_size() >= request->limit()) continue;
    FillQueuedPod(s, response->add_pods());
  }
  response->set_total(total);
  return Done(ctx);
}

grpc::ServerUnaryReactor* AdminService::ExplainPod(grpc::CallbackServerContext* ctx,
                                                   const v1::ExplainPodRequest* request,
                                                   v1::ExplainPodResponse* response) {
  std::optional<PodDiagnosis> last = scheduler_.LastDiagnosis(request->namespace_(), request->name());
  if (!last) {
    return Done(ctx, grpc::Status(grpc::StatusCode::NOT_FOUND,
                                  "no failed scheduling attempt recorded for pod " +
                                      request->namespace_() + "/" + request->name()));
  }
  if (auto s = queue_.Find(last->pod_uid)) FillQueuedPod(*s, response->mutable_pod());
  // An attempt that broke is reported as an error, not as "unschedulable".
  response->set_message(last->error ? "error: " + last->message : last->message);
  for (const auto& [node, status] : last->sample) {
    auto* verdict = response->add_nodes();
    verdict->set_node_name(node);
    status.ToProto(verdict->mutable_status());
  }
  response->set_nominated_node_name(last->nominated_node_name);
  return Done(ctx);
}

grpc::ServerUnaryReactor* AdminService::DumpCache(grpc::CallbackServerContext* ctx,
                                                  const v1::DumpCacheRequest* request,
                                                  v1::DumpCacheResponse* response) {
  cache_.Dump(request->include_pods(), response);
  return Done(ctx);
}

grpc::ServerUnaryReactor* AdminService::ListPlugins(grpc::CallbackServerContext* ctx,
                                                    const v1::ListPluginsRequest*,
                                                    v1::ListPluginsResponse* response) {
  for (GrpcPluginProcess* endpoint : endpoints_) {
    auto* info = response->add_endpoints();
    info->set_endpoint(endpoint->name() + " (" + endpoint->address() + ")");
    info->set_state(endpoint->ready() ? v1::PluginEndpointInfo::READY : v1::PluginEndpointInfo::FAILED);
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
  }
  return Done(ctx);
}

grpc::ServerUnaryReactor* AdminService::SetSchedulingPaused(
    grpc::CallbackServerContext* ctx, const v1::SetSchedulingPausedRequest* request,
    v1::SetSchedulingPausedResponse* response) {
  scheduler_.SetPaused(request->paused());
  response->set_paused(scheduler_.paused());
  return Done(ctx);
}

grpc::ServerUnaryReactor* AdminService::MovePodsToActiveQueue(
    grpc::CallbackServerContext* ctx, const v1::MovePodsToActiveQueueRequest* request,
    v1::MovePodsToActiveQueueResponse* response) {
  if (request->pods_size() == 0) {
    response->set_moved(static_cast<int32_t>(queue_.MoveAllToActiveQueue()));
  } else {
    std::vector<std::string> uids;
    for (const auto& ref : request->pods()) {
      if (!ref.uid().empty()) {
        uids.push_back(ref.uid());
        continue;
      }
      for (const auto& s : queue_.List()) {
        const auto& meta = s.pod_info->pod->meta();
        if (meta.namespace_() == ref.namespace_() && meta.name() == ref.name()) uids.push_back(meta.uid());
      }
    }
    response->set_moved(static_cast<int32_t>(queue_.Activate(uids)));
  }
  return Done(ctx);
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
  out.set_message(d.message);
  out.set_attempt_ms(absl::ToDoubleMilliseconds(d.attempt));
  out.set_time_us(absl::ToUnixMicros(d.time));
  out.set_profile(d.profile);
  return out;
}

// Streams decisions from the subscriber's bounded queue in the broadcaster
// (a slow reader loses the oldest, counted there). One write in flight.
// Lock order: broadcaster -> mu_ -> the DecisionQueue.
class DecisionWriter final : public grpc::ServerWriteReactor<v1::SchedulingDecision> {
 public:
  explicit DecisionWriter(DecisionBroadcaster& broadcaster) : broadcaster_(broadcaster) {
    auto subscription = broadcaster_.Subscribe([this] {
      absl::MutexLock lock(&mu_);
      MaybeWrite();
    });
    if (!subscription.ok()) {
      absl::MutexLock lock(&mu_);
      FinishLocked(grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, std::string(subscription.status().message())));
      return;
    }
    absl::MutexLock lock(&mu_);
    id_ = subscription->id;
    queue_ = subscription->queue;
    MaybeWrite();
  }

  void OnWriteDone(bool ok) override {
    absl::MutexLock lock(&mu_);
    writing_ = false;
    if (!ok) {
      FinishLocked(grpc::Status::CANCELLED);
      return;
    }
    MaybeWrite();
  }

  void OnCancel() override {
    absl::MutexLock lock(&mu_);
    FinishLocked(grpc::Status::CANCELLED);
  }

  void OnDone() override {
    if (id_ != 0) broadcaster_.Unsubscribe(id_);
    delete this;
  }

 private:
  void MaybeWrite() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (writing_ || finished_ || queue_ == nullptr) return;
    std::optional<SchedulingDecision> next = queue_->Pop();
    if (!next) return;
    current_ = ToProto(*next);
    writing_ = true;
    StartWrite(&current_);
  }

  void FinishLocked(grpc::Status status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (!finished_) {
      finished_ = true;
      Finish(status);
    }
  }

  DecisionBroadcaster& broadcaster_;
  uint64_t id_ = 0;
  absl::Mutex mu_;
  std::shared_ptr<DecisionQueue> queue_ ABSL_GUARDED_BY(mu_);
  v1::SchedulingDecision current_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace

grpc::ServerWriteReactor<v1::SchedulingDecision>* AdminService::WatchDecisions(
    grpc::CallbackServerContext*, const v1::WatchDecisionsRequest*) {
  return new DecisionWriter(scheduler_.decisions());
}

}  // namespace podium::scheduler
