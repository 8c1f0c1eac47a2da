#pragma once

#include <deque>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "actions/api_requests.h"
#include "client/retry.h"
#include "client/transport.h"
#include "metrics/adapter_metrics.h"
#include "podium/v1/cluster.pb.h"

namespace podium::kube {

// Issues the scheduler's actions as API calls, asynchronously, and reports
// every result. Two lanes: binds, deletes and status patches on `concurrency`
// workers; events on their own workers behind a small queue, so an event
// never delays a bind: identical events within `event_window` are aggregated
// (posted once, the repeats counted) and events that find the queue full are
// dropped (counted). Calls are retried with backoff on 429 (its Retry-After
// honoured), 5xx and connection errors; other 4xx are final.
// Lock order: mu_ only.
class ActionDispatcher {
 public:
  struct Options {
    int concurrency = 16;
    size_t queue_capacity = 1 << 14;
    int event_workers = 2;
    size_t event_queue_capacity = 1000;
    absl::Duration event_window = absl::Minutes(10);
    int max_attempts = 8;
    Backoff::Options backoff;
    EventSource event_source;
    // Asked before every API call; false: the call is not made and the action
    // fails as UNAVAILABLE (a standby, or a leader that could not renew).
    std::function<bool()> may_act;
    AdapterMetrics* metrics = nullptr;  // Queue depth, outcomes, retries.
  };
  using Done = std::function<void(v1::ActionResult)>;
  using Clock = std::function<absl::Time()>;

  // Waits between attempts; false = stop retrying (the dispatcher stops).
  using Sleep = std::function<bool(absl::Duration)>;
  // Events go through `event_transport`: a client with its own rate limit, as
  // kube-scheduler's event client, so events never take a bind's tokens.
  ActionDispatcher(Transport& transport, Transport& event_transport, Options options, Clock clock = absl::Now,
                   Sleep sleep = nullptr);
  ~ActionDispatcher();  // Stop().

  // Queues the action; `done` gets its result (from a worker thread). Blocks
  // only while the main lane's queue is full; events never block.
  void Submit(v1::Action action, Done done);
  // Drops what is queued (results: UNAVAILABLE), waits for the calls in
  // flight, joins the workers. Idempotent.
  void Stop();

  struct Counters {
    uint64_t calls = 0, retries = 0, ok = 0, failed = 0;
    uint64_t events_posted = 0, events_aggregated = 0, events_dropped = 0, events_failed = 0;
  };
  Counters counters() const;

  // Executes one action with retries; the result. Public for tests.
  v1::ActionResult Execute(const v1::Action& action);

 private:
  struct Item {
    v1::Action action;
    Done done;
  };
  void Work(bool events);
  bool SleepUnlessStopping(absl::Duration d);
  ApiAnswer CallWithRetries(Transport& transport, const HttpRequest& request, int* attempts);

  Transport& transport_;
  Transport& event_transport_;
  const Options options_;
  const Clock clock_;
  const Backoff::Random random_;
  const Sleep sleep_;
  mutable absl::Mutex mu_;
  std::deque<Item> queue_ ABSL_GUARDED_BY(mu_);
  std::deque<Item> events_ ABSL_GUARDED_BY(mu_);
  // Event key (regarding uid, type, reason, note) -> when it was last posted.
  std::map<std::string, absl::Time> recent_events_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  Counters counters_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> workers_;
};

}  // namespace podium::kube
