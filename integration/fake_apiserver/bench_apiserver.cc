// podium-bench-apiserver: a fake kube-apiserver in C++ for `make bench`'s
// adapter workloads only. The Python fake_apiserver.py (single-threaded
// interpreter) caps near 1 700 pods/s and would bound the numbers; it stays
// the server of the end-to-end tests, with its fault injection. This one keeps
// just the conventions the bench needs:
//   - paged lists (limit / continue over a snapshot, the list's
//     resourceVersion; fieldSelector spec.nodeName= and spec.nodeName!=) of
//     Nodes, Pods, Namespaces and policy/v1 PDBs; other API groups are 404;
//   - watches: chunked streams of JSON events (ADDED / MODIFIED / DELETED),
//     BOOKMARKs every second when allowed, ended after timeoutSeconds;
//   - pods/NAME/binding (409 when already bound or the uid differs), DELETE of
//     pods with preconditions.uid, PATCH of pods/NAME/status (conditions merged
//     by type, a null removes a field), events.k8s.io/v1 POST and PATCH,
//     coordination.k8s.io/v1 Leases (GET, POST, PUT with resourceVersion);
//   - counts every request ("METHOD verb", as fake_apiserver.py names them),
//     bind conflicts and double binds (a pod bound twice: must stay 0).
// Control: POST /control/objects {"objects": [Node or Pod...]};
// GET /control/stats[?brief=1].
//
//   podium-bench-apiserver [--port N]   prints "... listening on HOST:PORT"
//
// One thread per connection; one lock over the objects and the event log.

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/json.hpp>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace json = boost::json;
using tcp = asio::ip::tcp;

enum Resource { kNodes, kPods, kNamespaces, kPdbs, kResources };
constexpr const char* kKind[kResources] = {"Node", "Pod", "Namespace", "PodDisruptionBudget"};
constexpr const char* kApi[kResources] = {"v1", "v1", "v1", "policy/v1"};
constexpr bool kNamespaced[kResources] = {false, true, false, true};

using Key = std::pair<std::string, std::string>;  // namespace, name
using Object = std::shared_ptr<const json::object>;

std::string Now() { return absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", absl::Now(), absl::UTCTimeZone()); }

std::string NewUid() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  char buf[40];
  std::snprintf(buf, sizeof(buf), "%016llx-%016llx", static_cast<unsigned long long>(rng()),
                static_cast<unsigned long long>(rng()));
  return buf;
}

json::object StatusBody(int code, const std::string& reason, const std::string& message) {
  return {{"kind", "Status"}, {"apiVersion", "v1"}, {"status", "Failure"},
          {"reason", reason}, {"message", message},  {"code", code}};
}

std::string Str(const json::object& o, const char* a, const char* b = nullptr) {
  const json::value* v = o.if_contains(a);
  if (v && b) v = v->is_object() ? v->get_object().if_contains(b) : nullptr;
  return v && v->is_string() ? std::string(v->get_string()) : std::string();
}

std::string Chunk(const std::string& data) { return absl::StrCat(absl::Hex(data.size()), "\r\n", data, "\r\n"); }

struct LogEntry {
  int64_t rv;
  Resource resource;
  std::string chunk;  // The event as a watch chunk, serialized once.
};

struct Answer {
  int status = 200;
  std::string body;
};

Answer Reply(int status, const json::value& v) { return {status, json::serialize(v)}; }

class Cluster {
 public:
  // -- objects (mu_ held) ---------------------------------------------------
  Answer Create(Resource r, json::object obj) {
    // Top-level members first: an insertion may move the object's members.
    obj["kind"] = kKind[r];
    obj["apiVersion"] = kApi[r];
    if (!obj["metadata"].is_object()) obj["metadata"].emplace_object();
    if (r == kPods) {
      if (!obj["spec"].is_object()) obj["spec"].emplace_object();
      if (!obj["status"].is_object()) obj["status"].emplace_object();
      json::object& status = obj["status"].get_object();
      if (!status.contains("phase")) status["phase"] = "Pending";
    }
    json::object& meta = obj["metadata"].get_object();
    if (kNamespaced[r] && Str(meta, "namespace").empty()) meta["namespace"] = "default";
    Key key{kNamespaced[r] ? Str(meta, "namespace") : "", Str(meta, "name")};
    if (objects_[r].contains(key)) return Reply(409, StatusBody(409, "AlreadyExists", key.second + " already exists"));
    if (Str(meta, "uid").empty()) meta["uid"] = NewUid();
    if (Str(meta, "creationTimestamp").empty()) meta["creationTimestamp"] = Now();
    Store(r, key, std::move(obj), "ADDED");
    return {201, ""};
  }

