// Cluster.Sync: the adapter's stream, on gRPC's async API. Its completions run
// on the process's one AsyncDriver thread and do bookkeeping only; events are
// validated and handed, in order, to the scheduler on the event thread; action
// results go to their callbacks on the driver thread that read them.
#pragma once

#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "cluster_link.h"
#include "grpc_support/async_driver.h"
#include "podium/v1/cluster.grpc.pb.h"

namespace podium::scheduler {

class SchedulerMetrics;

// Which events of one batch need not be applied: a pod UPSERT that a valid
// DELETE of the same uid follows in the batch (a preemption victim's
// DisruptionTarget patch and its deletion when both are answered together, as
// podium-sim does without a termination grace period; a victim that
// terminates over a grace period is deleted in a later batch). The DELETE
// carries the pod's last state, so applying only it leaves the scheduler where
// both would, without handling a state that is already gone. `valid` marks
// the events that passed validation; an invalid DELETE supersedes nothing.
std::vector<bool> SupersededPodUpserts(const google::protobuf::RepeatedPtrField<v1::ObjectEvent>& events,
                                       const std::vector<bool>& valid);

// Serves one adapter stream at a time (see AdapterHello in cluster.proto): a
// second stream is refused while one is live unless its hello asks to take
// over. Everything it buffers is bounded: the adapter's outbox and the actions
// awaiting a result (a new action beyond the bound fails at once with
// UNAVAILABLE, so a bind is forgotten and requeued, never silently lost), and
// incoming events (reading pauses until the event thread catches up).
//
// Life cycle: register service() with the ServerBuilder, call Start with the
// server's completion queue once the server is built (the queue's driver may
// already run), and, at the end, Shutdown, then the server's Shutdown, then
// StopCalls, then stop the driver, and only then destroy the service (a
// stream's last completions reference it).
class ClusterService final : public ActionSink {
 public:
  // The highest Cluster protocol version served. 2: ActionResults may carry
  // the object events that follow them, and DeletePod a DisruptionTarget
  // condition to patch first (one message instead of two, each way). A
  // stream speaks the lower of this and the adapter's max_protocol_version.
  static constexpr uint32_t kProtocolVersion = 2;

  struct Options {
    std::vector<std::string> scheduler_names;
    absl::Duration action_timeout = absl::Seconds(30);
    size_t max_buffered_messages = 64;  // Reading pauses above this.
    // Actions sent and awaiting a result, and actions queued for writing: a
    // new action beyond either bound fails with UNAVAILABLE (counted).
    size_t max_pending_actions = 10000;
    size_t max_actions_per_message = 512;
    // How long a RecordEvent action may wait for a write to ride with (a
    // bind's) before it is written on its own: events never cost a bind a
    // write or a place in the adapter's queue.
    absl::Duration event_flush_delay = absl::Milliseconds(2);
    // How long an action other than a bind, sent by a thread other than the
    // driver while the scheduler is busy (SetSchedulerBusy), may wait for a
    // write to ride with (a bind's, or another one's that comes due); zero:
    // it is written at once. A preemptor's nomination patch and victim
    // deletes then share one message (and one adapter answer) with the next
    // pods' instead of costing one each way.
    absl::Duration action_coalesce_delay = absl::Milliseconds(2);
    // Streams connected that have not sent their hello yet.
    size_t max_unaccepted_streams = 4;
  };

  // Counters since start, for the Admin API and metrics.
  struct Stats {
    bool adapter_connected = false;
    std::string adapter;  // The live adapter's name, from its hello.
    size_t pending_actions = 0;
    size_t unaccepted_streams = 0;  // Connected, hello not read yet.
    size_t buffered_messages = 0;  // Read, not yet taken by the event thread.
    uint64_t refused_streams = 0;  // Second stream, bad hello, too many streams.
    uint64_t taken_over_streams = 0;
    uint64_t refused_actions = 0;  // Outbox full.
    uint64_t unknown_results = 0;  // A result for no pending action.
  };

  ClusterService(Options options, ClusterEventHandler& handler, SchedulerMetrics* metrics);
  ~ClusterService() override;

  // What to register with the ServerBuilder.
  grpc::Service* service() { return &async_; }
  // After BuildAndStart: waits for streams on the driver's queue (a queue of
  // that server). The driver outlives the service's calls.
  void Start(const grpc_support::AsyncDriver& driver);
  void Send(v1::Action action, ResultCallback on_result) override;
  uint32_t ProtocolVersion() const override;
  void SetSchedulerBusy(bool busy) override;

