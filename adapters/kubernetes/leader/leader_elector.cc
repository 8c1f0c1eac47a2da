#include "leader/leader_elector.h"

#include <cstdint>
#include <iostream>

#include <boost/json.hpp>

#include "absl/strings/str_cat.h"
#include "actions/api_requests.h"
#include "logging/logger.h"

namespace podium::kube {
namespace {

namespace json = boost::json;

std::string StringAt(const json::value& v, std::initializer_list<const char*> path) {
  const json::value* cur = &v;
  for (const char* key : path) {
    if (!cur->is_object()) return "";
    auto it = cur->as_object().find(key);
    if (it == cur->as_object().end()) return "";
    cur = &it->value();
  }
  if (cur->is_string()) return std::string(cur->as_string());
  if (cur->is_int64()) return std::to_string(cur->as_int64());
  return "";
}

// spec.FIELD as an int32 (the Lease's type); `missing` when absent or null.
absl::StatusOr<int64_t> Int32At(const json::value& lease, const char* field, int64_t missing) {
  const json::value* spec = lease.is_object() ? lease.as_object().if_contains("spec") : nullptr;
  const json::value* v = spec != nullptr && spec->is_object() ? spec->as_object().if_contains(field) : nullptr;
  if (v == nullptr || v->is_null()) return missing;
  if (v->is_int64() && v->as_int64() >= INT32_MIN && v->as_int64() <= INT32_MAX) return v->as_int64();
  if (v->is_uint64() && v->as_uint64() <= INT32_MAX) return static_cast<int64_t>(v->as_uint64());
  return absl::InvalidArgumentError(
      absl::StrCat("spec.", field, ": ", json::serialize(*v).substr(0, 40), " is not an int32"));
}

}  // namespace

LeaderElector::LeaderElector(Transport& transport, Options options, Clock clock)
    : transport_(transport), options_(std::move(options)), clock_(std::move(clock)) {}

std::string LeaderElector::LeasePath() const {
  return absl::StrCat("/apis/coordination.k8s.io/v1/namespaces/", options_.lease_namespace, "/leases");
}

std::string LeaderElector::LeaseBody(const std::string& resource_version, int64_t transitions,
                                     const std::string& acquire_time, absl::Time now) const {
  json::object meta{{"name", options_.lease_name}, {"namespace", options_.lease_namespace}};
  if (!resource_version.empty()) meta["resourceVersion"] = resource_version;
  json::object spec{{"holderIdentity", options_.identity},
                    {"leaseDurationSeconds", absl::ToInt64Seconds(options_.lease_duration)},
                    {"acquireTime", acquire_time.empty() ? MicroTime(now) : acquire_time},
                    {"renewTime", MicroTime(now)},
                    {"leaseTransitions", transitions}};
  json::object lease{{"apiVersion", "coordination.k8s.io/v1"}, {"kind", "Lease"}, {"metadata", std::move(meta)},
                     {"spec", std::move(spec)}};
  return json::serialize(lease);
}

bool LeaderElector::TryAcquireOrRenew() {
  const absl::Time now = clock_();
  ApiAnswer got = transport_.Do({.method = "GET", .target = absl::StrCat(LeasePath(), "/", options_.lease_name)});
  ApiAnswer wrote;
  if (got.status == 404) {
    wrote = transport_.Do({.method = "POST", .target = LeasePath(), .body = LeaseBody("", 0, "", now)});
  } else if (got.status == 200) {
    boost::system::error_code ec;
    json::value lease = json::parse(got.body, ec);
    // A Lease we cannot read is a failed attempt, never a crash: a leader
    // stops at its renew deadline, a standby keeps waiting.
    auto unreadable = [&](absl::string_view why) {
      ::podium::logging::Line(::podium::logging::Severity::kError)
          << "podium-k8s-adapter: Lease " << options_.lease_namespace << "/" << options_.lease_name << ": " << why
          << "; not acquired or renewed\n";
      return false;
    };
    if (ec) return unreadable(absl::StrCat("not JSON: ", ec.message()));
    const std::string holder = StringAt(lease, {"spec", "holderIdentity"});
    const std::string renew = StringAt(lease, {"spec", "renewTime"});
    auto transitions = Int32At(lease, "leaseTransitions", 0);
    if (!transitions.ok()) return unreadable(transitions.status().message());
    // The record's own duration decides when it expires (client-go's
    // isLeaseValid); a record without one has expired.
    auto duration_seconds = Int32At(lease, "leaseDurationSeconds", 0);
    if (!duration_seconds.ok()) return unreadable(duration_seconds.status().message());
    bool expired;
    {
      absl::MutexLock lock(&mu_);
      if (holder != observed_holder_ || renew != observed_renew_) {
        observed_holder_ = holder;
        observed_renew_ = renew;
        observed_at_ = now;
      }
      expired = observed_at_ + absl::Seconds(*duration_seconds) <= now;
    }
    const bool ours = holder == options_.identity;
    if (!holder.empty() && !ours && !expired) {
      absl::MutexLock lock(&mu_);
      leading_ = false;
      return false;
    }
    std::string acquire = ours ? StringAt(lease, {"spec", "acquireTime"}) : "";
    if (!ours) ++*transitions;
    wrote = transport_.Do({.method = "PUT",
                           .target = absl::StrCat(LeasePath(), "/", options_.lease_name),
                           .body = LeaseBody(StringAt(lease, {"metadata", "resourceVersion"}), *transitions, acquire, now)});
  } else {
    return false;  // The API is unreachable or refuses: not renewed.
  }
  if (wrote.status != 200 && wrote.status != 201) return false;  // 409: someone else wrote first.
  absl::MutexLock lock(&mu_);
  leading_ = true;
  last_renewal_ = now;
  observed_holder_ = options_.identity;
  observed_at_ = now;
  return true;
}

bool LeaderElector::IsLeader() const {
  absl::MutexLock lock(&mu_);
  return leading_ && clock_() - last_renewal_ < options_.renew_deadline;
}

bool LeaderElector::Run(const std::atomic<bool>& stop, const std::function<void()>& on_started,
                        const std::function<void(absl::Duration)>& sleep) {
  while (!stop.load() && !TryAcquireOrRenew()) sleep(options_.retry_period);
  if (stop.load()) return false;
  ::podium::logging::Line() << "podium-k8s-adapter: leading (lease " << options_.lease_namespace << "/" << options_.lease_name
            << ", identity " << options_.identity << ")\n";
  on_started();
  while (!stop.load()) {
    sleep(options_.retry_period);
    if (stop.load()) break;
    TryAcquireOrRenew();
    if (!IsLeader()) {
      ::podium::logging::Line(::podium::logging::Severity::kWarning) << "podium-k8s-adapter: lost the lease " << options_.lease_namespace << "/" << options_.lease_name
                << " (not renewed within " << options_.renew_deadline << ")\n";
      absl::MutexLock lock(&mu_);
      leading_ = false;
      break;
    }
  }
  return true;
}

}  // namespace podium::kube
