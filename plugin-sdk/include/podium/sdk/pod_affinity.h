// A pod's inter-pod (anti-)affinity terms, parsed once when the pod enters the
// mirror or the scheduler's cache (kube-scheduler's framework.PodInfo
// RequiredAffinityTerms, RequiredAntiAffinityTerms, PreferredAffinityTerms,
// PreferredAntiAffinityTerms). Only pods that have such terms carry one.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "podium/sdk/label_selector.h"
#include "podium/v1/objects.pb.h"

namespace podium::sdk {

// kube-scheduler's framework.AffinityTerm: matchLabelKeys/mismatchLabelKeys
// are merged into the selector with the owning pod's label values, and the
// namespaces default to the owning pod's own when neither namespaces nor a
// namespaceSelector is given.
struct AffinityTerm {
  LabelSelector selector;
  std::vector<std::string> namespaces;
  // Absent namespaceSelector: Nothing(); `{}`: Everything().
  LabelSelector namespace_selector = LabelSelector::Nothing();
  std::string topology_key;

  // Does `pod` (in a namespace with labels `namespace_labels`, null when
  // unknown: no labels) match this term?
  bool Matches(const v1::Pod& pod, const Labels* namespace_labels) const;
  bool MatchesNamespace(const std::string& ns, const Labels* namespace_labels) const;
};

struct WeightedAffinityTerm {
  AffinityTerm term;
  int32_t weight = 0;
};

struct PodAffinityTerms {
  std::vector<AffinityTerm> required_affinity;
  std::vector<AffinityTerm> required_anti_affinity;
  std::vector<WeightedAffinityTerm> preferred_affinity;
  std::vector<WeightedAffinityTerm> preferred_anti_affinity;
  // The first invalid term (its selector does not parse), naming the field;
  // that term is left out.
  absl::Status error;

  // The pod's terms; null when it has no pod affinity and no anti-affinity.
  static std::shared_ptr<const PodAffinityTerms> ForPod(const v1::Pod& pod);
};

}  // namespace podium::sdk
