// Validation of objects from the adapter, where they enter the scheduler. An
// error names the object and the field; the object is refused whole.
#pragma once

#include "absl/status/status.h"
#include "podium/v1/cluster.pb.h"

namespace podium::scheduler {

absl::Status ValidatePod(const v1::Pod& pod);
absl::Status ValidateNode(const v1::Node& node);
// Validates whichever object the event carries.
absl::Status ValidateObjectEvent(const v1::ObjectEvent& event);
// "Pod default/web-1", "Node edge-1".
std::string DescribeObject(const v1::ObjectEvent& event);

}  // namespace podium::scheduler
