#include "remote/grpc_plugin_process.h"

#include <algorithm>
#include <cstdio>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "grpc_support/thread_name.h"
#include "grpcpp/grpcpp.h"
#include "logging/logger.h"

namespace podium::scheduler {
namespace {

constexpr size_t kLatencyWindow = 4096;
// Plugin protocol versions this scheduler speaks (Open offers the range; the
// process answers the one it picked). 2 adds CycleResponse.status_table, which
// the framework decodes whichever version a process speaks; 3 what-if verdicts.
constexpr uint32_t kOldestPluginProtocol = 1;
// 9: every PreFilter has run when one answered a plain Unschedulable, so
// preemption may dry-run with the cycle's state (LeavesPreFilterUnschedulableToPreemption).
constexpr uint32_t kPluginProtocol = 10;

bool SpeaksPluginProtocol(const v1::Registration& reg) {
  return reg.protocol_version() >= kOldestPluginProtocol && reg.protocol_version() <= kPluginProtocol;
}
// Finished cycle ids wait for a request to ride on up to this many.
constexpr size_t kMaxQueuedFinishedCycles = 256;

using RequestKind = v1::SchedulerToPlugin::KindCase;
using AnswerKind = v1::PluginToScheduler::KindCase;

// The answer kind that fits each request kind.
AnswerKind ExpectedAnswer(RequestKind kind) {
  switch (kind) {
    case v1::SchedulerToPlugin::kOpen: return v1::PluginToScheduler::kRegistration;
    case v1::SchedulerToPlugin::kCycle: return v1::PluginToScheduler::kCycle;
    case v1::SchedulerToPlugin::kDryRunFilter: return v1::PluginToScheduler::kDryRunFilter;
    case v1::SchedulerToPlugin::kPreemptionDryRun: return v1::PluginToScheduler::kPreemptionDryRun;
    case v1::SchedulerToPlugin::kPermit: return v1::PluginToScheduler::kPermit;
    case v1::SchedulerToPlugin::kQueueingHint: return v1::PluginToScheduler::kQueueingHint;
    case v1::SchedulerToPlugin::kReserve:
    case v1::SchedulerToPlugin::kUnreserve:
    case v1::SchedulerToPlugin::kPreBind:
    case v1::SchedulerToPlugin::kBind:
    case v1::SchedulerToPlugin::kPostBind:
    case v1::SchedulerToPlugin::kPreEnqueue: return v1::PluginToScheduler::kStatus;
    default: return v1::PluginToScheduler::KIND_NOT_SET;
  }
}

// Whether applying the delta changes a mirror (an empty one only moves its
// generation).
bool ChangesMirror(const v1::StateDelta& d) {
  return d.reset() || d.node_removals_size() > 0 || d.node_upserts_size() > 0 ||
         d.pod_removals_size() > 0 || d.pod_upserts_size() > 0 || d.pdb_removals_size() > 0 ||
         d.pdb_upserts_size() > 0 || d.pod_group_removals_size() > 0 ||
         d.pod_group_upserts_size() > 0 || d.namespace_removals_size() > 0 ||
         d.namespace_upserts_size() > 0 ||
         d.nominated_pod_removals_size() > 0 || d.nominated_pod_upserts_size() > 0;
}

// Whether the process mirrors anything: what its registration asked for, and
// nodes whenever it serves a cycle extension point (requests name nodes by
// their mirror id).
bool ServesCyclePoints(const v1::Registration& registration) {
  for (const auto& plugin : registration.plugins()) {
    for (int point : plugin.extension_points()) {
      if (point == v1::PRE_FILTER || point == v1::FILTER || point == v1::PRE_SCORE ||
          point == v1::SCORE) {
        return true;
      }
    }
  }
  return false;
}

// The plugin is one the configuration assigns to this endpoint (the only
// endpoint that serves it) and the process registered it at Permit.
bool ServesPermitPlugin(const std::vector<v1::PluginArgs>& configured,
                        const v1::Registration& registration, const std::string& plugin) {
  if (std::none_of(configured.begin(), configured.end(),
                   [&](const v1::PluginArgs& a) { return a.name() == plugin; })) {
    return false;
  }
  for (const auto& p : registration.plugins()) {
    if (p.name() != plugin) continue;
    for (int point : p.extension_points()) {
      if (point == v1::PERMIT) return true;
    }
  }
  return false;
}

std::string RequestKindName(RequestKind kind) {
  const auto* field = v1::SchedulerToPlugin::descriptor()->FindFieldByNumber(kind);
  return field ? field->name() : "none";
}

std::string AnswerKindName(AnswerKind kind) {
  const auto* field = v1::PluginToScheduler::descriptor()->FindFieldByNumber(kind);
  return field ? field->name() : "none";
}

}  // namespace

v1::MirrorScope EffectiveMirrorScope(const v1::Registration& registration) {
  v1::MirrorScope scope = registration.mirror();
  // Pods, and nominated pods, are counted on their nodes.
  if (ServesCyclePoints(registration) || scope.assigned_pods() || scope.nominated_pods()) {
    scope.set_nodes(true);
  }
  return scope;
}

bool WantsState(const v1::MirrorScope& scope) {
  return scope.nodes() || scope.assigned_pods() || scope.pod_disruption_budgets() ||
         scope.pod_groups() || scope.namespaces();
}

void RestrictToScope(const v1::MirrorScope& scope, v1::StateDelta& delta) {
  if (!scope.nodes()) {
    delta.clear_node_removals();
    delta.clear_node_upserts();
  }
  if (!scope.assigned_pods()) {
    delta.clear_pod_removals();
    delta.clear_pod_upserts();
  }
  if (!scope.pod_disruption_budgets()) {
    delta.clear_pdb_removals();
    delta.clear_pdb_upserts();
  }
  if (!scope.pod_groups()) {
    delta.clear_pod_group_removals();
    delta.clear_pod_group_upserts();
  }
  if (!scope.namespaces()) {
    delta.clear_namespace_removals();
    delta.clear_namespace_upserts();
  }
  if (!scope.nominated_pods()) {
    delta.clear_nominated_pod_removals();
    delta.clear_nominated_pod_upserts();
  }
}

// One Run stream on the driver's completion queue (gRPC's async API: one
// operation of each kind at a time). Its state is guarded by the owner's mu_,
// so that writes are started straight from the thread that sends (the
// scheduling thread does not wait for the driver) and in the order Send queued
// them. Completions run on the driver thread; the stream deletes itself there
// once every operation it started has completed and the call has finished.
//
// Life: StartCall -> (ok) Read, Read, ... and Write, one at a time, from the
// queue -> a failed Read (the process closed the stream, died, or we
// cancelled it with Close) -> Finish -> deleted when no Write is in flight.
class GrpcPluginProcess::Stream {
 public:
  Stream(GrpcPluginProcess& owner, v1::Plugin::Stub& stub, grpc::CompletionQueue* queue)
      : owner_(owner) {
    // An endpoint that is not listening yet (a plugin sidecar still starting)
    // is waited for, up to the handshake deadline, rather than failing at once.
    context_.set_wait_for_ready(true);
    call_ = stub.PrepareAsyncRun(&context_, queue);
  }

