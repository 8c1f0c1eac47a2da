// Admin: what operators ask the running scheduler (podiumctl, grpcurl).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "logging/logger.h"
#include "podium/v1/admin.grpc.pb.h"

namespace grpc {
class ServerCompletionQueue;
}

namespace podium::scheduler {

class Scheduler;
class SchedulingQueue;
class Cache;
class GrpcPluginProcess;
class ClusterService;

// Translates between the Admin protos and the queue's, cache's and
// scheduler's plain types. Input it repeats in an error is cut to 256 bytes.
//
// Served on gRPC's async API: register service() with the ServerBuilder, call
// Start with the server's completion queue (drained by the process's
// AsyncDriver) once the server is built; the methods run on the driver thread
// and only read or set the scheduler's state under its own locks (never a
// plugin call). The service must outlive the driver's drain (the server's
// Shutdown ends every call; the driver delivers their last completions).
class AdminService final {
 public:
  static constexpr int32_t kDefaultPageSize = 500;
  static constexpr int32_t kMaxPageSize = 5000;
  // MovePodsToActiveQueue refuses longer lists.
  static constexpr int kMaxPodsPerMove = 10000;

  static constexpr int32_t kMaxLogVerbosity = 10;

  // `cluster` (may be null: no adapter status) says whether an adapter is
  // connected. `logger` (null: the process's) is what SetLogVerbosity changes.
  AdminService(Scheduler& scheduler, SchedulingQueue& queue, Cache& cache,
               std::vector<GrpcPluginProcess*> endpoints, const ClusterService* cluster = nullptr,
               logging::Logger* logger = nullptr)
      : scheduler_(scheduler),
        queue_(queue),
        cache_(cache),
        endpoints_(std::move(endpoints)),
        cluster_(cluster),
        logger_(logger != nullptr ? *logger : logging::Default()) {}

  // Mutating calls (SetSchedulingPaused, MovePodsToActiveQueue,
  // SetLogVerbosity) need a caller identity, which only AccessControl gives
  // (a bearer token or a client certificate). podium-scheduler turns this on:
  // without --token-auth-file / --client-ca-file, they are refused with
  // UNAUTHENTICATED instead of being open to whoever reaches the socket.
  void RequireIdentityForChanges(bool require) { require_identity_ = require; }

  // The nominations (preemption's nominator), node name -> the pods
  // nominated there, for DumpCache's nominated_pods. Set before Start;
  // unset, no node lists a nominated pod. Called on the driver thread: it
  // must take only the nominator's own lock.
  using NominationsFn = std::function<std::map<std::string, std::vector<v1::ObjectRef>>()>;
  // And the node one pod is nominated to ("" when none), for ExplainPod.
  using NominatedNodeFn = std::function<std::string(std::string_view uid)>;
  void SetNominations(NominationsFn nominations, NominatedNodeFn nominated_node_of) {
    nominations_ = std::move(nominations);
    nominated_node_of_ = std::move(nominated_node_of);
  }

  grpc::Service* service() { return &async_; }
  // After BuildAndStart: waits for calls of every method on `queue`.
  void Start(grpc::ServerCompletionQueue* queue);
  // After the server's Shutdown, before the driver shuts the queue down:
  // starts no more gRPC operations; each call is deleted on the driver with
  // its last one.
  void Stop() ABSL_LOCKS_EXCLUDED(calls_mu_);

  bool stopped() const ABSL_LOCKS_EXCLUDED(calls_mu_) {
    absl::MutexLock lock(&calls_mu_);
    return calls_stopped_;
  }
  // Runs `start` (which starts a gRPC operation) unless Stop was called;
  // returns whether it ran. For the calls in admin_service.cc.
  template <typename Start>
  bool StartOperation(Start&& start) ABSL_LOCKS_EXCLUDED(calls_mu_) {
    absl::MutexLock lock(&calls_mu_);
    if (calls_stopped_) return false;
    start();
    return true;
  }

  // The unary methods (also called directly by tests). WatchDecisions and
  // WatchDecisionBatches, the server streams, are served by writers of their
  // own (admin_service.cc).

  grpc::Status ListQueuedPods(grpc::ServerContext* ctx, const v1::ListQueuedPodsRequest* request,
                              v1::ListQueuedPodsResponse* response);
  grpc::Status ExplainPod(grpc::ServerContext* ctx, const v1::ExplainPodRequest* request,
                          v1::ExplainPodResponse* response);
  grpc::Status DumpCache(grpc::ServerContext* ctx, const v1::DumpCacheRequest* request,
                         v1::DumpCacheResponse* response);
  grpc::Status ListPlugins(grpc::ServerContext* ctx, const v1::ListPluginsRequest* request,
                           v1::ListPluginsResponse* response);
  grpc::Status SetSchedulingPaused(grpc::ServerContext* ctx, const v1::SetSchedulingPausedRequest* request,
                                   v1::SetSchedulingPausedResponse* response);
  grpc::Status MovePodsToActiveQueue(grpc::ServerContext* ctx, const v1::MovePodsToActiveQueueRequest* request,
                                     v1::MovePodsToActiveQueueResponse* response);
  grpc::Status GetStatus(grpc::ServerContext* ctx, const v1::GetStatusRequest* request,
                         v1::SchedulerStatus* response);
  grpc::Status SetLogVerbosity(grpc::ServerContext* ctx, const v1::SetLogVerbosityRequest* request,
                               v1::SetLogVerbosityResponse* response);

 private:
  Scheduler& scheduler_;
  SchedulingQueue& queue_;
  Cache& cache_;
  std::vector<GrpcPluginProcess*> endpoints_;
  const ClusterService* cluster_;
  logging::Logger& logger_;
  bool require_identity_ = false;
  NominationsFn nominations_;
  NominatedNodeFn nominated_node_of_;
  v1::Admin::AsyncService async_;
  mutable absl::Mutex calls_mu_;
  bool calls_stopped_ ABSL_GUARDED_BY(calls_mu_) = false;
  // The refusal for a mutating call without an identity; nullopt: go ahead.
  std::optional<grpc::Status> RefuseAnonymousChange(grpc::ServerContext* ctx,
                                                    std::string_view method) const;
};

}  // namespace podium::scheduler
