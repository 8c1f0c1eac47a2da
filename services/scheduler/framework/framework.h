// The runner of a profile's extension points. It sees plugins only through
// PluginProcess (plugin_process.h): which process serves which plugin comes
// from the handshake; the rest is kube-scheduler's framework semantics.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "framework/plugin_process.h"
#include "podium/sdk/framework.h"
#include "podium/v1/objects.pb.h"

namespace podium::scheduler {

// Plugins that run inside the scheduler.
inline constexpr char kPrioritySort[] = "PrioritySort";
inline constexpr char kSchedulingGates[] = "SchedulingGates";
inline constexpr char kDefaultBinder[] = "DefaultBinder";

// A profile with its plugins resolved per extension point (multiPoint already
// expanded with what each plugin registered).
struct ProfileSpec {
  std::string scheduler_name = std::string(kDefaultSchedulerName);
  int percentage_of_nodes_to_score = 0;  // 0 = adaptive.
  std::map<v1::ExtensionPoint, std::vector<PluginRef>> plugins;
  // plugin name -> the process serving it; built-ins are absent.
  absl::flat_hash_map<std::string, PluginProcess*> processes;
  // Adds the nominated pods a cycle for `pod` must count (CycleRequest.nominated_pods).
  std::function<void(const v1::Pod& pod, const sdk::Snapshot& snapshot,
                     google::protobuf::RepeatedPtrField<v1::MirroredPod>* out)>
      nominated_pods;
};

// The profile a pod belongs to: spec.schedulerName, default-scheduler when empty.
inline std::string_view SchedulerNameOf(const v1::Pod& pod) {
  return pod.scheduler_name().empty() ? kDefaultSchedulerName : std::string_view(pod.scheduler_name());
}

// kube-scheduler's numFeasibleNodesToFind.
uint32_t NumFeasibleNodesToFind(int percentage_of_nodes_to_score, uint32_t num_all_nodes);

// Why a pod fits no node (kube-scheduler's FitError / Diagnosis).
struct Diagnosis {
  uint32_t num_all_nodes = 0;
  uint64_t cycle_id = 0;  // The cycle that produced it (plugin processes keep its state).
  std::vector<std::pair<std::string, sdk::Status>> node_statuses;  // node name -> status
  std::string pre_filter_message;
  std::string post_filter_message;  // What PostFilter (preemption) said, appended.
  absl::flat_hash_set<std::string> unschedulable_plugins;
  absl::flat_hash_set<std::string> pending_plugins;
  // "0/10 nodes are available: 3 Insufficient cpu, 7 node(s) had untolerated taint {edge: true}."
  std::string Message() const;
};

struct ScheduleResult {
  enum class Outcome { kScheduled, kUnschedulable, kError };
  Outcome outcome = Outcome::kError;
  std::string node_name;
  uint32_t evaluated_nodes = 0;  // For the rotation of the first node.
  uint32_t feasible_nodes = 0;
  Diagnosis diagnosis;      // kUnschedulable.
  absl::Status error;       // kError.
};

// PostFilter runs inside the scheduler when a pod fits no node, as
// kube-scheduler's DefaultPreemption does; it may nominate a node where the pod
// will fit once victims are gone. The preemption issue adds DefaultPreemption.
struct PostFilterResult {
  std::string nominated_node_name;
  // Run by the scheduler once the pod is back in its queue (preemption sends
  // its victims' deletions then, so their events find the pod queued).
  std::function<void()> after_requeue;
};

class PostFilterPlugin {
 public:
  virtual ~PostFilterPlugin() = default;
  virtual std::string_view Name() const = 0;
  virtual std::pair<PostFilterResult, sdk::Status> PostFilter(const v1::Pod& pod,
                                                              const Diagnosis& diagnosis) = 0;
};
using PostFilterPluginPtr = std::unique_ptr<PostFilterPlugin>;

// A pod that waits at Permit (WAIT) for the plugins in `pending`.
struct PermitOutcome {
  sdk::Status status;  // Success, Wait or a rejection.
  std::map<std::string, absl::Duration> waiting;  // plugin -> timeout.
};

class Framework {
 public:
  explicit Framework(ProfileSpec spec, uint64_t seed = std::random_device{}());

