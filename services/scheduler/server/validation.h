// Validation of objects from the adapter, where they enter the scheduler: the
// rules are shared with the adapters (adapters/common/validation).
#pragma once

#include "common/validation/object_validation.h"

namespace podium::scheduler {

using validation::DescribeObject;
using validation::ValidateNode;
using validation::ValidateObjectEvent;
using validation::ValidatePod;

}  // namespace podium::scheduler