  // Requires owner_.mu_.
  void Begin() {
    starting_ = true;
    call_->StartCall(&started_);
  }

  // Requires owner_.mu_. Returns false when the stream is closing or full.
  bool Enqueue(v1::SchedulerToPlugin&& message) {
    if (closing_ || writes_.size() >= owner_.options_.max_in_flight) return false;
    writes_.push_back(std::move(message));
    StartNextWrite();
    return true;
  }

  // Requires owner_.mu_. Cancels the call: every operation completes, failed.
  void Close() {
    if (!closing_) {
      closing_ = true;
      context_.TryCancel();
    }
  }

 private:
  // Requires owner_.mu_.
  void StartNextWrite() {
    if (writing_ || !started_ok_ || closing_ || writes_.empty()) return;
    writing_ = true;
    call_->Write(writes_.front(), &write_done_);
  }

  void OnStarted(bool ok) {
    {
      absl::MutexLock lock(&owner_.mu_);
      starting_ = false;
      if (ok) {
        started_ok_ = true;
        reading_ = true;
        call_->Read(&incoming_, &read_done_);
        StartNextWrite();
        return;
      }
    }
    // The call never started (cancelled while waiting for the endpoint).
    OnInputClosed();
  }

  void OnReadDone(bool ok) {
    if (!ok) return OnInputClosed();
    owner_.OnMessage(this, std::move(incoming_));
    incoming_.Clear();
    absl::MutexLock lock(&owner_.mu_);
    call_->Read(&incoming_, &read_done_);
  }

  // Nothing more will be read: ask for the call's status, which says why
  // (OnFinished reports the break).
  void OnInputClosed() {
    absl::MutexLock lock(&owner_.mu_);
    reading_ = false;
    finishing_ = true;
    call_->Finish(&status_, &finished_);
  }

  void OnWriteDone(bool ok) {
    bool done;
    v1::SchedulerToPlugin written;
    {
      absl::MutexLock lock(&owner_.mu_);
      writing_ = false;
      // Freed after the lock: a request with a state delta holds hundreds of
      // objects, and the scheduling thread takes this lock to send the next.
      written = std::move(writes_.front());
      writes_.pop_front();
      if (ok) StartNextWrite();
      done = DoneLocked();
    }
    if (done) Destroy();
  }

