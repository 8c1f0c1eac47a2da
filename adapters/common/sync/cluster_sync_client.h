#pragma once

#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "podium/v1/cluster.grpc.pb.h"

namespace podium::adapter {

// The adapter's side of Cluster.Sync, exactly as the Kubernetes adapter speaks
// it: AdapterHello, ListBegin, the initial list as batched UPSERTs, ListEnd,
// then events and action results. A sync stream with two threads: the reader
// hands actions to ActionHandler (the executor), the writer drains a bounded
// queue, coalescing consecutive events (or results, and with a scheduler of
// protocol 2 the events queued behind them) into one message, so one
// write is in flight at a time (with write_after_actions the reader thread
// may be the one writing). Lock order: mu_ only.
class ClusterSyncClient {
 public:
  struct Options {
    std::string adapter_name = "podium-sim";
    std::vector<std::string> scheduler_names;  // AdapterHello; empty = the scheduler's.
    size_t batch_size = 500;                    // Events or results per message, at most...
    size_t batch_bytes = 1 << 20;               // ...and at most this many bytes (one item may exceed it).
    size_t queue_capacity = 1 << 17;            // Queued events and results.
    // For an ActionHandler that runs each action to completion on the reader
    // thread and never waits on the writer (podium-sim): what it queues while
    // one message's actions run is written by the reader thread once they all
    // ran (unless a write is in flight: the writer thread then goes on), not
    // by the writer thread woken for each: their results, then their events
    // unless older events are still queued (a burst is the writer thread's). The Kubernetes adapter hands its
    // actions to API workers and leaves this off.
    bool write_after_actions = false;
  };
  using ActionHandler = std::function<void(v1::Action&&)>;

  ClusterSyncClient(std::shared_ptr<grpc::Channel> channel, Options options, ActionHandler on_action);
  ~ClusterSyncClient();  // Close(absl::ZeroDuration()) if still open.

  // Opens the stream and queues the hello, ListBegin, the list and (when
  // `end_list`) ListEnd. Without it, more of the list may follow as
  // SendEvents until EndList().
  void Start(std::vector<v1::ObjectEvent> initial_list, bool end_list = true);
  // Queues ListEnd after what is queued (a list started without it). False
  // once the stream ended.
  bool EndList();

  // Queue for sending; block while the queue is full. False once the stream ended.
  bool SendEvents(std::vector<v1::ObjectEvent> events);
  bool SendResult(v1::ActionResult result);

  std::optional<v1::SchedulerHello> hello() const;
  // The stream ended (the scheduler went away, or Close); status() says why.
  bool ended() const;
  absl::Status status() const;
  // Nothing is queued or being written.
  bool idle() const;

  // Sends what is queued, half-closes, waits up to `grace` for the scheduler to
  // end the stream, then cancels it. Idempotent.
  absl::Status Close(absl::Duration grace);

 private:
  using Outbound = std::variant<v1::AdapterHello, v1::ListBegin, v1::ObjectEvent, v1::ListEnd>;

  bool Enqueue(Outbound item);
  // Moves the next message to write out of the queues (results first; with
  // `events_with_results` and a scheduler of protocol 2, the events queued
  // behind them in the same message).
  void TakeNext(v1::ClusterMessage* msg, bool events_with_results) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Moves the queue's leading object events into `events`, which holds
  // `items` items of `bytes` bytes already (the batch bounds count them).
  void TakeEvents(v1::ObjectEvents* events, size_t items, size_t bytes) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The reader thread's writes after an Actions message (write_after_actions).
  void WriteQueuedOnReader() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ReadLoop();
  void WriteLoop();
  bool HasRoomOrEnded() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool WriterHasWork() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool IsEnded() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return ended_; }
  bool ReadIsDone() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return read_done_; }

  const Options options_;
  const ActionHandler on_action_;
  std::unique_ptr<v1::Cluster::Stub> stub_;
  grpc::ClientContext context_;
  std::unique_ptr<grpc::ClientReaderWriter<v1::ClusterMessage, v1::SchedulerMessage>> stream_;
  std::thread reader_;
  std::thread writer_;

  mutable absl::Mutex mu_;
  std::deque<Outbound> queue_ ABSL_GUARDED_BY(mu_);
  // Action results go first, in their own lane: the API server answers a bind
  // independently of the watch, so a result must not wait behind a burst of
  // object events (it did: bind p99 60 ms on basic-5000).
  std::deque<v1::ActionResult> results_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;  // By either thread: one write (or WritesDone) at a time.
  // The reader thread is running one message's actions (write_after_actions).
  bool dispatching_ ABSL_GUARDED_BY(mu_) = false;
  size_t dispatch_queued_ ABSL_GUARDED_BY(mu_) = 0;  // Events and others queued while dispatching_.
  bool write_failed_ ABSL_GUARDED_BY(mu_) = false;
  bool closing_ ABSL_GUARDED_BY(mu_) = false;
  bool read_done_ ABSL_GUARDED_BY(mu_) = false;
  bool ended_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status status_ ABSL_GUARDED_BY(mu_);
  std::optional<v1::SchedulerHello> hello_ ABSL_GUARDED_BY(mu_);
};

// Converts a finished gRPC status.
absl::Status FromGrpc(const grpc::Status& s);

}  // namespace podium::adapter
