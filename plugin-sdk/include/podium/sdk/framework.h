// The plugin author's view of Podium, shaped like kube-scheduler's framework
// (staging/src/k8s.io/kube-scheduler/framework): statuses, NodeInfo, CycleState
// and the extension-point interfaces. Nothing here knows about gRPC; the SDK's
// Serve() (serve.h) puts these plugins behind the Plugin.Run stream.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <typeinfo>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "boost/json/object.hpp"
#include "podium/v1/objects.pb.h"
#include "podium/v1/plugin.pb.h"

namespace podium::sdk {

struct PodAffinityTerms;  // pod_affinity.h

inline constexpr int64_t kMaxNodeScore = 100;
inline constexpr int64_t kMinNodeScore = 0;

// kube-scheduler's framework.Code.
enum class Code {
  kSuccess = 0,
  kError = 1,
  kUnschedulable = 2,
  kUnschedulableAndUnresolvable = 3,
  kWait = 4,
  kSkip = 5,
  kPending = 6,
};

std::string_view CodeName(Code code);

// A scheduling outcome with its reasons and the plugin that produced it. A pod
// that does not fit is an outcome, not an error.
class Status {
 public:
  Status() = default;
  Status(Code code, std::vector<std::string> reasons = {})
      : code_(code), reasons_(std::move(reasons)) {}
  // Not reasons_{std::move(reason)}: an initializer list's elements are
  // const, so that copies the string (one more allocation per rejected node).
  Status(Code code, std::string reason) : code_(code) { reasons_.push_back(std::move(reason)); }

  static Status Success() { return Status(); }

  Code code() const { return code_; }
  const std::vector<std::string>& reasons() const { return reasons_; }
  const std::string& plugin() const { return plugin_; }
  Status& WithPlugin(std::string plugin) {
    plugin_ = std::move(plugin);
    return *this;
  }

  bool IsSuccess() const { return code_ == Code::kSuccess; }
  bool IsSkip() const { return code_ == Code::kSkip; }
  bool IsWait() const { return code_ == Code::kWait; }
  // Unschedulable or UnschedulableAndUnresolvable.
  bool IsRejected() const {
    return code_ == Code::kUnschedulable || code_ == Code::kUnschedulableAndUnresolvable ||
           code_ == Code::kPending;
  }
  std::string Message() const;  // Reasons joined by ", ".

  void ToProto(v1::Status* out) const;
  static Status FromProto(const v1::Status& in);

 private:
  Code code_ = Code::kSuccess;
  std::vector<std::string> reasons_;
  std::string plugin_;
};

// a + b, held at INT64_MAX (or INT64_MIN) instead of wrapping: a sum that
// overflowed would make a full node look empty. Objects are validated to at most
// 2^53 per quantity where they enter, so only sums of >1024 such values saturate.
inline int64_t SaturatingAdd(int64_t a, int64_t b) {
  int64_t sum;
  if (__builtin_add_overflow(a, b, &sum)) return b > 0 ? INT64_MAX : INT64_MIN;
  return sum;
}

// Resources in the units of the wire (milli-CPU, bytes, counts).
struct Resource {
  int64_t milli_cpu = 0;
  int64_t memory = 0;
  int64_t ephemeral_storage = 0;
  int64_t allowed_pod_number = 0;  // Only on node allocatable.
  absl::flat_hash_map<std::string, int64_t> scalar;

