#include "server/cluster_service.h"

#include <algorithm>

#include <cstdio>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "grpc_support/thread_name.h"
#include "grpcpp/alarm.h"
#include "logging/logger.h"
#include "metrics/metrics.h"
#include "server/echo.h"
#include "server/validation.h"

namespace podium::scheduler {

// One adapter stream on the async API. Every completion runs on the driver
// thread; its state is guarded by the service's mu_. Operations are started
// under mu_ (by the driver, the event thread that resumes reading, a thread
// sending an action, or Shutdown), except the hot writes: an action's write
// and the next write after one completes are decided under mu_ (writing_ set,
// `starting_` counted) and started after it is released, so that neither the
// scheduling thread nor the driver waits for the other's gRPC write (a
// sendmsg) to get the lock. It deletes itself once every operation it started
// has completed and none is being started ("done"), on the thread that sees
// that.
class ClusterService::SyncCall {
 public:
  explicit SyncCall(ClusterService& service) : service_(service) {
    // Before the call is requested, as gRPC requires.
    context_.AsyncNotifyWhenDone(&call_done_tag_);
  }

  void Request(v1::Cluster::AsyncService& async, grpc::ServerCompletionQueue* queue) {
    async.RequestSync(&context_, &stream_, queue, queue, &accepted_tag_);
  }

  // Reads the hello; nothing is sent before the stream is accepted.
  void Begin() { StartRead(); }

  void SendHello(uint32_t version) {
    v1::SchedulerMessage hello;
    hello.mutable_hello()->set_protocol_version(version);
    for (const auto& name : service_.options_.scheduler_names) hello.mutable_hello()->add_scheduler_names(name);
    outbox_.push_back(std::move(hello));
    hurry_ = outbox_.size();
    MaybeWrite();
  }

  // Actions queued and not yet handed to gRPC.
  size_t queued_actions() const { return queued_actions_; }

  // How Enqueue starts the write that may be due: here (returned to the
  // caller), by the driver woken for it (KickIfDue: the caller is a thread
  // other than the driver), or not yet (the driver runs result callbacks of
  // this call and writes once they all ran, OnReadDone).
  enum class Start { kHere, kKick, kHold };

  // Queues the action; returns the message to write when a write is to
  // start here (StartWrite, after mu_ is released), else null.
  const v1::SchedulerMessage* Enqueue(v1::Action&& action, Start start) {
    if (finished_) return nullptr;
    auto due = [&]() -> const v1::SchedulerMessage* {
      return start == Start::kHere ? TakeWrite() : start == Start::kKick ? KickIfDue() : nullptr;
    };
    if (action.has_record_event()) {
      // An event (kube-scheduler's are best effort and asynchronous too)
      // must not cost a write of its own, nor go ahead of a bind: it rides
      // with the next write, or the flush alarm sends it.
      deferred_.push_back(std::move(action));
      ++queued_actions_;
      if (deferred_.size() >= service_.options_.max_actions_per_message) flush_now_ = true;
      return due();
    }
    // The front message may be in flight; only a queued one can take more actions.
    if (outbox_.empty() || (writing_ && outbox_.size() == 1) || !outbox_.back().has_actions() ||
        static_cast<size_t>(outbox_.back().actions().actions_size()) >=
            service_.options_.max_actions_per_message) {
      outbox_.emplace_back();
      outbox_.back().mutable_actions();
    }
    *outbox_.back().mutable_actions()->add_actions() = std::move(action);
    ++queued_actions_;
    if (start != Start::kKick) hurry_ = outbox_.size();
    return due();
  }

  // Starts the write TakeWrite decided, without mu_, then takes mu_ to end
  // the start. The message stays put: the front of the outbox, popped only
  // when its write completes. True when the call is done (the caller deletes
  // it).
  bool StartWrite(const v1::SchedulerMessage* message) ABSL_LOCKS_EXCLUDED(service_.mu_) {
    stream_.Write(*message, &write_tag_);
    absl::MutexLock lock(&service_.mu_);
    EndStart();
    return DoneLocked();
  }

