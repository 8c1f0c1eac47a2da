#include "link/scheduler_link.h"

#include <algorithm>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "logging/logger.h"
#include "reflector/api_json.h"

namespace podium::kube {
namespace {

// n[a][b]'s text when it is a scalar, else "".
std::string Scalar(const boost::json::value& n, const char* a, const char* b) {
  return ScalarText(Member(Member(&n, a), b));
}

const v1::ObjectMeta* Meta(const v1::ObjectEvent& e) {
  switch (e.object_case()) {
    case v1::ObjectEvent::kNode: return &e.node().meta();
    case v1::ObjectEvent::kPod: return &e.pod().meta();
    case v1::ObjectEvent::kPdb: return &e.pdb().meta();
    case v1::ObjectEvent::kPodGroup: return &e.pod_group().meta();
    case v1::ObjectEvent::kPriorityClass: return &e.priority_class().meta();
    case v1::ObjectEvent::kNamespaceObject: return &e.namespace_object().meta();
    default: return nullptr;
  }
}

}  // namespace

SchedulerLink::SchedulerLink(Options options, std::shared_ptr<grpc::Channel> channel, ActionDispatcher& dispatcher)
    : options_(std::move(options)), channel_(std::move(channel)), dispatcher_(dispatcher), leading_(options_.leading) {
  for (const ResourceKind& k : options_.kinds) {
    KindProgress p;
    p.parts = k.first_list_parts.size();
    while (p.parts_needed < p.parts && k.first_list_parts[p.parts_needed].needed_to_schedule) ++p.parts_needed;
    progress_.push_back(std::move(p));
  }
}

SchedulerLink::~SchedulerLink() {
  std::vector<std::shared_ptr<adapter::ClusterSyncClient>> all;
  {
    absl::MutexLock lock(&mu_);
    all.swap(retired_);
    if (client_) all.push_back(std::move(client_));
  }
  for (auto& c : all) c->Close(absl::ZeroDuration()).IgnoreError();
}

size_t SchedulerLink::KindIndex(const ResourceKind& kind) const {
  for (size_t i = 0; i < options_.kinds.size(); ++i) {
    if (options_.kinds[i].kind == kind.kind) return i;
  }
  return options_.kinds.size() - 1;  // Not configured: after every other kind.
}

void SchedulerLink::Remember(size_t kind, const v1::ObjectEvent& e) {
  const v1::ObjectMeta* m = Meta(e);
  std::pair<size_t, std::string> key{kind, m ? absl::StrCat(m->namespace_(), "/", m->name()) : ""};
  if (e.type() == v1::ObjectEvent::DELETE) {
    view_.erase(key);
  } else {
    view_[std::move(key)] = e;
  }
}

bool SchedulerLink::Forwardable(size_t kind) const {
  for (size_t j = 0; j < kind && j < progress_.size(); ++j) {
    if (progress_[j].parts_done < progress_[j].parts) return false;
  }
  return true;
}

bool SchedulerLink::ReadyToSchedule() const {
  if (!leading_) return false;  // A standby: a warm cache, nothing scheduled.
  for (size_t i = 0; i < progress_.size(); ++i) {
    if (progress_[i].parts_done < progress_[i].parts_needed || !Forwardable(i)) return false;
  }
  return true;
}

void SchedulerLink::Deliver(size_t kind, std::vector<v1::ObjectEvent> events) {
  for (const auto& e : events) Remember(kind, e);
  if (kind < progress_.size() && !Forwardable(kind)) {
    auto& held = progress_[kind].held;
    held.insert(held.end(), std::make_move_iterator(events.begin()), std::make_move_iterator(events.end()));
    return;
  }
  if (StreamOpen()) client_->SendEvents(std::move(events));
}

void SchedulerLink::Flush() {
  for (size_t i = 0; i < progress_.size() && Forwardable(i); ++i) {
    auto held = std::move(progress_[i].held);
    progress_[i].held.clear();
    // Without a stream they are in the view: the next stream's list carries them.
    if (!held.empty() && StreamOpen()) client_->SendEvents(std::move(held));
  }
  if (StreamOpen() && !list_ended_ && ReadyToSchedule()) {
    client_->EndList();
    list_ended_ = true;
    ::podium::logging::Line() << "podium-k8s-adapter: list sent (" << view_.size() << " objects so far); the scheduler may schedule\n";
  }
}

void SchedulerLink::OnListPage(const ResourceKind& kind, std::vector<v1::ObjectEvent> events) {
  absl::MutexLock lock(&mu_);
  Deliver(KindIndex(kind), std::move(events));
}

void SchedulerLink::OnListPartDone(const ResourceKind& kind, size_t part) {
  absl::MutexLock lock(&mu_);
  const size_t i = KindIndex(kind);
  if (i < progress_.size()) progress_[i].parts_done = std::max(progress_[i].parts_done, part + 1);
  Flush();
}

void SchedulerLink::OnEvents(const ResourceKind& kind, std::vector<v1::ObjectEvent> events) {
  absl::MutexLock lock(&mu_);
  Deliver(KindIndex(kind), std::move(events));
}

void SchedulerLink::OnBadObject(const ResourceKind& kind, const boost::json::value& object, const absl::Status& error) {
  const std::string key = ObjectKey(object);
  ::podium::logging::Line(::podium::logging::Severity::kWarning) << "podium-k8s-adapter: " << kind.kind << " " << (key.empty() ? "(no name)" : key)
            << ": cannot translate: " << error.message() << "; skipped\n";
  std::vector<std::string> ours;
  {
    absl::MutexLock lock(&mu_);
    ++bad_objects_;
    if (options_.metrics) options_.metrics->CountSkippedObject(kind.kind);
    if (client_) {
      if (auto hello = client_->hello()) ours.assign(hello->scheduler_names().begin(), hello->scheduler_names().end());
    }
    if (!options_.scheduler_names.empty()) ours = options_.scheduler_names;
  }
  if (kind.kind != "Pod" || key.empty() || !Scalar(object, "spec", "nodeName").empty()) return;
  std::string scheduler = Scalar(object, "spec", "schedulerName");
  if (scheduler.empty()) scheduler = "default-scheduler";
  if (!ours.empty() && std::find(ours.begin(), ours.end(), scheduler) == ours.end()) return;
  // Tell the pod's owner why it is not scheduled.
  v1::Action action;
  auto* e = action.mutable_record_event();
  auto* r = e->mutable_regarding();
  r->set_kind("Pod");
  r->set_uid(Scalar(object, "metadata", "uid"));
  r->set_namespace_(Scalar(object, "metadata", "namespace"));
  r->set_name(Scalar(object, "metadata", "name"));
  e->set_type("Warning");
  e->set_reason("FailedScheduling");
  e->set_action("Scheduling");
  e->set_note(absl::StrCat("podium cannot read this pod: ", error.message()));
  dispatcher_.Submit(std::move(action), [](v1::ActionResult) {});
}

void SchedulerLink::Run(absl::Notification& stop) {
  for (;;) {
    std::shared_ptr<adapter::ClusterSyncClient> client;
    {
      absl::MutexLock lock(&mu_);
      if (stop.HasBeenNotified()) break;
      // What the scheduler may have now, in kind order (nodes before the pods
      // on them); the rest follows page by page.
      std::vector<v1::ObjectEvent> list;
      list.reserve(view_.size());
      for (const auto& [key, e] : view_) {
        if (Forwardable(key.first)) list.push_back(e);
      }
      // The action handler sends each result back on this stream only.
      auto self = std::make_shared<std::weak_ptr<adapter::ClusterSyncClient>>();
      auto on_action = [this, self](v1::Action&& action) {
        std::weak_ptr<adapter::ClusterSyncClient> target = *self;
        dispatcher_.Submit(std::move(action), [target](v1::ActionResult result) {
          if (auto c = target.lock()) c->SendResult(std::move(result));
        });
      };
      client = std::make_shared<adapter::ClusterSyncClient>(
          channel_,
          adapter::ClusterSyncClient::Options{.adapter_name = "podium-k8s-adapter", .scheduler_names = options_.scheduler_names},
          on_action);
      *self = client;
      retired_.push_back(client);
      ++streams_;
      list_ended_ = ReadyToSchedule();
      ::podium::logging::Line() << "podium-k8s-adapter: opening Cluster.Sync with " << list.size() << " objects (stream " << streams_
                << (list_ended_ ? ")\n" : "; the rest of the list follows as it arrives)\n");
      client->Start(std::move(list), list_ended_);
      client_ = client;
      Flush();  // Nothing is held for a forwardable kind; sends ListEnd if due.
    }
    while (!stop.HasBeenNotified() && !client->ended()) stop.WaitForNotificationWithTimeout(absl::Milliseconds(200));
    if (stop.HasBeenNotified()) break;
    ::podium::logging::Line(::podium::logging::Severity::kWarning) << "podium-k8s-adapter: the Cluster.Sync stream ended (" << client->status() << "); reopening in "
              << options_.reconnect_delay << "\n";
    {
      absl::MutexLock lock(&mu_);
      client_.reset();
    }
    stop.WaitForNotificationWithTimeout(options_.reconnect_delay);
  }
  std::shared_ptr<adapter::ClusterSyncClient> last;
  {
    absl::MutexLock lock(&mu_);
    last = client_;
  }
  if (last) last->Close(absl::Seconds(2)).IgnoreError();
}

void SchedulerLink::SetLeading() {
  absl::MutexLock lock(&mu_);
  leading_ = true;
  Flush();  // ListEnd, when the list is far enough.
}

uint64_t SchedulerLink::bad_objects() const {
  absl::MutexLock lock(&mu_);
  return bad_objects_;
}

uint64_t SchedulerLink::streams_opened() const {
  absl::MutexLock lock(&mu_);
  return streams_;
}

}  // namespace podium::kube
