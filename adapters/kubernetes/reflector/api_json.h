#pragma once

// The API's JSON (list bodies, watch event lines) parsed with Boost.JSON; the
// objects in it go to the shared translation as they are (k8s_json.h), with no
// intermediate document model.

#include <string>
#include <string_view>

#include <boost/json/value.hpp>

#include "absl/status/statusor.h"

namespace podium::kube {

// A parse error is DATA_LOSS "WHAT: not JSON: ...".
absl::StatusOr<boost::json::value> ParseApiJson(std::string_view text, std::string_view what);

// v[key] when v is an object holding it, else nullptr.
const boost::json::value* Member(const boost::json::value* v, std::string_view key);
// A scalar's text (strings as they are, numbers in decimal, booleans
// "true"/"false"); "" for null, objects, arrays and nullptr.
std::string ScalarText(const boost::json::value* v);

}  // namespace podium::kube