  // Under mu_: a kick waiting out the coalescing delay fires now (a cancelled
  // alarm's tag comes at once; OnKick writes whatever is due).
  void WriteHeldNow() {
    if (!kick_pending_ || !kick_held_) return;
    kick_held_ = false;
    kick_alarm_.Cancel();
  }

  // Resume reading once the service's threads caught up.
  void MaybeResumeRead() {
    if (!reading_ && !finished_ && paused_) {
      paused_ = false;
      StartRead();
    }
  }

  // Decides the stream's status; it is sent once no write is in flight (the
  // async API allows one write-side operation at a time).
  void FinishOnce(grpc::Status status) {
    if (finished_) return;
    finished_ = true;
    status_ = std::move(status);
    if (alarm_pending_) flush_alarm_.Cancel();  // Its tag still comes (not ok).
    if (kick_pending_) kick_alarm_.Cancel();
    StartFinish();
  }

 private:
  void OnAccepted(bool ok) {
    if (!ok) {  // The server is shutting down: the call never started (no call-done tag).
      {
        absl::MutexLock lock(&service_.mu_);
        if (service_.requested_ == this) service_.requested_ = nullptr;
      }
      delete this;
      return;
    }
    bool done = false;
    {
      absl::MutexLock lock(&service_.mu_);
      call_pending_ = true;
      service_.requested_ = nullptr;
      service_.RequestStreamLocked();  // The next stream, while this one starts.
      service_.OnStreamArrivedLocked(this);
      done = DoneLocked();
    }
    if (done) delete this;
  }

  void OnReadDone(bool ok) {
    // Action results: a bind's result needs no ordering with object events
    // and must not wait behind a burst of pod creations, nor behind a thread
    // hand-off (a wake-up cost 0.2-0.4 ms on a loaded 2-core machine). Their
    // callbacks do bookkeeping only (ActionSink), so they run right here on the
    // driver, in stream order, before the next read; each learns when its
    // result arrived.
    const absl::Time received = absl::Now();
    std::vector<Answered> completed;
    // Protocol 2: object events that rode with the results, applied after
    // the results' callbacks ran (as if they came in the next message).
    v1::ClusterMessage trailing;
    const v1::SchedulerMessage* held = nullptr;
    absl::Mutex& mu = service_.mu_;
    mu.Lock();
    reading_ = false;
    if (!ok) {
      FinishOnce(grpc::Status::OK);  // The adapter closed its side (or the stream broke).
    } else if (!finished_) {
      if (!accepted_) {
        grpc::Status refused = service_.AcceptLocked(this, incoming_);
        if (refused.ok()) {
          accepted_ = true;
        } else {
          FinishOnce(std::move(refused));
        }
      } else if (incoming_.has_results()) {
        service_.TakeCompletedLocked(*incoming_.mutable_results(), &completed);
        if (incoming_.results().events().events_size() > 0) {
          trailing.mutable_events()->Swap(incoming_.mutable_results()->mutable_events());
        }
      } else if (incoming_.has_hello()) {
        FinishOnce(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "a second hello on the stream"));
      } else if (!service_.shutdown_) {
        service_.work_.push_back(Work{this, std::move(incoming_), false});
      }
      incoming_.Clear();
      if (!completed.empty()) {
        // Callbacks run without the lock (they send actions); no read is
        // outstanding meanwhile, so incoming_ and the reading state stay ours,
        // and only this thread deletes the call.
        service_.callbacks_call_ = this;
        mu.Unlock();
        for (Answered& c : completed) {
          if (c.on_result) c.on_result(c.result, received);
        }
        completed.clear();  // Their captures go before the lock is taken again.
        mu.Lock();
        service_.callbacks_call_ = nullptr;
        // The actions the callbacks sent (a preemption's deletes, one per
        // DisruptionTarget patch result) were held: one write for them all.
        held = TakeWrite();
      }
      // Not once the stream finished meanwhile (taken over, shut down): a
      // separate message would not have been read either.
      if (trailing.has_events() && !finished_ && !service_.shutdown_) {
        service_.work_.push_back(Work{this, std::move(trailing), false});
      }
      if (!finished_) {
        // Back-pressure: stop reading while the event thread is behind.
        if (service_.ReadingShouldPauseLocked()) {
          paused_ = true;
        } else {
          StartRead();
        }
      }
    }
    bool done = DoneLocked();
    mu.Unlock();
    if (held != nullptr) done = StartWrite(held);
    if (done) delete this;
  }

