#include "plugins/helper/node_selector.h"

#include <algorithm>
#include <charconv>
#include <limits>

#include "plugins/helper/str.h"

namespace podium::plugins {
namespace {

using Req = v1::NodeSelectorRequirement;

const std::string& EmptyString() {
  static const std::string* const empty = new std::string();
  return *empty;
}

bool Contains(const std::vector<std::string>& values, const std::string& v) {
  return std::find(values.begin(), values.end(), v) != values.end();
}

// labels.NewRequirement's rules.
absl::Status CompileLabelRequirement(const Req& r, const std::string& path,
                                     CompiledRequirement* out) {
  out->key = r.key();
  out->op = r.operator_();
  out->values.assign(r.values().begin(), r.values().end());
  if (r.key().empty()) {
    return absl::InvalidArgumentError(Cat(path, ".key: must not be empty"));
  }
  switch (r.operator_()) {
    case Req::IN:
    case Req::NOT_IN:
      if (r.values().empty()) {
        return absl::InvalidArgumentError(
            Cat(path, ".values: for 'In', 'NotIn' operators, values set can't be empty"));
      }
      return absl::OkStatus();
    case Req::EXISTS:
    case Req::DOES_NOT_EXIST:
      if (!r.values().empty()) {
        return absl::InvalidArgumentError(
            Cat(path, ".values: values set must be empty for 'Exists', 'DoesNotExist' operators"));
      }
      return absl::OkStatus();
    case Req::GT:
    case Req::LT:
      if (r.values().size() != 1) {
        return absl::InvalidArgumentError(
            Cat(path, ".values: for 'Gt', 'Lt' operators, exactly one value is required"));
      }
      if (!ParseInt64(r.values(0), &out->number)) {
        return absl::InvalidArgumentError(
            Cat(path, ".values[0]: for 'Gt', 'Lt' operators, the value must be an integer"));
      }
      return absl::OkStatus();
    default:
      return absl::InvalidArgumentError(Cat(path, ".operator: not a valid node selector operator"));
  }
}

// nodeSelectorRequirementsAsFieldSelector's rules: In/NotIn with one value.
absl::Status CompileFieldRequirement(const Req& r, const std::string& path,
                                     CompiledRequirement* out) {
  out->key = r.key();
  out->op = r.operator_();
  out->values.assign(r.values().begin(), r.values().end());
  if (r.values().size() != 1) {
    return absl::InvalidArgumentError(Cat(path, ".values: must have one element"));
  }
  if (r.operator_() != Req::IN && r.operator_() != Req::NOT_IN) {
    return absl::InvalidArgumentError(Cat(path, ".operator: supported values: \"In\", \"NotIn\""));
  }
  return absl::OkStatus();
}

bool MatchLabel(const CompiledRequirement& r,
                const google::protobuf::Map<std::string, std::string>& labels) {
  auto it = labels.find(r.key);
  const bool has = it != labels.end();
  switch (r.op) {
    case Req::IN:
      return has && Contains(r.values, it->second);
    case Req::NOT_IN:
      return !has || !Contains(r.values, it->second);
    case Req::EXISTS:
      return has;
    case Req::DOES_NOT_EXIST:
      return !has;
    case Req::GT:
    case Req::LT: {
      if (!has) return false;
      int64_t v;
      if (!ParseInt64(it->second, &v)) return false;
      return r.op == Req::GT ? v > r.number : v < r.number;
    }
    default:
      return false;
  }
}

bool MatchField(const CompiledRequirement& r, const v1::Node& node) {
  // The only field a node offers is metadata.name; others read as "".
  const std::string& value = r.key == "metadata.name" ? node.meta().name() : EmptyString();
  const bool equal = value == r.values[0];
  return r.op == Req::IN ? equal : !equal;
}

}  // namespace

bool ParseInt64(std::string_view s, int64_t* out) {
  if (s.empty()) return false;
  bool negative = false;
  if (s[0] == '+' || s[0] == '-') {
    negative = s[0] == '-';
    s.remove_prefix(1);
    if (s.empty()) return false;
  }
  uint64_t magnitude = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), magnitude);
  if (ec != std::errc() || ptr != s.data() + s.size()) return false;
  constexpr uint64_t kMax = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
  if (negative) {
    if (magnitude > kMax + 1) return false;
    *out = magnitude == kMax + 1 ? std::numeric_limits<int64_t>::min()
                                 : -static_cast<int64_t>(magnitude);
  } else {
    if (magnitude > kMax) return false;
    *out = static_cast<int64_t>(magnitude);
  }
  return true;
}

