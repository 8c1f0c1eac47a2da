// Pod scheduling signatures (KEP-5598, as Podium does it): every filter and
// score plugin of a profile says in its Registration which parts of a pod its
// verdicts depend on (SignatureSpec); pods whose parts are equal are the same
// pod to every plugin of the profile, so one pod's ranking serves the next
// (batcher.h). A plugin without a SignatureSpec makes every pod of the profile
// unsignable, so third-party plugins stay correct without changes.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "framework/framework.h"
#include "podium/v1/objects.pb.h"
#include "podium/v1/plugin.pb.h"

namespace podium::scheduler::batching {

struct PodSignature {
  bool signable = false;
  // Equal keys: the same pod to every plugin of the profile (exact bytes, no hash).
  std::string key;
  // Why not signable, e.g. "PodTopologySpread: the pod sets topologySpreadConstraints".
  std::string unsignable_reason;
};

// The signing rules of one profile, derived from its plugins' registrations.
class Signer {
 public:
  // Every pod unsignable, for `reason`.
  static Signer Unsignable(std::string reason);
  // From the profile's PreFilter, Filter, PreScore and Score plugins (the
  // phases a cycle reuses) and `registrations`: plugin name -> its
  // PluginRegistration (absent: its process has not registered it).
  static Signer ForProfile(const ProfileSpec& spec,
                           const absl::flat_hash_map<std::string, v1::PluginRegistration>& registrations);

  // `affinity_terms_exist`: some pod, assigned or nominated, has a pod
  // (anti-)affinity term. When false, the parts every plugin that lists
  // them reads only through such terms
  // (SignatureSpec.parts_read_through_affinity_terms) are left out.
  PodSignature Sign(const v1::Pod& pod, bool affinity_terms_exist = true) const;
  // Whether some part is left out without affinity terms (a caller need not
  // find out whether terms exist otherwise).
  bool HasPartsReadThroughAffinityTerms() const { return !through_terms_.empty(); }

  // Score plugins whose NormalizeScore looks across nodes.
  const absl::flat_hash_set<std::string>& normalizing() const { return normalizing_; }
  // A score plugin's weight (1 when unset, as the framework weighs it).
  int64_t Weight(const std::string& plugin) const;

 private:
  std::string profile_unsignable_;  // Non-empty: every pod is unsignable, and why.
  std::vector<v1::PodPart> parts_;  // Sorted, unique.
  // Of parts_, those read only through affinity terms by every plugin listing them.
  absl::flat_hash_set<int> through_terms_;
  std::vector<std::pair<v1::PodPart, std::string>> unsignable_when_set_;  // part, plugin.
  absl::flat_hash_set<std::string> normalizing_;
  absl::flat_hash_map<std::string, int64_t> weights_;
};

// The Kubernetes field a part stands for ("topologySpreadConstraints").
std::string_view PodPartField(v1::PodPart part);
// Whether the pod sets the part (a non-empty value).
bool PodSetsPart(const v1::Pod& pod, v1::PodPart part);
// Appends the part's value to `out`, unambiguously (length-prefixed,
// deterministic protobuf bytes).
void AppendPodPart(const v1::Pod& pod, v1::PodPart part, std::string& out);

}  // namespace podium::scheduler::batching