  void OnWriteDone(bool ok) {
    bool done = false;
    const v1::SchedulerMessage* next = nullptr;
    v1::SchedulerMessage written;  // Freed after the lock, which every Send takes.
    {
      absl::MutexLock lock(&service_.mu_);
      writing_ = false;
      if (outbox_.front().has_actions()) queued_actions_ -= outbox_.front().actions().actions_size();
      written = std::move(outbox_.front());
      outbox_.pop_front();
      if (hurry_ > 0) --hurry_;
      // A failed write decides the status unless it was decided already: a
      // cancelled call's (OnCallDone) may have come first and waited for
      // this write to send it, so a finish is started either way.
      if (!ok) FinishOnce(grpc::Status(grpc::StatusCode::UNAVAILABLE, "write failed"));
      if (finished_) {
        StartFinish();  // It waited for this write.
      } else if (!kick_pending_ || !kick_held_ || hurry_ > 0) {
        // Actions waiting out the coalescing delay, and nothing else, wait
        // on: the alarm, a bind or the loop going idle writes them.
        next = TakeWrite();
      }
      done = DoneLocked();
    }
    if (next != nullptr) done = StartWrite(next);
    if (done) delete this;
  }

  void OnFinishDone(bool /*ok*/) {
    bool done = false;
    {
      absl::MutexLock lock(&service_.mu_);
      finish_pending_ = false;
      finish_done_ = true;
      done = DoneLocked();
    }
    if (done) delete this;
  }

  // The call is over: finished, or cancelled by the adapter, a deadline or
  // the server's shutdown (then the pending operations fail).
  void OnCallDone(bool /*ok*/) {
    bool done = false;
    {
      absl::MutexLock lock(&service_.mu_);
      call_pending_ = false;
      if (context_.IsCancelled()) FinishOnce(grpc::Status::CANCELLED);
      done = DoneLocked();
    }
    if (done) delete this;
  }

  void StartRead() {
    if (service_.calls_stopped_) return;
    reading_ = true;
    stream_.Read(&incoming_, &read_tag_);
  }

  // Starts the next write, if one is due, under mu_ (the rare paths: the
  // hello, the flush alarm).
  void MaybeWrite() {
    if (const v1::SchedulerMessage* message = TakeWrite()) {
      stream_.Write(*message, &write_tag_);
      EndStart();
    }
  }

  // Under mu_: a write TakeWrite counted as being started has been started.
  void EndStart() {
    --starting_;
    --service_.ops_starting_;
  }

  // Under mu_: whether a write is due (no write in flight, a message to
  // write; deferred events alone wait for the flush alarm, armed here).
  bool WriteDue() {
    if (writing_ || finished_ || service_.calls_stopped_) return false;
    TakeDeferred();
    if (outbox_.empty()) {
      if (!deferred_.empty()) ArmFlushAlarm();
      return false;
    }
    return true;
  }

  // Under mu_: whether a write is due; if so, marks it in flight and being
  // started, and returns the message (the front of the outbox).
  const v1::SchedulerMessage* TakeWrite() {
    if (!WriteDue()) return nullptr;
    writing_ = true;
    ++starting_;
    ++service_.ops_starting_;
    return &outbox_.front();
  }

