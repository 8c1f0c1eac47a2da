// Label selectors compiled once and matched without allocating: Kubernetes'
// metav1.LabelSelectorAsSelector. One helper for every plugin (topology
// spread, pod affinity, PDBs, third-party plugins).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "google/protobuf/map.h"
#include "podium/v1/objects.pb.h"

namespace podium::sdk {

using Labels = google::protobuf::Map<std::string, std::string>;

// The same keys with the same values (labels, annotations): protobuf maps
// have no operator==.
bool SameStringMap(const Labels& a, const Labels& b);

class LabelSelector {
 public:
  enum class Operator { kIn, kNotIn, kExists, kDoesNotExist };
  struct Requirement {
    std::string key;
    Operator op = Operator::kIn;
    std::vector<std::string> values;
    bool Matches(const Labels& labels) const;
  };

  // Matches every label set (an empty selector, `{}`).
  static LabelSelector Everything() { return LabelSelector(); }
  // Matches no label set (an absent selector).
  static LabelSelector Nothing() {
    LabelSelector s;
    s.nothing_ = true;
    return s;
  }
  // LabelSelectorAsSelector: matchLabels and matchExpressions ANDed. An invalid
  // requirement (unknown operator, In/NotIn without values, Exists/DoesNotExist
  // with values, empty key) is an error naming `path` and the field.
  static absl::StatusOr<LabelSelector> Compile(const v1::LabelSelector& selector,
                                               std::string_view path = "labelSelector");
  // Compile() of an optional field: absent = Nothing().
  template <typename Message>
  static absl::StatusOr<LabelSelector> CompileOptional(bool present, const Message& selector,
                                                       std::string_view path) {
    if (!present) return Nothing();
    return Compile(selector, path);
  }

  // Adds `key In (value)` (matchLabelKeys) or `key NotIn (value)`
  // (mismatchLabelKeys). No effect on Nothing().
  void AddRequirement(std::string key, Operator op, std::vector<std::string> values);

  bool Matches(const Labels& labels) const;
  bool MatchesNothing() const { return nothing_; }
  bool MatchesEverything() const { return !nothing_ && requirements_.empty(); }
  const std::vector<Requirement>& requirements() const { return requirements_; }
  // Requirements compared in order: equal selectors written in another order
  // are merely not recognised as equal (what a plugin keying counts on a
  // selector can afford).
  bool SameAs(const LabelSelector& other) const {
    if (nothing_ != other.nothing_ || requirements_.size() != other.requirements_.size()) return false;
    for (size_t i = 0; i < requirements_.size(); ++i) {
      const Requirement& a = requirements_[i];
      const Requirement& b = other.requirements_[i];
      if (a.key != b.key || a.op != b.op || a.values != b.values) return false;
    }
    return true;
  }

 private:
  bool nothing_ = false;
  std::vector<Requirement> requirements_;
};

}  // namespace podium::sdk
