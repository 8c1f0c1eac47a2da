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
  auto last = scheduler_.LastDiagnosis(request->namespace_(), request->name());
  if (!last) {
    return Done(ctx, grpc::Status(grpc::StatusCode::NOT_FOUND,
                                  "no failed scheduling attempt recorded for pod " +
                                      request->namespace_() + "/" + request->name()));
  }
  const auto& [pod, diagnosis] = *last;
  if (auto s = queue_.Find(pod.meta().uid())) FillQueuedPod(*s, response->mutable_pod());
  response->set_message(diagnosis.Message());
  for (const auto& [node, status] : diagnosis.node_statuses) {
    auto* verdict = response->add_nodes();
    verdict->set_node_name(node);
    status.ToProto(verdict->mutable_status());
  }
  response->set_nominated_node_name(pod.nominated_node_name());
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

// Streams decisions; a slow reader loses the oldest (bounded backlog).
class DecisionWriter final : public grpc::ServerWriteReactor<v1::SchedulingDecision> {
 public:
  explicit DecisionWriter(DecisionBroadcaster& broadcaster) : broadcaster_(broadcaster) {
    id_ = broadcaster_.Subscribe([this](const v1::SchedulingDecision& d) { Offer(d); });
  }

  void OnWriteDone(bool ok) override {
    absl::MutexLock lock(&mu_);
    writing_ = false;
    if (!ok) {
      FinishLocked(grpc::Status::CANCELLED);
      return;
    }
    backlog_.pop_front();
    MaybeWrite();
  }

  void OnCancel() override {
    absl::MutexLock lock(&mu_);
    FinishLocked(grpc::Status::CANCELLED);
  }

  void OnDone() override {
    broadcaster_.Unsubscribe(id_);
    delete this;
  }

 private:
  static constexpr size_t kMaxBacklog = 100000;

  void Offer(const v1::SchedulingDecision& d) {
    absl::MutexLock lock(&mu_);
    if (finished_) return;
    if (backlog_.size() >= kMaxBacklog && !writing_) backlog_.pop_front();
    backlog_.push_back(d);
    MaybeWrite();
  }

  void MaybeWrite() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (!writing_ && !finished_ && !backlog_.empty()) {
      writing_ = true;
      StartWrite(&backlog_.front());
    }
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
  std::deque<v1::SchedulingDecision> backlog_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace

grpc::ServerWriteReactor<v1::SchedulingDecision>* AdminService::WatchDecisions(
    grpc::CallbackServerContext*, const v1::WatchDecisionsRequest*) {
  return new DecisionWriter(scheduler_.decisions());
}

}  // namespace podium::scheduler