  // Under mu_, for a non-bind action queued by a thread other than the
  // driver (ClusterService::Send): a write that TakeWrite would start is
  // started by the driver instead, woken by an alarm that fires at once. The
  // scheduling thread's status and DisruptionTarget patches then never run
  // gRPC's write path (a sendmsg, after which the write's completion wakes
  // the driver, which preempted the sender: preempt-500's scheduling thread
  // was switched out there about 600 times per 1 000 preemptors). While the
  // scheduler is busy the alarm fires after Options::action_coalesce_delay
  // instead (a bind's write, or WriteHeldNow, may take the actions first).
  // Always null.
  const v1::SchedulerMessage* KickIfDue() {
    if (kick_pending_ || service_.queue_ == nullptr) return nullptr;
    const bool hold = service_.scheduler_busy_ && service_.options_.action_coalesce_delay > absl::ZeroDuration();
    // A write in flight goes on with the next when it completes
    // (OnWriteDone), unless this kick holds the actions: then it is armed
    // all the same, and the completion leaves them to it.
    if (writing_ ? !hold || finished_ || service_.calls_stopped_ : !WriteDue()) return nullptr;
    kick_pending_ = true;
    kick_held_ = hold;
    const absl::Duration wait = kick_held_ ? service_.options_.action_coalesce_delay : absl::ZeroDuration();
    kick_alarm_.Set(service_.queue_, std::chrono::system_clock::now() + absl::ToChronoMicroseconds(wait),
                    &kick_tag_);
    return nullptr;
  }

  void OnKick(bool /*ok*/) {
    const v1::SchedulerMessage* next = nullptr;
    bool done = false;
    {
      absl::MutexLock lock(&service_.mu_);
      kick_pending_ = false;
      next = TakeWrite();
      done = DoneLocked();
    }
    if (next != nullptr) done = StartWrite(next);
    if (done) delete this;
  }

  // Deferred events join the message about to be written (an actions
  // message with room); once the flush alarm rang (or they fill a message),
  // they form one of their own if there is none.
  void TakeDeferred() {
    if (deferred_.empty()) return;
    if (outbox_.empty() || !outbox_.front().has_actions() ||
        static_cast<size_t>(outbox_.front().actions().actions_size()) + deferred_.size() >
            service_.options_.max_actions_per_message) {
      if (!outbox_.empty() || !flush_now_) return;  // They go with a later write.
      outbox_.emplace_back();
      outbox_.back().mutable_actions();
    }
    flush_now_ = false;
    auto* actions = outbox_.front().mutable_actions()->mutable_actions();
    for (v1::Action& a : deferred_) *actions->Add() = std::move(a);
    deferred_.clear();
  }

  void ArmFlushAlarm() {
    if (alarm_pending_ || service_.calls_stopped_ || service_.queue_ == nullptr) return;
    alarm_pending_ = true;
    flush_alarm_.Set(service_.queue_,
                     std::chrono::system_clock::now() +
                         absl::ToChronoMicroseconds(service_.options_.event_flush_delay),
                     &flush_tag_);
  }

  void OnFlushAlarm(bool /*ok*/) {
    bool done = false;
    {
      absl::MutexLock lock(&service_.mu_);
      alarm_pending_ = false;
      if (!deferred_.empty()) flush_now_ = true;
      MaybeWrite();
      done = DoneLocked();
    }
    if (done) delete this;
  }

  void StartFinish() {
    if (!finished_ || finish_started_ || writing_ || service_.calls_stopped_) return;
    finish_started_ = true;
    finish_pending_ = true;
    stream_.Finish(status_, &finish_tag_);
  }

  // Whether every operation has completed and none will start (the status
  // was sent, or StopCalls); then the service forgets the call and the
  // caller deletes it.
  bool DoneLocked() {
    if (done_ || reading_ || writing_ || finish_pending_ || call_pending_ || alarm_pending_ || kick_pending_ ||
        starting_ > 0) {
      return false;
    }
    if (!finish_done_ && !service_.calls_stopped_) return false;
    done_ = true;
    service_.ForgetCallLocked(this);
    return true;
  }

