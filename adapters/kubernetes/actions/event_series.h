#pragma once

// Repeated events as kube-scheduler's recorder sends them: client-go's
// tools/events keys an event by (action, reason, reportingController,
// regarding, related); the first occurrence is POSTed, a repeat while the
// series is live becomes an events.k8s.io/v1 series (series.count,
// series.lastObservedTime) PATCHed onto that event; a series not seen for
// `finish_after` (client-go's finishTime, 6 minutes) ends, and the next
// occurrence is a new event. Occurrences are rate limited per regarding
// object with client-go's spam filter defaults (a token bucket: burst 25,
// one token every 5 minutes). Not thread-safe: the ActionDispatcher holds its
// lock around every call.

#include <cstdint>
#include <map>
#include <set>
#include <string>

#include "absl/time/time.h"
#include "podium/v1/cluster.pb.h"

namespace podium::kube {

class EventSeriesBook {
 public:
  struct Options {
    absl::Duration finish_after = absl::Minutes(6);
    int per_object_burst = 25;
    absl::Duration per_object_refill = absl::Minutes(5);  // One token each.
    size_t max_series = 4096;  // The oldest are forgotten beyond (client-go's LRU size).
  };

  enum class Decision {
    kPost,         // A new event: POST it under `name`.
    kPatch,        // A repeat: PATCH the series of `name` (nothing else in flight for it).
    kCoalesced,    // A repeat counted into a POST or PATCH already in flight.
    kRateLimited,  // The object's token bucket is empty: not sent.
  };
  struct Outcome {
    Decision decision;
    std::string key;   // The series key (for Finished and Series).
    std::string name;  // The event's metadata.name.
  };

  explicit EventSeriesBook(Options options) : options_(options) {}

  // One occurrence of `event` at `now`. `new_name` names it if it starts a
  // new event.
  Outcome Observe(const v1::RecordEvent& event, absl::Time now, const std::string& new_name);

  // The POST or PATCH for `key` ended (`ok`: the API took it). True when
  // repeats came meanwhile and a PATCH should follow now (the caller issues
  // it, or calls PatchNotIssued when it cannot).
  bool Finished(const std::string& key, bool ok);
  void PatchNotIssued(const std::string& key);

  // The series as the next PATCH carries it; false when `key` is unknown.
  bool Series(const std::string& key, int32_t* count, absl::Time* last_observed) const;
  // The same, for the PATCH about to be sent: it carries every repeat seen
  // so far, so those no longer call for another PATCH when it ends.
  bool TakeForPatch(const std::string& key, int32_t* count, absl::Time* last_observed);

  size_t size() const { return series_.size(); }

 private:
  struct Entry {
    std::string name;
    int32_t count = 1;
    absl::Time last_observed;
    bool in_flight = false;  // A POST or PATCH is queued or running.
    bool dirty = false;      // Occurrences the API has not heard of yet.
  };
  struct Bucket {
    double tokens = 0;
    absl::Time updated;
  };
  bool TakeToken(const std::string& object, absl::Time now);
  // Keeps idle_ in step with an entry's in_flight and last_observed.
  void SetIdle(const std::string& key, Entry& e);
  void SetBusy(const std::string& key, Entry& e);

  const Options options_;
  std::map<std::string, Entry> series_;
  // The series with nothing in flight, oldest last_observed first (then by
  // key): the one to forget beyond max_series, without a scan per new event.
  std::set<std::pair<absl::Time, std::string>> idle_;
  std::map<std::string, Bucket> buckets_;
};

}  // namespace podium::kube
