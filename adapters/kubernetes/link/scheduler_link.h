#pragma once

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "actions/action_dispatcher.h"
#include "reflector/reflector.h"
#include "common/sync/cluster_sync_client.h"

namespace podium::kube {

// Joins the reflectors and the action dispatcher to the scheduler's
// Cluster.Sync stream, as podium-sim does: once every kind has its first list,
// it opens the stream with ListBegin, those lists (nodes first), ListEnd; then
// it forwards changes, and hands the scheduler's actions to the dispatcher,
// sending each result back on the stream that asked. It keeps the scheduler's
// view (every object sent), so a new stream after the scheduler restarts
// starts with a full list. Lock order: mu_, then ClusterSyncClient's.
class SchedulerLink : public ReflectorSink {
 public:
  struct Options {
    std::vector<std::string> kinds;  // The kinds whose first list must arrive first, in list order.
    std::vector<std::string> scheduler_names;
    absl::Duration reconnect_delay = absl::Seconds(1);
  };
  SchedulerLink(Options options, std::shared_ptr<grpc::Channel> channel, ActionDispatcher& dispatcher);
  ~SchedulerLink() override;

  void OnInitialList(const ResourceKind& kind, std::vector<v1::ObjectEvent> events) override;
  void OnEvents(std::vector<v1::ObjectEvent> events) override;
  void OnBadObject(const ResourceKind& kind, const YAML::Node& object, const absl::Status& error) override;

  // Keeps a stream to the scheduler open (reopening it when the scheduler goes
  // away) until `stop` is notified; then closes it.
  void Run(absl::Notification& stop);

  uint64_t bad_objects() const;
  uint64_t streams_opened() const;

 private:
  std::string ViewKey(const v1::ObjectEvent& e) const;
  void Remember(const v1::ObjectEvent& e) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool AllListed() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Options options_;
  std::shared_ptr<grpc::Channel> channel_;
  ActionDispatcher& dispatcher_;
  mutable absl::Mutex mu_;
  std::set<std::string> listed_ ABSL_GUARDED_BY(mu_);
  // What the scheduler has (or will get in the next stream's list), by kind/ns/name.
  std::map<std::string, v1::ObjectEvent> view_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<adapter::ClusterSyncClient> client_ ABSL_GUARDED_BY(mu_);
  // Closed streams, kept until the end: late action results may still hold them.
  std::vector<std::shared_ptr<adapter::ClusterSyncClient>> retired_ ABSL_GUARDED_BY(mu_);
  uint64_t bad_objects_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t streams_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace podium::kube