  ClusterService& service_;
  grpc::ServerContext context_;
  grpc::ServerAsyncReaderWriter<v1::SchedulerMessage, v1::ClusterMessage> stream_{&context_};
  grpc_support::CompletionOf<SyncCall> accepted_tag_{this, &SyncCall::OnAccepted};
  grpc_support::CompletionOf<SyncCall> read_tag_{this, &SyncCall::OnReadDone};
  grpc_support::CompletionOf<SyncCall> write_tag_{this, &SyncCall::OnWriteDone};
  grpc_support::CompletionOf<SyncCall> finish_tag_{this, &SyncCall::OnFinishDone};
  grpc_support::CompletionOf<SyncCall> call_done_tag_{this, &SyncCall::OnCallDone};
  grpc_support::CompletionOf<SyncCall> flush_tag_{this, &SyncCall::OnFlushAlarm};
  grpc::Alarm flush_alarm_;
  grpc_support::CompletionOf<SyncCall> kick_tag_{this, &SyncCall::OnKick};
  grpc::Alarm kick_alarm_;
  // Guarded by service_.mu_.
  v1::ClusterMessage incoming_;
  std::deque<v1::SchedulerMessage> outbox_;
  std::vector<v1::Action> deferred_;  // Events waiting for a write (counted in queued_actions_).
  bool alarm_pending_ = false;
  bool kick_pending_ = false;  // The kick alarm is set (KickIfDue).
  bool kick_held_ = false;  // ... for the coalescing delay, not at once.
  // How many messages at the outbox's front hold something not to wait out
  // the coalescing delay (a bind, an action sent on the driver, the hello):
  // a completed write goes on with the next while there are any.
  size_t hurry_ = 0;
  bool flush_now_ = false;  // The deferred events may be written on their own.
  size_t queued_actions_ = 0;
  grpc::Status status_;
  bool accepted_ = false;
  bool writing_ = false;
  int starting_ = 0;  // Writes decided under mu_ and being started without it.
  bool reading_ = false;
  bool paused_ = false;
  bool finished_ = false;  // status_ decided.
  bool finish_started_ = false;
  bool finish_pending_ = false;
  bool finish_done_ = false;
  bool call_pending_ = false;  // The call-done tag will come.
  bool done_ = false;
};

ClusterService::ClusterService(Options options, ClusterEventHandler& handler,
                               SchedulerMetrics* metrics)
    : options_(std::move(options)), handler_(handler), metrics_(metrics) {
  event_thread_ = std::thread([this] {
    grpc_support::NameThisThread("cluster-events");
    EventLoop();
  });
}

ClusterService::~ClusterService() { Shutdown(); }

void ClusterService::Shutdown() {
  {
    absl::MutexLock lock(&mu_);
    if (shutdown_) return;
    shutdown_ = true;
    for (auto& [call, accepted] : live_) {
      call->FinishOnce(grpc::Status(grpc::StatusCode::UNAVAILABLE, "scheduler shutting down"));
    }
    // Failed on the event thread before it returns; a result read from now
    // on finds no pending action.
    FailActions("scheduler shutting down");
    // A result callback running on the driver completes before we return.
    mu_.Await(absl::Condition(
        +[](SyncCall** running) { return *running == nullptr; }, &callbacks_call_));
  }
  if (event_thread_.joinable()) event_thread_.join();
}

void ClusterService::StopCalls() {
  absl::MutexLock lock(&mu_);
  calls_stopped_ = true;
  // No operation starts from now on; those being started without mu_ finish
  // before the driver (and its completion queue) may stop.
  mu_.Await(absl::Condition(
      +[](int* starting) { return *starting == 0; }, &ops_starting_));
}

bool ClusterService::adapter_connected() const {
  absl::MutexLock lock(&mu_);
  return active_ != nullptr;
}

ClusterService::Stats ClusterService::stats() const {
  absl::MutexLock lock(&mu_);
  Stats s;
  s.adapter_connected = active_ != nullptr;
  if (active_ != nullptr) s.adapter = active_adapter_;
  s.pending_actions = pending_.size();
  s.unaccepted_streams = unaccepted_;
  s.buffered_messages = work_.size();
  s.refused_streams = refused_streams_;
  s.taken_over_streams = taken_over_streams_;
  s.refused_actions = refused_actions_;
  s.unknown_results = unknown_results_;
  return s;
}

