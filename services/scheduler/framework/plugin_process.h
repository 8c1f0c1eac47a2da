// The framework's view of one plugin process. remote/ implements it over a
// Plugin.Run stream; framework tests mock it (mock_plugin_process.h). Nothing
// here is a gRPC type: requests and answers are the contract's messages.
#pragma once

#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "config/config.h"
#include "podium/v1/plugin.pb.h"

namespace podium::scheduler {

// Where the mirror of one plugin process must be brought to before a request:
// the state the scheduling cycle's snapshot was taken at.
class StateSource {
 public:
  virtual ~StateSource() = default;
  // Fills the changes in (from_seq, to_seq]. Returns false when from_seq is too
  // old (trimmed); the caller then sends FullState instead.
  virtual bool ReadDelta(uint64_t from_seq, uint64_t to_seq, v1::StateDelta* out) = 0;
  // The whole state at to_seq, as a reset delta.
  virtual void FullState(uint64_t to_seq, v1::StateDelta* out) = 0;
  // A connected mirror stands at `position` (the last delta sent to it), or
  // (nullopt) is disconnected or will be reset: the source keeps what the
  // slowest connected mirror still needs, and nothing when none is connected.
  virtual void SetMirrorPosition(const void* mirror, std::optional<uint64_t> position) {}
};

using PluginAnswer = absl::StatusOr<v1::PluginToScheduler>;

class PluginProcess {
 public:
  virtual ~PluginProcess() = default;

  // The endpoint's name in the configuration ("host").
  virtual const std::string& name() const = 0;
  virtual FailurePolicy failure_policy() const = 0;
  // False while connecting or after the stream broke.
  virtual bool ready() const = 0;
  // The registration of the current stream (empty when never connected).
  virtual v1::Registration registration() const = 0;
  // Bumped each time the process's stream is dialed again (after it broke):
  // a change means what the process held for an earlier stream, such as the
  // pods it made wait at Permit, is gone with it.
  virtual uint64_t stream_generation() const { return 0; }
  // The process keeps nominated pods from state deltas
  // (MirrorScope.nominated_pods): its requests carry none.
  virtual bool MirrorsNominatedPods() const { return false; }
  // The process runs the preemption dry run that rides in a cycle request
  // (CycleRequest.preemption_dry_run: protocol version 2).
  virtual bool RunsDryRunsInCycles() const { return false; }
  // The process answers what-if verdicts (CycleRequest.what_if_copies:
  // protocol version 3).
  virtual bool AnswersWhatIf() const { return false; }
  // The process answers lookahead verdicts (CycleRequest.lookahead: protocol
  // version 4).
  virtual bool AnswersLookahead() const { return false; }
  // CycleRequest.later_lookaheads (protocol version 5).
  virtual bool AnswersLaterLookaheads() const { return false; }
  // CycleRequest.nominated_checks (protocol version 6).
  virtual bool AnswersNominatedChecks() const { return false; }
  // PreemptionDryRunRequest.what_if (protocol version 7).
  virtual bool AnswersPreemptionWhatIf() const { return false; }
  // PreemptionDryRunRequest.what_if_gone (protocol version 8).
  virtual bool AnswersPreemptionWhatIfGone() const { return false; }
  // A PreFilter's plain Unschedulable leaves the other PreFilters run and the
  // cycle's state whole (protocol version 9): preemption may then try every
  // node, as kube-scheduler does. From an older process it is taken as
  // UnschedulableAndUnresolvable (its dry run would read a partial state).
  virtual bool LeavesPreFilterUnschedulableToPreemption() const { return false; }
  // Its plugins' registrations name the pending pod's own updates that may
  // help (UNSCHEDULED_POD; protocol version 10). From an older process, every
  // such update is taken to help, as it was before (RegisteredEvents).
  virtual bool RegistersPendingPodUpdates() const { return false; }

  // Sends a request and returns its answer, or DeadlineExceeded / Unavailable /
  // an error naming what was wrong with the answer. When state_seq is set, the
  // mirror is first brought to that state (the delta rides in the same message).
  // Several calls may be in flight on one stream.
  virtual std::future<PluginAnswer> Call(v1::SchedulerToPlugin request,
                                         std::optional<uint64_t> state_seq) = 0;
  virtual absl::Duration timeout() const = 0;
  // Brings the process's mirror to state_seq with a message that carries only
  // state (no request, no answer): for processes that mirror the cluster but
  // get no request with state before they need it (Bind-only processes).
  virtual void SendState(uint64_t state_seq) {}
  // The scheduling cycle ended (bound, failed or unschedulable): the process
  // may drop its cycle state. Sent with the next message to the process.
  virtual void FinishCycle(uint64_t cycle_id) {}

  // Counters, for failure policy accounting and the admin API.
  virtual void CountInvalidAnswer() = 0;
  virtual void CountIgnoredFailure() = 0;
};

using PluginProcessPtr = std::shared_ptr<PluginProcess>;

// An error of a plugin process, for a pod's status or an admin reply, named
// once: "plugin endpoint NAME: MESSAGE", unless the process's own message
// already begins with "plugin endpoint NAME".
inline std::string EndpointMessage(absl::string_view endpoint, absl::string_view message) {
  const std::string prefix = absl::StrCat("plugin endpoint ", endpoint);
  if (absl::StartsWith(message, prefix)) return std::string(message);
  return absl::StrCat(prefix, ": ", message);
}

}  // namespace podium::scheduler
