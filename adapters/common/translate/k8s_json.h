#pragma once

// The Kubernetes API's JSON objects -> podium.v1 objects, straight from a
// parsed Boost.JSON value (the Kubernetes adapter's path). The very same
// translation as k8s_yaml.h's *FromYaml (one code, templated on the node type):
// the same defaults, checks and "field.path: problem" errors.

#include <vector>

#include <boost/json/value.hpp>

#include "absl/status/statusor.h"
#include "podium/v1/objects.pb.h"

namespace podium::k8s {

absl::StatusOr<v1::Pod> PodFromJson(const boost::json::value& object);
absl::StatusOr<v1::Node> NodeFromJson(const boost::json::value& object);
absl::StatusOr<v1::PriorityClass> PriorityClassFromJson(const boost::json::value& object);
absl::StatusOr<v1::PodDisruptionBudget> PodDisruptionBudgetFromJson(const boost::json::value& object);
absl::StatusOr<v1::Namespace> NamespaceFromJson(const boost::json::value& object);
absl::StatusOr<v1::PodGroup> PodGroupFromJson(const boost::json::value& object);
absl::StatusOr<std::vector<v1::PodGroup>> PodGroupsFromWorkloadJson(const boost::json::value& object);

}  // namespace podium::k8s
