#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client/retry.h"
#include "client/transport.h"
#include "metrics/adapter_metrics.h"
#include "podium/v1/cluster.pb.h"
#include "reflector/resource_kind.h"

namespace podium::kube {

// Where a reflector's output goes (the link to the scheduler). Called from the
// reflector's thread.
class ReflectorSink {
 public:
  virtual ~ReflectorSink() = default;
  // One page of the reflector's first list, as UPSERTs, as soon as it arrives
  // (a big cluster's list is streamed, not gathered first).
  virtual void OnListPage(const ResourceKind& kind, std::vector<v1::ObjectEvent> events) = 0;
  // Part `part` of the first list (kind.first_list_parts) is complete. Called
  // for every part, in order; also when the resource does not exist on this
  // cluster (then with no page).
  virtual void OnListPartDone(const ResourceKind& kind, size_t part) = 0;
  // What changed since, in order: watch events, or the differences a relist
  // found (page by page; what vanished comes at the end of the relist).
  virtual void OnEvents(const ResourceKind& kind, std::vector<v1::ObjectEvent> events) = 0;
  // An object the translation refused; it is skipped (the stream goes on).
  virtual void OnBadObject(const ResourceKind& kind, const boost::json::value& object, const absl::Status& error) = 0;
};

// client-go's Reflector for one resource: list in pages, remember the
// resourceVersion, watch from it (with bookmarks), relist on 410 Gone and
// send only the differences, back off with jitter on errors and between
// relists. It keeps the last state of every object (the store), so a relist
// can tell what changed and what vanished, and a DELETE carries the object's
// last known state.
class Reflector {
 public:
  struct Options {
    int page_size = 500;
    // Each watch asks the server to end it after a random time in
    // [watch_timeout, 2 * watch_timeout), as client-go does.
    absl::Duration watch_timeout = absl::Minutes(5);
    // A watch that ends cleanly this soon without one event is an error.
    absl::Duration min_watch_duration = absl::Seconds(1);
    // client-go's reflector backoff manager: 0.8 s doubling to 30 s, jitter
    // 1.0, back to the start when the last backoff began over 2 minutes ago.
    Backoff::Options backoff{.initial = absl::Milliseconds(800), .cap = absl::Seconds(30), .jitter = 1.0};
    absl::Duration backoff_reset = absl::Minutes(2);
    AdapterMetrics* metrics = nullptr;  // Watch restarts, relists.
  };
  using Clock = std::function<absl::Time()>;
  using Sleep = std::function<void(absl::Duration)>;

  Reflector(ResourceKind kind, Transport& transport, ReflectorSink& sink, Options options, Clock clock = absl::Now,
            Sleep sleep = absl::SleepFor, Backoff::Random random = DefaultRandom());

  // List, then watch, until `stop`. Every list error is retried with backoff,
  // except that an optional kind (kind.optional) whose first list is refused
  // (404 or 403) returns at once, after an empty initial list.
  void Run(const std::atomic<bool>& stop);

  // The steps of Run, for tests.
  // The first list (its parts, each page handed to the sink as it arrives),
  // or a relist that hands the sink the differences with the store. Resumes
  // a first list at the part that failed. NotFound: the resource does not
  // exist; PermissionDenied: listing it is forbidden; DataLoss: the answer is
  // not a list of this kind (nothing is deleted for it).
  absl::Status ListAndSync();
  // One watch from resource_version(). kEnded when the server ended it
  // normally or it was quiet for the transport's idle timeout (watch again);
  // kGone: relist; kRelist: relist after a backoff, as client-go does after
  // an ERROR event, an event that cannot be parsed or one over the
  // transport's size limit (watching again from the same resourceVersion
  // could replay it); kError:
  // another error (watch again after a backoff).
  enum class WatchEnd { kEnded, kGone, kRelist, kError };
  WatchEnd Watch(absl::Status* error);

  const std::string& resource_version() const { return resource_version_; }
  size_t store_size() const { return store_.size(); }
  bool synced() const { return synced_; }

 private:
  struct Stored {
    std::string uid;
    std::string resource_version;
    bool finished = false;
    // The translated objects (type UPSERT): one, or a Workload's groups.
    std::vector<v1::ObjectEvent> last;
  };
  // The API object as podium.v1 objects (kind_.decode or kind_.decode_many).
  absl::StatusOr<std::vector<v1::ObjectEvent>> Decode(const boost::json::value& object) const;
  // Applies one object's new state to the store and appends what the
  // scheduler must hear to `out`.
  void Upsert(const std::string& key, const std::string& uid, const std::string& rv,
              std::vector<v1::ObjectEvent> objects, std::vector<v1::ObjectEvent>* out);
  void Remove(const std::string& key, std::vector<v1::ObjectEvent>* out);
  std::string WatchTarget();
  // One list (every page) with `field_selector`; hands each page's items to
  // `on_page`, calls `on_restart` when an expired continue token restarts it.
  // Returns the list's resourceVersion.
  struct Listed {
    std::string key, uid, rv;
    const boost::json::value* raw;  // In the page's parsed body.
  };
  absl::StatusOr<std::string> ListPages(const std::string& field_selector,
                                        const std::function<void(std::vector<Listed>&)>& on_page,
                                        const std::function<void()>& on_restart);
  // Applies listed objects to the store; what the scheduler must hear goes to `out`.
  void ApplyListed(std::vector<Listed>& items, std::set<std::string>* seen, std::vector<v1::ObjectEvent>* out);
  absl::Status FirstList();
  absl::Status Relist();
  void MarkFirstListDone();
  // Deletes what the store has and `listed` does not (client-go's Replace).
  void RemoveUnlisted(const std::set<std::string>& listed, std::vector<v1::ObjectEvent>* out);
  // client-go's ExponentialBackoffManager: the backoff starts again when the
  // previous one began more than options_.backoff_reset ago.
  absl::Duration NextBackoff();

  const ResourceKind kind_;
  Transport& transport_;
  ReflectorSink& sink_;
  const Options options_;
  const Clock clock_;
  const Sleep sleep_;
  const Backoff::Random random_;
  Backoff backoff_;
  std::map<std::string, Stored> store_;  // By namespace/name.
  std::string resource_version_;
  size_t first_list_parts_done_ = 0;
  // Keys the completed parts of the first list listed. Kept across failed
  // attempts: what an attempt sent and a later complete one did not list is
  // deleted.
  std::set<std::string> first_list_keys_;
  bool synced_ = false;  // The first list is complete.
  absl::Time last_backoff_ = absl::InfinitePast();
};

// "namespace/name" (or "name") of an API object; empty when it has no name.
std::string ObjectKey(const boost::json::value& object);

}  // namespace podium::kube
