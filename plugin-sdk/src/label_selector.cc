#include "podium/sdk/label_selector.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl_compat.h"

namespace podium::sdk {
namespace {

using internal::AsAbsl;

absl::Status Invalid(std::string_view path, std::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat(AsAbsl(path), ": ", AsAbsl(message)));
}

}  // namespace

bool LabelSelector::Requirement::Matches(const Labels& labels) const {
  auto it = labels.find(key);
  switch (op) {
    case Operator::kExists:
      return it != labels.end();
    case Operator::kDoesNotExist:
      return it == labels.end();
    case Operator::kIn:
      return it != labels.end() &&
             std::find(values.begin(), values.end(), it->second) != values.end();
    case Operator::kNotIn:
      return it == labels.end() ||
             std::find(values.begin(), values.end(), it->second) == values.end();
  }
  return false;
}

absl::StatusOr<LabelSelector> LabelSelector::Compile(const v1::LabelSelector& selector,
                                                     std::string_view path) {
  LabelSelector out;
  out.requirements_.reserve(selector.match_labels_size() + selector.match_expressions_size());
  for (const auto& [key, value] : selector.match_labels()) {
    if (key.empty()) return Invalid(absl::StrCat(AsAbsl(path), ".matchLabels"), "empty key");
    out.requirements_.push_back({key, Operator::kIn, {value}});
  }
  for (int i = 0; i < selector.match_expressions_size(); ++i) {
    const v1::LabelSelectorRequirement& r = selector.match_expressions(i);
    const std::string where = absl::StrCat(AsAbsl(path), ".matchExpressions[", i, "]");
    if (r.key().empty()) return Invalid(absl::StrCat(where, ".key"), "empty key");
    Requirement req{r.key(), Operator::kIn, {r.values().begin(), r.values().end()}};
    switch (r.operator_()) {
      case v1::LabelSelectorRequirement::IN:
      case v1::LabelSelectorRequirement::NOT_IN:
        req.op = r.operator_() == v1::LabelSelectorRequirement::IN ? Operator::kIn
                                                                   : Operator::kNotIn;
        if (req.values.empty()) {
          return Invalid(absl::StrCat(where, ".values"),
                         "must be specified when `operator` is 'In' or 'NotIn'");
        }
        break;
      case v1::LabelSelectorRequirement::EXISTS:
      case v1::LabelSelectorRequirement::DOES_NOT_EXIST:
        req.op = r.operator_() == v1::LabelSelectorRequirement::EXISTS ? Operator::kExists
                                                                       : Operator::kDoesNotExist;
        if (!req.values.empty()) {
          return Invalid(absl::StrCat(where, ".values"),
                         "may not be specified when `operator` is 'Exists' or 'DoesNotExist'");
        }
        break;
      default:
        return Invalid(absl::StrCat(where, ".operator"),
                       absl::StrCat("not a valid selector operator (", r.operator_(), ")"));
    }
    out.requirements_.push_back(std::move(req));
  }
  return out;
}

void LabelSelector::AddRequirement(std::string key, Operator op, std::vector<std::string> values) {
  if (nothing_) return;
  requirements_.push_back({std::move(key), op, std::move(values)});
}

bool LabelSelector::Matches(const Labels& labels) const {
  if (nothing_) return false;
  for (const Requirement& r : requirements_) {
    if (!r.Matches(labels)) return false;
  }
  return true;
}

bool SameStringMap(const Labels& a, const Labels& b) {
  if (a.size() != b.size()) return false;
  for (const auto& [key, value] : a) {
    auto it = b.find(key);
    if (it == b.end() || it->second != value) return false;
  }
  return true;
}

}  // namespace podium::sdk
