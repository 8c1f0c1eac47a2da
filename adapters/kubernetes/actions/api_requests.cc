#include "actions/api_requests.h"

#include <random>

#include <boost/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace podium::kube {
namespace {

namespace json = boost::json;

std::string PodPath(const v1::ObjectRef& pod) {
  return absl::StrCat("/api/v1/namespaces/", pod.namespace_().empty() ? "default" : pod.namespace_(), "/pods/",
                      pod.name());
}

}  // namespace

std::string MicroTime(absl::Time t) { return absl::FormatTime("%Y-%m-%dT%H:%M:%E6SZ", t, absl::UTCTimeZone()); }

HttpRequest BindRequest(const v1::BindPod& bind) {
  json::object meta{{"name", bind.pod().name()}, {"namespace", bind.pod().namespace_()}};
  if (!bind.pod().uid().empty()) meta["uid"] = bind.pod().uid();
  json::object body{{"apiVersion", "v1"},
                    {"kind", "Binding"},
                    {"metadata", std::move(meta)},
                    {"target", json::object{{"apiVersion", "v1"}, {"kind", "Node"}, {"name", bind.node_name()}}}};
  return {.method = "POST", .target = PodPath(bind.pod()) + "/binding", .body = json::serialize(body)};
}

HttpRequest GetPodRequest(const v1::ObjectRef& pod) { return {.method = "GET", .target = PodPath(pod)}; }

HttpRequest DeletePodRequest(const v1::DeletePod& del) {
  json::object body{{"apiVersion", "v1"}, {"kind", "DeleteOptions"}};
  if (!del.pod().uid().empty()) body["preconditions"] = json::object{{"uid", del.pod().uid()}};
  if (del.has_grace_period_seconds()) body["gracePeriodSeconds"] = del.grace_period_seconds();
  return {.method = "DELETE", .target = PodPath(del.pod()), .body = json::serialize(body)};
}

HttpRequest PatchPodStatusRequest(const v1::PatchPodStatus& patch) {
  json::object status;
  if (patch.conditions_size() > 0) {
    json::array conditions;
    for (const auto& c : patch.conditions()) {
      json::object o{{"type", c.type()}, {"status", c.status()}};
      if (!c.reason().empty()) o["reason"] = c.reason();
      if (!c.message().empty()) o["message"] = c.message();
      if (c.last_transition_time_us() != 0) {
        o["lastTransitionTime"] =
            absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", absl::FromUnixMicros(c.last_transition_time_us()), absl::UTCTimeZone());
      }
      conditions.push_back(std::move(o));
    }
    status["conditions"] = std::move(conditions);
  }
  if (patch.has_nominated_node_name()) {
    if (patch.nominated_node_name().empty()) {
      status["nominatedNodeName"] = nullptr;
    } else {
      status["nominatedNodeName"] = patch.nominated_node_name();
    }
  }
  json::object body{{"status", std::move(status)}};
  return {.method = "PATCH",
          .target = PodPath(patch.pod()) + "/status",
          .body = json::serialize(body),
          .content_type = "application/strategic-merge-patch+json"};
}

std::string EventName(const v1::ObjectRef& r, absl::Time now) {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  // client-go names events "<object>.<unix nanos in hex>".
  return absl::StrFormat("%s.%x%04x", r.name(), absl::ToUnixNanos(now), rng() & 0xffff);
}

HttpRequest EventRequest(const v1::RecordEvent& event, const EventSource& source, absl::Time now) {
  return EventRequest(event, source, now, EventName(event.regarding(), now));
}

HttpRequest EventSeriesPatchRequest(const v1::ObjectRef& r, const std::string& name, int32_t count,
                                    absl::Time last_observed) {
  const std::string ns = r.namespace_().empty() ? "default" : r.namespace_();
  json::object body{
      {"series", json::object{{"count", count}, {"lastObservedTime", MicroTime(last_observed)}}}};
  return {.method = "PATCH",
          .target = absl::StrCat("/apis/events.k8s.io/v1/namespaces/", ns, "/events/", name),
          .body = json::serialize(body),
          .content_type = "application/merge-patch+json"};
}

HttpRequest EventRequest(const v1::RecordEvent& event, const EventSource& source, absl::Time now,
                         const std::string& name) {
  const v1::ObjectRef& r = event.regarding();
  const std::string ns = r.namespace_().empty() ? "default" : r.namespace_();
  json::object regarding{{"apiVersion", "v1"}, {"kind", r.kind().empty() ? "Pod" : r.kind()}, {"namespace", ns},
                         {"name", r.name()}};
  if (!r.uid().empty()) regarding["uid"] = r.uid();
  json::object body{{"apiVersion", "events.k8s.io/v1"},
                    {"kind", "Event"},
                    {"metadata", json::object{{"name", name}, {"namespace", ns}}},
                    {"eventTime", MicroTime(now)},
                    {"reportingController", source.reporting_controller},
                    {"reportingInstance", source.reporting_instance},
                    {"action", event.action()},
                    {"reason", event.reason()},
                    {"note", event.note().substr(0, 1024)},
                    {"type", event.type().empty() ? "Normal" : event.type()},
                    {"regarding", std::move(regarding)}};
  return {.method = "POST", .target = absl::StrCat("/apis/events.k8s.io/v1/namespaces/", ns, "/events"),
          .body = json::serialize(body)};
}

}  // namespace podium::kube
