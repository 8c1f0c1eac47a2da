#pragma once

#include <vector>

#include "podium/sdk/framework.h"

namespace podium::plugins {

// kube-scheduler's helper.DefaultNormalizeScore: scales scores so the highest
// becomes max_priority; with `reverse`, the highest becomes 0 and all-zero
// scores become max_priority.
inline void DefaultNormalizeScore(int64_t max_priority, bool reverse,
                                  std::vector<sdk::NodeScore>& scores) {
  int64_t max_count = 0;
  for (const sdk::NodeScore& s : scores) max_count = std::max(max_count, s.score);
  if (max_count == 0) {
    if (reverse) {
      for (sdk::NodeScore& s : scores) s.score = max_priority;
    }
    return;
  }
  for (sdk::NodeScore& s : scores) {
    int64_t score = max_priority * s.score / max_count;
    if (reverse) score = max_priority - score;
    s.score = score;
  }
}

}  // namespace podium::plugins