void ClusterService::Start(const grpc_support::AsyncDriver& driver) {
  absl::MutexLock lock(&mu_);
  driver_ = &driver;
  queue_ = driver.server_queue();
  RequestStreamLocked();
}

void ClusterService::RequestStreamLocked() {
  // Also after Shutdown: a stream that comes meanwhile is refused, not left
  // waiting until the server shuts down.
  if (queue_ == nullptr || requested_ != nullptr || calls_stopped_) return;
  requested_ = new SyncCall(*this);
  requested_->Request(async_, queue_);
}

void ClusterService::OnStreamArrivedLocked(SyncCall* call) {
  if (shutdown_) {
    call->FinishOnce(grpc::Status(grpc::StatusCode::UNAVAILABLE, "scheduler shutting down"));
    return;
  }
  if (unaccepted_ >= options_.max_unaccepted_streams) {
    // Not in live_: it never counted as unaccepted.
    ++refused_streams_;
    call->FinishOnce(grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                                  "too many Cluster.Sync streams waiting to send their hello"));
    return;
  }
  live_[call] = false;
  ++unaccepted_;
  call->Begin();
}

grpc::Status ClusterService::AcceptLocked(SyncCall* call, const v1::ClusterMessage& first) {
  auto refuse = [&](grpc::StatusCode code, std::string message) {
    ++refused_streams_;
    PODIUM_LOG(Warning, "Refused an adapter stream", {"err", message});
    return grpc::Status(code, std::move(message));
  };
  if (shutdown_) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "scheduler shutting down");
  if (!first.has_hello()) {
    return refuse(grpc::StatusCode::INVALID_ARGUMENT,
                  "the first message on Cluster.Sync must be hello (AdapterHello)");
  }
  const v1::AdapterHello& hello = first.hello();
  if (hello.protocol_version() > kProtocolVersion) {
    return refuse(grpc::StatusCode::FAILED_PRECONDITION,
                  absl::StrCat("hello.protocol_version: ", hello.protocol_version(),
                               " is not supported (this scheduler speaks 1 to ", kProtocolVersion, ")"));
  }
  const std::string adapter = Echo(hello.adapter());
  if (active_ != nullptr) {
    if (!hello.takeover()) {
      return refuse(grpc::StatusCode::ALREADY_EXISTS,
                    absl::StrCat("adapter \"", active_adapter_,
                                 "\" is already connected and the scheduler serves one adapter "
                                 "stream at a time (set hello.takeover to replace it)"));
    }
    PODIUM_LOG(Warning, "Adapter takes over the stream", {"adapter", adapter}, {"previous", active_adapter_});
    ++taken_over_streams_;
    active_->FinishOnce(grpc::Status(grpc::StatusCode::ABORTED,
                                     absl::StrCat("taken over by adapter \"", adapter, "\"")));
    FailActions("adapter stream taken over");
    work_.push_back(Work{active_, {}, true});
  }
  live_[call] = true;
  --unaccepted_;
  active_ = call;
  active_adapter_ = adapter;
  // The stream speaks the highest version both sides do.
  active_version_ = std::min(std::max({1u, hello.protocol_version(), hello.max_protocol_version()}), kProtocolVersion);
  work_.push_back(Work{call, first, false});  // Logged on the event thread.
  call->SendHello(active_version_);
  return grpc::Status::OK;
}

void ClusterService::ForgetCallLocked(SyncCall* call) {
  if (auto it = live_.find(call); it != live_.end()) {
    if (!it->second) --unaccepted_;
    live_.erase(it);
  }
  if (active_ == call) {
    active_ = nullptr;
    active_adapter_.clear();
    active_version_ = 0;
    FailActions("adapter disconnected");
    work_.push_back(Work{call, {}, true});
  }
  // Drop queued work of this stream except the disconnect marker.
  for (auto& w : work_) {
    if (w.call == call && !w.disconnected) w.message.Clear();
  }
}