  void Store(Resource r, const Key& key, json::object obj, const char* type) {
    obj["metadata"].get_object()["resourceVersion"] = std::to_string(++rv_);
    auto stored = std::make_shared<const json::object>(std::move(obj));
    if (std::string_view(type) == "DELETED") {
      objects_[r].erase(key);
    } else {
      objects_[r][key] = stored;
    }
    json::object event{{"type", type}, {"object", *stored}};
    log_.push_back({rv_, r, Chunk(json::serialize(event) + "\n")});
    cv_.notify_all();
  }

  std::mutex mu_;
  std::condition_variable cv_;
  int64_t rv_ = 1000;
  std::map<Key, Object> objects_[kResources];
  std::vector<LogEntry> log_;
  std::map<std::string, std::pair<int64_t, std::vector<Object>>> snapshots_;
  int64_t next_snapshot_ = 0;
  std::map<std::string, int64_t> requests_;
  std::map<std::string, int64_t> binds_;  // "ns/name" -> successful binds
  int64_t bind_conflicts_ = 0, double_binds_ = 0, events_ = 0, event_patches_ = 0, bound_ = 0;
  std::map<Key, json::object> leases_;
};

Cluster cluster;

struct Request {
  std::string method, path;
  std::map<std::string, std::string> query;
  std::vector<std::string> parts;
  std::string body, content_type;
};

std::string Unescape(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size()) {
      int v = 0;
      if (absl::SimpleHexAtoi(absl::string_view(s.data() + i + 1, 2), &v)) {
        out += static_cast<char>(v);
        i += 2;
        continue;
      }
    }
    out += s[i] == '+' ? ' ' : s[i];
  }
  return out;
}

void Count(const Request& r, const char* verb) {
  ++cluster.requests_[absl::StrCat(r.method, " ", verb)];
}

// -- list and watch ---------------------------------------------------------

// fieldSelector: "" (all), "spec.nodeName=" (pending) or "spec.nodeName!=" (assigned); others 400.
bool Selector(const std::string& text, int* mode) {
  if (text.empty()) return (*mode = 0), true;
  if (text == "spec.nodeName=" || text == "spec.nodeName==") return (*mode = 1), true;
  if (text == "spec.nodeName!=") return (*mode = 2), true;
  return false;
}

Answer List(const Request& req, Resource r) {
  std::lock_guard lock(cluster.mu_);
  Count(req, "list");
  int mode;
  if (!Selector(req.query.count("fieldSelector") ? req.query.at("fieldSelector") : "", &mode)) {
    return Reply(400, StatusBody(400, "BadRequest", "unsupported fieldSelector"));
  }
  int64_t limit = 0;
  if (req.query.count("limit")) (void)absl::SimpleAtoi(req.query.at("limit"), &limit);
  std::string token = req.query.count("continue") ? req.query.at("continue") : "";
  std::string sid;
  size_t offset = 0;
  std::pair<int64_t, std::vector<Object>>* snap;
  if (!token.empty()) {
    std::vector<std::string> t = absl::StrSplit(token, ':');
    auto it = t.size() == 2 ? cluster.snapshots_.find(t[0]) : cluster.snapshots_.end();
    if (it == cluster.snapshots_.end() || !absl::SimpleAtoi(t[1], &offset)) {
      return Reply(410, StatusBody(410, "Expired", "The provided continue parameter is too old"));
    }
    sid = t[0];
    snap = &it->second;
  } else {
    sid = std::to_string(++cluster.next_snapshot_);
    snap = &cluster.snapshots_[sid];
    snap->first = cluster.rv_;
    for (const auto& [key, o] : cluster.objects_[r]) {
      const bool bound = !Str(*o, "spec", "nodeName").empty();
      if (mode == 0 || (mode == 1 && !bound) || (mode == 2 && bound)) snap->second.push_back(o);
    }
  }
  const size_t end = limit > 0 ? std::min(snap->second.size(), offset + static_cast<size_t>(limit)) : snap->second.size();
  json::array items;
  for (size_t i = offset; i < end; ++i) items.push_back(*snap->second[i]);
  json::object meta{{"resourceVersion", std::to_string(snap->first)}};
  if (end < snap->second.size()) {
    meta["continue"] = absl::StrCat(sid, ":", end);
  } else {
    cluster.snapshots_.erase(sid);
  }
  return Reply(200, json::object{{"kind", absl::StrCat(kKind[r], "List")}, {"apiVersion", kApi[r]},
                                 {"metadata", std::move(meta)}, {"items", std::move(items)}});
}

