// What PodTopologySpread keeps across cycles, so that a cycle's pass over the
// nodes is array lookups: each topology key's domains as small integers per
// node id, and per (selector, namespace) the matching assigned pods per node
// id, kept from the snapshot's pod change log (Snapshot::PodChangesSince)
// instead of recounted every cycle.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "podium/sdk/framework.h"
#include "podium/sdk/label_selector.h"

namespace podium::plugins {

// A topology key's domains: each label value's id (0, 1, ... in the order
// learnt) and each node's domain id by node id. Cycle states share it;
// KeptSpreadCounts changes it only when no state holds it (copy on write).
class TopologyDomains {
 public:
  static constexpr int32_t kMissing = -1;      // The node lacks the key.
  static constexpr int32_t kUnknown = -2;      // A node this table has not learnt.
  static constexpr int32_t kNoSuchValue = -3;  // A value no learnt node has.

  explicit TopologyDomains(std::string key) : key_(std::move(key)) {}

  const std::string& key() const { return key_; }
  size_t size() const { return ids_.size(); }
  // The learnt node's domain id, kMissing, or kUnknown.
  int32_t Known(uint32_t node_id) const {
    return node_id < of_node_.size() ? of_node_[node_id] : kUnknown;
  }
  int32_t Find(absl::string_view value) const {
    auto it = ids_.find(value);
    return it == ids_.end() ? kNoSuchValue : it->second;
  }
  // The node's domain from its labels, learnt from now on.
  int32_t Learn(const sdk::NodeInfo& node);

 private:
  std::string key_;
  std::vector<int32_t> of_node_;
  absl::flat_hash_map<std::string, int32_t> ids_;
};

// Matching assigned pods per node id (countPodsMatchSelector per node:
// terminating pods and pods of other namespaces do not count).
using PodsPerNode = std::vector<int32_t>;

class KeptSpreadCounts {
 public:
  // Brings what is kept up to `snapshot`: its pod changes since the last
  // call and the nodes it added; or, when it cannot list the changes (no log,
  // a node removed or relabelled, another snapshot), forgets everything and
  // learns again on demand.
  void Sync(const sdk::Snapshot& snapshot);
  // The domains of `key` over the snapshot's nodes (after Sync).
  std::shared_ptr<const TopologyDomains> Domains(const std::string& key,
                                                 const sdk::Snapshot& snapshot);
  // The pods of namespace `ns` matching `selector` per node id (after Sync):
  // counted once, through the label index when the selector allows it, then
  // kept from pod changes. Ids past the end have none.
  std::shared_ptr<const PodsPerNode> Matching(const sdk::LabelSelector& selector,
                                              const std::string& ns,
                                              const sdk::Snapshot& snapshot);

 private:
  // Keys and selections kept; the least recently used goes first. Each
  // selection costs a selector match per pod change and 4 bytes per node; 64
  // keeps the default constraints of dozens of interleaved workloads (one
  // selection each) without recounting every cycle.
  static constexpr size_t kMaxKeys = 8;
  static constexpr size_t kMaxSelections = 64;
  struct Keyed {
    std::shared_ptr<TopologyDomains> domains;
    uint64_t last_used = 0;
  };
  struct Selection {
    sdk::LabelSelector selector;
    std::string ns;
    std::shared_ptr<PodsPerNode> pods;
    uint64_t last_used = 0;
  };
  void Apply(const sdk::Snapshot::PodChange& change);

  const sdk::Snapshot* synced_ = nullptr;
  uint64_t cursor_ = 0;
  uint64_t syncs_ = 0;
  size_t learnt_nodes_ = 0;  // Nodes of the snapshot every kept key has learnt.
  std::vector<Keyed> keys_;
  std::vector<Selection> selected_;
};

}  // namespace podium::plugins
