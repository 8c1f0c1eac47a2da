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
// Cluster.Sync stream, as podium-sim does. It opens the stream at once with
// ListBegin and streams each list page as it arrives, in kind order (a kind's
// pages wait until every earlier kind is fully listed: nodes before the pods
// on them). ListEnd (the scheduler may schedule) goes once every kind's parts
// needed to schedule are sent (all assigned pods); pending pods that are
// still being listed follow as events. Then it forwards changes, and hands
// the scheduler's actions to the dispatcher, sending each result back on the
// stream that asked. It keeps the scheduler's view (every object sent), so a
// new stream after the scheduler restarts starts with a full list. Lock
// order: mu_, then ClusterSyncClient's.
class SchedulerLink : public ReflectorSink {
 public:
  struct Options {
    std::vector<ResourceKind> kinds;  // Every kind a reflector lists, in list order.
    std::vector<std::string> scheduler_names;
    absl::Duration reconnect_delay = absl::Seconds(1);
    AdapterMetrics* metrics = nullptr;  // Objects skipped.
    // False for a standby (leader election): its scheduler gets the list and
    // every change (a warm cache) but no ListEnd, so it schedules nothing,
    // until SetLeading().
    bool leading = true;
  };
  SchedulerLink(Options options, std::shared_ptr<grpc::Channel> channel, ActionDispatcher& dispatcher);
  ~SchedulerLink() override;

  void OnListPage(const ResourceKind& kind, std::vector<v1::ObjectEvent> events) override;
  void OnListPartDone(const ResourceKind& kind, size_t part) override;
  void OnEvents(const ResourceKind& kind, std::vector<v1::ObjectEvent> events) override;
  void OnBadObject(const ResourceKind& kind, const boost::json::value& object, const absl::Status& error) override;

  // Keeps a stream to the scheduler open (reopening it when the scheduler goes
  // away) until `stop` is notified; then closes it.
  void Run(absl::Notification& stop);

  // This replica now leads: its scheduler gets ListEnd (once the list needed
  // to schedule is sent) and may schedule. There is no way back: a leader
  // that loses its lease ends the process.
  void SetLeading();

  uint64_t bad_objects() const;
  uint64_t streams_opened() const;

 private:
  struct KindProgress {
    size_t parts_done = 0;
    size_t parts_needed = 0;  // Parts needed to schedule (the leading ones).
    size_t parts = 0;
    // What arrived while an earlier kind was still listing, in order.
    std::vector<v1::ObjectEvent> held;
  };
  size_t KindIndex(const ResourceKind& kind) const;
  void Remember(size_t kind, const v1::ObjectEvent& e) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Every earlier kind is fully listed: this kind's objects may be sent.
  bool Forwardable(size_t kind) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool ReadyToSchedule() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Deliver(size_t kind, std::vector<v1::ObjectEvent> events) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Sends what waited for an earlier kind, and ListEnd when it is due.
  void Flush() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool StreamOpen() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return client_ && !client_->ended(); }

  const Options options_;
  std::shared_ptr<grpc::Channel> channel_;
  ActionDispatcher& dispatcher_;
  mutable absl::Mutex mu_;
  std::vector<KindProgress> progress_ ABSL_GUARDED_BY(mu_);  // By kind index.
  // What the scheduler has (or will get in the next stream's list), by kind
  // index and namespace/name.
  std::map<std::pair<size_t, std::string>, v1::ObjectEvent> view_ ABSL_GUARDED_BY(mu_);
  bool list_ended_ ABSL_GUARDED_BY(mu_) = false;  // ListEnd was sent on client_.
  bool leading_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<adapter::ClusterSyncClient> client_ ABSL_GUARDED_BY(mu_);
  // Closed streams, kept until the end: late action results may still hold them.
  std::vector<std::shared_ptr<adapter::ClusterSyncClient>> retired_ ABSL_GUARDED_BY(mu_);
  uint64_t bad_objects_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t streams_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace podium::kube