CompiledNodeSelectorTerm CompiledNodeSelectorTerm::Compile(const v1::NodeSelectorTerm& term,
                                                           std::string_view path) {
  CompiledNodeSelectorTerm out;
  out.empty_ = term.match_expressions().empty() && term.match_fields().empty();
  out.labels_.resize(term.match_expressions_size());
  for (int i = 0; i < term.match_expressions_size(); ++i) {
    absl::Status s = CompileLabelRequirement(
        term.match_expressions(i), Cat(path, ".matchExpressions[", i, "]"), &out.labels_[i]);
    if (!s.ok() && out.error_.ok()) out.error_ = s;
  }
  out.fields_.resize(term.match_fields_size());
  for (int i = 0; i < term.match_fields_size(); ++i) {
    absl::Status s = CompileFieldRequirement(term.match_fields(i),
                                             Cat(path, ".matchFields[", i, "]"), &out.fields_[i]);
    if (!s.ok() && out.error_.ok()) out.error_ = s;
  }
  return out;
}

bool CompiledNodeSelectorTerm::Matches(const v1::Node& node) const {
  if (empty_ || !error_.ok()) return false;
  const auto& labels = node.meta().labels();
  for (const CompiledRequirement& r : labels_) {
    if (!MatchLabel(r, labels)) return false;
  }
  for (const CompiledRequirement& r : fields_) {
    if (!MatchField(r, node)) return false;
  }
  return true;
}

CompiledNodeSelector CompiledNodeSelector::Compile(const v1::NodeSelector& selector,
                                                   std::string_view path) {
  CompiledNodeSelector out;
  out.terms_.reserve(selector.terms_size());
  for (int i = 0; i < selector.terms_size(); ++i) {
    out.terms_.push_back(CompiledNodeSelectorTerm::Compile(
        selector.terms(i), Cat(path, ".nodeSelectorTerms[", i, "]")));
  }
  return out;
}

bool CompiledNodeSelector::Matches(const v1::Node& node) const {
  for (const CompiledNodeSelectorTerm& t : terms_) {
    if (t.Matches(node)) return true;
  }
  return false;
}

absl::Status CompiledNodeSelector::error() const {
  for (const CompiledNodeSelectorTerm& t : terms_) {
    if (!t.error().ok()) return t.error();
  }
  return absl::OkStatus();
}

int64_t CompiledPreferredTerms::Score(const v1::Node& node) const {
  int64_t score = 0;
  for (const auto& [weight, term] : terms_) {
    if (term.Matches(node)) score += weight;
  }
  return score;
}

absl::Status CompiledPreferredTerms::error() const {
  for (const auto& [weight, term] : terms_) {
    if (!term.error().ok()) return term.error();
  }
  return absl::OkStatus();
}

RequiredNodeAffinity RequiredNodeAffinity::ForPod(const v1::Pod& pod) {
  RequiredNodeAffinity out;
  out.node_selector_.reserve(pod.node_selector().size());
  for (const auto& [k, v] : pod.node_selector()) out.node_selector_.emplace_back(k, v);
  // Deterministic order; cheap keys first would be a guess, so sort by key.
  std::sort(out.node_selector_.begin(), out.node_selector_.end());
  if (pod.has_affinity() && pod.affinity().has_node_affinity() &&
      pod.affinity().node_affinity().has_required()) {
    out.affinity_ = CompiledNodeSelector::Compile(pod.affinity().node_affinity().required());
  }
  return out;
}

bool RequiredNodeAffinity::Matches(const v1::Node& node) const {
  if (!node_selector_.empty()) {
    const auto& labels = node.meta().labels();
    for (const auto& [k, v] : node_selector_) {
      auto it = labels.find(k);
      if (it == labels.end() || it->second != v) return false;
    }
  }
  if (affinity_.has_value()) return affinity_->Matches(node);
  return true;
}

}  // namespace podium::plugins
