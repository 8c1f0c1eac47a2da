#include "watch/decision_watcher.h"

namespace podium::sim {

DecisionWatcher::DecisionWatcher(std::shared_ptr<grpc::Channel> channel) : stub_(v1::Admin::NewStub(channel)) {}

DecisionWatcher::~DecisionWatcher() { Stop(); }

void DecisionWatcher::Start() { thread_ = std::thread([this] { Run(); }); }

void DecisionWatcher::Stop() {
  if (!thread_.joinable()) return;
  context_.TryCancel();
  thread_.join();
}

void DecisionWatcher::Run() {
  v1::WatchDecisionsRequest req;
  auto reader = stub_->WatchDecisions(&context_, req);
  v1::SchedulingDecision d;
  while (reader->Read(&d)) {
    absl::MutexLock lock(&mu_);
    decisions_.push_back(d);
  }
  grpc::Status s = reader->Finish();
  absl::MutexLock lock(&mu_);
  unimplemented_ = s.error_code() == grpc::StatusCode::UNIMPLEMENTED;
}

std::vector<v1::SchedulingDecision> DecisionWatcher::Decisions() const {
  absl::MutexLock lock(&mu_);
  return decisions_;
}

bool DecisionWatcher::unimplemented() const {
  absl::MutexLock lock(&mu_);
  return unimplemented_;
}

}  // namespace podium::sim
