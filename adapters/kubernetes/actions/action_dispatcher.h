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
#include "actions/event_series.h"
#include "client/retry.h"
#include "client/transport.h"
#include "metrics/adapter_metrics.h"
#include "podium/v1/cluster.pb.h"

namespace podium::kube {

// Issues the scheduler's actions as API calls, asynchronously, and reports
// every result. Two lanes: binds, deletes and status patches on `concurrency`
// workers; events on their own workers behind a small queue, so an event
// never delays a bind. Events go as kube-scheduler's recorder sends them
// (EventSeriesBook): a repeat of a live event is PATCHed onto it as an
// events.k8s.io/v1 series (series.count, series.lastObservedTime; repeats
// while its POST or PATCH is in flight are folded into the next PATCH), each
// object's events are rate limited (burst 25, one every 5 minutes), and
// events that find the queue full are dropped; all counted. Calls are retried
// with backoff on 429 (its Retry-After honoured), 5xx and connection errors;
// other 4xx are final.
// Lock order: mu_ only.
class ActionDispatcher {
 public:
  struct Options {
    int concurrency = 16;
    size_t queue_capacity = 1 << 14;
    int event_workers = 2;
    size_t event_queue_capacity = 1000;
    EventSeriesBook::Options event_series;
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
    // Events: posted (new), aggregated (repeats counted into a series),
    // series_patches (PATCHes the API took), dropped (lane full or stopping),
    // rate_limited (per object), failed (the API refused or was unreachable).
    uint64_t events_posted = 0, events_aggregated = 0, events_dropped = 0, events_failed = 0;
    uint64_t events_series_patches = 0, events_rate_limited = 0;
  };
  Counters counters() const;

  // Executes one action with retries; the result. Public for tests.
  v1::ActionResult Execute(const v1::Action& action);

 private:
  struct Item {
    v1::Action action;
    Done done;
    // Events: the series (EventSeriesBook key), the event's name, and whether
    // this is the PATCH of its series rather than its POST.
    std::string series_key, event_name;
    bool series_patch = false;
  };
  void Work(bool events);
  // An event lane item: the POST of a new event or the PATCH of its series;
  // queues the series' next PATCH when repeats came meanwhile.
  v1::ActionResult ExecuteEvent(const Item& item);
  // Counts and logs one action's outcome; its result.
  v1::ActionResult Conclude(const v1::Action& action, const HttpRequest& request, v1::ActionResult::Code code,
                            const ApiAnswer& answer, int attempts);
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
  EventSeriesBook series_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  Counters counters_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> workers_;
};

}  // namespace podium::kube
