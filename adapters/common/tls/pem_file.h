// A certificate or key file named by a flag, checked at start: gRPC's file
// watcher would only log a wrong path or a non-PEM file and serve nothing.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace podium::tls {

// OK for an empty path (the flag is unset); NOT_FOUND when the file cannot be
// read; INVALID_ARGUMENT when its start has no "-----BEGIN" line. Errors name
// `flag` and the path.
absl::Status CheckPemFile(absl::string_view flag, const std::string& path);

}  // namespace podium::tls