  void OnFinished(bool /*ok*/) {
    bool by_scheduler;
    {
      absl::MutexLock lock(&owner_.mu_);
      by_scheduler = closing_;
    }
    // The cause, for the log and ListPlugins: a process that died or was
    // unreachable leaves UNAVAILABLE, one that ended its handler cleanly OK.
    std::string why;
    if (by_scheduler) {
      why = "stream closed by the scheduler";
    } else if (status_.ok()) {
      why = "stream closed by the plugin process";
    } else {
      why = absl::StrCat("stream ended: ",
                         absl::StatusCodeToString(static_cast<absl::StatusCode>(status_.error_code())), ": ",
                         status_.error_message());
    }
    owner_.OnStreamBroken(this, why, /*record=*/!by_scheduler);
    bool done;
    {
      absl::MutexLock lock(&owner_.mu_);
      finishing_ = false;
      call_finished_ = true;
      done = DoneLocked();
    }
    if (done) Destroy();
  }

  // Requires owner_.mu_. Every operation completed and none can start: after
  // Finish, Enqueue refuses (OnStreamBroken closed us, or we are not the
  // owner's stream any more and nobody enqueues).
  bool DoneLocked() const {
    return call_finished_ && !starting_ && !reading_ && !writing_ && !finishing_;
  }

  // On the driver thread, after the last completion.
  void Destroy() {
    owner_.OnStreamDone(this);
    // Deleted while the owner (and so its channel) is alive: this
    // ClientContext holds a channel reference, and the channel must not die
    // on the driver thread.
    GrpcPluginProcess& owner = owner_;
    delete this;
    absl::MutexLock lock(&owner.mu_);
    --owner.live_streams_;
  }

  using Tag = grpc_support::CompletionOf<Stream>;

  GrpcPluginProcess& owner_;
  grpc::ClientContext context_;
  std::unique_ptr<grpc::ClientAsyncReaderWriter<v1::SchedulerToPlugin, v1::PluginToScheduler>> call_;
  Tag started_{this, &Stream::OnStarted};
  Tag read_done_{this, &Stream::OnReadDone};
  Tag write_done_{this, &Stream::OnWriteDone};
  Tag finished_{this, &Stream::OnFinished};
  // Driver thread only: the buffer of the one Read in flight, and the status
  // Finish fills in.
  v1::PluginToScheduler incoming_;
  grpc::Status status_;
  // Guarded by owner_.mu_: which operations are in flight, and the queue of
  // writes (its front is the one in flight, kept alive until it completes).
  bool starting_ = false;
  bool started_ok_ = false;
  bool reading_ = false;
  bool writing_ = false;
  bool finishing_ = false;
  bool call_finished_ = false;
  bool closing_ = false;
  std::deque<v1::SchedulerToPlugin> writes_;
};

GrpcPluginProcess::GrpcPluginProcess(PluginEndpointOptions options, StateSource& state,
                                     PermitDecisionHandler on_permit_decision)
    : options_(std::move(options)),
      state_(state),
      on_permit_decision_(std::move(on_permit_decision)) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(64 << 20);
  args.SetMaxSendMessageSize(64 << 20);
  // While waiting for an endpoint, dial at least every second, so that one
  // that comes up is used within about a second.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  channel_ = grpc::CreateCustomChannel(
      options_.address,
      options_.channel_credentials ? options_.channel_credentials : grpc::InsecureChannelCredentials(), args);
  stub_ = v1::Plugin::NewStub(channel_);
  if (options_.driver == nullptr) own_driver_ = std::make_unique<grpc_support::AsyncDriver>();
  driver_ = options_.driver != nullptr ? options_.driver : own_driver_.get();
  driver_->Start();
  latencies_ms_.reserve(kLatencyWindow);
  circuit_backoff_ = options_.circuit_open_initial;
  deadline_thread_ = std::thread([this] {
    grpc_support::NameThisThread("plugin-deadline");
    DeadlineLoop();
  });
}

GrpcPluginProcess::~GrpcPluginProcess() { Shutdown(); }

absl::Status GrpcPluginProcess::Start() {
  absl::Status status = Connect();
  reconnect_thread_ = std::thread([this] {
    grpc_support::NameThisThread("plugin-redial");
    ReconnectLoop();
  });
  return status;
}

