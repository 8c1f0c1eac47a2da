// Finding the assigned pods a label selector may match without scanning every
// pod: through the snapshot's label index (MirrorNeeds::pod_label_index), kept
// by the SDK's mirror in the plugin process. Shared by PodTopologySpread and
// InterPodAffinity, whose PreFilter/PreScore cost O(nodes + matching pods)
// with it instead of O(nodes x pods per node).
#pragma once

#include <algorithm>

#include "podium/sdk/framework.h"
#include "podium/sdk/label_selector.h"

namespace podium::plugins {

// Visits the assigned pods that may match `selector` (a superset: the caller
// still checks the selector and whatever else counts): those labelled with a
// value of the selector's first `key In (values)` requirement (matchLabels
// and matchLabelKeys are such requirements), each once. Returns false,
// visiting nothing, when the selector has no such requirement or the
// snapshot keeps no index: the caller scans every pod. A selector that
// matches nothing visits nothing and returns true.
inline bool ForEachPodMaybeMatching(const sdk::Snapshot& snapshot, const sdk::LabelSelector& selector,
                                    const sdk::Snapshot::PodVisitor& visit) {
  if (selector.MatchesNothing()) return true;
  for (const sdk::LabelSelector::Requirement& r : selector.requirements()) {
    if (r.op != sdk::LabelSelector::Operator::kIn) continue;
    for (size_t i = 0; i < r.values.size(); ++i) {
      // A pod has one value per key: distinct values visit distinct pods.
      if (std::find(r.values.begin(), r.values.begin() + i, r.values[i]) != r.values.begin() + i) continue;
      if (!snapshot.ForEachPodWithLabel(r.key, r.values[i], visit)) return false;
    }
    return true;
  }
  return false;
}

// Whether every pod ForEachPodMaybeMatching visits for `selector` matches it:
// its only requirement is the `key In (values)` the index answers. Then the
// visitor need not match the selector again (a label lookup per pod).
inline bool IndexVisitsOnlyMatches(const sdk::LabelSelector& selector) {
  return !selector.MatchesNothing() && selector.requirements().size() == 1 &&
         selector.requirements().front().op == sdk::LabelSelector::Operator::kIn;
}

// Whether ForEachPodMaybeMatching would use the index for `selector` (it has
// a `key In (values)` requirement, or matches nothing) rather than answer
// false: lets a caller choose how to count before visiting anything.
inline bool CanVisitByIndex(const sdk::Snapshot& snapshot, const sdk::LabelSelector& selector) {
  if (selector.MatchesNothing()) return true;
  const bool has_in = std::any_of(selector.requirements().begin(), selector.requirements().end(),
                                  [](const auto& r) { return r.op == sdk::LabelSelector::Operator::kIn; });
  // A label key is never empty: the probe visits nothing and says whether
  // the snapshot keeps an index.
  return has_in && snapshot.ForEachPodWithLabel("", "", [](const sdk::PodInfo&, const sdk::NodeInfo&) {});
}

}  // namespace podium::plugins