  static Resource FromProto(const v1::ResourceList& list);
  // Saturating (SaturatingAdd); a saturated sum stays "full" after Subtract.
  void Add(const Resource& other);
  void Subtract(const Resource& other);
  // Component-wise max (used for init containers).
  void SetMax(const Resource& other);
  int64_t Get(std::string_view name) const;  // "cpu", "memory", "ephemeral-storage", "pods", scalar names.
};

// kube-scheduler's defaults for containers that request nothing, used by
// scoring so that such pods still spread (DefaultMilliCPURequest,
// DefaultMemoryRequest).
inline constexpr int64_t kDefaultMilliCpuRequest = 100;
inline constexpr int64_t kDefaultMemoryRequest = 200 * 1024 * 1024;

struct HostPort {
  std::string ip;  // "0.0.0.0" when unset.
  std::string protocol;  // "TCP" when unset.
  int32_t port = 0;
  bool operator==(const HostPort& other) const {
    return ip == other.ip && protocol == other.protocol && port == other.port;
  }
};

// A pod with what plugins need precomputed once, when it enters the mirror.
struct PodInfo {
  std::shared_ptr<const v1::Pod> pod;
  // Effective requests as kube-scheduler computes them: max(sum of containers
  // + restartable init containers, each init container + the sidecars started
  // before it) + overhead.
  Resource requests;
  // The same with kube-scheduler's non-zero defaults per container (scoring).
  int64_t non_zero_milli_cpu = 0;
  int64_t non_zero_memory = 0;
  std::vector<HostPort> host_ports;
  // Inter-pod (anti-)affinity terms, parsed once; null when the pod has none
  // (the usual case: nothing parsed, nothing stored).
  std::shared_ptr<const PodAffinityTerms> affinity;

  const std::string& uid() const { return pod->meta().uid(); }
  static std::shared_ptr<const PodInfo> Create(v1::Pod pod);
};
using PodInfoPtr = std::shared_ptr<const PodInfo>;

// One image on a node with how many nodes in the cluster have it (ImageLocality).
struct ImageState {
  int64_t size_bytes = 0;
  int32_t num_nodes = 0;
};

// A node and the pods assigned to it (bound or assumed), with aggregates kept
// current as pods are added and removed.
class NodeInfo {
 public:
  NodeInfo() = default;
  NodeInfo(uint32_t id, std::shared_ptr<const v1::Node> node);

  uint32_t id() const { return id_; }
  const v1::Node& node() const { return *node_; }
  // The node object itself, shared (what the mirror or snapshot holds).
  const std::shared_ptr<const v1::Node>& shared_node() const { return node_; }
  const std::string& name() const { return node_->meta().name(); }
  void SetNode(std::shared_ptr<const v1::Node> node);

  const std::vector<PodInfoPtr>& pods() const { return pods_; }
  const Resource& allocatable() const { return allocatable_; }
  const Resource& requested() const { return requested_; }
  int64_t non_zero_requested_milli_cpu() const { return non_zero_milli_cpu_; }
  int64_t non_zero_requested_memory() const { return non_zero_memory_; }
  const std::vector<HostPort>& used_ports() const { return used_ports_; }
  // The pods with pod affinity or anti-affinity terms (required or preferred),
  // and those with required anti-affinity terms: kube-scheduler's
  // PodsWithAffinity / PodsWithRequiredAntiAffinity, so InterPodAffinity
  // looks only at these. Empty vectors on most nodes: no allocation.
  const std::vector<PodInfoPtr>& pods_with_affinity() const { return pods_with_affinity_; }
  const std::vector<PodInfoPtr>& pods_with_required_anti_affinity() const {
    return pods_with_required_anti_affinity_;
  }
  // Images on this node by every name they are known by.
  const absl::flat_hash_map<std::string, ImageState>& images() const { return images_; }
  absl::flat_hash_map<std::string, ImageState>& mutable_images() { return images_; }

  void AddPod(PodInfoPtr pod);
  // Returns false when no pod with that uid is on the node.
  bool RemovePod(std::string_view uid);
  const PodInfo* FindPod(std::string_view uid) const;

