// The StateSource plugin mirrors are brought to: the scheduling cycle's
// snapshot, by deltas from the cache's delta log or, for a mirror that is new,
// reconnected or too far behind, by a reset built from the snapshot.
#pragma once

#include <cstdint>
#include <optional>

#include "cache/cache.h"
#include "cache/snapshot.h"
#include "framework/plugin_process.h"

namespace podium::scheduler {

// ReadDelta and FullState run on the scheduling thread (the only writer of
// the snapshot), as the framework's requests that carry state do.
class CacheStateSource final : public StateSource {
 public:
  CacheStateSource(Cache& cache, const Snapshot& snapshot) : cache_(cache), snapshot_(snapshot) {}
  bool ReadDelta(uint64_t from_seq, uint64_t to_seq, v1::StateDelta* out) override;
  // Nodes with their pods, PodDisruptionBudgets and PodGroups of the snapshot.
  void FullState(uint64_t to_seq, v1::StateDelta* out) override;
  void SetMirrorPosition(const void* mirror, std::optional<uint64_t> position) override;

 private:
  Cache& cache_;
  const Snapshot& snapshot_;
};

}  // namespace podium::scheduler
