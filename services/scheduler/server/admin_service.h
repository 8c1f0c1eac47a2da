// Admin: what operators ask the running scheduler (podiumctl, grpcurl).
#pragma once

#include <memory>
#include <vector>

#include "podium/v1/admin.grpc.pb.h"

namespace podium::scheduler {

class Scheduler;
class SchedulingQueue;
class Cache;
class GrpcPluginProcess;

class AdminService final : public v1::Admin::CallbackService {
 public:
  AdminService(Scheduler& scheduler, SchedulingQueue& queue, Cache& cache,
               std::vector<GrpcPluginProcess*> endpoints)
      : scheduler_(scheduler), queue_(queue), cache_(cache), endpoints_(std::move(endpoints)) {}

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

 private:
  Scheduler& scheduler_;
  SchedulingQueue& queue_;
  Cache& cache_;
  std::vector<GrpcPluginProcess*> endpoints_;
};

}  // namespace podium::scheduler