bool ClusterService::ReadingShouldPauseLocked() const { return work_.size() >= options_.max_buffered_messages; }

void ClusterService::MaybeResumeReadLocked() {
  if (active_ != nullptr && work_.size() < std::max<size_t>(1, options_.max_buffered_messages / 4)) {
    active_->MaybeResumeRead();
  }
}

void ClusterService::FailLocked(uint64_t id, ResultCallback on_result, const std::string& why) {
  v1::ActionResult result;
  result.set_action_id(id);
  result.set_code(v1::ActionResult::UNAVAILABLE);
  result.set_message(why);
  to_fail_.emplace_back(std::move(on_result), std::move(result));
}

void ClusterService::Send(v1::Action action, ResultCallback on_result) {
  SyncCall* call = nullptr;
  const v1::SchedulerMessage* message = nullptr;
  {
    absl::MutexLock lock(&mu_);
    if (active_ == nullptr || shutdown_) {
      FailLocked(action.id(), std::move(on_result), "no adapter is connected");
      return;
    }
    if (action.has_delete_pod() && action.delete_pod().has_disruption_target() && active_version_ < 2) {
      // An older adapter would delete without the condition.
      FailLocked(action.id(), std::move(on_result),
                 absl::StrCat("the adapter speaks Cluster protocol ", active_version_,
                              ": DeletePod.disruption_target needs 2"));
      return;
    }
    if (pending_.size() >= options_.max_pending_actions ||
        active_->queued_actions() >= options_.max_pending_actions) {
      // Fail it rather than drop it: a bind is then forgotten and requeued.
      ++refused_actions_;
      FailLocked(action.id(), std::move(on_result),
                 absl::StrCat("the adapter's outbox is full (", pending_.size(),
                              " actions await a result)"));
      return;
    }
    const uint64_t id = next_action_id_++;
    action.set_id(id);
    pending_.emplace(id, PendingAction{std::move(on_result), absl::Now() + options_.action_timeout});
    call = active_;
    // A bind's write starts here: the binds in flight are bounded, so its
    // latency is throughput (basic-5000 halved when the driver started them).
    // Other actions (status patches, preemption's patches and deletes) from
    // a thread other than the driver are started by the driver
    // (SyncCall::KickIfDue). Actions sent by result callbacks, which run on
    // the driver, are written once the callbacks of that message all ran
    // (OnReadDone): a preemption's deletes, each sent when its victim's
    // DisruptionTarget patch succeeded, went one per message before.
    const bool on_driver = driver_->OnDriverThread();
    const SyncCall::Start start = on_driver && callbacks_call_ == call ? SyncCall::Start::kHold
                                  : action.has_bind() || on_driver     ? SyncCall::Start::kHere
                                                                       : SyncCall::Start::kKick;
    message = call->Enqueue(std::move(action), start);
  }
  // The write starts without the lock (see SyncCall).
  if (message != nullptr && call->StartWrite(message)) delete call;
}

void ClusterService::SetSchedulerBusy(bool busy) {
  absl::MutexLock lock(&mu_);
  scheduler_busy_ = busy;
  if (!busy && active_ != nullptr) active_->WriteHeldNow();
}

uint32_t ClusterService::ProtocolVersion() const {
  absl::MutexLock lock(&mu_);
  return active_version_;
}

void ClusterService::FailActions(const std::string& why) {
  for (auto& [id, pending] : pending_) FailLocked(id, std::move(pending.on_result), why);
  pending_.clear();
}

void ClusterService::TakeCompletedLocked(v1::ActionResults& results, std::vector<Answered>* completed) {
  completed->reserve(results.results_size());
  for (v1::ActionResult& result : *results.mutable_results()) {
    auto it = pending_.find(result.action_id());
    if (it == pending_.end()) {  // Timed out already, or a made-up id.
      ++unknown_results_;
      continue;
    }
    completed->push_back(Answered{std::move(it->second.on_result), std::move(result)});
    pending_.erase(it);
  }
}