// Streams events after `resourceVersion` until timeoutSeconds; false: the client went away.
bool Watch(tcp::socket& s, const Request& req, Resource r) {
  int64_t cursor = 0, timeout = 1800;
  bool bookmarks = false;
  {
    std::lock_guard lock(cluster.mu_);
    Count(req, "watch");
    if (req.query.count("resourceVersion")) (void)absl::SimpleAtoi(req.query.at("resourceVersion"), &cursor);
    if (cursor == 0) cursor = cluster.rv_;
    if (req.query.count("timeoutSeconds")) (void)absl::SimpleAtoi(req.query.at("timeoutSeconds"), &timeout);
    bookmarks = req.query.count("allowWatchBookmarks") && req.query.at("allowWatchBookmarks") != "false";
  }
  boost::system::error_code ec;
  asio::write(s, asio::buffer(std::string_view(
                     "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n")),
              ec);
  if (ec) return false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout);
  auto last_bookmark = std::chrono::steady_clock::now();
  // Log index of the first entry after cursor.
  size_t next;
  {
    std::lock_guard lock(cluster.mu_);
    auto it = std::upper_bound(cluster.log_.begin(), cluster.log_.end(), cursor,
                               [](int64_t rv, const LogEntry& e) { return rv < e.rv; });
    next = it - cluster.log_.begin();
  }
  for (;;) {
    std::string batch;
    int64_t current;
    {
      std::unique_lock lock(cluster.mu_);
      if (next >= cluster.log_.size()) cluster.cv_.wait_for(lock, std::chrono::milliseconds(200));
      for (; next < cluster.log_.size(); ++next) {
        if (cluster.log_[next].resource == r) batch += cluster.log_[next].chunk;
      }
      current = cluster.rv_;
    }
    const auto now = std::chrono::steady_clock::now();
    if (bookmarks && now - last_bookmark >= std::chrono::seconds(1)) {
      json::object bm{{"type", "BOOKMARK"},
                      {"object", json::object{{"kind", kKind[r]}, {"apiVersion", kApi[r]},
                                              {"metadata", json::object{{"resourceVersion", std::to_string(current)}}}}}};
      batch += Chunk(json::serialize(bm) + "\n");
      last_bookmark = now;
    }
    if (!batch.empty()) {
      asio::write(s, asio::buffer(batch), ec);
      if (ec) return false;
    }
    if (now >= deadline) {
      asio::write(s, asio::buffer(std::string_view("0\r\n\r\n")), ec);
      return !ec;
    }
  }
}

// -- writes -----------------------------------------------------------------

json::object ParseObject(const std::string& body, bool* ok) {
  boost::system::error_code ec;
  json::value v = json::parse(body.empty() ? std::string("{}") : body, ec);
  *ok = !ec && v.is_object();
  return *ok ? std::move(v.get_object()) : json::object();
}

Answer Bind(const Request& req, const std::string& ns, const std::string& name) {
  bool ok;
  json::object body = ParseObject(req.body, &ok);
  std::lock_guard lock(cluster.mu_);
  Count(req, "bind");
  if (!ok) return Reply(400, StatusBody(400, "BadRequest", "body is not JSON"));
  auto it = cluster.objects_[kPods].find({ns, name});
  if (it == cluster.objects_[kPods].end()) return Reply(404, StatusBody(404, "NotFound", "pods \"" + name + "\" not found"));
  const json::object& pod = *it->second;
  const std::string uid = Str(body, "metadata", "uid");
  if (!uid.empty() && uid != Str(pod, "metadata", "uid")) {
    ++cluster.bind_conflicts_;
    return Reply(409, StatusBody(409, "Conflict", "the UID in the precondition does not match"));
  }
  const std::string bound = Str(pod, "spec", "nodeName");
  if (!bound.empty()) {
    ++cluster.bind_conflicts_;
    return Reply(409, StatusBody(409, "Conflict", "pod " + name + " is already assigned to node \"" + bound + "\""));
  }
  const std::string node = Str(body, "target", "name");
  if (node.empty()) return Reply(400, StatusBody(400, "BadRequest", "target.name: Required value"));
  json::object updated = pod;
  updated["spec"].get_object()["nodeName"] = node;
  json::object& status = updated["status"].get_object();
  json::array conditions;
  if (const json::value* c = status.if_contains("conditions"); c && c->is_array()) {
    for (const auto& x : c->get_array()) {
      if (!x.is_object() || Str(x.get_object(), "type") != "PodScheduled") conditions.push_back(x);
    }
  }
  conditions.push_back(json::object{{"type", "PodScheduled"}, {"status", "True"}, {"lastTransitionTime", Now()}});
  status["conditions"] = std::move(conditions);
  cluster.Store(kPods, {ns, name}, std::move(updated), "MODIFIED");
  if (++cluster.binds_[ns + "/" + name] > 1) ++cluster.double_binds_;
  ++cluster.bound_;
  return Reply(201, json::object{{"kind", "Status"}, {"apiVersion", "v1"}, {"status", "Success"}, {"code", 201}});
}