absl::Status GrpcPluginProcess::Connect() {
  std::future<PluginAnswer> answer;
  {
    absl::MutexLock lock(&mu_);
    if (shutdown_) return absl::CancelledError("shutting down");
    // Wait for the channel so that a plugin still starting is not an error.
    broken_ = false;
    ++stream_generation_;
    finished_cycles_.clear();
    stream_ = new Stream(*this, *stub_, driver_->queue());
    ++live_streams_;
    stream_->Begin();
    v1::SchedulerToPlugin open;
    open_id_ = next_id_++;
    open.set_id(open_id_);
    open.mutable_open()->set_protocol_version(kOldestPluginProtocol);
    open.mutable_open()->set_max_protocol_version(kPluginProtocol);
    open.mutable_open()->set_scheduler_id(options_.scheduler_id);
    for (const auto& p : options_.plugins) *open.mutable_open()->add_plugins() = p;
    const absl::Time now = absl::Now();
    Pending pending{std::promise<PluginAnswer>(), v1::SchedulerToPlugin::kOpen, now,
                    now + options_.handshake_timeout};
    answer = pending.promise.get_future();
    pending_.emplace(open_id_, std::move(pending));
    deadlines_.emplace(now + options_.handshake_timeout, open_id_);
    stream_->Enqueue(std::move(open));
  }
  PluginAnswer result = answer.get();
  const bool never_connected = channel_->GetState(false) != GRPC_CHANNEL_READY;
  absl::MutexLock lock(&mu_);
  if (!result.ok()) {
    last_error_ = result.status().code() == absl::StatusCode::kDeadlineExceeded && never_connected
                      ? absl::StrCat("no plugin process answered at ", options_.address,
                                     " within ", absl::FormatDuration(options_.handshake_timeout),
                                     " (is it running and listening there?)")
                      : std::string(result.status().message());
    if (stream_ != nullptr) stream_->Close();
    return absl::UnavailableError(absl::StrCat("plugin endpoint ", options_.name, " (",
                                               options_.address, "): ", last_error_));
  }
  const v1::Registration& reg = result->registration();
  if (!reg.error().empty() || !SpeaksPluginProtocol(reg)) {
    last_error_ = !reg.error().empty()
                      ? reg.error()
                      : absl::StrCat("unsupported protocol_version ", reg.protocol_version());
    if (stream_ != nullptr) stream_->Close();
    return absl::FailedPreconditionError(absl::StrCat(
        "plugin endpoint ", options_.name, " refused the handshake: ", last_error_));
  }
  // A process back without a plugin the configuration assigns to it (a
  // sidecar rolled back to an older build) is not used: its requests would
  // name a plugin it does not run. Refused until it serves them all.
  for (const v1::PluginArgs& configured : options_.plugins) {
    const bool served = std::any_of(reg.plugins().begin(), reg.plugins().end(),
                                    [&](const v1::PluginRegistration& p) { return p.name() == configured.name(); });
    if (!served) {
      last_error_ = absl::StrCat("does not serve plugin \"", configured.name(), "\" that the configuration assigns to it");
      if (stream_ != nullptr) stream_->Close();
      return absl::NotFoundError(absl::StrCat("plugin endpoint ", options_.name, " (", options_.address, ") ",
                                              last_error_));
    }
  }
  registration_ = reg;
  mirror_scope_ = EffectiveMirrorScope(reg);
  breaker_ = Breaker::kClosed;  // A new stream starts with a clean record.
  consecutive_timeouts_ = 0;
  circuit_backoff_ = options_.circuit_open_initial;
  ready_ = true;
  last_error_.clear();
  return absl::OkStatus();
}

void GrpcPluginProcess::Shutdown() {
  {
    absl::MutexLock lock(&mu_);
    if (shutdown_) return;
    shutdown_ = true;
    ready_ = false;
    state_.SetMirrorPosition(this, std::nullopt);
    if (stream_ != nullptr) stream_->Close();
    FailAllPending(absl::CancelledError("scheduler shutting down"));
  }
  if (reconnect_thread_.joinable()) reconnect_thread_.join();
  if (deadline_thread_.joinable()) deadline_thread_.join();
  // Wait until the stream has deleted itself, so that nothing of ours runs
  // on the driver after we return.
  {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(
        +[](GrpcPluginProcess* self) ABSL_NO_THREAD_SAFETY_ANALYSIS {
          return self->stream_ == nullptr && self->live_streams_ == 0;
        },
        this));
  }
  if (own_driver_ != nullptr) own_driver_->Stop();
}

uint64_t GrpcPluginProcess::stream_generation() const {
  absl::MutexLock lock(&mu_);
  return stream_generation_;
}

bool GrpcPluginProcess::ready() const {
  absl::MutexLock lock(&mu_);
  return ready_;
}

v1::Registration GrpcPluginProcess::registration() const {
  absl::MutexLock lock(&mu_);
  return registration_;
}

bool GrpcPluginProcess::MirrorsNominatedPods() const {
  absl::MutexLock lock(&mu_);
  return mirror_scope_.nominated_pods();
}

bool GrpcPluginProcess::RunsDryRunsInCycles() const {
  absl::MutexLock lock(&mu_);
  return registration_.protocol_version() >= 2;
}

bool GrpcPluginProcess::AnswersWhatIf() const {
  absl::MutexLock lock(&mu_);
  return registration_.protocol_version() >= 3;
}

