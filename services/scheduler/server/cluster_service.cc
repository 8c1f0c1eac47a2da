#include "server/cluster_service.h"

#include <cstdio>

#include "absl/strings/str_cat.h"
#include "metrics/metrics.h"
#include "server/validation.h"

namespace podium::scheduler {

// One adapter stream. Deleted only in OnDone. Its write state is guarded by
// the service's mu_.
class ClusterService::SyncReactor
    : public grpc::ServerBidiReactor<v1::ClusterMessage, v1::SchedulerMessage> {
 public:
  SyncReactor(ClusterService& service) : service_(service) {}

  void Begin() ABSL_EXCLUSIVE_LOCKS_REQUIRED(service_.mu_) {
    v1::SchedulerMessage hello;
    hello.mutable_hello()->set_protocol_version(1);
    for (const auto& name : service_.options_.scheduler_names) hello.mutable_hello()->add_scheduler_names(name);
    outbox_.push_back(std::move(hello));
    MaybeWrite();
    reading_ = true;
    StartRead(&incoming_);
  }

  // Requires service_.mu_.
  void Enqueue(v1::Action&& action) {
    if (finished_) return;
    // The front message may be in flight; only a queued one can take more actions.
    if (outbox_.empty() || (writing_ && outbox_.size() == 1) || !outbox_.back().has_actions()) {
      outbox_.emplace_back();
      outbox_.back().mutable_actions();
    }
    *outbox_.back().mutable_actions()->add_actions() = std::move(action);
    MaybeWrite();
  }

  // Requires service_.mu_: resume reading once the event thread caught up.
  void MaybeResumeRead() {
    if (!reading_ && !finished_ && paused_) {
      paused_ = false;
      reading_ = true;
      StartRead(&incoming_);
    }
  }

  // Requires service_.mu_.
  void FinishOnce(grpc::Status status) {
    if (!finished_) {
      finished_ = true;
      Finish(status);
    }
  }

  void OnReadDone(bool ok) override {
    absl::MutexLock lock(&service_.mu_);
    reading_ = false;
    if (!ok) {
      FinishOnce(grpc::Status::OK);
      return;
    }
    if (incoming_.has_results()) {
      for (auto& r : *incoming_.mutable_results()->mutable_results()) {
        service_.results_.push_back(std::move(r));
      }
    } else {
      service_.work_.push_back(Work{this, std::move(incoming_), false});
    }
    incoming_.Clear();
    // Back-pressure: stop reading while the event thread is behind.
    if (service_.work_.size() >= service_.options_.max_buffered_messages) {
      paused_ = true;
    } else if (!finished_) {
      reading_ = true;
      StartRead(&incoming_);
    }
  }

  void OnWriteDone(bool ok) override {
    absl::MutexLock lock(&service_.mu_);
    writing_ = false;
    outbox_.pop_front();
    if (!ok) {
      FinishOnce(grpc::Status(grpc::StatusCode::UNAVAILABLE, "write failed"));
      return;
    }
    MaybeWrite();
  }

  void OnDone() override {
    service_.OnReactorDone(this);
    delete this;
  }

  void OnCancel() override {
    absl::MutexLock lock(&service_.mu_);
    FinishOnce(grpc::Status::CANCELLED);
  }

 private:
  void MaybeWrite() {
    if (!writing_ && !outbox_.empty() && !finished_) {
      writing_ = true;
      StartWrite(&outbox_.front());
    }
  }

  ClusterService& service_;
  v1::ClusterMessage incoming_;
  std::deque<v1::SchedulerMessage> outbox_;
  bool writing_ = false;
  bool reading_ = false;
  bool paused_ = false;
  bool finished_ = false;
};

ClusterService::ClusterService(Options options, ClusterEventHandler& handler,
                               SchedulerMetrics* metrics)
    : options_(std::move(options)), handler_(handler), metrics_(metrics) {
  event_thread_ = std::thread([this] { EventLoop(); });
  result_thread_ = std::thread([this] { ResultLoop(); });
}

ClusterService::~ClusterService() { Shutdown(); }

void ClusterService::Shutdown() {
  {
    absl::MutexLock lock(&mu_);
    if (shutdown_) return;
    shutdown_ = true;
    if (active_ != nullptr) active_->FinishOnce(grpc::Status(grpc::StatusCode::UNAVAILABLE, "scheduler shutting down"));
  }
  if (event_thread_.joinable()) event_thread_.join();
  if (result_thread_.joinable()) result_thread_.join();
}

bool ClusterService::adapter_connected() const {
  absl::MutexLock lock(&mu_);
  return active_ != nullptr;
}

grpc::ServerBidiReactor<v1::ClusterMessage, v1::SchedulerMessage>* ClusterService::Sync(
    grpc::CallbackServerContext* context) {
  auto* reactor = new SyncReactor(*this);
  absl::MutexLock lock(&mu_);
  if (shutdown_) {
    reactor->FinishOnce(grpc::Status(grpc::StatusCode::UNAVAILABLE, "scheduler shutting down"));
    return reactor;
  }
  if (active_ != nullptr) {
    // The newest adapter stream wins: the old one is most likely dead.
    std::fprintf(stderr, "podium-scheduler: a new adapter stream replaces the old one\n");
    active_->FinishOnce(grpc::Status(grpc::StatusCode::ABORTED, "replaced by a newer adapter stream"));
    FailActions("adapter stream replaced");
    work_.push_back(Work{active_, {}, true});
  }
  active_ = reactor;
  reactor->Begin();
  return reactor;
}

void ClusterService::OnReactorDone(SyncReactor* reactor) {
  absl::MutexLock lock(&mu_);
  if (active_ == reactor) {
    active_ = nullptr;
    FailActions("adapter disconnected");
    work_.push_back(Work{reactor, {}, true});
  }
  // Drop queued work of this stream except the disconnect marker.
  for (auto& w : work_) {
    if (w.reactor == reactor && !w.disconnected) w.message.Clear();
  }
}

void ClusterService::Send(v1::Action action, ResultCallback on_result) {
  absl::MutexLock lock(&mu_);
  if (active_ == nullptr || shutdown_) {
    v1::ActionResult result;
    result.set_action_id(action.id());
    result.set_code(v1::ActionResult::UNAVAILABLE);
    result.set_message("no adapter is connected");
    to_fail_.emplace_back(std::move(on_result), std::move(result));
    return;
  }
  const uint64_t id = next_action_id_++;
  action.set_id(id);
  pending_.emplace(id, PendingAction{std::move(on_result), absl::Now() + options_.action_timeout});
  active_->Enqueue(std::move(action));
}

void ClusterService::FailActions(const std::string& why) {
  for (auto& [id, pending] : pending_) {
    v1::ActionResult result;
    result.set_action_id(id);
    result.set_code(v1::ActionResult::UNAVAILABLE);
    result.set_message(why);
    to_fail_.emplace_back(std::move(pending.on_result), std::move(result));
  }
  pending_.clear();
}

void ClusterService::Complete(uint64_t id, const v1::ActionResult& result) {
  ResultCallback callback;
  {
    absl::MutexLock lock(&mu_);
    auto it = pending_.find(id);
    if (it == pending_.end()) return;  // Timed out already, or a made-up id.
    callback = std::move(it->second.on_result);
    pending_.erase(it);
  }
  callback(result);
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
          v1::ActionResult result;
          result.set_action_id(it->first);
          result.set_code(v1::ActionResult::UNAVAILABLE);
          result.set_message("no result from the adapter in time");
          to_fail_.emplace_back(std::move(it->second.on_result), std::move(result));
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
        if (active_ != nullptr && work_.size() < options_.max_buffered_messages / 4) {
          active_->MaybeResumeRead();
        }
      }
    }
    for (auto& [callback, result] : failed) callback(result);
    Handle(work);
  }
}