Answer PatchStatus(const Request& req, const std::string& ns, const std::string& name) {
  bool ok;
  json::object body = ParseObject(req.body, &ok);
  std::lock_guard lock(cluster.mu_);
  Count(req, "patch");
  if (!ok) return Reply(400, StatusBody(400, "BadRequest", "body is not JSON"));
  const bool strategic = req.content_type == "application/strategic-merge-patch+json";
  if (!strategic && req.content_type != "application/merge-patch+json") {
    return Reply(415, StatusBody(415, "UnsupportedMediaType", "content type " + req.content_type));
  }
  auto it = cluster.objects_[kPods].find({ns, name});
  if (it == cluster.objects_[kPods].end()) return Reply(404, StatusBody(404, "NotFound", "pods \"" + name + "\" not found"));
  json::object pod = *it->second;
  json::object& status = pod["status"].is_object() ? pod["status"].get_object() : pod["status"].emplace_object();
  if (const json::value* patch = body.if_contains("status"); patch && patch->is_object()) {
    for (const auto& kv : patch->get_object()) {
      if (kv.key() == "conditions" && strategic && kv.value().is_array()) {
        json::array merged;
        if (const json::value* c = status.if_contains("conditions"); c && c->is_array()) merged = c->get_array();
        for (const auto& cond : kv.value().get_array()) {
          if (!cond.is_object()) continue;
          const std::string type = Str(cond.get_object(), "type");
          bool found = false;
          for (auto& have : merged) {
            if (have.is_object() && Str(have.get_object(), "type") == type) {
              for (const auto& f : cond.get_object()) have.get_object()[f.key()] = f.value();
              found = true;
            }
          }
          if (!found) merged.push_back(cond);
        }
        status["conditions"] = std::move(merged);
      } else if (kv.value().is_null()) {
        status.erase(kv.key());
      } else {
        status[kv.key()] = kv.value();
      }
    }
  }
  cluster.Store(kPods, {ns, name}, pod, "MODIFIED");
  return Reply(200, pod);
}

Answer DeletePod(const Request& req, const std::string& ns, const std::string& name) {
  bool ok;
  json::object body = ParseObject(req.body, &ok);
  std::lock_guard lock(cluster.mu_);
  Count(req, "delete");
  auto it = cluster.objects_[kPods].find({ns, name});
  if (it == cluster.objects_[kPods].end()) return Reply(404, StatusBody(404, "NotFound", "pods \"" + name + "\" not found"));
  json::object pod = *it->second;
  const std::string want = Str(body, "preconditions", "uid");
  if (!want.empty() && want != Str(pod, "metadata", "uid")) {
    return Reply(409, StatusBody(409, "Conflict", "Precondition failed: UID in precondition: " + want));
  }
  if (!Str(pod, "spec", "nodeName").empty()) --cluster.bound_;
  cluster.Store(kPods, {ns, name}, pod, "DELETED");
  return Reply(200, pod);
}