bool GrpcPluginProcess::AnswersLookahead() const {
  absl::MutexLock lock(&mu_);
  return registration_.protocol_version() >= 4;
}

bool GrpcPluginProcess::AnswersLaterLookaheads() const {
  absl::MutexLock lock(&mu_);
  return registration_.protocol_version() >= 5;
}

bool GrpcPluginProcess::AnswersNominatedChecks() const {
  absl::MutexLock lock(&mu_);
  return registration_.protocol_version() >= 6;
}

bool GrpcPluginProcess::AnswersPreemptionWhatIf() const {
  absl::MutexLock lock(&mu_);
  return registration_.protocol_version() >= 7;
}

bool GrpcPluginProcess::AnswersPreemptionWhatIfGone() const {
  absl::MutexLock lock(&mu_);
  return registration_.protocol_version() >= 8;
}

bool GrpcPluginProcess::LeavesPreFilterUnschedulableToPreemption() const {
  absl::MutexLock lock(&mu_);
  return registration_.protocol_version() >= 9;
}

bool GrpcPluginProcess::RegistersPendingPodUpdates() const {
  absl::MutexLock lock(&mu_);
  return registration_.protocol_version() >= 10;
}

std::future<PluginAnswer> GrpcPluginProcess::Call(v1::SchedulerToPlugin request,
                                                  std::optional<uint64_t> state_seq) {
  return Send(std::move(request), state_seq, /*expect_answer=*/true);
}

void GrpcPluginProcess::SendState(uint64_t state_seq) {
  Send(v1::SchedulerToPlugin(), state_seq, /*expect_answer=*/false);
}

std::future<PluginAnswer> GrpcPluginProcess::Send(v1::SchedulerToPlugin request,
                                                  std::optional<uint64_t> state_seq,
                                                  bool expect_answer) {
  std::promise<PluginAnswer> promise;
  std::future<PluginAnswer> future = promise.get_future();
  // The delta and the request leave together, in delta order: one writer of
  // deltas at a time. The mirror is current only if the last delta went to
  // this very stream (a reconnected stream starts with an empty mirror).
  std::optional<absl::MutexLock> delta_lock;
  if (state_seq) {
    delta_lock.emplace(&delta_mu_);
    uint64_t generation;
    bool resync;
    v1::MirrorScope scope;
    {
      absl::MutexLock lock(&mu_);
      generation = stream_generation_;
      resync = std::exchange(resync_mirror_, false);
      scope = mirror_scope_;
    }
    if (!WantsState(scope)) {
      state_seq.reset();  // Nothing to mirror: the request goes alone.
      delta_lock.reset();
    } else {
      v1::StateDelta* delta = request.mutable_delta();
      const bool current = mirror_valid_ && mirror_generation_ == generation;
      if (current && !resync && *state_seq == mirror_seq_ && !expect_answer) {
        return future;  // A state-only message with nothing to say.
      }
      if (resync || !current || !state_.ReadDelta(mirror_seq_, *state_seq, delta)) {
        delta->Clear();
        state_.FullState(*state_seq, delta);
      }
      RestrictToScope(scope, *delta);
      mirror_generation_ = generation;
    }
  }
  if (!expect_answer && !state_seq) return future;  // No state wanted.
  absl::MutexLock lock(&mu_);
  if (state_seq && mirror_generation_ != stream_generation_) {
    // Redialled since the delta was chosen: send nothing rather than a delta
    // the new mirror cannot apply; the next call sends a reset.
    InvalidateMirror();
    stats_.errors++;
    promise.set_value(absl::UnavailableError(
        absl::StrCat("plugin endpoint ", options_.name, " reconnected; retry")));
    return future;
  }
  if (expect_answer) stats_.requests++;
  if (!ready_ || stream_ == nullptr) {
    stats_.errors++;
    if (state_seq) InvalidateMirror();
    promise.set_value(absl::UnavailableError(absl::StrCat(
        "plugin endpoint ", options_.name, " is not connected",
        last_error_.empty() ? "" : ": ", last_error_)));
    return future;
  }
  if (expect_answer) {
    if (absl::Status open = AdmitThroughBreaker(absl::Now()); !open.ok()) {
      stats_.errors++;
      stats_.circuit_fast_failures++;
      if (state_seq) InvalidateMirror();  // The delta was not sent.
      promise.set_value(std::move(open));
      return future;
    }
  }
  const uint64_t id = expect_answer ? next_id_++ : 0;
  request.set_id(id);
  request.mutable_finished_cycles()->Add(finished_cycles_.begin(), finished_cycles_.end());
  finished_cycles_.clear();
  const RequestKind kind = request.kind_case();
  const bool carried_delta = state_seq && ChangesMirror(request.delta());
  if (!stream_->Enqueue(std::move(request))) {
    stats_.errors++;
    if (state_seq) InvalidateMirror();
    promise.set_value(absl::ResourceExhaustedError(
        absl::StrCat("plugin endpoint ", options_.name, ": too many requests in flight")));
    return future;
  }
  if (state_seq) {
    mirror_valid_ = true;
    mirror_seq_ = *state_seq;
    state_.SetMirrorPosition(this, mirror_seq_);
  }
  if (!expect_answer) return future;
  const absl::Time now = absl::Now();
  pending_.emplace(id, Pending{std::move(promise), kind, now, now + options_.timeout,
                               carried_delta});
  deadlines_.emplace(now + options_.timeout, id);
  return future;
}

