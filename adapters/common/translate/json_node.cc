#include "common/translate/json_node.h"

#include <charconv>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace podium::k8s {

namespace json = boost::json;

std::string JsonNumberText(const json::value& v) {
  switch (v.kind()) {
    case json::kind::int64: return absl::StrCat(v.get_int64());
    case json::kind::uint64: return absl::StrCat(v.get_uint64());
    case json::kind::double_: {
      const double d = v.get_double();
      if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.0e15) return absl::StrCat(static_cast<int64_t>(d));
      char buf[64];
      auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), d);
      return ec == std::errc() ? std::string(buf, end) : absl::StrCat(d);
    }
    default: return "";
  }
}

YAML::NodeType::value JsonNode::Type() const {
  if (v_ == nullptr) return YAML::NodeType::Undefined;
  switch (v_->kind()) {
    case json::kind::object: return YAML::NodeType::Map;
    case json::kind::array: return YAML::NodeType::Sequence;
    case json::kind::null: return YAML::NodeType::Null;
    default: return YAML::NodeType::Scalar;
  }
}

std::string JsonNode::Scalar() const {
  if (v_ == nullptr) return "";
  switch (v_->kind()) {
    case json::kind::string: return std::string(v_->get_string());
    case json::kind::bool_: return v_->get_bool() ? "true" : "false";
    case json::kind::int64:
    case json::kind::uint64:
    case json::kind::double_: return JsonNumberText(*v_);
    default: return "";
  }
}

bool JsonNode::DecodeBool(bool* out) const {
  if (v_ == nullptr) return false;
  if (v_->is_bool()) {
    *out = v_->get_bool();
    return true;
  }
  if (!IsScalar()) return false;
  // What yaml-cpp accepts for a scalar read as bool (its convert<bool>).
  return YAML::convert<bool>::decode(YAML::Node(Scalar()), *out);
}

size_t JsonNode::size() const {
  if (v_ == nullptr) return 0;
  if (v_->is_array()) return v_->get_array().size();
  if (v_->is_object()) return v_->get_object().size();
  return 0;
}

JsonNode JsonNode::operator[](size_t i) const {
  if (!IsSequence() || i >= v_->get_array().size()) return JsonNode();
  return JsonNode(&v_->get_array()[i]);
}

JsonNode JsonNode::operator[](const char* key) const {
  if (!IsMap()) return JsonNode();
  return JsonNode(v_->get_object().if_contains(key));
}

}  // namespace podium::k8s