Answer Lease(const Request& req, const std::string& ns, const std::string& name) {
  bool ok;
  json::object body = ParseObject(req.body, &ok);
  std::lock_guard lock(cluster.mu_);
  Count(req, "lease");
  auto it = cluster.leases_.find({ns, name});
  if (req.method == "GET") {
    if (it == cluster.leases_.end()) return Reply(404, StatusBody(404, "NotFound", "leases \"" + name + "\" not found"));
    return Reply(200, it->second);
  }
  if (!ok) return Reply(400, StatusBody(400, "BadRequest", "body is not JSON"));
  if (req.method == "POST" && it != cluster.leases_.end()) return Reply(409, StatusBody(409, "AlreadyExists", name));
  if (req.method == "PUT") {
    if (it == cluster.leases_.end()) return Reply(404, StatusBody(404, "NotFound", name));
    if (Str(body, "metadata", "resourceVersion") != Str(it->second, "metadata", "resourceVersion")) {
      return Reply(409, StatusBody(409, "Conflict", "the object has been modified"));
    }
  }
  if (!body["metadata"].is_object()) body["metadata"].emplace_object();
  body["metadata"].get_object()["namespace"] = ns;
  body["metadata"].get_object()["name"] = name;
  body["metadata"].get_object()["resourceVersion"] = std::to_string(++cluster.rv_);
  cluster.leases_[{ns, name}] = body;
  return Reply(req.method == "POST" ? 201 : 200, body);
}

Answer Control(const Request& req) {
  if (req.method == "POST" && req.parts.size() == 2 && req.parts[1] == "objects") {
    bool ok;
    json::object body = ParseObject(req.body, &ok);
    if (!ok) return Reply(400, StatusBody(400, "BadRequest", "body is not JSON"));
    json::array results;
    std::lock_guard lock(cluster.mu_);
    if (const json::value* objs = body.if_contains("objects"); objs && objs->is_array()) {
      for (const auto& o : objs->get_array()) {
        if (!o.is_object()) continue;
        const std::string kind = Str(o.get_object(), "kind");
        int r = 0;
        while (r < kResources && kind != kKind[r]) ++r;
        if (r == kResources) {
          results.push_back(json::string("unknown kind " + kind));
          continue;
        }
        results.push_back(cluster.Create(static_cast<Resource>(r), o.get_object()).status);
      }
    }
    return Reply(200, json::object{{"results", std::move(results)}});
  }
  if (req.method == "GET" && req.parts.size() == 2 && req.parts[1] == "stats") {
    std::lock_guard lock(cluster.mu_);
    json::object requests;
    for (const auto& [k, n] : cluster.requests_) requests[k] = n;
    json::object out{{"pods", cluster.objects_[kPods].size()}, {"bound", cluster.bound_},
                     {"requests", std::move(requests)}, {"bind_conflicts", cluster.bind_conflicts_},
                     {"double_binds", cluster.double_binds_}, {"rv", cluster.rv_}};
    return Reply(200, out);
  }
  return Reply(404, json::object{{"error", "unknown control"}});
}

Answer Event(const Request& req) {
  std::lock_guard lock(cluster.mu_);
  if (req.method == "POST") {
    Count(req, "event");
    ++cluster.events_;
    bool ok;
    json::object body = ParseObject(req.body, &ok);
    if (!ok) return Reply(400, StatusBody(400, "BadRequest", "body is not JSON"));
    if (!body["metadata"].is_object()) body["metadata"].emplace_object();
    body["metadata"].get_object()["resourceVersion"] = std::to_string(++cluster.rv_);
    return Reply(201, body);
  }
  Count(req, "event_patch");
  ++cluster.event_patches_;
  return Reply(200, json::object{{"kind", "Event"}, {"apiVersion", "events.k8s.io/v1"}});
}

