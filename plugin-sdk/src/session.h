// One Plugin.Run stream as the plugin process sees it, without the transport:
// the handshake, the plugin instances built from Open, the mirror, cycle
// states, and the extension points run for each request. Messages are handled
// one at a time, in stream order, never concurrently: on the gRPC thread that
// read them or on the stream's worker (plugin_server.cc says which).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/btree_map.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "google/protobuf/arena.h"
#include "mirror.h"
#include "podium/sdk/extension_points.h"
#include "podium/sdk/framework.h"
#include "podium/v1/plugin.pb.h"

namespace podium::sdk::internal {

// A message to the scheduler, built on its own arena: filling in a node's
// status allocates nothing from the heap, and the whole answer is freed at once
// after it has been written. Pooled by the sink.
class Response {
 public:
  Response();
  Response(const Response&) = delete;
  Response& operator=(const Response&) = delete;
  v1::PluginToScheduler& message() { return *message_; }
  // Empties the message, keeping the arena's first block.
  void Reset();

 private:
  static constexpr size_t kInitialBlockBytes = 64 * 1024;
  std::unique_ptr<char[]> initial_block_;
  google::protobuf::Arena arena_;
  v1::PluginToScheduler* message_;
};
using ResponsePtr = std::unique_ptr<Response>;

// Where a session's messages go: the stream. Thread-safe (plugins may speak
// first from their own threads).
class ResponseSink {
 public:
  virtual ~ResponseSink() = default;
  // An empty response to fill and Send.
  virtual ResponsePtr NewResponse() { return std::make_unique<Response>(); }
  // Returns false when the stream is gone; the message is dropped.
  virtual bool Send(ResponsePtr response) = 0;
};

enum class ExtensionPointKind {
  kPreEnqueue,
  kPreFilter,
  kFilter,
  kPreScore,
  kScore,
  kReserve,
  kPermit,
  kPreBind,
  kBind,
  kPostBind,
};

// A plugin built for one stream, with its interfaces resolved once.
struct PluginInstance {
  std::string name;  // As registered (the definition's name).
  PluginPtr plugin;
  PreEnqueuePlugin* pre_enqueue = nullptr;
  PreFilterPlugin* pre_filter = nullptr;
  FilterPlugin* filter = nullptr;
  PreScorePlugin* pre_score = nullptr;
  ScorePlugin* score = nullptr;
  ReservePlugin* reserve = nullptr;
  PermitPlugin* permit = nullptr;
  PreBindPlugin* pre_bind = nullptr;
  BindPlugin* bind = nullptr;
  PostBindPlugin* post_bind = nullptr;
  std::vector<ClusterEventWithHint> events;

  bool Implements(ExtensionPointKind point) const;
};

using PluginList = std::vector<PluginInstance*>;

class Session {
 public:
  // `definitions` must outlive the session.
  Session(const std::vector<PluginDefinition>& definitions, std::string process_name,
          std::shared_ptr<ResponseSink> sink);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // Handles one message from the scheduler; objects are moved out of it.
  void Handle(v1::SchedulerToPlugin& message);

  // Bound on cycle states kept at once; the oldest cycle is dropped beyond it.
  static constexpr size_t kMaxCycleStates = 1024;
  size_t NumCycleStates() const { return cycle_states_.size(); }
  const Mirror& mirror() const { return mirror_; }

 private:
  class HandleImpl;
  struct ResolvedList {
    ExtensionPointKind point;
    std::vector<std::string> names;
    PluginList plugins;
  };
  struct ExtensionRef {
    PreFilterExtensions* extensions;
    const std::string* plugin;
  };

