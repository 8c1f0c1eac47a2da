// Admin: what operators ask the running scheduler (podiumctl, grpcurl).
#pragma once

#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "logging/logger.h"
#include "podium/v1/admin.grpc.pb.h"

namespace podium::scheduler {

class Scheduler;
class SchedulingQueue;
class Cache;
class GrpcPluginProcess;
class ClusterService;

// Translates between the Admin protos and the queue's, cache's and
// scheduler's plain types. Input it repeats in an error is cut to 256 bytes.
class AdminService final : public v1::Admin::CallbackService {
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

  grpc::ServerUnaryReactor* ListQueuedPods(grpc::CallbackServerContext* ctx,
                                           const v1::ListQueuedPodsRequest* request,
                                           v1::ListQueuedPodsResponse* response) override;
  grpc::ServerUnaryReactor* ExplainPod(grpc::CallbackServerContext* ctx,
                                       const v1::ExplainPodRequest* request,
                                       v1::ExplainPodResponse* response) override;
  grpc::ServerUnaryReactor* DumpCache(grpc::CallbackServerContext* ctx,
                                      const v1::DumpCacheRequest* request,
                                      v1::DumpCacheResponse* response) override;
  grpc::ServerUnaryReactor* ListPlugins(grpc::CallbackServerContext* ctx,
                                        const v1::ListPluginsRequest* request,
                                        v1::ListPluginsResponse* response) override;
  grpc::ServerUnaryReactor* SetSchedulingPaused(grpc::CallbackServerContext* ctx,
                                                const v1::SetSchedulingPausedRequest* request,
                                                v1::SetSchedulingPausedResponse* response) override;
  grpc::ServerUnaryReactor* MovePodsToActiveQueue(grpc::CallbackServerContext* ctx,
                                                  const v1::MovePodsToActiveQueueRequest* request,
                                                  v1::MovePodsToActiveQueueResponse* response) override;
  grpc::ServerWriteReactor<v1::SchedulingDecision>* WatchDecisions(
      grpc::CallbackServerContext* ctx, const v1::WatchDecisionsRequest* request) override;
  grpc::ServerUnaryReactor* GetStatus(grpc::CallbackServerContext* ctx,
                                      const v1::GetStatusRequest* request,
                                      v1::SchedulerStatus* response) override;
  grpc::ServerUnaryReactor* SetLogVerbosity(grpc::CallbackServerContext* ctx,
                                            const v1::SetLogVerbosityRequest* request,
                                            v1::SetLogVerbosityResponse* response) override;

 private:
  Scheduler& scheduler_;
  SchedulingQueue& queue_;
  Cache& cache_;
  std::vector<GrpcPluginProcess*> endpoints_;
  const ClusterService* cluster_;
  logging::Logger& logger_;
  bool require_identity_ = false;
  // The refusal for a mutating call without an identity; nullopt: go ahead.
  std::optional<grpc::Status> RefuseAnonymousChange(grpc::CallbackServerContext* ctx,
                                                    std::string_view method) const;
};

}  // namespace podium::scheduler
