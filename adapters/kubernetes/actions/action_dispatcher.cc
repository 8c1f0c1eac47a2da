#include "actions/action_dispatcher.h"

#include <iostream>

#include "absl/strings/str_cat.h"
#include "yaml-cpp/yaml.h"
#include "logging/logger.h"

namespace podium::kube {
namespace {

v1::ActionResult Result(uint64_t id, v1::ActionResult::Code code, std::string message) {
  v1::ActionResult r;
  r.set_action_id(id);
  r.set_code(code);
  r.set_message(std::move(message));
  return r;
}

// The pod's spec.nodeName and metadata.uid from a GET answer.
const char* ActionName(const v1::Action& a) {
  switch (a.kind_case()) {
    case v1::Action::kBind: return "bind";
    case v1::Action::kDeletePod: return "delete";
    case v1::Action::kPatchPodStatus: return "patch_status";
    case v1::Action::kRecordEvent: return "event";
    default: return "unknown";
  }
}

std::pair<std::string, std::string> NodeAndUid(const ApiAnswer& a) {
  try {
    YAML::Node pod = YAML::Load(a.body);
    std::string node, uid;
    if (pod["spec"] && pod["spec"]["nodeName"]) node = pod["spec"]["nodeName"].Scalar();
    if (pod["metadata"] && pod["metadata"]["uid"]) uid = pod["metadata"]["uid"].Scalar();
    return {node, uid};
  } catch (const YAML::Exception&) {
    return {};
  }
}

}  // namespace

ActionDispatcher::ActionDispatcher(Transport& transport, Transport& event_transport, Options options, Clock clock,
                                   Sleep sleep)
    : transport_(transport),
      event_transport_(event_transport),
      options_(std::move(options)),
      clock_(std::move(clock)),
      random_(DefaultRandom()),
      sleep_(sleep ? std::move(sleep) : [this](absl::Duration d) { return SleepUnlessStopping(d); }),
      series_(options_.event_series) {
  for (int i = 0; i < options_.concurrency; ++i) workers_.emplace_back([this] { Work(false); });
  for (int i = 0; i < options_.event_workers; ++i) workers_.emplace_back([this] { Work(true); });
}

ActionDispatcher::~ActionDispatcher() { Stop(); }

void ActionDispatcher::Submit(v1::Action action, Done done) {
  const uint64_t id = action.id();
  if (action.has_record_event()) {
    std::string refusal = "the adapter is stopping";
    v1::ActionResult::Code code = v1::ActionResult::UNAVAILABLE;
    {
      absl::MutexLock lock(&mu_);
      if (!stopping_) {
        const absl::Time now = clock_();
        auto seen = series_.Observe(action.record_event(), now, EventName(action.record_event().regarding(), now));
        switch (seen.decision) {
          case EventSeriesBook::Decision::kRateLimited:
            ++counters_.events_rate_limited;
            if (options_.metrics) options_.metrics->CountAction("event", "rate_limited");
            refusal = "event not sent: this object's events are rate limited";
            break;
          case EventSeriesBook::Decision::kCoalesced:
            ++counters_.events_aggregated;
            if (options_.metrics) options_.metrics->CountAction("event", "aggregated");
            code = v1::ActionResult::OK;
            refusal = "counted into the event's series";
            break;
          case EventSeriesBook::Decision::kPost:
          case EventSeriesBook::Decision::kPatch: {
            const bool patch = seen.decision == EventSeriesBook::Decision::kPatch;
            if (patch) {
              ++counters_.events_aggregated;
              if (options_.metrics) options_.metrics->CountAction("event", "aggregated");
            }
            if (events_.size() < options_.event_queue_capacity) {
              events_.push_back({std::move(action), std::move(done), std::move(seen.key), std::move(seen.name), patch});
              if (options_.metrics) options_.metrics->SetActionQueueDepth("events", events_.size());
              return;
            }
            if (patch) {
              series_.PatchNotIssued(seen.key);  // The next repeat's PATCH carries the count.
            } else {
              series_.Finished(seen.key, false);
            }
            ++counters_.events_dropped;
            if (options_.metrics) options_.metrics->CountAction("event", "dropped");
            refusal = "event dropped: the event lane is full";
            break;
          }
        }
      }
    }
    done(Result(id, code, refusal));
    return;
  }
  {
    absl::MutexLock lock(&mu_);
    auto has_room = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return stopping_ || queue_.size() < options_.queue_capacity;
    };
    mu_.Await(absl::Condition(&has_room));
    if (!stopping_) {
      queue_.push_back({std::move(action), std::move(done)});
      if (options_.metrics) options_.metrics->SetActionQueueDepth("actions", queue_.size());
      return;
    }
  }
  done(Result(id, v1::ActionResult::UNAVAILABLE, "the adapter is stopping"));
}