void GrpcPluginProcess::FinishCycle(uint64_t cycle_id) {
  absl::MutexLock lock(&mu_);
  if (!ready_ || stream_ == nullptr) return;  // A new stream has no cycle state.
  finished_cycles_.push_back(cycle_id);
  if (finished_cycles_.size() < kMaxQueuedFinishedCycles) return;
  // An idle process (no request to ride on): tell it in a message of its own.
  v1::SchedulerToPlugin message;
  message.mutable_finished_cycles()->Add(finished_cycles_.begin(), finished_cycles_.end());
  finished_cycles_.clear();
  stream_->Enqueue(std::move(message));
}

void GrpcPluginProcess::InvalidateMirror() {
  mirror_valid_ = false;
  state_.SetMirrorPosition(this, std::nullopt);
}

void GrpcPluginProcess::OnMessage(Stream* stream, v1::PluginToScheduler&& message) {
  if (message.id() == 0 && message.has_permit_decision()) {
    const v1::PermitDecision& decision = message.permit_decision();
    {
      absl::MutexLock lock(&mu_);
      if (stream != stream_) return;
      // A process decides only for the Permit plugins it serves: anything else
      // would let one plugin allow or reject pods on behalf of another. This is
      // the only such check (the scheduler trusts what passes it); whether the
      // pod waits on that plugin is WaitingPods' to say.
      if (!ServesPermitPlugin(options_.plugins, registration_, decision.plugin())) {
        stats_.refused_permit_decisions++;
        PODIUM_LOG(Warning, "Refused a PermitDecision for a plugin this endpoint does not serve at Permit",
                   {"endpoint", options_.name}, {"podUID", decision.pod_uid().substr(0, 64)},
                   {"plugin", decision.plugin().substr(0, 64)});
        return;
      }
    }
    if (on_permit_decision_) on_permit_decision_(decision);
    return;
  }
  absl::MutexLock lock(&mu_);
  if (stream != stream_) return;
  auto it = pending_.find(message.id());
  if (it == pending_.end()) {
    // A late answer (after its deadline), a second answer, or a made-up id:
    // dropped. Said in the log at the 1st, 2nd, 4th, 8th, ... so that a
    // plugin answering every request twice does not flood it.
    const uint64_t n = ++stats_.spurious_answers;
    if ((n & (n - 1)) == 0) {
      PODIUM_LOG(Warning, "Dropped answers to no request in flight (late, repeated or a made-up id)",
                 {"endpoint", options_.name}, {"id", absl::StrCat(message.id())}, {"count", absl::StrCat(n)});
    }
    return;
  }
  Pending pending = std::move(it->second);
  pending_.erase(it);
  deadlines_.erase({pending.deadline, message.id()});
  const absl::Duration round_trip = absl::Now() - pending.sent;
  RecordLatency(round_trip);
  if (options_.on_answered) {
    const auto* field = v1::SchedulerToPlugin::descriptor()->FindFieldByNumber(pending.kind);
    options_.on_answered(field != nullptr ? std::string_view(field->name()) : std::string_view("none"), round_trip);
  }
  OnRequestAnswered();
  if (message.kind_case() == v1::PluginToScheduler::kError) {
    stats_.errors++;
    // The plugin may have refused the delta this request carried (the SDK
    // answers `error` when a delta does not apply): later deltas would apply
    // on the wrong base, so the next request with state resets the mirror.
    if (pending.carried_delta) {
      resync_mirror_ = true;
      state_.SetMirrorPosition(this, std::nullopt);
    }
    pending.promise.set_value(absl::InternalError(absl::StrCat(
        "plugin endpoint ", options_.name, " failed ", RequestKindName(pending.kind),
        " request ", message.id(), ": ", message.error())));
    return;
  }
  if (message.kind_case() != ExpectedAnswer(pending.kind)) {
    stats_.invalid_answers++;
    pending.promise.set_value(absl::InvalidArgumentError(absl::StrCat(
        "plugin endpoint ", options_.name, " answered ", RequestKindName(pending.kind),
        " request ", message.id(), " with ", AnswerKindName(message.kind_case()))));
    return;
  }
  if (pending.kind == v1::SchedulerToPlugin::kOpen && message.registration().error().empty() &&
      SpeaksPluginProtocol(message.registration())) {
    // Now, not when Connect resumes: the process may speak first (a
    // PermitDecision) right after its registration, and is judged by it.
    registration_ = message.registration();
    mirror_scope_ = EffectiveMirrorScope(registration_);
  }
  pending.promise.set_value(std::move(message));
}

