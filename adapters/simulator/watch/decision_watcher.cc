#include "watch/decision_watcher.h"

namespace podium::sim {
namespace {

// Completion queue tags.
void* const kStarted = reinterpret_cast<void*>(1);
void* const kRead = reinterpret_cast<void*>(2);
void* const kFinished = reinterpret_cast<void*>(3);

}  // namespace

DecisionWatcher::DecisionWatcher(std::shared_ptr<grpc::Channel> channel, absl::Duration interval)
    : stub_(v1::Admin::NewStub(channel)), interval_(interval) {}

DecisionWatcher::~DecisionWatcher() { Stop(); }

void DecisionWatcher::Start() {
  v1::WatchDecisionsRequest req;
  reader_ = stub_->PrepareAsyncWatchDecisionBatches(&context_, req, &cq_);
  reader_->StartCall(kStarted);
  {
    absl::MutexLock lock(&mu_);
    started_ = true;
  }
  thread_ = std::thread([this] { Run(); });
}

void DecisionWatcher::Stop() {
  if (!thread_.joinable()) return;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  context_.TryCancel();
  thread_.join();
}

bool DecisionWatcher::Drain(gpr_timespec deadline) {
  for (;;) {
    void* tag = nullptr;
    bool ok = false;
    switch (cq_.AsyncNext(&tag, &ok, deadline)) {
      case grpc::CompletionQueue::TIMEOUT: return true;
      case grpc::CompletionQueue::SHUTDOWN: return false;
      case grpc::CompletionQueue::GOT_EVENT: break;
    }
    // After the first: only what is ready, never a wait for the network.
    deadline = gpr_now(GPR_CLOCK_MONOTONIC);
    if (tag == kFinished) {
      absl::MutexLock lock(&mu_);
      unimplemented_ = status_.error_code() == grpc::StatusCode::UNIMPLEMENTED;
      return false;
    }
    if (!ok) {  // The stream ended (or never started): collect its status.
      reader_->Finish(&status_, kFinished);
      continue;
    }
    if (tag == kRead) {
      absl::MutexLock lock(&mu_);
      for (v1::SchedulingDecision& d : *incoming_.mutable_decisions()) decisions_.push_back(std::move(d));
    }
    incoming_.Clear();
    reader_->Read(&incoming_, kRead);
  }
}

bool DecisionWatcher::DrainWantedOrStopping() const { return stopping_ || drains_wanted_ > drains_done_; }
bool DecisionWatcher::DrainedOrDone(const DrainWait* wait) {
  return wait->watcher->done_ || wait->watcher->drains_done_ >= wait->want;
}

void DecisionWatcher::Run() {
  gpr_timespec deadline = gpr_now(GPR_CLOCK_MONOTONIC);
  for (;;) {
    const bool open = Drain(deadline);
    absl::MutexLock lock(&mu_);
    drains_done_ = drains_wanted_;
    if (!open) break;
    mu_.AwaitWithTimeout(absl::Condition(this, &DecisionWatcher::DrainWantedOrStopping), interval_);
    // Stopping: the stream is cancelled; wait for its end (and status).
    deadline = stopping_ ? gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC), gpr_time_from_millis(100, GPR_TIMESPAN))
                         : gpr_now(GPR_CLOCK_MONOTONIC);
  }
  cq_.Shutdown();
  void* tag;
  bool ok;
  while (cq_.Next(&tag, &ok)) {
  }
  absl::MutexLock lock(&mu_);
  done_ = true;
}

std::vector<v1::SchedulingDecision> DecisionWatcher::Decisions() const {
  absl::MutexLock lock(&mu_);
  if (started_ && !done_) {
    const DrainWait wait{this, ++drains_wanted_};
    mu_.Await(absl::Condition(&DecisionWatcher::DrainedOrDone, &wait));
  }
  return decisions_;
}

bool DecisionWatcher::unimplemented() const {
  absl::MutexLock lock(&mu_);
  return unimplemented_;
}

bool DecisionWatcher::ended() const {
  absl::MutexLock lock(&mu_);
  return done_;
}

}  // namespace podium::sim
