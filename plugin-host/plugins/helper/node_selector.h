// Node selectors compiled once per pod (or per plugin, for args) and matched
// against nodes without allocating: kube-scheduler's
// component-helpers/scheduling/corev1/nodeaffinity.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "podium/v1/objects.pb.h"

namespace podium::plugins {

// One requirement of a term's matchExpressions (node labels) or matchFields
// (metadata.name).
struct CompiledRequirement {
  std::string key;
  v1::NodeSelectorRequirement::Operator op = v1::NodeSelectorRequirement::OPERATOR_UNSPECIFIED;
  std::vector<std::string> values;
  int64_t number = 0;  // Gt / Lt.
};

// A NodeSelectorTerm: its requirements are ANDed. A term with no requirement,
// or one that does not parse, matches no node (as Kubernetes' lazy-error
// selector).
class CompiledNodeSelectorTerm {
 public:
  // `path` names the term in the error ("...nodeSelectorTerms[0]").
  static CompiledNodeSelectorTerm Compile(const v1::NodeSelectorTerm& term,
                                          std::string_view path = "");
  bool Matches(const v1::Node& node) const;
  // The first parse error, if any (OK otherwise).
  const absl::Status& error() const { return error_; }
  const std::vector<CompiledRequirement>& match_fields() const { return fields_; }

 private:
  bool empty_ = true;
  absl::Status error_;
  std::vector<CompiledRequirement> labels_;
  std::vector<CompiledRequirement> fields_;
};

// A NodeSelector: its terms are ORed; no terms matches no node.
class CompiledNodeSelector {
 public:
  static CompiledNodeSelector Compile(const v1::NodeSelector& selector, std::string_view path = "");
  bool Matches(const v1::Node& node) const;
  // The first parse error of any term.
  absl::Status error() const;

 private:
  std::vector<CompiledNodeSelectorTerm> terms_;
};

// preferredDuringSchedulingIgnoredDuringExecution: the score of a node is the
// sum of the weights of the terms it matches. Terms of weight 0 are ignored.
class CompiledPreferredTerms {
 public:
  template <typename Range>
  static CompiledPreferredTerms Compile(const Range& terms, std::string_view path = "") {
    CompiledPreferredTerms out;
    int i = 0;
    for (const v1::PreferredSchedulingTerm& t : terms) {
      std::string p = std::string(path) + "[" + std::to_string(i++) + "]";
      if (t.weight() == 0) continue;
      out.terms_.emplace_back(t.weight(),
                              CompiledNodeSelectorTerm::Compile(t.preference(), p + ".preference"));
    }
    return out;
  }
  bool empty() const { return terms_.empty(); }
  int64_t Score(const v1::Node& node) const;
  absl::Status error() const;

 private:
  std::vector<std::pair<int32_t, CompiledNodeSelectorTerm>> terms_;
};

// A pod's hard node constraints: spec.nodeSelector AND required node affinity
// (nodeaffinity.GetRequiredNodeAffinity).
class RequiredNodeAffinity {
 public:
  static RequiredNodeAffinity ForPod(const v1::Pod& pod);
  bool Matches(const v1::Node& node) const;

 private:
  std::vector<std::pair<std::string, std::string>> node_selector_;
  std::optional<CompiledNodeSelector> affinity_;
};

// strconv.ParseInt(s, 10, 64).
bool ParseInt64(std::string_view s, int64_t* out);

}  // namespace podium::plugins
