#include "plugins/node_resources/resource_allocation.h"

#include "boost/json/array.hpp"
#include "plugins/helper/args.h"
#include "plugins/helper/str.h"

namespace podium::plugins {

ScoredResource MakeScoredResource(std::string name, int64_t weight) {
  ScoredResource r;
  if (name == "cpu") {
    r.kind = ResourceKind::kCpu;
  } else if (name == "memory") {
    r.kind = ResourceKind::kMemory;
  } else if (name == "ephemeral-storage") {
    r.kind = ResourceKind::kEphemeralStorage;
  } else if (name == "pods") {
    r.kind = ResourceKind::kPods;
  } else {
    r.kind = ResourceKind::kScalar;
  }
  r.name = std::move(name);
  r.weight = weight;
  return r;
}

std::vector<ScoredResource> DefaultScoredResources() {
  return {MakeScoredResource("cpu", 1), MakeScoredResource("memory", 1)};
}

absl::StatusOr<std::vector<ScoredResource>> ReadScoredResources(
    const boost::json::value& v, std::string_view plugin, std::string_view path,
    std::string (*check_weight)(const ScoredResource&)) {
  const boost::json::array* list;
  if (absl::Status s = ReadArray(v, plugin, path, &list); !s.ok()) return s;
  std::vector<ScoredResource> out;
  for (size_t i = 0; i < list->size(); ++i) {
    const std::string p = IndexPath(path, i);
    const boost::json::object* o;
    if (absl::Status s = ReadObject((*list)[i], plugin, p, &o); !s.ok()) return s;
    if (absl::Status s = CheckKnownFields(*o, plugin, p, {"name", "weight"}); !s.ok()) return s;
    std::string name;
    if (const boost::json::value* n = o->if_contains("name")) {
      if (absl::Status s = ReadString(*n, plugin, JoinPath(p, "name"), &name); !s.ok()) return s;
    }
    if (name.empty()) return ArgsError(plugin, JoinPath(p, "name"), "must not be empty");
    for (const ScoredResource& seen : out) {
      if (seen.name == name) {
        return ArgsError(plugin, JoinPath(p, "name"), Cat("duplicate value \"", name, "\""));
      }
    }
    int64_t weight = 0;
    if (const boost::json::value* w = o->if_contains("weight")) {
      if (absl::Status s = ReadInt(*w, plugin, JoinPath(p, "weight"), &weight); !s.ok()) return s;
    }
    if (weight == 0) weight = 1;  // Kubernetes' defaulting.
    ScoredResource r = MakeScoredResource(std::move(name), weight);
    if (std::string err = check_weight(r); !err.empty()) {
      return ArgsError(plugin, JoinPath(p, "weight"), err);
    }
    out.push_back(std::move(r));
  }
  return out;
}

PodRequestList PodRequestsFor(const std::vector<ScoredResource>& resources,
                              const sdk::PodInfo& pod) {
  PodRequestList out;
  out.reserve(resources.size());
  for (const ScoredResource& r : resources) {
    switch (r.kind) {
      case ResourceKind::kCpu:
        out.push_back(pod.non_zero_milli_cpu);
        break;
      case ResourceKind::kMemory:
        out.push_back(pod.non_zero_memory);
        break;
      case ResourceKind::kEphemeralStorage:
        out.push_back(pod.requests.ephemeral_storage);
        break;
      case ResourceKind::kPods:
        out.push_back(0);
        break;
      case ResourceKind::kScalar:
        out.push_back(pod.requests.Get(r.name));
        break;
    }
  }
  return out;
}

std::pair<int64_t, int64_t> AllocatableAndRequested(const ScoredResource& resource,
                                                    const sdk::NodeInfo& node,
                                                    int64_t pod_request) {
  switch (resource.kind) {
    case ResourceKind::kCpu:
      return {node.allocatable().milli_cpu, node.non_zero_requested_milli_cpu() + pod_request};
    case ResourceKind::kMemory:
      return {node.allocatable().memory, node.non_zero_requested_memory() + pod_request};
    case ResourceKind::kEphemeralStorage:
      return {node.allocatable().ephemeral_storage,
              node.requested().ephemeral_storage + pod_request};
    case ResourceKind::kPods:
      return {0, 0};
    case ResourceKind::kScalar: {
      if (pod_request == 0) return {0, 0};
      auto it = node.allocatable().scalar.find(resource.name);
      if (it == node.allocatable().scalar.end()) return {0, 0};
      auto req = node.requested().scalar.find(resource.name);
      const int64_t requested = req == node.requested().scalar.end() ? 0 : req->second;
      return {it->second, requested + pod_request};
    }
  }
  return {0, 0};
}

}  // namespace podium::plugins