  bool adapter_connected() const;
  Stats stats() const;
  // Ends every stream (UNAVAILABLE) and fails every pending action
  // (UNAVAILABLE); once it returns no ResultCallback runs any more and no
  // event reaches the handler. Streams still complete on the driver until the
  // server shuts down.
  void Shutdown();
  // After the server's Shutdown, before the driver shuts the queue down:
  // starts no more gRPC operations (gRPC aborts on an operation started on a
  // queue that is shut down). Operations in flight complete, and each stream
  // is deleted on the driver with its last one.
  void StopCalls();

 private:
  class SyncCall;
  struct PendingAction {
    ResultCallback on_result;
    absl::Time deadline;
  };
  struct Answered {
    ResultCallback on_result;
    v1::ActionResult result;
  };
  struct Work {
    SyncCall* call = nullptr;  // Identity only; never dereferenced here.
    v1::ClusterMessage message;
    bool disconnected = false;
  };

  void EventLoop();
  void Handle(Work& work);
  // The first message of a stream: OK makes `call` the live stream.
  grpc::Status AcceptLocked(SyncCall* call, const v1::ClusterMessage& first)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A new stream arrived (on the driver): begins or refuses it.
  void OnStreamArrivedLocked(SyncCall* call) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RequestStreamLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The stream's last operation completed; the caller deletes it next.
  void ForgetCallLocked(SyncCall* call) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool ReadingShouldPauseLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void MaybeResumeReadLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void FailActions(const std::string& why) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void FailLocked(uint64_t id, ResultCallback on_result, const std::string& why)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Moves the callbacks of the actions `results` answer out of pending_
  // (results for no pending action are counted and dropped).
  void TakeCompletedLocked(v1::ActionResults& results, std::vector<Answered>* completed)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Options options_;
  ClusterEventHandler& handler_;
  SchedulerMetrics* metrics_;

  v1::Cluster::AsyncService async_;

  // Lock order: mu_ only; callbacks run without it.
  mutable absl::Mutex mu_;
  grpc::ServerCompletionQueue* queue_ ABSL_GUARDED_BY(mu_) = nullptr;
  bool scheduler_busy_ ABSL_GUARDED_BY(mu_) = false;  // SetSchedulerBusy.
  // Runs the calls' completions (Send tells its thread from others).
  const grpc_support::AsyncDriver* driver_ ABSL_GUARDED_BY(mu_) = nullptr;
  // The call object waiting for the next stream (not in live_).
  SyncCall* requested_ ABSL_GUARDED_BY(mu_) = nullptr;
  SyncCall* active_ ABSL_GUARDED_BY(mu_) = nullptr;
  std::string active_adapter_ ABSL_GUARDED_BY(mu_);
  uint32_t active_version_ ABSL_GUARDED_BY(mu_) = 0;  // The live stream's protocol version.
  // Every stream not yet done (the live one and those awaiting their hello).
  absl::flat_hash_map<SyncCall*, bool> live_ ABSL_GUARDED_BY(mu_);  // -> accepted
  size_t unaccepted_ ABSL_GUARDED_BY(mu_) = 0;
  bool shutdown_ ABSL_GUARDED_BY(mu_) = false;
  bool calls_stopped_ ABSL_GUARDED_BY(mu_) = false;  // StopCalls.
  std::deque<Work> work_ ABSL_GUARDED_BY(mu_);
  uint64_t next_action_id_ ABSL_GUARDED_BY(mu_) = 1;
  absl::flat_hash_map<uint64_t, PendingAction> pending_ ABSL_GUARDED_BY(mu_);
  // Results to deliver on the event thread (failures decided under mu_).
  std::vector<std::pair<ResultCallback, v1::ActionResult>> to_fail_ ABSL_GUARDED_BY(mu_);
  uint64_t refused_streams_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t taken_over_streams_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t refused_actions_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t unknown_results_ ABSL_GUARDED_BY(mu_) = 0;
  // The stream whose result callbacks run on the (one) driver thread without
  // mu_: Shutdown waits for none, and the actions they send are held and
  // written together once they all ran.
  SyncCall* callbacks_call_ ABSL_GUARDED_BY(mu_) = nullptr;
  // Writes decided under mu_ and being started without it (SyncCall); StopCalls
  // waits for none.
  int ops_starting_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread event_thread_;
};

}  // namespace podium::scheduler