void ActionDispatcher::Work(bool events) {
  for (;;) {
    Item item;
    {
      absl::MutexLock lock(&mu_);
      std::deque<Item>& q = events ? events_ : queue_;
      auto ready = [this, &q]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_ || !q.empty(); };
      mu_.Await(absl::Condition(&ready));
      if (q.empty()) return;  // Stopping.
      item = std::move(q.front());
      q.pop_front();
      if (options_.metrics) options_.metrics->SetActionQueueDepth(events ? "events" : "actions", q.size());
    }
    v1::ActionResult result = events && !item.series_key.empty() ? ExecuteEvent(item) : Execute(item.action);
    if (item.done) item.done(std::move(result));
  }
}

bool ActionDispatcher::SleepUnlessStopping(absl::Duration d) {
  absl::MutexLock lock(&mu_);
  auto stopping = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_; };
  return !mu_.AwaitWithTimeout(absl::Condition(&stopping), d);
}

ApiAnswer ActionDispatcher::CallWithRetries(Transport& transport, const HttpRequest& request, int* attempts) {
  Backoff backoff(options_.backoff, random_);
  ApiAnswer answer;
  for (*attempts = 1;; ++*attempts) {
    if (options_.may_act && !options_.may_act()) {
      return ApiAnswer{.status = 0, .error = "not the leader: the action was not issued"};
    }
    answer = transport.Do(request);
    {
      absl::MutexLock lock(&mu_);
      ++counters_.calls;
    }
    if (Classify(answer) != Verdict::kRetry || *attempts >= options_.max_attempts) return answer;
    std::optional<absl::Duration> retry_after;
    if (answer.status == 429 || answer.status == 503) retry_after = ParseRetryAfter(answer.retry_after);
    if (!sleep_(backoff.Next(retry_after))) return answer;
    if (options_.metrics) options_.metrics->CountRetry(request.method, request.target, answer.status);
    absl::MutexLock lock(&mu_);
    ++counters_.retries;
  }
}

v1::ActionResult ActionDispatcher::Execute(const v1::Action& action) {
  if (action.has_delete_pod() && action.delete_pod().has_disruption_target()) {
    // Protocol 2: the DisruptionTarget condition's status patch first (as
    // kube-scheduler's PreemptPod does), the delete only if it succeeded.
    v1::Action patch;
    patch.set_id(action.id());
    *patch.mutable_patch_pod_status()->mutable_pod() = action.delete_pod().pod();
    *patch.mutable_patch_pod_status()->add_conditions() = action.delete_pod().disruption_target();
    v1::ActionResult patched = Execute(patch);
    if (patched.code() != v1::ActionResult::OK) {
      patched.set_message(absl::StrCat("DisruptionTarget patch: ", patched.message()));
      return patched;
    }
    v1::Action del = action;
    del.mutable_delete_pod()->clear_disruption_target();
    return Execute(del);
  }
  HttpRequest request;
  switch (action.kind_case()) {
    case v1::Action::kBind: request = BindRequest(action.bind()); break;
    case v1::Action::kDeletePod: request = DeletePodRequest(action.delete_pod()); break;
    case v1::Action::kPatchPodStatus: request = PatchPodStatusRequest(action.patch_pod_status()); break;
    case v1::Action::kRecordEvent: request = EventRequest(action.record_event(), options_.event_source, clock_()); break;
    default: return Result(action.id(), v1::ActionResult::INVALID, "unknown action kind");
  }
  int attempts = 0;
  ApiAnswer answer =
      CallWithRetries(action.has_record_event() ? event_transport_ : transport_, request, &attempts);
  v1::ActionResult::Code code = ResultCode(answer);
  if (code == v1::ActionResult::CONFLICT && action.has_bind() && attempts > 1) {
    // An earlier attempt may have bound the pod before its answer was lost:
    // bound here, to this node, is success.
    int get_attempts = 0;
    ApiAnswer pod = CallWithRetries(transport_, GetPodRequest(action.bind().pod()), &get_attempts);
    auto [node, uid] = NodeAndUid(pod);
    if (pod.status == 200 && node == action.bind().node_name() &&
        (action.bind().pod().uid().empty() || uid == action.bind().pod().uid())) {
      code = v1::ActionResult::OK;
    }
  }
  return Conclude(action, request, code, answer, attempts);
}