  void Dispatch(v1::SchedulerToPlugin& message, v1::PluginToScheduler& out);
  void Open(const v1::Open& open, v1::Registration& out);
  absl::Status RunCycle(v1::CycleRequest& request, v1::CycleResponse& out);
  absl::Status RunDryRunFilter(v1::DryRunFilterRequest& request, v1::DryRunFilterResponse& out);
  // Defined in preemption_dry_run.cc.
  absl::Status RunPreemptionDryRun(v1::PreemptionDryRunRequest& request,
                                   v1::PreemptionDryRunResponse& out);
  absl::Status RunReserve(v1::ReserveRequest& request, v1::StatusResponse& out);
  absl::Status RunUnreserve(v1::UnreserveRequest& request, v1::StatusResponse& out);
  absl::Status RunPermit(v1::PermitRequest& request, v1::PermitResponse& out);
  absl::Status RunBinding(ExtensionPointKind point, v1::BindingRequest& request,
                          v1::StatusResponse& out);
  absl::Status RunPreEnqueue(v1::PreEnqueueRequest& request, v1::StatusResponse& out);
  absl::Status RunQueueingHint(const v1::QueueingHintRequest& request,
                               v1::QueueingHintResponse& out);

  // The instances for a list of plugin names, cached per distinct list so the
  // hot path does no lookups by name.
  absl::StatusOr<const PluginList*> Resolve(
      const google::protobuf::RepeatedPtrField<std::string>& names, ExtensionPointKind point,
      std::string_view field);
  CycleState& StateFor(uint64_t cycle_id);
  CycleState* FindState(uint64_t cycle_id);

  // Filter plugins not skipped by PreFilter, in order, into `out`.
  static void ActiveFilters(const PluginList& filters, CycleState& state, PluginList& out);
  static void ActiveExtensions(const PluginList& pre_filters, CycleState& state,
                               std::vector<ExtensionRef>& out);
  // A filter outcome and the plugin that produced it (null on success).
  struct FilterOutcome {
    Status status;
    const std::string* plugin = nullptr;
  };
  static FilterOutcome RunFilters(const PluginList& filters, CycleState& state,
                                  const PodInfo& pod, const NodeInfo& node);
  FilterOutcome RunFiltersWithNominatedPods(CycleState& state, const PodInfo& pod,
                                            const NodeInfo& node);

  // Plugin-initiated PermitDecision (Handle::AllowWaitingPod / RejectWaitingPod).
  bool SendPermitDecision(std::string_view pod_uid, std::string_view plugin, bool allow,
                          std::string_view reason);
  void StopWaiting(const std::string& pod_uid);

  const std::vector<PluginDefinition>& definitions_;
  const std::string process_name_;
  const std::shared_ptr<ResponseSink> sink_;
  // Declared before the plugins: plugins hold it until they are destroyed.
  std::unique_ptr<HandleImpl> handle_;

  bool opened_ = false;
  bool registered_ = false;
  std::vector<std::unique_ptr<PluginInstance>> instances_;
  absl::flat_hash_map<std::string, PluginInstance*> instances_by_name_;
  std::vector<std::unique_ptr<ResolvedList>> resolved_;
  std::vector<std::unique_ptr<ResolvedList>> uncached_;  // When resolved_ is full; per message.

  Mirror mirror_;
  // Cycle ids grow, so the smallest id is the oldest cycle.
  absl::btree_map<uint64_t, std::unique_ptr<CycleState>> cycle_states_;

  // Scratch reused across requests (no per-node allocations on the hot path).
  PluginList active_filters_;
  std::vector<ExtensionRef> extensions_;
  std::vector<const NodeInfo*> request_nodes_;
  std::vector<const NodeInfo*> feasible_;
  std::vector<NodeScore> node_scores_;
  absl::flat_hash_map<uint32_t, std::vector<PodInfoPtr>> nominated_;

  absl::Mutex waiting_mu_;
  // Pods waiting at Permit -> the plugins that answered Wait for them.
  absl::flat_hash_map<std::string, absl::flat_hash_set<std::string>> waiting_
      ABSL_GUARDED_BY(waiting_mu_);
};

}  // namespace podium::sdk::internal
