#include "reflector/reflector.h"

#include <iostream>
#include <set>

#include "absl/strings/str_cat.h"
#include "reflector/api_json.h"
#include "logging/logger.h"

namespace podium::kube {
namespace {

namespace json = boost::json;

// n[key]'s text when n is an object and the value a scalar, else "".
std::string Scalar(const json::value* n, std::string_view key) { return ScalarText(Member(n, key)); }

std::string UrlEscape(const std::string& s) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

v1::ObjectEvent AsDelete(v1::ObjectEvent e) {
  e.set_type(v1::ObjectEvent::DELETE);
  return e;
}

// The podium.v1 object's name (what tells a Workload's groups apart).
const std::string& EventName(const v1::ObjectEvent& e) {
  switch (e.object_case()) {
    case v1::ObjectEvent::kNode: return e.node().meta().name();
    case v1::ObjectEvent::kPod: return e.pod().meta().name();
    case v1::ObjectEvent::kPdb: return e.pdb().meta().name();
    case v1::ObjectEvent::kPodGroup: return e.pod_group().meta().name();
    case v1::ObjectEvent::kPriorityClass: return e.priority_class().meta().name();
    case v1::ObjectEvent::kNamespaceObject: return e.namespace_object().meta().name();
    default: {
      static const std::string kNone;
      return kNone;
    }
  }
}

}  // namespace

std::string ObjectKey(const json::value& object) {
  const json::value* meta = Member(&object, "metadata");
  std::string name = Scalar(meta, "name");
  if (name.empty()) return "";
  std::string ns = Scalar(meta, "namespace");
  return ns.empty() ? name : absl::StrCat(ns, "/", name);
}

Reflector::Reflector(ResourceKind kind, Transport& transport, ReflectorSink& sink, Options options, Clock clock,
                     Sleep sleep, Backoff::Random random)
    : kind_(std::move(kind)),
      transport_(transport),
      sink_(sink),
      options_(options),
      clock_(std::move(clock)),
      sleep_(std::move(sleep)),
      random_(random),
      backoff_(options_.backoff, std::move(random)) {}

absl::StatusOr<std::vector<v1::ObjectEvent>> Reflector::Decode(const json::value& object) const {
  if (kind_.decode_many) return kind_.decode_many(object);
  auto one = kind_.decode(object);
  if (!one.ok()) return one.status();
  std::vector<v1::ObjectEvent> out;
  out.push_back(*std::move(one));
  return out;
}

void Reflector::Upsert(const std::string& key, const std::string& uid, const std::string& rv,
                       std::vector<v1::ObjectEvent> objects, std::vector<v1::ObjectEvent>* out) {
  const bool finished = objects.size() == 1 && kind_.finished(objects.front());
  auto it = store_.find(key);
  if (it != store_.end() && it->second.uid != uid) {
    Remove(key, out);  // Deleted and created again under the same name.
    it = store_.end();
  }
  const bool was_live = it != store_.end() && !it->second.finished;
  if (!finished) {
    // Objects the previous state had and this one does not (a Workload's
    // dropped group) are gone.
    if (was_live) {
      std::set<std::string> now;
      for (const auto& o : objects) now.insert(EventName(o));
      for (const auto& old : it->second.last) {
        if (!now.contains(EventName(old))) out->push_back(AsDelete(old));
      }
    }
    out->insert(out->end(), objects.begin(), objects.end());
  } else if (was_live) {
    out->push_back(AsDelete(objects.front()));  // Succeeded/Failed: its resources are free.
  }
  store_[key] = Stored{uid, rv, finished, std::move(objects)};
}

void Reflector::Remove(const std::string& key, std::vector<v1::ObjectEvent>* out) {
  auto it = store_.find(key);
  if (it == store_.end()) return;
  if (!it->second.finished) {
    for (auto& o : it->second.last) out->push_back(AsDelete(std::move(o)));
  }
  store_.erase(it);
}

absl::StatusOr<std::string> Reflector::ListPages(const std::string& field_selector,
                                                 const std::function<void(std::vector<Listed>&)>& on_page,
                                                 const std::function<void()>& on_restart) {
  std::string next, list_rv;
  int restarts = 0;
  for (;;) {
    std::string target = absl::StrCat(kind_.list_path, "?limit=", options_.page_size);
    if (!field_selector.empty()) absl::StrAppend(&target, "&fieldSelector=", UrlEscape(field_selector));
    if (!next.empty()) absl::StrAppend(&target, "&continue=", UrlEscape(next));
    ApiAnswer answer = transport_.Do({.method = "GET", .target = target});
    if (answer.status == 410 && !next.empty() && restarts < 3) {
      // The continue token expired mid-list: start the list again.
      ++restarts;
      next.clear();
      on_restart();
      continue;
    }
    if (answer.status == 404) {
      return absl::NotFoundError(absl::StrCat("list ", kind_.list_path, ": ", AnswerMessage(answer)));
    }
    if (answer.status == 403) {
      return absl::PermissionDeniedError(absl::StrCat("list ", kind_.list_path, ": ", AnswerMessage(answer)));
    }
    if (answer.status != 200) return absl::UnavailableError(absl::StrCat("list ", kind_.list_path, ": ", AnswerMessage(answer)));
    auto doc = ParseApiJson(answer.body, absl::StrCat("list ", kind_.list_path));
    if (!doc.ok()) return doc.status();
    // An answer that is not a list of this kind is an error, never an empty
    // list: a relist would take it for every object deleted.
    const std::string list_kind = Scalar(&*doc, "kind");
    if (!list_kind.empty() && !kind_.list_kind.empty() && list_kind != kind_.list_kind) {
      return absl::DataLossError(
          absl::StrCat("list ", kind_.list_path, ": the answer is a ", list_kind, ", not a ", kind_.list_kind));
    }
    const json::value* items = Member(&*doc, "items");
    if (items == nullptr || !(items->is_array() || items->is_null())) {  // null: Go's empty slice.
      return absl::DataLossError(absl::StrCat("list ", kind_.list_path, ": items: ",
                                              items == nullptr ? "missing" : "not an array"));
    }
    std::vector<Listed> page;
    const json::value* meta = Member(&*doc, "metadata");
    list_rv = Scalar(meta, "resourceVersion");
    next = Scalar(meta, "continue");
    if (items->is_array()) {
      page.reserve(items->get_array().size());
      for (const json::value& item : items->get_array()) {
        const json::value* m = Member(&item, "metadata");
        page.push_back({ObjectKey(item), Scalar(m, "uid"), Scalar(m, "resourceVersion"), &item});
      }
    }
    on_page(page);
    if (next.empty()) return list_rv;
  }
}

void Reflector::ApplyListed(std::vector<Listed>& items, std::set<std::string>* seen,
                            std::vector<v1::ObjectEvent>* out) {
  for (Listed& l : items) {
    if (l.key.empty()) {
      sink_.OnBadObject(kind_, *l.raw, absl::InvalidArgumentError("metadata.name: missing"));
      continue;
    }
    seen->insert(l.key);
    auto it = store_.find(l.key);
    if (it != store_.end() && it->second.uid == l.uid && it->second.resource_version == l.rv) continue;
    auto decoded = Decode(*l.raw);
    if (!decoded.ok()) {
      sink_.OnBadObject(kind_, *l.raw, decoded.status());
      continue;  // The scheduler keeps what it had, if anything.
    }
    Upsert(l.key, l.uid, l.rv, *std::move(decoded), out);
  }
}

absl::Status Reflector::ListAndSync() { return synced_ ? Relist() : FirstList(); }

absl::Status Reflector::FirstList() {
  while (first_list_parts_done_ < kind_.first_list_parts.size()) {
    std::set<std::string> seen;  // Keys this attempt listed (since its last restart).
    auto on_page = [&](std::vector<Listed>& page) {
      std::vector<v1::ObjectEvent> out;
      ApplyListed(page, &seen, &out);
      if (!out.empty()) sink_.OnListPage(kind_, std::move(out));
    };
    auto rv = ListPages(kind_.first_list_parts[first_list_parts_done_].field_selector, on_page, [&] { seen.clear(); });
    if (!rv.ok()) return rv.status();
    // What a failed attempt or a restarted list sent and this complete list
    // did not list has gone meanwhile. The store holds only this part's
    // objects and those of the parts already done.
    first_list_keys_.insert(seen.begin(), seen.end());
    std::vector<v1::ObjectEvent> gone;
    RemoveUnlisted(first_list_keys_, &gone);
    if (!gone.empty()) sink_.OnEvents(kind_, std::move(gone));
    // The watch starts from the first part's version: the later parts'
    // objects then see again what changed after it (harmless repeats; an
    // identical resourceVersion is dropped), and nothing is missed.
    if (first_list_parts_done_ == 0) resource_version_ = *rv;
    sink_.OnListPartDone(kind_, first_list_parts_done_++);
  }
  synced_ = true;
  first_list_keys_.clear();
  return absl::OkStatus();
}

absl::Status Reflector::Relist() {
  if (options_.metrics) options_.metrics->CountRelist(kind_.kind);
  std::set<std::string> seen;
  auto on_page = [&](std::vector<Listed>& page) {
    std::vector<v1::ObjectEvent> out;
    ApplyListed(page, &seen, &out);
    if (!out.empty()) sink_.OnEvents(kind_, std::move(out));
  };
  auto rv = ListPages("", on_page, [&] { seen.clear(); });
  if (!rv.ok()) return rv.status();
  std::vector<v1::ObjectEvent> out;
  RemoveUnlisted(seen, &out);
  if (!out.empty()) sink_.OnEvents(kind_, std::move(out));
  resource_version_ = *rv;
  return absl::OkStatus();
}

void Reflector::RemoveUnlisted(const std::set<std::string>& listed, std::vector<v1::ObjectEvent>* out) {
  std::vector<std::string> vanished;
  for (const auto& [key, stored] : store_) {
    if (!listed.contains(key)) vanished.push_back(key);
  }
  for (const auto& key : vanished) Remove(key, out);
}

absl::Duration Reflector::NextBackoff() {
  const absl::Time now = clock_();
  if (now - last_backoff_ > options_.backoff_reset) backoff_.Reset();
  last_backoff_ = now;
  return backoff_.Next();
}

void Reflector::MarkFirstListDone() {
  while (first_list_parts_done_ < kind_.first_list_parts.size()) sink_.OnListPartDone(kind_, first_list_parts_done_++);
  synced_ = true;
}

std::string Reflector::WatchTarget() {
  const int64_t base = absl::ToInt64Seconds(options_.watch_timeout);
  const int64_t timeout = base + static_cast<int64_t>(random_() * static_cast<double>(base));
  return absl::StrCat(kind_.list_path, "?watch=1&allowWatchBookmarks=true&resourceVersion=", UrlEscape(resource_version_),
                      "&timeoutSeconds=", std::max<int64_t>(1, timeout));
}

Reflector::WatchEnd Reflector::Watch(absl::Status* error) {
  const absl::Time start = clock_();
  StreamAnswer answer = transport_.Stream({.method = "GET", .target = WatchTarget()});
  if (answer.head.status == 410) return WatchEnd::kGone;
  if (answer.head.status != 200) {
    *error = absl::UnavailableError(absl::StrCat("watch ", kind_.list_path, ": ", AnswerMessage(answer.head)));
    return WatchEnd::kError;
  }
  int events = 0;
  std::string line;
  for (;;) {
    absl::StatusOr<bool> more = answer.lines->NextLine(&line);
    if (absl::IsDeadlineExceeded(more.status())) {
      // Quiet for the transport's idle timeout: an idle watch or a half-open
      // connection. Watching again from the last version is cheap and tells
      // them apart.
      return WatchEnd::kEnded;
    }
    if (!more.ok()) {
      *error = more.status();
      // An event over the size limit would come again from the same version.
      return absl::IsResourceExhausted(more.status()) ? WatchEnd::kRelist : WatchEnd::kError;
    }
    if (!*more) break;
    if (line.empty()) continue;
    auto doc = ParseApiJson(line, absl::StrCat("watch ", kind_.list_path));
    if (!doc.ok()) {
      *error = doc.status();
      return WatchEnd::kRelist;
    }
    std::vector<v1::ObjectEvent> out;
    {
      const std::string type = Scalar(&*doc, "type");
      static const json::value kNull;
      const json::value* object_ptr = Member(&*doc, "object");
      const json::value& object = object_ptr != nullptr ? *object_ptr : kNull;
      if (type == "ERROR") {
        const std::string code = Scalar(&object, "code");
        if (code == "410") return WatchEnd::kGone;
        *error = absl::UnavailableError(absl::StrCat("watch ", kind_.list_path, ": ", Scalar(&object, "message")));
        return code == "429" ? WatchEnd::kError : WatchEnd::kRelist;  // 429: watch again after the backoff.
      }
      const json::value* meta = Member(&object, "metadata");
      const std::string rv = Scalar(meta, "resourceVersion");
      ++events;
      if (type == "BOOKMARK") {
        if (!rv.empty()) resource_version_ = rv;
        continue;
      }
      const std::string key = ObjectKey(object);
      if (key.empty()) {
        sink_.OnBadObject(kind_, object, absl::InvalidArgumentError("metadata.name: missing"));
      } else if (auto it = store_.find(key); (type == "ADDED" || type == "MODIFIED") && it != store_.end() &&
                 it->second.uid == Scalar(meta, "uid") && it->second.resource_version == rv) {
        // Already known at this version (the first list's later parts saw it).
      } else if (type == "ADDED" || type == "MODIFIED") {
        auto decoded = Decode(object);
        if (decoded.ok()) {
          Upsert(key, Scalar(meta, "uid"), rv, *std::move(decoded), &out);
        } else {
          sink_.OnBadObject(kind_, object, decoded.status());
        }
      } else if (type == "DELETED") {
        auto it = store_.find(key);
        if (it != store_.end()) {
          auto decoded = Decode(object);
          // The deleted object's final state; a Workload's groups as stored
          // (the scheduler knows those).
          if (decoded.ok() && !it->second.finished && !kind_.decode_many) it->second.last = *std::move(decoded);
          Remove(key, &out);
        }
      } else {
        // As client-go: logged and skipped; the resourceVersion moves past it.
        ::podium::logging::Line(::podium::logging::Severity::kWarning)
            << "podium-k8s-adapter: " << kind_.kind << ": unable to understand watch event type \"" << type
            << "\" (resourceVersion " << rv << "); skipped\n";
      }
      if (!rv.empty()) resource_version_ = rv;
    }
    if (!out.empty()) sink_.OnEvents(kind_, std::move(out));
  }
  if (events == 0 && clock_() - start < options_.min_watch_duration) {
    *error = absl::UnavailableError(absl::StrCat("watch ", kind_.list_path, ": very short watch: closed with no events"));
    return WatchEnd::kError;
  }
  return WatchEnd::kEnded;
}

void Reflector::Run(const std::atomic<bool>& stop) {
  bool need_list = true;
  while (!stop.load()) {
    if (need_list) {
      absl::Status s = ListAndSync();
      const bool refused = absl::IsNotFound(s) || absl::IsPermissionDenied(s);
      if (refused && kind_.optional && !synced_) {
        ::podium::logging::Line(::podium::logging::Severity::kWarning) << "podium-k8s-adapter: " << kind_.kind << ": "
                  << (absl::IsNotFound(s) ? "the API has no " : "not allowed to list ") << kind_.list_path
                  << (absl::IsNotFound(s) ? " (API group absent)" : " (RBAC)") << "; not watching it\n";
        MarkFirstListDone();
        return;
      }
      if (!s.ok()) {
        if (stop.load()) return;
        // Retried until it succeeds, as client-go does (a 403 while RBAC
        // propagates heals itself). Until a required kind's first list is
        // complete the scheduler gets no ListEnd: as kube-scheduler waits in
        // WaitForCacheSync, it does not start on a partial view of the
        // cluster. client-go takes a 404 for an empty list; for a required
        // kind it means a wrong server or proxy, so it waits the same way.
        const absl::Duration wait = NextBackoff();
        ::podium::logging::Line(::podium::logging::Severity::kWarning)
            << "podium-k8s-adapter: " << kind_.kind << ": " << s.message() << "; listing again in " << wait << "\n";
        sleep_(wait);
        continue;
      }
      need_list = false;
    }
    absl::Status error;
    const WatchEnd end = Watch(&error);
    if (options_.metrics && !stop.load()) {
      options_.metrics->CountWatchRestart(kind_.kind, end == WatchEnd::kEnded  ? "timeout"
                                                      : end == WatchEnd::kGone ? "gone"
                                                                               : "error");
    }
    // Every relist waits its backoff first, as client-go's ListAndWatch
    // iterations do: a server that answers each watch with 410 is not
    // listed in a hot loop.
    switch (end) {
      case WatchEnd::kEnded:
        break;
      case WatchEnd::kGone:
        if (stop.load()) return;
        ::podium::logging::Line() << "podium-k8s-adapter: " << kind_.kind << ": resourceVersion " << resource_version_
                  << " is too old (410 Gone); relisting\n";
        need_list = true;
        sleep_(NextBackoff());
        break;
      case WatchEnd::kRelist:
        if (stop.load()) return;
        ::podium::logging::Line(::podium::logging::Severity::kWarning)
            << "podium-k8s-adapter: " << kind_.kind << ": " << error.message() << "; relisting\n";
        need_list = true;
        sleep_(NextBackoff());
        break;
      case WatchEnd::kError:
        if (stop.load()) return;
        ::podium::logging::Line(::podium::logging::Severity::kWarning) << "podium-k8s-adapter: " << error.message() << "; watching again from resourceVersion "
                  << resource_version_ << "\n";
        sleep_(NextBackoff());
        break;
    }
  }
}

}  // namespace podium::kube
