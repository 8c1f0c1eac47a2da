#include "actions/event_series.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace podium::kube {
namespace {

std::string Ref(const v1::ObjectRef& r) {
  return absl::StrCat(r.kind(), "\x1f", r.uid(), "\x1f", r.namespace_(), "/", r.name());
}

}  // namespace

bool EventSeriesBook::TakeToken(const std::string& object, absl::Time now) {
  auto [it, fresh] = buckets_.try_emplace(object);
  Bucket& b = it->second;
  if (fresh) {
    b.tokens = options_.per_object_burst;
    b.updated = now;
  } else if (now > b.updated && options_.per_object_refill > absl::ZeroDuration()) {
    b.tokens = std::min<double>(options_.per_object_burst,
                                b.tokens + absl::FDivDuration(now - b.updated, options_.per_object_refill));
    b.updated = now;
  }
  if (b.tokens < 1) return false;
  b.tokens -= 1;
  return true;
}

void EventSeriesBook::SetIdle(const std::string& key, Entry& e) {
  if (!e.in_flight) return;
  e.in_flight = false;
  idle_.insert({e.last_observed, key});
}

void EventSeriesBook::SetBusy(const std::string& key, Entry& e) {
  if (e.in_flight) return;
  idle_.erase({e.last_observed, key});
  e.in_flight = true;
}

EventSeriesBook::Outcome EventSeriesBook::Observe(const v1::RecordEvent& event, absl::Time now,
                                                  const std::string& new_name) {
  // client-go's tools/events key: the note is not part of it (a series keeps
  // its first note).
  // (RecordEvent has no `related`; one reportingController per adapter.)
  std::string key = absl::StrCat(event.action(), "\x1e", event.reason(), "\x1e", Ref(event.regarding()));
  if (!TakeToken(Ref(event.regarding()), now)) return {Decision::kRateLimited, std::move(key), ""};
  auto it = series_.find(key);
  if (it != series_.end() && (it->second.in_flight || now - it->second.last_observed < options_.finish_after)) {
    Entry& e = it->second;
    ++e.count;
    if (e.in_flight) {
      e.last_observed = std::max(e.last_observed, now);
      e.dirty = true;
      return {Decision::kCoalesced, std::move(key), e.name};
    }
    SetBusy(key, e);  // Before last_observed changes: idle_ is keyed by it.
    e.last_observed = std::max(e.last_observed, now);
    e.dirty = false;
    return {Decision::kPatch, std::move(key), e.name};
  }
  if (it != series_.end()) {
    SetBusy(key, it->second);  // An ended series starts again under a new name.
  } else if (series_.size() >= options_.max_series) {
    // Forget the series seen longest ago (not one in flight).
    if (!idle_.empty()) {
      series_.erase(idle_.begin()->second);
      idle_.erase(idle_.begin());
    }
    if (buckets_.size() > 4 * options_.max_series) buckets_.clear();
  }
  series_[key] = Entry{.name = new_name, .count = 1, .last_observed = now, .in_flight = true};
  return {Decision::kPost, std::move(key), new_name};
}

bool EventSeriesBook::Finished(const std::string& key, bool ok) {
  auto it = series_.find(key);
  if (it == series_.end()) return false;
  if (!ok) {
    // The API does not have it (or not its series): the next occurrence
    // starts a new event.
    if (!it->second.in_flight) idle_.erase({it->second.last_observed, key});
    series_.erase(it);
    return false;
  }
  Entry& e = it->second;
  if (e.dirty) {
    e.dirty = false;
    return true;  // Still in flight: the caller PATCHes now.
  }
  SetIdle(key, e);
  return false;
}

void EventSeriesBook::PatchNotIssued(const std::string& key) {
  auto it = series_.find(key);
  if (it == series_.end()) return;
  SetIdle(key, it->second);
  it->second.dirty = true;  // The next occurrence's PATCH carries the count.
}

bool EventSeriesBook::Series(const std::string& key, int32_t* count, absl::Time* last_observed) const {
  auto it = series_.find(key);
  if (it == series_.end()) return false;
  *count = it->second.count;
  *last_observed = it->second.last_observed;
  return true;
}

bool EventSeriesBook::TakeForPatch(const std::string& key, int32_t* count, absl::Time* last_observed) {
  if (!Series(key, count, last_observed)) return false;
  series_.find(key)->second.dirty = false;
  return true;
}

}  // namespace podium::kube
