#pragma once

#include <functional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace podium::kube {

// The bearer token: fixed, or read from a file that the kubelet rotates (a
// projected service-account token). The file is re-read when its
// modification time or size changes, checked at most once a second.
class TokenSource {
 public:
  using Clock = std::function<absl::Time()>;
  TokenSource(std::string token, std::string file, Clock now = absl::Now);
  // Empty when there is no token.
  std::string Token();

 private:
  const std::string fixed_;
  const std::string file_;
  const Clock now_;
  absl::Mutex mu_;
  std::string cached_ ABSL_GUARDED_BY(mu_);
  int64_t stamp_ ABSL_GUARDED_BY(mu_) = -1;
  absl::Time checked_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
};

}  // namespace podium::kube
