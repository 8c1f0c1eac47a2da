// PluginProcess over one Plugin.Run stream (gRPC's async API, on a
// grpc_support::AsyncDriver's completion queue).
#pragma once

#include <deque>
#include <set>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/security/credentials.h>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "framework/plugin_process.h"
#include "grpc_support/async_driver.h"
#include "podium/v1/plugin.grpc.pb.h"

namespace podium::scheduler {

// What of the cluster a process's mirror receives: what its registration
// asked for, plus nodes when it serves PreFilter/Filter/PreScore/Score or
// asked for pods.
v1::MirrorScope EffectiveMirrorScope(const v1::Registration& registration);
bool WantsState(const v1::MirrorScope& scope);
// Drops from the delta what the scope did not ask for.
void RestrictToScope(const v1::MirrorScope& scope, v1::StateDelta& delta);

struct PluginEndpointOptions {
  std::string name;
  std::string address;  // unix:///path or host:port.
  // Null: plaintext. TLS/mTLS for a host:port endpoint (main builds them).
  std::shared_ptr<grpc::ChannelCredentials> channel_credentials;
  FailurePolicy failure_policy = FailurePolicy::kFail;
  absl::Duration timeout = absl::Seconds(1);  // Per request.
  std::vector<v1::PluginArgs> plugins;        // Sent in Open.
  std::string scheduler_id = "podium-scheduler";
  absl::Duration handshake_timeout = absl::Seconds(5);
  absl::Duration reconnect_initial_backoff = absl::Milliseconds(100);
  absl::Duration reconnect_max_backoff = absl::Seconds(5);
  size_t max_in_flight = 4096;  // Bounded: beyond it a call fails at once.
  // Circuit breaker: after this many consecutive request timeouts (0 = never)
  // calls fail at once for circuit_open_initial, then one probe request is let
  // through; while probes time out the open period doubles up to
  // circuit_open_max. Any answer closes the circuit.
  // Called (on the reconnect thread) each time the endpoint connects again
  // after Start: its registration may be new (a sidecar that came up late).
  std::function<void()> on_reconnected;
  // Called on the driver thread for every answered request, with the
  // request kind ("cycle", "queueing_hint", ... as in SchedulerToPlugin) and
  // its round trip (podium_plugin_endpoint_request_duration_seconds). Must
  // not block.
  std::function<void(std::string_view request, absl::Duration round_trip)> on_answered;
  uint32_t circuit_breaker_timeouts = 3;
  absl::Duration circuit_open_initial = absl::Seconds(1);
  absl::Duration circuit_open_max = absl::Seconds(30);
  // The driver whose completion queue the stream uses, and on whose thread
  // answers are read (on_answered, the PermitDecision handler): in
  // podium-scheduler the one the server's services use too, so that a single
  // thread in the process waits on gRPC. It must outlive the process's
  // Shutdown; it is started if it was not. Null: the process makes and owns
  // one (tests, tools).
  grpc_support::AsyncDriver* driver = nullptr;
};

// Counters of one endpoint, for the admin API and metrics.
struct PluginProcessStats {
  uint64_t requests = 0;
  uint64_t errors = 0;
  uint64_t timeouts = 0;
  uint64_t invalid_answers = 0;
  uint64_t ignored_failures = 0;
  uint64_t spurious_answers = 0;
  // PermitDecisions naming a plugin the endpoint does not serve at Permit.
  uint64_t refused_permit_decisions = 0;
  uint32_t reconnects = 0;
  uint64_t circuit_opens = 0;          // Times the circuit breaker opened.
  uint64_t circuit_fast_failures = 0;  // Calls failed at once while it was open.
  double latency_p50_ms = 0;
  double latency_p99_ms = 0;
};

// What ListPlugins reports: connecting (dialing, or waiting for the
// handshake), ready, or circuit-open (the endpoint keeps timing out; calls fail
// at once until a probe request is answered).
enum class EndpointState { kConnecting, kReady, kCircuitOpen };

class GrpcPluginProcess : public PluginProcess {
 public:
  using PermitDecisionHandler = std::function<void(const v1::PermitDecision&)>;

  GrpcPluginProcess(PluginEndpointOptions options, StateSource& state,
                    PermitDecisionHandler on_permit_decision);
  ~GrpcPluginProcess() override;

  // Dials and completes the handshake, waiting up to handshake_timeout. On
  // failure the process keeps reconnecting in the background.
  absl::Status Start();
  void Shutdown();

  const std::string& name() const override { return options_.name; }
  FailurePolicy failure_policy() const override { return options_.failure_policy; }
  bool ready() const override;
  uint64_t stream_generation() const override;
  v1::Registration registration() const override;
  bool MirrorsNominatedPods() const override;
  bool RunsDryRunsInCycles() const override;
  bool AnswersWhatIf() const override;
  bool AnswersLookahead() const override;
  bool AnswersLaterLookaheads() const override;
  bool AnswersNominatedChecks() const override;
  bool AnswersPreemptionWhatIf() const override;
  bool AnswersPreemptionWhatIfGone() const override;
  bool LeavesPreFilterUnschedulableToPreemption() const override;
  bool RegistersPendingPodUpdates() const override;
  std::future<PluginAnswer> Call(v1::SchedulerToPlugin request,
                                 std::optional<uint64_t> state_seq) override;
  void SendState(uint64_t state_seq) override;
  void FinishCycle(uint64_t cycle_id) override;
  absl::Duration timeout() const override { return options_.timeout; }
  void CountInvalidAnswer() override;
  void CountIgnoredFailure() override;