void GrpcPluginProcess::OnStreamBroken(Stream* stream, const std::string& why, bool record) {
  absl::MutexLock lock(&mu_);
  if (stream != stream_) return;
  stream_->Close();
  state_.SetMirrorPosition(this, std::nullopt);
  if (!broken_) {
    broken_ = true;
    ready_ = false;
    // The scheduler closes a stream only after recording why (a refused
    // handshake, a failed redial): that cause stands.
    if (!shutdown_ && record) {
      last_error_ = why;
      PODIUM_LOG(Warning, "Plugin stream broke", {"endpoint", options_.name}, {"address", options_.address},
                 {"err", why});
    }
    FailAllPending(absl::UnavailableError(
        absl::StrCat("plugin endpoint ", options_.name, ": ", why)));
  }
}

void GrpcPluginProcess::OnStreamDone(Stream* stream) {
  absl::MutexLock lock(&mu_);
  if (stream == stream_) {
    state_.SetMirrorPosition(this, std::nullopt);
    stream_ = nullptr;
    broken_ = true;
    ready_ = false;
    FailAllPending(absl::UnavailableError(
        absl::StrCat("plugin endpoint ", options_.name, ": stream ended")));
  }
}

absl::Status GrpcPluginProcess::AdmitThroughBreaker(absl::Time now) {
  switch (breaker_) {
    case Breaker::kClosed:
      return absl::OkStatus();
    case Breaker::kOpen:
      if (now >= circuit_open_until_) {
        breaker_ = Breaker::kHalfOpen;  // This request is the probe.
        return absl::OkStatus();
      }
      return absl::UnavailableError(absl::StrCat(
          "plugin endpoint ", options_.name, ": circuit open after ",
          options_.circuit_breaker_timeouts, " consecutive timeouts; next probe in ",
          absl::FormatDuration(absl::Ceil(circuit_open_until_ - now, absl::Milliseconds(1)))));
    case Breaker::kHalfOpen:
      return absl::UnavailableError(absl::StrCat(
          "plugin endpoint ", options_.name,
          ": circuit open, waiting for the answer to its probe request"));
  }
  return absl::OkStatus();
}

void GrpcPluginProcess::OnRequestTimedOut(absl::Time now) {
  ++consecutive_timeouts_;
  if (breaker_ == Breaker::kHalfOpen) {
    // The probe timed out too: stay open, longer.
    circuit_backoff_ = std::min(circuit_backoff_ * 2, options_.circuit_open_max);
  } else if (breaker_ == Breaker::kOpen ||
             options_.circuit_breaker_timeouts == 0 ||
             consecutive_timeouts_ < options_.circuit_breaker_timeouts) {
    return;
  }
  breaker_ = Breaker::kOpen;
  circuit_open_until_ = now + circuit_backoff_;
  stats_.circuit_opens++;
  PODIUM_LOG(Warning, "Circuit opened: calls fail at once, then one probe request is let through",
             {"endpoint", options_.name}, {"address", options_.address},
             {"consecutiveTimeouts", consecutive_timeouts_}, {"openFor", absl::FormatDuration(circuit_backoff_)});
}

void GrpcPluginProcess::OnRequestAnswered() {
  consecutive_timeouts_ = 0;
  if (breaker_ != Breaker::kClosed) {
    PODIUM_LOG(Info, "Plugin endpoint answers again; circuit closed", {"endpoint", options_.name});
  }
  breaker_ = Breaker::kClosed;
  circuit_backoff_ = options_.circuit_open_initial;
}

EndpointState GrpcPluginProcess::state() const {
  absl::MutexLock lock(&mu_);
  if (!ready_) return EndpointState::kConnecting;
  return breaker_ == Breaker::kClosed ? EndpointState::kReady : EndpointState::kCircuitOpen;
}

void GrpcPluginProcess::FailAllPending(const absl::Status& status) {
  for (auto& [id, pending] : pending_) pending.promise.set_value(status);
  pending_.clear();
  deadlines_.clear();
}

void GrpcPluginProcess::RecordLatency(absl::Duration d) {
  const double ms = absl::ToDoubleMilliseconds(d);
  if (latencies_ms_.size() < kLatencyWindow) {
    latencies_ms_.push_back(ms);
  } else {
    latencies_ms_[latency_next_] = ms;
    latency_next_ = (latency_next_ + 1) % kLatencyWindow;
  }
}

