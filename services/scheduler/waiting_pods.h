// Pods waiting at Permit (kube-scheduler's waitingPodsMap): which plugins each
// still waits for and until when, and decisions that plugins sent before the
// pod's Permit answer came back. Its own lock; it never calls out.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "podium/v1/plugin.pb.h"
#include "queue/scheduling_queue.h"

namespace podium::scheduler {

class Framework;
using QueuedPodInfoPtr = std::shared_ptr<QueuedPodInfo>;

// kube-scheduler's maxTimeout: a plugin asking to wait longer is clamped.
inline constexpr absl::Duration kMaxPermitWait = absl::Minutes(15);
// Decisions kept for the pod whose Permit is running, before it waits.
inline constexpr size_t kMaxEarlyPermitDecisions = 64;

// A pod between Permit and its binding cycle: what the binding cycle and a
// failed attempt need to finish it.
struct BindingPod {
  QueuedPodInfoPtr pod;
  Framework* framework = nullptr;
  std::string node;
  uint64_t cycle_id = 0;          // The framework's cycle (plugin cycle state).
  uint64_t scheduling_cycle = 0;  // The queue's cycle at Pop.
  absl::Time start;
  absl::Time wait_start = absl::InfinitePast();  // When it began to wait at Permit.
  // Plugin -> the stream generation of the process serving it when the pod
  // began to wait there (PluginProcess::stream_generation).
  std::map<std::string, uint64_t> permit_streams;
};

// A pod waiting at Permit, as the Admin API lists it.
struct WaitingPodSummary {
  QueuedPodInfoPtr pod;
  std::string node;
  absl::Time waiting_since = absl::InfinitePast();
  std::map<std::string, absl::Time> pending;  // plugin -> deadline
  Framework* framework = nullptr;
  std::map<std::string, uint64_t> permit_streams;  // BindingPod::permit_streams
};

class WaitingPods {
 public:
  enum class Verdict {
    kNotWaiting,     // Unknown pod: ignored.
    kKeptEarly,      // Its Permit is running: applied when it starts waiting.
    kDroppedEarly,   // Its Permit is running and too many decisions came first.
    kUnknownPlugin,  // The pod does not wait on that plugin: refused.
    kStillWaiting,   // Allowed by that plugin; others still pending.
    kAllowed,        // Every plugin allowed it: bind.
    kRejected,       // A plugin rejected it.
  };
  struct Outcome {
    Verdict verdict = Verdict::kNotWaiting;
    std::optional<BindingPod> done;  // kAllowed / kRejected.
    v1::PermitDecision decision;     // The decision that finished it.
  };

  // The scheduling thread runs Permit for `uid`.
  void BeginPermit(std::string uid, Framework* framework);
  // Permit returned: the decisions that came for the pod meanwhile.
  std::vector<v1::PermitDecision> EndPermit();
  // The pod waits for `deadlines` (plugin -> when it times out); the early
  // decisions are applied in order. A finished outcome removes it again.
  Outcome Add(BindingPod pod, std::map<std::string, absl::Time> deadlines,
              const std::vector<v1::PermitDecision>& early);
  Outcome Decide(const v1::PermitDecision& decision);
  // The pod stops waiting (deleted): the caller releases what it assumed.
  std::optional<BindingPod> Remove(std::string_view uid);
  // Pods with a plugin past its deadline, with that plugin; they are removed.
  std::vector<std::pair<BindingPod, std::string>> Expire(absl::Time now);
  bool Contains(std::string_view uid) const;
  // The profile of a pod waiting or in Permit; null otherwise.
  Framework* FrameworkOf(std::string_view uid) const;
  size_t size() const;
  // The waiting pods, by when they began to wait (then uid). Copies under the
  // lock only.
  std::vector<WaitingPodSummary> List() const;

 private:
  struct Entry {
    BindingPod pod;
    std::map<std::string, absl::Time> pending;  // plugin -> deadline
  };
  Outcome DecideLocked(const v1::PermitDecision& decision) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, Entry> pods_ ABSL_GUARDED_BY(mu_);
  std::string in_permit_ ABSL_GUARDED_BY(mu_);
  Framework* in_permit_framework_ ABSL_GUARDED_BY(mu_) = nullptr;
  std::vector<v1::PermitDecision> early_ ABSL_GUARDED_BY(mu_);
};

}  // namespace podium::scheduler