 private:
  uint32_t id_ = 0;
  std::shared_ptr<const v1::Node> node_;
  std::vector<PodInfoPtr> pods_;
  Resource allocatable_;
  Resource requested_;
  int64_t non_zero_milli_cpu_ = 0;
  int64_t non_zero_memory_ = 0;
  std::vector<HostPort> used_ports_;
  absl::flat_hash_map<std::string, ImageState> images_;
  std::vector<PodInfoPtr> pods_with_affinity_;
  std::vector<PodInfoPtr> pods_with_required_anti_affinity_;
};

// The mirrored cluster as plugins see it during a cycle.
class Snapshot {
 public:
  virtual ~Snapshot() = default;
  // Every node, in ascending id order.
  virtual const std::vector<const NodeInfo*>& Nodes() const = 0;
  virtual const NodeInfo* Get(std::string_view node_name) const = 0;
  virtual const NodeInfo* GetById(uint32_t id) const = 0;
  virtual size_t NumNodes() const = 0;
  // The PodDisruptionBudgets of a namespace, and a PodGroup by namespace and
  // name. In a plugin process they are mirrored only when a plugin of the
  // process asks for them (PluginDefinition::mirror); otherwise empty / null.
  virtual std::vector<const v1::PodDisruptionBudget*> PodDisruptionBudgets(
      std::string_view namespace_) const {
    return {};
  }
  virtual const v1::PodGroup* GetPodGroup(std::string_view namespace_,
                                          std::string_view name) const {
    return nullptr;
  }
  // A Namespace by name, and every Namespace (in no particular order): their
  // labels are what a namespaceSelector matches. Mirrored only when a plugin
  // of the process asks (MirrorNeeds::namespaces); otherwise null / empty.
  virtual const v1::Namespace* GetNamespace(std::string_view name) const { return nullptr; }
  virtual std::vector<const v1::Namespace*> Namespaces() const { return {}; }
  // The nodes with at least one pod in pods_with_affinity() /
  // pods_with_required_anti_affinity(), ascending id (kube-scheduler's
  // HavePodsWithAffinityList / HavePodsWithRequiredAntiAffinityList). The
  // default scans Nodes(); the SDK's mirror keeps them.
  virtual std::vector<const NodeInfo*> NodesHavingPodsWithAffinity() const;
  virtual std::vector<const NodeInfo*> NodesHavingPodsWithRequiredAntiAffinity() const;
  // Calls `visit` for every assigned pod labelled key=value, with its node
  // (in no particular order), and returns true: a plugin finds the pods a
  // selector's `key In (values)` requirement admits without scanning every
  // pod. Returns false, visiting nothing, when the snapshot keeps no label
  // index: the caller scans Nodes(). The SDK's mirror keeps one when a plugin
  // of the process asks (MirrorNeeds::pod_label_index); the scheduler's own
  // snapshot does not, so NodeInfo carries nothing for it.
  using PodVisitor = std::function<void(const PodInfo& pod, const NodeInfo& node)>;
  virtual bool ForEachPodWithLabel(std::string_view key, std::string_view value,
                                   const PodVisitor& visit) const {
    return false;
  }
  // An assigned pod added to or removed from `node`. A relabelled pod is its
  // old version removed and its new one added.
  struct PodChange {
    bool added = false;
    const PodInfo* pod = nullptr;
    const NodeInfo* node = nullptr;
  };
  using PodChangeVisitor = std::function<void(const PodChange& change)>;
  // Lets a plugin keep what it derives from assigned pods across cycles
  // instead of recounting it every cycle. Visits the pod changes since
  // `*cursor`, oldest first, and returns true; or returns false, visiting
  // nothing, when it cannot say (no log is kept: the default; the cursor is
  // 0 or older than the log; the mirror was reset; a node was removed or its
  // labels changed since): the caller then rebuilds from Nodes(). Either way
  // *cursor is then current. The SDK's mirror keeps the log when a plugin of
  // the process asks (MirrorNeeds::pod_changes); the pointers are valid only
  // during the call.
  virtual bool PodChangesSince(uint64_t* cursor, const PodChangeVisitor& visit) const {
    return false;
  }
  // Calls `visit` for every assigned (bound or assumed) pod that names pod
  // group `group` of `namespace_` (Pod.pod_group), with its node, and returns
  // true: a gang's members cost O(members), not a scan of every pod. Returns
  // false, visiting nothing, when the snapshot keeps no such index: the
  // caller scans Nodes(). The SDK's mirror keeps one for every pod that names
  // a group.
  virtual bool ForEachAssignedPodInGroup(std::string_view namespace_, std::string_view group,
                                         const PodVisitor& visit) const {
    return false;
  }
};

// Data a plugin keeps for one scheduling cycle (written in PreFilter, read in
// Filter, Score, Reserve...).
class StateData {
 public:
  virtual ~StateData() = default;
  virtual std::unique_ptr<StateData> Clone() const = 0;
};

class CycleState {
 public:
  StateData* Read(std::string_view key) const;
  // Plugins read their state for every node: an exact-type check (one
  // type_info comparison) avoids dynamic_cast's walk on that path.
  template <typename T>
  T* ReadAs(std::string_view key) const {
    StateData* data = Read(key);
    if (data != nullptr && typeid(*data) == typeid(T)) return static_cast<T*>(data);
    return dynamic_cast<T*>(data);
  }
  void Write(std::string key, std::unique_ptr<StateData> data);
  void Delete(std::string_view key);
  // Deep copy, for preemption's dry runs.
  std::unique_ptr<CycleState> Clone() const;
  // Plugins whose PreFilter returned Skip (their Filter is not run).
  absl::flat_hash_set<std::string>& skip_filter_plugins() { return skip_filter_plugins_; }
  absl::flat_hash_set<std::string>& skip_score_plugins() { return skip_score_plugins_; }

