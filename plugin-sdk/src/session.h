// One Plugin.Run stream as the plugin process sees it, without the transport:
// the handshake, the plugin instances built from Open, the mirror kept from the
// state deltas, the dispatch of each request (the phases of a CycleRequest run
// in cycle_runner.h), the binding-cycle requests and the pods waiting at Permit. Messages are handled
// one at a time, in stream order, never concurrently: on the server's driver
// thread that read them or on the stream's worker (plugin_server.cc says which).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/btree_map.h"
#include "absl/container/btree_set.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "google/protobuf/arena.h"
#include "cycle_runner.h"
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

// Safety bounds for a scheduler that never says which cycles finished
// (SchedulerToPlugin.finished_cycles): beyond them the oldest cycle state, or
// the oldest waiting pod, is dropped. Never reached otherwise.
struct SessionLimits {
  size_t max_cycle_states = 16384;
  size_t max_waiting_pods = 65536;
};

class Session {
 public:
  using Limits = SessionLimits;

  // `definitions` and `parallelizer` (null: every request is evaluated on the
  // calling thread) must outlive the session.
  Session(const std::vector<PluginDefinition>& definitions, std::string process_name,
          std::shared_ptr<ResponseSink> sink, SessionLimits limits = SessionLimits(),
          Parallelizer* parallelizer = nullptr);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // Handles one message from the scheduler; objects are moved out of it.
  void Handle(v1::SchedulerToPlugin& message);

  size_t NumCycleStates() const { return runner_.NumCycleStates(); }
  // Pods waiting at a Permit plugin of this process.
  size_t NumWaitingPods() ABSL_LOCKS_EXCLUDED(waiting_mu_);
  const Mirror& mirror() const { return mirror_; }

 private:
  class HandleImpl;
  struct ResolvedList {
    ExtensionPointKind point;
    std::string profile;  // "" unless some plugin has per-profile instances.
    std::vector<std::string> names;
    PluginList plugins;
  };

  void Dispatch(v1::SchedulerToPlugin& message, v1::PluginToScheduler& out);
  void Open(const v1::Open& open, v1::Registration& out);
  absl::Status RunCycle(v1::CycleRequest& request, v1::CycleResponse& out);
  absl::Status RunDryRunFilter(v1::DryRunFilterRequest& request, v1::DryRunFilterResponse& out);
  // Defined in preemption_dry_run.cc.
  absl::Status RunPreemptionDryRun(v1::PreemptionDryRunRequest& request,
                                   v1::PreemptionDryRunResponse& out);
  // The same for `pod` (a dry run that rode in a cycle request: its pod).
  absl::Status RunPreemptionDryRun(v1::PreemptionDryRunRequest& request, const PodInfoPtr& pod,
                                   v1::PreemptionDryRunResponse& out);
  absl::Status RunReserve(v1::ReserveRequest& request, v1::StatusResponse& out);
  absl::Status RunUnreserve(v1::UnreserveRequest& request, v1::StatusResponse& out);
  absl::Status RunPermit(v1::PermitRequest& request, v1::PermitResponse& out);
  absl::Status RunBinding(ExtensionPointKind point, v1::BindingRequest& request,
                          v1::StatusResponse& out);
  absl::Status RunPreEnqueue(v1::PreEnqueueRequest& request, v1::StatusResponse& out);
  absl::Status RunQueueingHint(const v1::QueueingHintRequest& request,
                               v1::QueueingHintResponse& out);

  // The instances for a list of plugin names and the pod's profile, cached
  // per distinct list so the hot path does no lookups by name.
  absl::StatusOr<const PluginList*> Resolve(
      const google::protobuf::RepeatedPtrField<std::string>& names, ExtensionPointKind point,
      std::string_view field, const v1::Pod& pod);
  // The instance of `name` for pods of `profile` (PluginArgs.scheduler_names),
  // or null when the plugin is not open here.
  PluginInstance* InstanceFor(const std::string& name, std::string_view profile) const;

  // Plugin-initiated PermitDecision (Handle::AllowWaitingPod / RejectWaitingPod).
  bool SendPermitDecision(std::string_view pod_uid, std::string_view plugin, bool allow,
                          std::string_view reason);
  void StartWaiting(const std::string& pod_uid, const std::string& plugin, uint64_t cycle_id);
  void StopWaiting(const std::string& pod_uid);
  // The scheduler finished these cycles: their states and waiting pods go.
  void FinishCycles(const google::protobuf::RepeatedField<uint64_t>& cycle_ids);

  const std::vector<PluginDefinition>& definitions_;
  const std::string process_name_;
  const std::shared_ptr<ResponseSink> sink_;
  // Declared before the plugins: plugins hold it until they are destroyed.
  std::unique_ptr<HandleImpl> handle_;

  bool opened_ = false;
  bool registered_ = false;
  std::vector<std::unique_ptr<PluginInstance>> instances_;
  // Plugin name -> its instance for every profile (with per-profile args: the
  // entry without scheduler_names, or else the first one).
  absl::flat_hash_map<std::string, PluginInstance*> instances_by_name_;
  // schedulerName -> plugin name -> instance, for plugins opened per profile.
  absl::flat_hash_map<std::string, absl::flat_hash_map<std::string, PluginInstance*>>
      instances_by_profile_;
  std::vector<std::unique_ptr<ResolvedList>> resolved_;
  std::vector<std::unique_ptr<ResolvedList>> uncached_;  // When resolved_ is full; per message.

  Mirror mirror_;
  const Limits limits_;
  CycleRunner runner_;  // After mirror_ and limits_: built from them.
  absl::Mutex waiting_mu_;
  struct WaitingPod {
    absl::flat_hash_set<std::string> plugins;  // That answered Wait for it.
    uint64_t cycle_id = 0;
  };
  // Pods waiting at Permit, by uid, and by (cycle id, uid): oldest first.
  absl::flat_hash_map<std::string, WaitingPod> waiting_ ABSL_GUARDED_BY(waiting_mu_);
  absl::btree_set<std::pair<uint64_t, std::string>> waiting_by_cycle_
      ABSL_GUARDED_BY(waiting_mu_);
};

}  // namespace podium::sdk::internal