void GrpcPluginProcess::DeadlineLoop() {
  absl::MutexLock lock(&mu_);
  while (!shutdown_) {
    const absl::Time now = absl::Now();
    if (deadlines_.empty() || deadlines_.begin()->first > now) {
      // Sleep until the earliest deadline (or a second, with none), woken early
      // only by a request due before then. Requests added later or answered do
      // not wake this thread: waking twice per request cost the scheduling
      // thread a context switch and a contended mu_ per plugin call.
      struct Args {
        GrpcPluginProcess* self;
        absl::Time wake;
      } args{this, deadlines_.empty() ? now + absl::Seconds(1) : deadlines_.begin()->first};
      mu_.AwaitWithDeadline(absl::Condition(
                                +[](Args* a) ABSL_NO_THREAD_SAFETY_ANALYSIS {
                                  return a->self->shutdown_ ||
                                         (!a->self->deadlines_.empty() &&
                                          a->self->deadlines_.begin()->first < a->wake);
                                },
                                &args),
                            args.wake);
      continue;
    }
    const uint64_t id = deadlines_.begin()->second;
    deadlines_.erase(deadlines_.begin());
    auto it = pending_.find(id);
    if (it == pending_.end()) continue;
    stats_.timeouts++;
    if (it->second.kind != v1::SchedulerToPlugin::kOpen) OnRequestTimedOut(now);
    it->second.promise.set_value(absl::DeadlineExceededError(absl::StrCat(
        "plugin endpoint ", options_.name, " did not answer ", RequestKindName(it->second.kind),
        " request ", id, " within ", absl::FormatDuration(options_.timeout))));
    pending_.erase(it);
  }
}

void GrpcPluginProcess::ReconnectLoop() {
  absl::Duration backoff = options_.reconnect_initial_backoff;
  std::string last_logged;  // A failed redial is logged when its cause changes.
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      // Wait until the stream is gone (OnDone ran) or we shut down.
      mu_.Await(absl::Condition(
          +[](GrpcPluginProcess* self) ABSL_NO_THREAD_SAFETY_ANALYSIS {
            return self->shutdown_ || (self->broken_ && self->stream_ == nullptr) ||
                   (!self->ready_ && self->stream_ == nullptr);
          },
          this));
      if (shutdown_) return;
      mu_.AwaitWithTimeout(absl::Condition(&shutdown_), backoff);
      if (shutdown_) return;
    }
    absl::Status status = Connect();
    if (status.ok()) {
      {
        absl::MutexLock lock(&mu_);
        stats_.reconnects++;
        PODIUM_LOG(Info, "Plugin endpoint connected", {"endpoint", options_.name},
                   {"address", options_.address});
        backoff = options_.reconnect_initial_backoff;
      }
      if (options_.on_reconnected) options_.on_reconnected();
    } else {
      if (status.message() != last_logged) {
        last_logged = std::string(status.message());
        PODIUM_LOG(Warning, "Plugin endpoint redial failed", {"endpoint", options_.name},
                   {"address", options_.address}, {"err", last_logged});
      }
      // Wait for the failed stream's OnDone before dialing again.
      absl::MutexLock lock(&mu_);
      if (stream_ != nullptr) stream_->Close();
      mu_.Await(absl::Condition(
          +[](GrpcPluginProcess* self) ABSL_NO_THREAD_SAFETY_ANALYSIS {
            return self->stream_ == nullptr;
          },
          this));
      backoff = std::min(backoff * 2, options_.reconnect_max_backoff);
    }
  }
}

void GrpcPluginProcess::CountInvalidAnswer() {
  absl::MutexLock lock(&mu_);
  stats_.invalid_answers++;
}

void GrpcPluginProcess::CountIgnoredFailure() {
  absl::MutexLock lock(&mu_);
  stats_.ignored_failures++;
}

PluginProcessStats GrpcPluginProcess::stats() const {
  absl::MutexLock lock(&mu_);
  PluginProcessStats s = stats_;
  if (!latencies_ms_.empty()) {
    std::vector<double> sorted = latencies_ms_;
    std::sort(sorted.begin(), sorted.end());
    s.latency_p50_ms = sorted[sorted.size() / 2];
    s.latency_p99_ms = sorted[std::min(sorted.size() - 1, sorted.size() * 99 / 100)];
  }
  return s;
}

std::optional<uint64_t> GrpcPluginProcess::mirror_seq() const {
  absl::MutexLock lock(const_cast<absl::Mutex*>(&delta_mu_));
  if (!mirror_valid_) return std::nullopt;
  return mirror_seq_;
}

std::string GrpcPluginProcess::last_error() const {
  absl::MutexLock lock(&mu_);
  return last_error_;
}

}  // namespace podium::scheduler