void ClusterService::ResultLoop() {
  while (true) {
    std::deque<v1::ActionResult> results;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](ClusterService* s) ABSL_NO_THREAD_SAFETY_ANALYSIS { return s->shutdown_ || !s->results_.empty(); },
          this));
      if (results_.empty() && shutdown_) return;
      results.swap(results_);
    }
    for (const auto& result : results) Complete(result.action_id(), result);
  }
}

void ClusterService::Handle(Work& work) {
  if (work.disconnected) {
    handler_.OnAdapterDisconnected();
    return;
  }
  v1::ClusterMessage& message = work.message;
  switch (message.kind_case()) {
    case v1::ClusterMessage::kHello:
      std::fprintf(stderr, "podium-scheduler: adapter %s connected (protocol %u)\n",
                   message.hello().adapter().c_str(), message.hello().protocol_version());
      break;
    case v1::ClusterMessage::kListBegin: handler_.OnListBegin(); break;
    case v1::ClusterMessage::kListEnd: handler_.OnListEnd(); break;
    case v1::ClusterMessage::kEvents:
      for (const auto& event : message.events().events()) {
        if (absl::Status s = ValidateObjectEvent(event); !s.ok()) {
          std::fprintf(stderr, "podium-scheduler: refused %s from the adapter: %s\n",
                       DescribeObject(event).c_str(), std::string(s.message()).c_str());
          if (metrics_ != nullptr) {
            const std::string kind = DescribeObject(event);
            metrics_->CountInvalidObject(kind.substr(0, kind.find(' ')));
          }
          continue;
        }
        handler_.OnObjectEvent(event);
      }
      break;
    default: break;  // Results go to ResultLoop; cleared messages of a replaced stream.
  }
}

}  // namespace podium::scheduler
