#include "executor.h"

#include "grpc_support/thread_name.h"

namespace podium::scheduler {

BoundedExecutor::BoundedExecutor(int threads, size_t max_queued, std::string name) : max_queued_(max_queued) {
  for (int i = 0; i < threads; ++i) {
    threads_.emplace_back([this, name] {
      grpc_support::NameThisThread(name);
      Run();
    });
  }
}

BoundedExecutor::~BoundedExecutor() { Stop(); }

void BoundedExecutor::Run() {
  while (true) {
    std::function<void()> work;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](BoundedExecutor* e) ABSL_NO_THREAD_SAFETY_ANALYSIS {
            return (e->stopped_ || !e->work_.empty()) && !e->running_here_;
          },
          this));
      if (work_.empty()) return;
      work = std::move(work_.front());
      work_.pop_front();
      ++running_;
    }
    work();
    absl::MutexLock lock(&mu_);
    --running_;
  }
}

bool BoundedExecutor::Post(std::function<void()> work) {
  absl::MutexLock lock(&mu_);
  if (stopped_ || work_.size() >= max_queued_) return false;
  work_.push_back(std::move(work));
  return true;
}

bool BoundedExecutor::RunHereIfIdle(const std::function<void()>& work) {
  {
    absl::MutexLock lock(&mu_);
    if (stopped_ || !work_.empty() || running_ > 0) return false;
    running_here_ = true;
    ++running_;
  }
  work();
  absl::MutexLock lock(&mu_);
  running_here_ = false;
  --running_;
  return true;
}

bool BoundedExecutor::PostOrWait(std::function<void()> work) {
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(
      +[](BoundedExecutor* e) ABSL_NO_THREAD_SAFETY_ANALYSIS { return e->stopped_ || e->work_.size() < e->max_queued_; },
      this));
  if (stopped_) return false;
  work_.push_back(std::move(work));
  return true;
}

void BoundedExecutor::Drain() {
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(
      +[](BoundedExecutor* e) ABSL_NO_THREAD_SAFETY_ANALYSIS { return e->work_.empty() && e->running_ == 0; },
      this));
}

void BoundedExecutor::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopped_ = true;
  }
  for (auto& t : threads_) {
    if (t.joinable()) t.join();
  }
}

}  // namespace podium::scheduler