  const ProfileSpec& spec() const { return spec_; }
  const std::string& name() const { return spec_.scheduler_name; }

  // PreFilter, Filter, PreScore, Score and host selection for one pod on the
  // given snapshot (taken at state_seq). Runs on the scheduling thread.
  ScheduleResult SchedulePod(const v1::Pod& pod, const sdk::Snapshot& snapshot,
                             uint64_t state_seq, uint64_t cycle_id);

  // Remote PreEnqueue plugins, in order (SchedulingGates runs in the queue's
  // PreEnqueue before this). The first non-success gates the pod.
  sdk::Status RunPreEnqueue(const v1::Pod& pod) const;

  void AddPostFilterPlugin(PostFilterPluginPtr plugin) { post_filters_.push_back(std::move(plugin)); }
  bool HasPostFilterPlugins() const { return !post_filters_.empty(); }
  // kube-scheduler's RunPostFilterPlugins: the first Success wins; an
  // UnschedulableAndUnresolvable stops; other rejections are collected.
  std::pair<PostFilterResult, sdk::Status> RunPostFilter(const v1::Pod& pod,
                                                         const Diagnosis& diagnosis);

  sdk::Status RunReserve(const v1::Pod& pod, const std::string& node, uint64_t cycle_id);
  void RunUnreserve(const v1::Pod& pod, const std::string& node, uint64_t cycle_id);
  PermitOutcome RunPermit(const v1::Pod& pod, const std::string& node, uint64_t cycle_id);
  sdk::Status RunPreBind(const v1::Pod& pod, const std::string& node, uint64_t cycle_id);
  // Remote Bind plugins in order; Skip from all of them (or none configured)
  // means the DefaultBinder's bind, which the caller issues.
  sdk::Status RunBindPlugins(const v1::Pod& pod, const std::string& node, uint64_t cycle_id);
  void RunPostBind(const v1::Pod& pod, const std::string& node, uint64_t cycle_id);

  bool HasRemotePlugins(v1::ExtensionPoint point) const;

 private:
  // The plugins of one process for the cycle phases.
  struct ProcessPlan {
    PluginProcess* process = nullptr;
    std::vector<std::string> pre_filter, filter, pre_score, score;
  };

  // The point's remote plugins, in order (or reversed), as runs of consecutive
  // plugins served by one process: each run travels in one request.
  using ProcessRun = std::pair<PluginProcess*, std::vector<std::string>>;
  std::vector<ProcessRun> RemoteRuns(v1::ExtensionPoint point, bool reverse) const;
  // Reserve/Unreserve/PreBind/Bind/PostBind: the point's remote plugins, in
  // order, one request per run of plugins served by one process.
  sdk::Status RunStatusPhase(v1::ExtensionPoint point, const v1::Pod& pod, const std::string& node,
                             uint64_t cycle_id, bool unreserve, bool stop_on_skip) const;
  // A CycleRequest for the plan's filter and/or score plugins, without pod and nodes.
  v1::SchedulerToPlugin NewCycleRequest(const ProcessPlan& plan, uint64_t cycle_id, bool filter,
                                        bool score) const;
  // The answer's error, or its validation against the request (counted and
  // logged when invalid).
  absl::Status CheckCycleAnswer(const ProcessPlan& plan, const PluginAnswer& answer,
                                const v1::CycleRequest& request, const sdk::Snapshot& snapshot,
                                bool scores_for_request_nodes) const;
  // Validates a CycleResponse against its request; an error names the problem.
  absl::Status ValidateCycleAnswer(const ProcessPlan& plan, const v1::CycleRequest& request,
                                   const v1::CycleResponse& answer, const sdk::Snapshot& snapshot,
                                   bool expect_scores_for_request_nodes) const;
  uint32_t NextStartIndex(uint32_t num_nodes) const;

  ProfileSpec spec_;
  // Every process with cycle plugins, in the order its first plugin appears.
  std::vector<ProcessPlan> plans_;
  size_t num_filter_processes_ = 0;
  absl::flat_hash_map<std::string, int64_t> weights_;
  std::vector<PostFilterPluginPtr> post_filters_;
  uint32_t next_start_node_index_ = 0;
  std::mt19937_64 rng_;
};

using FrameworkPtr = std::unique_ptr<Framework>;

}  // namespace podium::scheduler
