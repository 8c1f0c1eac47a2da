#include "plugins/pod_topology_spread/kept_counts.h"

#include <algorithm>

#include "plugins/helper/pod_index.h"

namespace podium::plugins {
namespace {

// countPodsMatchSelector for one pod; `selector_known` when the label index
// visited it for the selector's only requirement.
bool Counts(const sdk::PodInfo& p, const sdk::LabelSelector& selector, const std::string& ns,
            bool selector_known = false) {
  const v1::ObjectMeta& meta = p.pod->meta();
  return meta.deletion_timestamp_us() == 0 && meta.namespace_() == ns &&
         (selector_known || selector.Matches(meta.labels()));
}

// Copy on write: a cycle state may still hold it.
template <typename T>
T& Mutable(std::shared_ptr<T>& p) {
  if (p.use_count() > 1) p = std::make_shared<T>(*p);
  return *p;
}

void Bump(PodsPerNode& pods, uint32_t node_id, int32_t delta) {
  if (pods.size() <= node_id) pods.resize(node_id + 1, 0);
  pods[node_id] += delta;
}

template <typename T>
void EvictLeastRecentlyUsed(std::vector<T>& kept, size_t max) {
  if (kept.size() < max) return;
  kept.erase(std::min_element(kept.begin(), kept.end(), [](const T& a, const T& b) {
    return a.last_used < b.last_used;
  }));
}

}  // namespace

int32_t TopologyDomains::Learn(const sdk::NodeInfo& node) {
  const auto& labels = node.node().meta().labels();
  auto it = labels.find(key_);
  int32_t domain = kMissing;
  if (it != labels.end()) {
    domain = ids_.try_emplace(it->second, static_cast<int32_t>(ids_.size())).first->second;
  }
  if (of_node_.size() <= node.id()) of_node_.resize(node.id() + 1, kUnknown);
  of_node_[node.id()] = domain;
  return domain;
}

void KeptSpreadCounts::Sync(const sdk::Snapshot& snapshot) {
  ++syncs_;
  const bool same = synced_ == &snapshot;
  const bool incremental = snapshot.PodChangesSince(&cursor_, [&](const sdk::Snapshot::PodChange& c) {
    if (same) Apply(c);
  }) && same;
  if (!incremental) {
    keys_.clear();
    selected_.clear();
    learnt_nodes_ = 0;
    synced_ = &snapshot;
  }
  // Without a barrier the nodes only grow: learn the new ones.
  if (learnt_nodes_ == snapshot.NumNodes()) return;
  for (Keyed& k : keys_) {
    bool learnt = false;
    for (const sdk::NodeInfo* node : snapshot.Nodes()) {
      if (k.domains->Known(node->id()) != TopologyDomains::kUnknown) continue;
      if (!learnt) Mutable(k.domains);
      learnt = true;
      k.domains->Learn(*node);
    }
  }
  learnt_nodes_ = snapshot.NumNodes();
}

void KeptSpreadCounts::Apply(const sdk::Snapshot::PodChange& change) {
  for (Selection& s : selected_) {
    if (Counts(*change.pod, s.selector, s.ns)) {
      Bump(Mutable(s.pods), change.node->id(), change.added ? 1 : -1);
    }
  }
}

std::shared_ptr<const TopologyDomains> KeptSpreadCounts::Domains(const std::string& key,
                                                                 const sdk::Snapshot& snapshot) {
  for (Keyed& k : keys_) {
    if (k.domains->key() == key) {
      k.last_used = syncs_;
      return k.domains;
    }
  }
  auto domains = std::make_shared<TopologyDomains>(key);
  for (const sdk::NodeInfo* node : snapshot.Nodes()) domains->Learn(*node);
  EvictLeastRecentlyUsed(keys_, kMaxKeys);
  keys_.push_back({domains, syncs_});
  return domains;
}

std::shared_ptr<const PodsPerNode> KeptSpreadCounts::Matching(const sdk::LabelSelector& selector,
                                                             const std::string& ns,
                                                             const sdk::Snapshot& snapshot) {
  for (Selection& s : selected_) {
    if (s.ns == ns && s.selector.SameAs(selector)) {
      s.last_used = syncs_;
      return s.pods;
    }
  }
  auto pods = std::make_shared<PodsPerNode>();
  if (!snapshot.Nodes().empty()) pods->resize(snapshot.Nodes().back()->id() + 1, 0);
  const bool known = IndexVisitsOnlyMatches(selector);
  const bool indexed = ForEachPodMaybeMatching(snapshot, selector, [&](const sdk::PodInfo& p, const sdk::NodeInfo& node) {
    if (Counts(p, selector, ns, known)) Bump(*pods, node.id(), 1);
  });
  if (!indexed) {
    for (const sdk::NodeInfo* node : snapshot.Nodes()) {
      for (const sdk::PodInfoPtr& p : node->pods()) {
        if (Counts(*p, selector, ns)) Bump(*pods, node->id(), 1);
      }
    }
  }
  EvictLeastRecentlyUsed(selected_, kMaxSelections);
  selected_.push_back({selector, ns, pods, syncs_});
  return pods;
}

}  // namespace podium::plugins