  const std::string& address() const { return options_.address; }
  EndpointState state() const;
  PluginProcessStats stats() const;
  // The state the mirror is known to have (for trimming the delta log).
  std::optional<uint64_t> mirror_seq() const;
  std::string last_error() const;

 private:
  class Stream;
  struct Pending {
    std::promise<PluginAnswer> promise;
    v1::SchedulerToPlugin::KindCase kind;
    absl::Time sent;
    absl::Time deadline;
    // The request carried a state delta: an `error` answer means the plugin
    // may not have applied it, so its mirror must be reset.
    bool carried_delta = false;
  };

  absl::Status Connect();
  // Call, or (expect_answer false) a message with id 0 that nobody answers.
  std::future<PluginAnswer> Send(v1::SchedulerToPlugin request, std::optional<uint64_t> state_seq,
                                 bool expect_answer);
  void InvalidateMirror() ABSL_EXCLUSIVE_LOCKS_REQUIRED(delta_mu_);
  void OnMessage(Stream* stream, v1::PluginToScheduler&& message);
  // `record`: the cause goes to last_error and the log (not when the
  // scheduler closed the stream itself, having recorded why).
  void OnStreamBroken(Stream* stream, const std::string& why, bool record);
  void OnStreamDone(Stream* stream);
  void FailAllPending(const absl::Status& status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RecordLatency(absl::Duration d) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Circuit breaker: OK when a request may be sent now (possibly as the probe).
  absl::Status AdmitThroughBreaker(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void OnRequestTimedOut(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void OnRequestAnswered() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void DeadlineLoop();
  void ReconnectLoop();

  const PluginEndpointOptions options_;
  StateSource& state_;
  const PermitDecisionHandler on_permit_decision_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Plugin::Stub> stub_;
  // options_.driver, or one of our own (stopped in Shutdown once our stream
  // is gone).
  std::unique_ptr<grpc_support::AsyncDriver> own_driver_;
  grpc_support::AsyncDriver* driver_ = nullptr;

  // Lock order: delta_mu_ before mu_.
  absl::Mutex delta_mu_;
  bool mirror_valid_ ABSL_GUARDED_BY(delta_mu_) = false;
  uint64_t mirror_generation_ ABSL_GUARDED_BY(delta_mu_) = 0;  // The stream it is on.
  uint64_t mirror_seq_ ABSL_GUARDED_BY(delta_mu_) = 0;

  mutable absl::Mutex mu_;
  Stream* stream_ ABSL_GUARDED_BY(mu_) = nullptr;
  // Streams created and not yet deleted; Shutdown waits for 0 so that no
  // completion of ours runs after it returns and the last channel reference
  // is never dropped on the driver thread.
  int live_streams_ ABSL_GUARDED_BY(mu_) = 0;
  bool ready_ ABSL_GUARDED_BY(mu_) = false;
  bool shutdown_ ABSL_GUARDED_BY(mu_) = false;
  bool broken_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  uint64_t open_id_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t stream_generation_ ABSL_GUARDED_BY(mu_) = 0;  // Bumped per dial.
  // Set when a request that carried a delta was answered with `error`: the
  // next request with state sends a reset instead of a delta.
  bool resync_mirror_ ABSL_GUARDED_BY(mu_) = false;
  v1::Registration registration_ ABSL_GUARDED_BY(mu_);
  v1::MirrorScope mirror_scope_ ABSL_GUARDED_BY(mu_);
  // Finished cycles not yet told to the process: they ride on the next message.
  std::vector<uint64_t> finished_cycles_ ABSL_GUARDED_BY(mu_);
  std::string last_error_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<uint64_t, Pending> pending_ ABSL_GUARDED_BY(mu_);
  // Pending requests by deadline (the per-message deadline timer).
  std::set<std::pair<absl::Time, uint64_t>> deadlines_ ABSL_GUARDED_BY(mu_);
  PluginProcessStats stats_ ABSL_GUARDED_BY(mu_);
  enum class Breaker { kClosed, kOpen, kHalfOpen };
  Breaker breaker_ ABSL_GUARDED_BY(mu_) = Breaker::kClosed;
  uint32_t consecutive_timeouts_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Time circuit_open_until_ ABSL_GUARDED_BY(mu_);
  absl::Duration circuit_backoff_ ABSL_GUARDED_BY(mu_);
  std::vector<double> latencies_ms_ ABSL_GUARDED_BY(mu_);  // Ring of recent ones.
  size_t latency_next_ ABSL_GUARDED_BY(mu_) = 0;

  std::thread deadline_thread_;
  std::thread reconnect_thread_;
};

}  // namespace podium::scheduler
