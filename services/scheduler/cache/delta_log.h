// The plugin-mirror delta log: every change of the state a plugin mirror sees
// (nodes by id, the pods on them, PodDisruptionBudgets, PodGroups), numbered,
// so that a mirror at position s is brought to t by the net effect of the
// entries in (s, t].
//
// It keeps only what connected mirrors still need: each mirror reports its
// position (SetMirrorPosition), and the log is trimmed to the slowest one; with
// no mirror connected it keeps nothing (a mirror that connects later starts
// with a reset anyway). max_entries is a safety cap: a mirror that falls that
// far behind gets a reset.
//
// Not thread-safe: the cache's lock guards it.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "google/protobuf/message.h"
#include "podium/v1/objects.pb.h"
#include "podium/v1/plugin.pb.h"

namespace podium::scheduler {

class DeltaLog {
 public:
  // A pod as a plugin mirror sees it; pod == null means absent.
  struct MirrorPod {
    std::shared_ptr<const v1::Pod> pod;
    uint32_t node_id = 0;
    bool assumed = false;
  };
  struct Entry {
    enum class Kind : uint8_t { kNode, kPod, kPdb, kPodGroup, kNamespace, kNomination };
    uint64_t seq = 0;
    Kind kind = Kind::kNode;
    uint32_t node_id = 0;                                      // kNode
    std::shared_ptr<const v1::Node> node_before, node_after;  // null = absent
    std::string uid;                                   // kPod, kPdb, kPodGroup, kNomination; kNamespace: its name
    MirrorPod pod_before, pod_after;
    // kPdb (v1::PodDisruptionBudget), kPodGroup (v1::PodGroup) kNamespace (v1::Namespace) or kNomination
    // (the pending v1::Pod with status.nominated_node_name set).
    std::shared_ptr<const google::protobuf::Message> obj_before, obj_after;
  };

  explicit DeltaLog(size_t max_entries) : max_entries_(max_entries) {}

  // The position of the last change (0 before any).
  uint64_t seq() const { return seq_; }
  // Entries with seq <= trimmed_through() are gone.
  uint64_t trimmed_through() const { return trimmed_through_; }
  size_t size() const { return entries_.size(); }
  size_t num_mirrors() const { return mirrors_.size(); }

  // Numbers the entry, appends it and trims what no mirror needs.
  void Append(Entry entry);

  // Where a connected mirror stands (the position of the last delta sent to
  // it), or nullopt when it disconnected or will be reset: it then holds
  // nothing in the log.
  void SetMirrorPosition(const void* mirror, std::optional<uint64_t> position);

  // Frees the entries with seq <= min_seq_still_needed.
  void Trim(uint64_t min_seq_still_needed);

  // Calls f(entry) for every entry with seq > after, oldest first. Requires
  // after >= trimmed_through().
  template <typename F>
  void ForEachAfter(uint64_t after, F&& f) const {
    for (size_t i = after - trimmed_through_; i < entries_.size(); ++i) f(entries_[i]);
  }

  // The net effect of the entries in (from_seq, to_seq] per object, appended to
  // `out` (removals and upserts; no reset). Requires trimmed_through() <=
  // from_seq and to_seq <= seq(). Nominations are sent as their latest state
  // whatever they were before (a removal even when the range added them): a
  // reset carries the nominations of its moment, not of its position.
  void Coalesce(uint64_t from_seq, uint64_t to_seq, v1::StateDelta* out) const;

 private:
  void TrimToMirrors();

  const size_t max_entries_;
  std::deque<Entry> entries_;
  uint64_t seq_ = 0;
  uint64_t trimmed_through_ = 0;
  absl::flat_hash_map<const void*, uint64_t> mirrors_;
};

// Fills a MirroredPod from the log's view of a pod.
void FillMirroredPod(const DeltaLog::MirrorPod& pod, v1::MirroredPod* out);

}  // namespace podium::scheduler