// Routes one request; a watch streams on the socket (returns nullopt-like: status 0).
Answer Route(tcp::socket& s, const Request& req, bool* streamed) {
  const auto& p = req.parts;
  *streamed = false;
  if (!p.empty() && p[0] == "control") return Control(req);
  auto list_or_watch = [&](Resource r) -> Answer {
    if (req.query.count("watch") && (req.query.at("watch") == "1" || req.query.at("watch") == "true")) {
      *streamed = true;
      if (!Watch(s, req, r)) return {-1, ""};
      return {0, ""};
    }
    return List(req, r);
  };
  if (req.method == "GET") {
    if (p.size() == 3 && p[0] == "api" && p[1] == "v1") {
      if (p[2] == "nodes") return list_or_watch(kNodes);
      if (p[2] == "pods") return list_or_watch(kPods);
      if (p[2] == "namespaces") return list_or_watch(kNamespaces);
    }
    if (p == std::vector<std::string>{"apis", "policy", "v1", "poddisruptionbudgets"}) return list_or_watch(kPdbs);
    if (p.size() == 6 && p[0] == "api" && p[2] == "namespaces" && p[4] == "pods") {
      std::lock_guard lock(cluster.mu_);
      Count(req, "get");
      auto it = cluster.objects_[kPods].find({p[3], p[5]});
      if (it == cluster.objects_[kPods].end()) return Reply(404, StatusBody(404, "NotFound", "pods \"" + p[5] + "\" not found"));
      return Reply(200, *it->second);
    }
  }
  if (p.size() == 7 && p[0] == "apis" && p[1] == "coordination.k8s.io" && p[3] == "namespaces" && p[5] == "leases") {
    return Lease(req, p[4], p[6]);
  }
  if (req.method == "POST" && p.size() == 6 && p[0] == "apis" && p[1] == "coordination.k8s.io" && p[5] == "leases") {
    bool ok;
    json::object body = ParseObject(req.body, &ok);
    return Lease(req, p[4], Str(body, "metadata", "name"));
  }
  if (p.size() >= 6 && p[0] == "apis" && p[1] == "events.k8s.io" && p[5] == "events") return Event(req);
  if (p.size() == 7 && p[0] == "api" && p[2] == "namespaces" && p[4] == "pods") {
    if (req.method == "POST" && p[6] == "binding") return Bind(req, p[3], p[5]);
    if (req.method == "PATCH" && p[6] == "status") return PatchStatus(req, p[3], p[5]);
  }
  if (req.method == "DELETE" && p.size() == 6 && p[0] == "api" && p[2] == "namespaces" && p[4] == "pods") {
    return DeletePod(req, p[3], p[5]);
  }
  {
    std::lock_guard lock(cluster.mu_);
    Count(req, "other");
  }
  return Reply(404, StatusBody(404, "NotFound", "the server could not find the requested resource (" + req.path + ")"));
}

void Serve(tcp::socket s) {
  beast::flat_buffer buffer;
  boost::system::error_code ec;
  for (;;) {
    http::request_parser<http::string_body> parser;
    parser.body_limit(64 << 20);
    http::read(s, buffer, parser, ec);
    if (ec) return;
    auto& m = parser.get();
    Request req;
    req.method = std::string(m.method_string());
    const std::string target(m.target());
    const size_t q = target.find('?');
    req.path = target.substr(0, q);
    if (q != std::string::npos) {
      const std::string query = target.substr(q + 1);
      for (absl::string_view part : absl::StrSplit(query, '&', absl::SkipEmpty())) {
        const std::string_view kv(part.data(), part.size());
        const size_t eq = kv.find('=');
        req.query[Unescape(kv.substr(0, eq))] = eq == std::string_view::npos ? "" : Unescape(kv.substr(eq + 1));
      }
    }
    req.parts = absl::StrSplit(req.path, '/', absl::SkipEmpty());
    req.body = std::move(m.body());
    if (auto it = m.find(http::field::content_type); it != m.end()) req.content_type = std::string(it->value());
    const bool keep = m.keep_alive();
    bool streamed;
    Answer a = Route(s, req, &streamed);
    if (streamed) {
      if (a.status < 0) return;
      continue;
    }
    http::response<http::string_body> res{static_cast<http::status>(a.status), 11};
    res.set(http::field::content_type, "application/json");
    res.body() = std::move(a.body);
    res.keep_alive(keep);
    res.prepare_payload();
    http::write(s, res, ec);
    if (ec || !keep) return;
  }
}

}  // namespace

int main(int argc, char** argv) {
  int port = 0;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--port" && i + 1 < argc) {
      port = std::atoi(argv[++i]);
    } else if (a.rfind("--port=", 0) == 0) {
      port = std::atoi(a.c_str() + 7);
    } else {
      std::cerr << "usage: podium-bench-apiserver [--port N]\n";
      return 2;
    }
  }
  asio::io_context ioc;
  tcp::acceptor acceptor(ioc, tcp::endpoint(asio::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port)));
  std::cerr << "podium-bench-apiserver listening on 127.0.0.1:" << acceptor.local_endpoint().port() << std::endl;
  for (;;) {
    tcp::socket s(ioc);
    boost::system::error_code ec;
    acceptor.accept(s, ec);
    if (ec) continue;
    s.set_option(tcp::no_delay(true), ec);
    std::thread(Serve, std::move(s)).detach();
  }
}
