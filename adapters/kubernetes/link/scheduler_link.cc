#include "link/scheduler_link.h"

#include <iostream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace podium::kube {
namespace {

std::string Scalar(const YAML::Node& n, const char* a, const char* b) {
  try {
    if (!n.IsMap() || !n[a] || !n[a].IsMap() || !n[a][b] || !n[a][b].IsScalar()) return "";
    return n[a][b].Scalar();
  } catch (const YAML::Exception&) {
    return "";
  }
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
    : options_(std::move(options)), channel_(std::move(channel)), dispatcher_(dispatcher) {}

SchedulerLink::~SchedulerLink() {
  std::vector<std::shared_ptr<adapter::ClusterSyncClient>> all;
  {
    absl::MutexLock lock(&mu_);
    all.swap(retired_);
    if (client_) all.push_back(std::move(client_));
  }
  for (auto& c : all) c->Close(absl::ZeroDuration()).IgnoreError();
}

std::string SchedulerLink::ViewKey(const v1::ObjectEvent& e) const {
  const v1::ObjectMeta* m = Meta(e);
  return absl::StrCat(static_cast<int>(e.object_case()), "/", m ? m->namespace_() : "", "/", m ? m->name() : "");
}

void SchedulerLink::Remember(const v1::ObjectEvent& e) {
  if (e.type() == v1::ObjectEvent::DELETE) {
    view_.erase(ViewKey(e));
  } else {
    view_[ViewKey(e)] = e;
  }
}

bool SchedulerLink::AllListed() const { return listed_.size() >= options_.kinds.size(); }

void SchedulerLink::OnInitialList(const ResourceKind& kind, std::vector<v1::ObjectEvent> events) {
  absl::MutexLock lock(&mu_);
  listed_.insert(kind.kind);
  for (const auto& e : events) Remember(e);
  // Before the stream opens these wait in the view; after it (a kind that
  // came back), they are news.
  if (client_ && !client_->ended() && !events.empty()) client_->SendEvents(std::move(events));
}

void SchedulerLink::OnEvents(std::vector<v1::ObjectEvent> events) {
  absl::MutexLock lock(&mu_);
  for (const auto& e : events) Remember(e);
  if (client_ && !client_->ended()) client_->SendEvents(std::move(events));
}

void SchedulerLink::OnBadObject(const ResourceKind& kind, const YAML::Node& object, const absl::Status& error) {
  const std::string key = ObjectKey(object);
  std::cerr << "podium-k8s-adapter: " << kind.kind << " " << (key.empty() ? "(no name)" : key)
            << ": cannot translate: " << error.message() << "; skipped\n";
  std::vector<std::string> ours;
  {
    absl::MutexLock lock(&mu_);
    ++bad_objects_;
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
      auto ready = [this, &stop]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return AllListed() || stop.HasBeenNotified(); };
      while (!mu_.AwaitWithTimeout(absl::Condition(&ready), absl::Milliseconds(200))) {
      }
      if (stop.HasBeenNotified()) break;
      // The list in kind order (nodes before the pods on them).
      std::vector<v1::ObjectEvent> list;
      list.reserve(view_.size());
      for (int c : {static_cast<int>(v1::ObjectEvent::kNamespaceObject), static_cast<int>(v1::ObjectEvent::kNode), static_cast<int>(v1::ObjectEvent::kPriorityClass),
                    static_cast<int>(v1::ObjectEvent::kPdb), static_cast<int>(v1::ObjectEvent::kPodGroup),
                    static_cast<int>(v1::ObjectEvent::kPod)}) {
        for (const auto& [key, e] : view_) {
          if (static_cast<int>(e.object_case()) == c) list.push_back(e);
        }
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
      std::cerr << "podium-k8s-adapter: opening Cluster.Sync with " << list.size() << " objects (stream " << streams_
                << ")\n";
      client->Start(std::move(list));
      client_ = client;
    }
    while (!stop.HasBeenNotified() && !client->ended()) stop.WaitForNotificationWithTimeout(absl::Milliseconds(200));
    if (stop.HasBeenNotified()) break;
    std::cerr << "podium-k8s-adapter: the Cluster.Sync stream ended (" << client->status() << "); reopening in "
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

uint64_t SchedulerLink::bad_objects() const {
  absl::MutexLock lock(&mu_);
  return bad_objects_;
}

uint64_t SchedulerLink::streams_opened() const {
  absl::MutexLock lock(&mu_);
  return streams_;
}

}  // namespace podium::kube
