// What NodeResourcesFit's and NodeResourcesBalancedAllocation's scores share
// (kube-scheduler's resourceAllocationScorer): the resources scored, the pod's
// request for each, and the node's allocatable and requested amounts.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/status/statusor.h"
#include "boost/json/object.hpp"
#include "podium/sdk/framework.h"

namespace podium::plugins {

enum class ResourceKind { kCpu, kMemory, kEphemeralStorage, kPods, kScalar };

struct ScoredResource {
  std::string name;
  ResourceKind kind = ResourceKind::kScalar;
  int64_t weight = 1;
};

ScoredResource MakeScoredResource(std::string name, int64_t weight);
std::vector<ScoredResource> DefaultScoredResources();  // cpu:1, memory:1.

// Parses a [{name, weight}] list; weight 0 or absent means 1. `check_weight`
// validates the weight; it returns an error message, or "" when valid.
absl::StatusOr<std::vector<ScoredResource>> ReadScoredResources(
    const boost::json::value& v, std::string_view plugin, std::string_view path,
    std::string (*check_weight)(const ScoredResource&));

// Per scored resource, the pod's request: cpu and memory with kube-scheduler's
// non-zero defaults (so that pods requesting nothing still spread).
using PodRequestList = absl::InlinedVector<int64_t, 4>;
PodRequestList PodRequestsFor(const std::vector<ScoredResource>& resources,
                              const sdk::PodInfo& pod);

// The node's allocatable amount and requested amount including the pod, or
// (0, 0) when the resource is not scored on this node (an extended resource the
// pod does not request, or the node does not have).
std::pair<int64_t, int64_t> AllocatableAndRequested(const ScoredResource& resource,
                                                    const sdk::NodeInfo& node, int64_t pod_request);

}  // namespace podium::plugins
