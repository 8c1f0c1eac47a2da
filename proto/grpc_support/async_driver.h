#pragma once

// One thread that drives a gRPC completion queue for the async API, shared by
// every stream of a process (server streams and client streams alike).
//
// Why one: gRPC's callback API runs callbacks on two "nexting" threads per
// process, and with the epoll1 poller every event wakes one of them and hands
// the poller role to the other (a futex wake and a context switch per message,
// measured with perf sched). A process whose only thread waiting on a
// completion queue is this one keeps the poller role on it: an event costs no
// hand-off until our own code passes work to another thread.
//
// Every tag put on the queue is a Completion; the driver calls its Complete
// with the operation's `ok`. Completions run one at a time, in the order the
// queue returns them, on the driver thread: they must not block (no plugin
// call, no lock held across one), only do bookkeeping, start the next
// operation, or hand work to an executor.

#include <pthread.h>

#include <atomic>
#include <memory>
#include <thread>
#include <utility>

#include <grpcpp/completion_queue.h>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "grpc_support/thread_name.h"

#if defined(__SANITIZE_THREAD__)
#include <sanitizer/tsan_interface.h>
#endif

namespace podium::grpc_support {

// A tag reaches the driver through gRPC's completion queue, which orders it
// with atomics of its own that ThreadSanitizer does not see (gRPC is not
// instrumented). The tag's construction is released here and acquired by the
// driver before it runs the tag, so that the first completion of a freshly
// allocated stream's tag is not reported as racing with its allocation.
inline void ReleaseToDriver([[maybe_unused]] void* tag) {
#if defined(__SANITIZE_THREAD__)
  __tsan_release(tag);
#endif
}
inline void AcquireFromQueue([[maybe_unused]] void* tag) {
#if defined(__SANITIZE_THREAD__)
  __tsan_acquire(tag);
#endif
}

// A tag on the driver's queue.
class Completion {
 public:
  virtual void Complete(bool ok) = 0;

 protected:
  ~Completion() = default;
};

// Calls `(owner->*handler)(ok)` when its operation completes.
template <typename Owner>
class CompletionOf final : public Completion {
 public:
  CompletionOf(Owner* owner, void (Owner::*handler)(bool)) : owner_(owner), handler_(handler) {
    ReleaseToDriver(this);
  }
  void Complete(bool ok) override { (owner_->*handler_)(ok); }

 private:
  Owner* const owner_;
  void (Owner::*const handler_)(bool);
};

// Owns a completion queue and the one thread that drains it.
//
// With a ServerCompletionQueue (from ServerBuilder::AddCompletionQueue before
// BuildAndStart) the same queue serves the server's async services and any
// client calls of the process; the driver may start before the server is
// built, so client streams (plugin handshakes) progress meanwhile.
//
// Stop: the owner first ends every call that uses the queue (server Shutdown,
// client TryCancel), then Stop shuts the queue down; the thread returns once
// every outstanding tag has been delivered (with ok = false for cancelled
// operations), so no Completion runs after Stop returns.
//
// Ending the calls is not enough by itself: a cancelled call's completions
// still run, and one that starts an operation (a Finish after a failed
// write, a next RequestCall) once the queue is shut down makes gRPC abort
// (`grpc_cq_begin_op` assertion). So before Stop every user of the queue also
// stops starting operations (podium-scheduler: ClusterService::StopCalls,
// AdminService::Stop, HealthService::Stop after the server's Shutdown), and
// its call objects go with their last completion.
class AsyncDriver {
 public:
  // A client-only queue of its own.
  AsyncDriver() : queue_(std::make_unique<grpc::CompletionQueue>()) {}
  // A server queue: `server_queue()` is non-null.
  explicit AsyncDriver(std::unique_ptr<grpc::ServerCompletionQueue> queue)
      : server_queue_(queue.get()), queue_(std::move(queue)) {}
  AsyncDriver(const AsyncDriver&) = delete;
  AsyncDriver& operator=(const AsyncDriver&) = delete;
  ~AsyncDriver() { Stop(); }

  grpc::CompletionQueue* queue() const { return queue_.get(); }
  grpc::ServerCompletionQueue* server_queue() const { return server_queue_; }

  // Starts the thread; later calls do nothing.
  void Start() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    if (started_ || stopped_) return;
    started_ = true;
    thread_ = std::thread([this] {
      // Named so that profiles and per-thread counts tell it from the
      // callback API's "nexting_thread"s.
      NameThisThread("grpc-driver");
      thread_id_.store(std::this_thread::get_id(), std::memory_order_release);
      void* tag = nullptr;
      bool ok = false;
      while (queue_->Next(&tag, &ok)) {
        AcquireFromQueue(tag);
        static_cast<Completion*>(tag)->Complete(ok);
      }
    });
  }

  // Shuts the queue down and joins the thread (see the class comment). Safe
  // to call more than once; must not be called on the driver thread.
  void Stop() ABSL_LOCKS_EXCLUDED(mu_) {
    std::thread thread;
    {
      absl::MutexLock lock(&mu_);
      if (stopped_) return;
      stopped_ = true;
      thread = std::move(thread_);
    }
    queue_->Shutdown();
    if (thread.joinable()) {
      thread.join();
    } else {
      // Never started: drain what was queued so the queue can be destroyed.
      void* tag = nullptr;
      bool ok = false;
      while (queue_->Next(&tag, &ok)) {
        AcquireFromQueue(tag);
        static_cast<Completion*>(tag)->Complete(ok);
      }
    }
  }

  bool OnDriverThread() const {
    return thread_id_.load(std::memory_order_acquire) == std::this_thread::get_id();
  }

 private:
  absl::Mutex mu_;
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_ ABSL_GUARDED_BY(mu_);
  std::atomic<std::thread::id> thread_id_{};
  grpc::ServerCompletionQueue* const server_queue_ = nullptr;
  const std::unique_ptr<grpc::CompletionQueue> queue_;
};

}  // namespace podium::grpc_support
