#include "podium/sdk/pod_affinity.h"

#include <algorithm>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl_compat.h"

namespace podium::sdk {
namespace {

using internal::AsAbsl;

absl::StatusOr<AffinityTerm> ParseTerm(const v1::Pod& pod, const v1::PodAffinityTerm& term,
                                       const std::string& path) {
  AffinityTerm out;
  absl::StatusOr<LabelSelector> selector = LabelSelector::CompileOptional(
      term.has_label_selector(), term.label_selector(), absl::StrCat(path, ".labelSelector"));
  if (!selector.ok()) return selector.status();
  out.selector = *std::move(selector);
  const auto& labels = pod.meta().labels();
  // What the API server does at admission (MatchLabelKeysInPodAffinity); a
  // second merge of an already merged selector changes nothing.
  for (const std::string& key : term.match_label_keys()) {
    auto it = labels.find(key);
    if (it != labels.end()) out.selector.AddRequirement(key, LabelSelector::Operator::kIn, {it->second});
  }
  for (const std::string& key : term.mismatch_label_keys()) {
    auto it = labels.find(key);
    if (it != labels.end()) {
      out.selector.AddRequirement(key, LabelSelector::Operator::kNotIn, {it->second});
    }
  }
  if (term.has_namespace_selector()) {
    absl::StatusOr<LabelSelector> ns = LabelSelector::Compile(
        term.namespace_selector(), absl::StrCat(path, ".namespaceSelector"));
    if (!ns.ok()) return ns.status();
    out.namespace_selector = *std::move(ns);
  }
  out.namespaces.assign(term.namespaces().begin(), term.namespaces().end());
  if (out.namespaces.empty() && !term.has_namespace_selector()) {
    out.namespaces.push_back(pod.meta().namespace_());
  }
  out.topology_key = term.topology_key();
  return out;
}

}  // namespace

bool AffinityTerm::MatchesNamespace(const std::string& ns, const Labels* namespace_labels) const {
  if (std::find(namespaces.begin(), namespaces.end(), ns) != namespaces.end()) return true;
  if (namespace_selector.MatchesNothing()) return false;
  if (namespace_selector.MatchesEverything()) return true;
  static const Labels* const kNoLabels = new Labels();
  return namespace_selector.Matches(namespace_labels != nullptr ? *namespace_labels : *kNoLabels);
}

bool AffinityTerm::Matches(const v1::Pod& pod, const Labels* namespace_labels) const {
  return MatchesNamespace(pod.meta().namespace_(), namespace_labels) &&
         selector.Matches(pod.meta().labels());
}

std::shared_ptr<const PodAffinityTerms> PodAffinityTerms::ForPod(const v1::Pod& pod) {
  if (!pod.has_affinity()) return nullptr;
  const v1::Affinity& a = pod.affinity();
  const bool has_affinity = a.has_pod_affinity() && (a.pod_affinity().required_size() > 0 ||
                                                     a.pod_affinity().preferred_size() > 0);
  const bool has_anti = a.has_pod_anti_affinity() && (a.pod_anti_affinity().required_size() > 0 ||
                                                      a.pod_anti_affinity().preferred_size() > 0);
  if (!has_affinity && !has_anti) return nullptr;

  auto out = std::make_shared<PodAffinityTerms>();
  auto note = [&](const absl::Status& s) {
    if (out->error.ok()) out->error = s;
  };
  auto required = [&](const v1::PodAffinity& pa, const std::string& path,
                      std::vector<AffinityTerm>& terms) {
    for (int i = 0; i < pa.required_size(); ++i) {
      absl::StatusOr<AffinityTerm> t =
          ParseTerm(pod, pa.required(i),
                    absl::StrCat(path, ".requiredDuringSchedulingIgnoredDuringExecution[", i, "]"));
      if (t.ok()) {
        terms.push_back(*std::move(t));
      } else {
        note(t.status());
      }
    }
  };
  auto preferred = [&](const v1::PodAffinity& pa, const std::string& path,
                       std::vector<WeightedAffinityTerm>& terms) {
    for (int i = 0; i < pa.preferred_size(); ++i) {
      const std::string where =
          absl::StrCat(path, ".preferredDuringSchedulingIgnoredDuringExecution[", i, "]");
      absl::StatusOr<AffinityTerm> t =
          ParseTerm(pod, pa.preferred(i).term(), absl::StrCat(where, ".podAffinityTerm"));
      if (t.ok()) {
        terms.push_back({*std::move(t), pa.preferred(i).weight()});
      } else {
        note(t.status());
      }
    }
  };
  const std::string base = "spec.affinity";
  if (a.has_pod_affinity()) {
    required(a.pod_affinity(), base + ".podAffinity", out->required_affinity);
    preferred(a.pod_affinity(), base + ".podAffinity", out->preferred_affinity);
  }
  if (a.has_pod_anti_affinity()) {
    required(a.pod_anti_affinity(), base + ".podAntiAffinity", out->required_anti_affinity);
    preferred(a.pod_anti_affinity(), base + ".podAntiAffinity", out->preferred_anti_affinity);
  }
  return out;
}

}  // namespace podium::sdk
