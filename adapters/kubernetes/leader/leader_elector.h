#pragma once

#include <atomic>
#include <functional>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "client/transport.h"

namespace podium::kube {

// client-go's leader election on a coordination.k8s.io/v1 Lease, with
// kube-scheduler's defaults (leaseDuration 15 s, renewDeadline 10 s,
// retryPeriod 2 s). Writes use the Lease's resourceVersion (optimistic
// concurrency: a 409 means someone else wrote first).
//
// A leader that cannot renew stops leading renew_deadline after its last
// renewal, which is before its lease can expire for the others (who wait
// lease_duration from when they saw it last change): IsLeader() reads the
// clock, so it turns false on time even if the renewing thread is stuck.
class LeaderElector {
 public:
  struct Options {
    std::string lease_namespace = "kube-system";
    std::string lease_name = "podium";
    std::string identity;
    absl::Duration lease_duration = absl::Seconds(15);
    absl::Duration renew_deadline = absl::Seconds(10);
    absl::Duration retry_period = absl::Seconds(2);
  };
  using Clock = std::function<absl::Time()>;

  LeaderElector(Transport& transport, Options options, Clock clock = absl::Now);

  // One attempt to acquire or renew the lease; true when we hold it now.
  // Errors (the API unreachable) count as "not renewed".
  bool TryAcquireOrRenew();

  // Leading, and the last renewal is younger than renew_deadline.
  bool IsLeader() const;

  // Campaigns until leading (or `stop`), then renews every retry_period until
  // the lease is lost (or `stop`). Returns whether it ever led. `on_started`
  // runs once leading; the caller learns of the loss by the return.
  bool Run(const std::atomic<bool>& stop, const std::function<void()>& on_started,
           const std::function<void(absl::Duration)>& sleep);

  const Options& options() const { return options_; }

 private:
  std::string LeasePath() const;
  std::string LeaseBody(const std::string& resource_version, int64_t transitions, const std::string& acquire_time,
                        absl::Time now) const;

  Transport& transport_;
  const Options options_;
  const Clock clock_;
  mutable absl::Mutex mu_;
  // The record as last seen, and when we saw it change (the others' clocks
  // are not trusted: expiry is measured on ours, from then plus the record's
  // leaseDurationSeconds, as client-go does).
  std::string observed_holder_ ABSL_GUARDED_BY(mu_);
  std::string observed_renew_ ABSL_GUARDED_BY(mu_);
  absl::Time observed_at_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  bool leading_ ABSL_GUARDED_BY(mu_) = false;
  absl::Time last_renewal_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
};

}  // namespace podium::kube