void ClusterService::EventLoop() {
  while (true) {
    Work work;
    std::vector<std::pair<ResultCallback, v1::ActionResult>> failed;
    {
      absl::MutexLock lock(&mu_);
      mu_.AwaitWithTimeout(absl::Condition(
                               +[](ClusterService* s) ABSL_NO_THREAD_SAFETY_ANALYSIS {
                                 return s->shutdown_ || !s->work_.empty() || !s->to_fail_.empty();
                               },
                               this),
                           absl::Seconds(1));
      // Expire actions whose result did not come in time.
      const absl::Time now = absl::Now();
      for (auto it = pending_.begin(); it != pending_.end();) {
        if (it->second.deadline <= now) {
          FailLocked(it->first, std::move(it->second.on_result), "no result from the adapter in time");
          pending_.erase(it++);
        } else {
          ++it;
        }
      }
      failed.swap(to_fail_);
      if (failed.empty() && work_.empty() && shutdown_) return;
      if (!work_.empty()) {
        work = std::move(work_.front());
        work_.pop_front();
        MaybeResumeReadLocked();
      }
    }
    const absl::Time decided = absl::Now();
    for (auto& [callback, result] : failed) {
      if (callback) callback(result, decided);
    }
    Handle(work);
  }
}

std::vector<bool> SupersededPodUpserts(const google::protobuf::RepeatedPtrField<v1::ObjectEvent>& events,
                                       const std::vector<bool>& valid) {
  std::vector<bool> superseded(events.size());
  // uid -> index of the pod's last valid DELETE in the batch.
  absl::flat_hash_map<absl::string_view, int> deleted_at;
  for (int i = 0; i < events.size(); ++i) {
    const v1::ObjectEvent& event = events[i];
    if (valid[i] && event.type() == v1::ObjectEvent::DELETE && event.object_case() == v1::ObjectEvent::kPod) {
      deleted_at[event.pod().meta().uid()] = i;
    }
  }
  if (deleted_at.empty()) return superseded;
  for (int i = 0; i < events.size(); ++i) {
    const v1::ObjectEvent& event = events[i];
    if (event.type() != v1::ObjectEvent::UPSERT || event.object_case() != v1::ObjectEvent::kPod) continue;
    auto it = deleted_at.find(event.pod().meta().uid());
    if (it != deleted_at.end() && it->second > i) superseded[i] = true;
  }
  return superseded;
}

void ClusterService::Handle(Work& work) {
  if (work.disconnected) {
    handler_.OnAdapterDisconnected();
    return;
  }
  v1::ClusterMessage& message = work.message;
  switch (message.kind_case()) {
    case v1::ClusterMessage::kHello:
      PODIUM_LOG(Info, "Adapter connected", {"adapter", Echo(message.hello().adapter())},
                 {"protocol", message.hello().protocol_version()});
      break;
    case v1::ClusterMessage::kListBegin: handler_.OnListBegin(); break;
    case v1::ClusterMessage::kListEnd: handler_.OnListEnd(); break;
    case v1::ClusterMessage::kEvents: {
      const auto& events = message.events().events();
      std::vector<bool> valid(events.size());
      for (int i = 0; i < events.size(); ++i) {
        const v1::ObjectEvent& event = events[i];
        if (absl::Status s = ValidateObjectEvent(event); !s.ok()) {
          PODIUM_LOG(Warning, "Refused an object from the adapter", {"object", Echo(DescribeObject(event))},
                     {"err", Echo(s.message(), 1024)});
          if (metrics_ != nullptr) {
            const std::string kind = DescribeObject(event);
            metrics_->CountInvalidObject(kind.substr(0, kind.find(' ')));
          }
          continue;
        }
        valid[i] = true;
      }
      const std::vector<bool> superseded = SupersededPodUpserts(events, valid);
      for (int i = 0; i < events.size(); ++i) {
        if (valid[i] && !superseded[i]) handler_.OnObjectEvent(events[i]);
      }
      break;
    }
    default: break;  // Results went to their callbacks in OnReadDone; cleared messages of a replaced stream.
  }
}

}  // namespace podium::scheduler