v1::ActionResult ActionDispatcher::ExecuteEvent(const Item& item) {
  const v1::RecordEvent& event = item.action.record_event();
  HttpRequest request;
  if (item.series_patch) {
    int32_t count = 0;
    absl::Time last;
    {
      absl::MutexLock lock(&mu_);
      if (!series_.TakeForPatch(item.series_key, &count, &last)) {
        return Result(item.action.id(), v1::ActionResult::OK, "the event's series has ended");
      }
    }
    request = EventSeriesPatchRequest(event.regarding(), item.event_name, count, last);
  } else {
    request = EventRequest(event, options_.event_source, clock_(), item.event_name);
  }
  int attempts = 0;
  ApiAnswer answer = CallWithRetries(event_transport_, request, &attempts);
  const v1::ActionResult::Code code = ResultCode(answer);
  {
    absl::MutexLock lock(&mu_);
    if (series_.Finished(item.series_key, code == v1::ActionResult::OK)) {
      if (!stopping_ && events_.size() < options_.event_queue_capacity) {
        // Repeats came while this call ran: their count goes in a PATCH now.
        v1::Action next;
        *next.mutable_record_event() = event;
        events_.push_back({std::move(next), nullptr, item.series_key, item.event_name, true});
      } else {
        series_.PatchNotIssued(item.series_key);
      }
    }
    if (item.series_patch && code == v1::ActionResult::OK) ++counters_.events_series_patches;
  }
  return Conclude(item.action, request, code, answer, attempts);
}

v1::ActionResult ActionDispatcher::Conclude(const v1::Action& action, const HttpRequest& request,
                                            v1::ActionResult::Code code, const ApiAnswer& answer, int attempts) {
  std::string message;
  if (code != v1::ActionResult::OK) {
    message = AnswerMessage(answer);
    if (attempts > 1) absl::StrAppend(&message, " (after ", attempts, " attempts)");
    ::podium::logging::Line(::podium::logging::Severity::kWarning) << "podium-k8s-adapter: " << request.method << " " << request.target << ": "
              << v1::ActionResult::Code_Name(code) << ": " << message << "\n";
  }
  if (options_.metrics) options_.metrics->CountAction(ActionName(action), v1::ActionResult::Code_Name(code));
  absl::MutexLock lock(&mu_);
  if (code == v1::ActionResult::OK) {
    ++counters_.ok;
    if (action.has_record_event() && request.method == "POST") ++counters_.events_posted;
  } else {
    ++counters_.failed;
    if (action.has_record_event()) ++counters_.events_failed;
  }
  return Result(action.id(), code, std::move(message));
}

void ActionDispatcher::Stop() {
  std::deque<Item> dropped;
  {
    absl::MutexLock lock(&mu_);
    if (stopping_ && workers_.empty()) return;
    stopping_ = true;
    dropped.swap(queue_);
    counters_.events_dropped += events_.size();
    for (auto& e : events_) dropped.push_back(std::move(e));
    events_.clear();
  }
  for (auto& item : dropped) {
    if (item.done) item.done(Result(item.action.id(), v1::ActionResult::UNAVAILABLE, "the adapter is stopping"));
  }
  for (auto& w : workers_) {
    if (w.joinable()) w.join();
  }
  workers_.clear();
}

ActionDispatcher::Counters ActionDispatcher::counters() const {
  absl::MutexLock lock(&mu_);
  return counters_;
}

}  // namespace podium::kube
