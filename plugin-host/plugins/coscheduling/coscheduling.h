// Coscheduling: gangs, as scheduler-plugins' Coscheduling and Kubernetes'
// GangScheduling do, for pods that name a PodGroup (either API, one shape).
//
// - PreEnqueue holds a member until its group exists and at least minMember
//   pods name it (the scheduler sends both with the request).
// - Permit: a member waits until minMember members of its group are assumed or
//   bound, then the plugin allows every waiting member over the stream.
// - Unreserve (a member's wait timed out, was rejected, or its binding
//   failed): every other waiting member is rejected too, so the group gives
//   back its room and is requeued together.
// The scheduler places the members it finds queued together in one pass
// (services/scheduler/schedule_gang.cc); this plugin is what holds them at
// the door and lets them bind together.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "podium/sdk/extension_points.h"
#include "podium/sdk/framework.h"

namespace podium::plugins {

class Coscheduling : public sdk::PreEnqueuePlugin,
                     public sdk::ReservePlugin,
                     public sdk::PermitPlugin,
                     public sdk::EnqueueExtensions {
 public:
  static constexpr std::string_view kName = "Coscheduling";
  // scheduler-plugins' permitWaitingTimeSeconds default: the Permit wait of a
  // group without scheduleTimeoutSeconds.
  static constexpr int64_t kDefaultPermitWaitingTimeSeconds = 60;

  // Args: {permitWaitingTimeSeconds: N} (N >= 1).
  static absl::StatusOr<sdk::PluginPtr> New(const boost::json::object& args, sdk::Handle& handle);
  // What the plugin host registers: mirrors pod groups and assigned pods, and
  // is called only for pods that name a group.
  static sdk::PluginDefinition Definition();

  Coscheduling(sdk::Handle& handle, int64_t permit_waiting_seconds)
      : handle_(handle), permit_waiting_seconds_(permit_waiting_seconds) {}

  std::string_view Name() const override { return kName; }
  sdk::Status PreEnqueue(const sdk::PodInfo& pod) override;
  sdk::Status PreEnqueue(const sdk::PodInfo& pod, const Context& context) override;
  sdk::Status Reserve(sdk::CycleState& state, const sdk::PodInfo& pod, const std::string& node_name) override;
  void Unreserve(sdk::CycleState& state, const sdk::PodInfo& pod, const std::string& node_name) override;
  sdk::PermitResult Permit(sdk::CycleState& state, const sdk::PodInfo& pod, const std::string& node_name) override;
  std::vector<sdk::ClusterEventWithHint> EventsToRegister() const override;

  // Members of `group_key` ("ns/name") this plugin told to wait (tests).
  size_t NumWaiting(const std::string& group_key) const;

 private:
  // Members of the group on a node of the mirror (bound or assumed), other
  // than `pod`: O(members) through the mirror's group index.
  size_t AssignedMembers(const v1::Pod& pod) const;

  sdk::Handle& handle_;
  const int64_t permit_waiting_seconds_;
  mutable absl::Mutex mu_;
  // "ns/group" -> uids of members waiting at Permit.
  absl::flat_hash_map<std::string, absl::flat_hash_set<std::string>> waiting_ ABSL_GUARDED_BY(mu_);
};

}  // namespace podium::plugins