 private:
  // A few entries per cycle, read for every node: a linear scan beats hashing.
  std::vector<std::pair<std::string, std::unique_ptr<StateData>>> data_;
  absl::flat_hash_set<std::string> skip_filter_plugins_;
  absl::flat_hash_set<std::string> skip_score_plugins_;
};

// What the SDK offers a plugin beyond its arguments.
class Handle {
 public:
  virtual ~Handle() = default;
  virtual const Snapshot& snapshot() const = 0;
  // Permit: allow or reject a pod waiting at this plugin's Permit. Returns false
  // when no such pod waits.
  virtual bool AllowWaitingPod(std::string_view pod_uid, std::string_view plugin) = 0;
  virtual bool RejectWaitingPod(std::string_view pod_uid, std::string_view plugin,
                                std::string_view reason) = 0;
};

class Plugin {
 public:
  virtual ~Plugin() = default;
  virtual std::string_view Name() const = 0;
};

// PreFilter may narrow the nodes to look at (kube-scheduler's PreFilterResult).
struct PreFilterResult {
  std::optional<absl::flat_hash_set<std::string>> node_names;  // nullopt = all.
};

class PreFilterExtensions {
 public:
  virtual ~PreFilterExtensions() = default;
  virtual Status AddPod(CycleState& state, const PodInfo& pod_to_schedule,
                        const PodInfo& pod_to_add, const NodeInfo& node) = 0;
  virtual Status RemovePod(CycleState& state, const PodInfo& pod_to_schedule,
                           const PodInfo& pod_to_remove, const NodeInfo& node) = 0;
};

class PreFilterPlugin : public virtual Plugin {
 public:
  virtual std::pair<PreFilterResult, Status> PreFilter(CycleState& state, const PodInfo& pod,
                                                       const Snapshot& snapshot) = 0;
  virtual PreFilterExtensions* Extensions() { return nullptr; }
};

class FilterPlugin : public virtual Plugin {
 public:
  virtual Status Filter(CycleState& state, const PodInfo& pod, const NodeInfo& node) = 0;
};

class PreScorePlugin : public virtual Plugin {
 public:
  virtual Status PreScore(CycleState& state, const PodInfo& pod,
                          const std::vector<const NodeInfo*>& nodes) = 0;
};

struct NodeScore {
  const NodeInfo* node = nullptr;
  int64_t score = 0;
};

class ScorePlugin : public virtual Plugin {
 public:
  virtual std::pair<int64_t, Status> Score(CycleState& state, const PodInfo& pod,
                                           const NodeInfo& node) = 0;
  virtual bool HasNormalizeScore() const { return false; }
  virtual Status NormalizeScore(CycleState& state, const PodInfo& pod,
                                std::vector<NodeScore>& scores) {
    return Status::Success();
  }
};

class ReservePlugin : public virtual Plugin {
 public:
  virtual Status Reserve(CycleState& state, const PodInfo& pod, const std::string& node_name) = 0;
  virtual void Unreserve(CycleState& state, const PodInfo& pod, const std::string& node_name) = 0;
};

struct PermitResult {
  Status status;  // Success, Wait (with timeout) or a rejection.
  int64_t timeout_ms = 0;
};

class PermitPlugin : public virtual Plugin {
 public:
  virtual PermitResult Permit(CycleState& state, const PodInfo& pod,
                              const std::string& node_name) = 0;
};

class PreBindPlugin : public virtual Plugin {
 public:
  virtual Status PreBind(CycleState& state, const PodInfo& pod, const std::string& node_name) = 0;
};

class PostBindPlugin : public virtual Plugin {
 public:
  virtual void PostBind(CycleState& state, const PodInfo& pod, const std::string& node_name) = 0;
};

// kube-scheduler's QueueingHint.
enum class QueueingHint { kQueueSkip = 0, kQueue = 1 };

// An event that can make a pod this plugin rejected schedulable, with an
// optional hint that says whether it does for one pod.
struct ClusterEventWithHint {
  v1::ClusterResource resource = v1::NODE;
  uint32_t action_mask = v1::ALL;
  // Empty: every matching event requeues the pod. old/new may be null (add,
  // delete).
  std::function<QueueingHint(const v1::Pod& pod, const v1::ClusterEvent& event)> hint;
};

class EnqueueExtensions : public virtual Plugin {
 public:
  virtual std::vector<ClusterEventWithHint> EventsToRegister() const = 0;
};

// Scheduling signatures (KEP-5598): a plugin that says which parts of a pod
// its PreFilter/Filter/PreScore/Score verdicts depend on lets the scheduler
// treat pods that agree on them as the same pod, and reuse one pod's ranking
// for the next (services/scheduler/batching). A plugin that does not implement
// SignPlugin makes every pod of its profiles unsignable: always correct.
//
// The promise: for two pods equal in `parts`, every verdict on every node is
// the same in the same cluster state. A plugin whose verdict on one node
// depends on other nodes' pods (spreading, inter-pod affinity) must list what
// makes a pod depend on them in `unsignable_when_set`.
struct PodSignatureSpec {
  std::vector<v1::PodPart> parts;
  std::vector<v1::PodPart> unsignable_when_set;
  // Of `parts`, those the verdicts read only through other pods' pod
  // (anti-)affinity terms: the scheduler drops them from the signature while
  // no pod has such a term (SignatureSpec.parts_read_through_affinity_terms).
  std::vector<v1::PodPart> read_through_affinity_terms;
};

class SignPlugin : public virtual Plugin {
 public:
  // Called once, after the plugin is built from its args.
  virtual PodSignatureSpec SignatureSpec() const = 0;
};

using PluginPtr = std::unique_ptr<Plugin>;

// Builds a plugin from its pluginConfig args (an empty object when none). A bad
// argument is an error naming the field.
using PluginFactory =
    std::function<absl::StatusOr<PluginPtr>(const boost::json::object& args, Handle& handle)>;

// The cluster state a plugin reads through Handle::snapshot(), beyond the
// nodes (always mirrored: requests name nodes by their mirror id). A process
// asks the scheduler (Registration.mirror) for the union of what its plugins
// need, and gets nothing else.
struct MirrorNeeds {
  bool assigned_pods = true;  // Bound and assumed pods on their nodes.
  bool pod_disruption_budgets = false;
  bool pod_groups = false;
  bool namespaces = false;
  // The plugin process keeps an index of assigned pods by label (key=value)
  // for Snapshot::ForEachPodWithLabel. Local to the process: it costs one
  // hash entry per label of each mirrored pod, paid only where asked for.
  bool pod_label_index = false;
  // The plugin process logs assigned pods' additions and removals for
  // Snapshot::PodChangesSince (bounded; local to the process).
  bool pod_changes = false;
};

struct PluginDefinition {
  std::string name;
  PluginFactory factory;
  MirrorNeeds mirror = {};
  // PreEnqueue, Reserve/Unreserve and Permit only for pods that name a pod
  // group (PluginRegistration.pod_group_members_only): others skip the call.
  bool pod_group_members_only = false;
  // The plugin's Reserve always succeeds and changes nothing: the scheduler
  // skips the Reserve request and still calls Unreserve
  // (PluginRegistration.unreserve_only).
  bool unreserve_only = false;
};

}  // namespace podium::sdk
