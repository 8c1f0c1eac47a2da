#pragma once

// A read-only view of a Boost.JSON value with the part of yaml-cpp's
// YAML::Node interface that the shared translation (k8s_yaml.cc) reads, so the
// Kubernetes adapter translates the API's JSON straight into podium.v1 objects
// with the same code, the same checks and the same error paths as podium-sim's
// YAML, without building a yaml-cpp node graph per object.
//
// Scalars read as yaml-cpp read the JSON before: strings as they are, integers
// in decimal, other numbers in the shortest form that reads back (1.5, 1e+30),
// booleans as "true"/"false". A missing key is undefined, JSON null is null:
// both are "absent" to the translation.

#include <string>
#include <string_view>

#include <boost/json/value.hpp>

#include "yaml-cpp/yaml.h"

namespace podium::k8s {

class JsonNode {
 public:
  JsonNode() = default;  // Undefined (a missing key).
  explicit JsonNode(const boost::json::value* v) : v_(v) {}
  explicit JsonNode(const boost::json::value& v) : v_(&v) {}

  bool IsDefined() const { return v_ != nullptr; }
  bool IsNull() const { return v_ != nullptr && v_->is_null(); }
  bool IsMap() const { return v_ != nullptr && v_->is_object(); }
  bool IsSequence() const { return v_ != nullptr && v_->is_array(); }
  bool IsScalar() const { return v_ != nullptr && (v_->is_string() || v_->is_number() || v_->is_bool()); }
  YAML::NodeType::value Type() const;

  // The scalar's text (see above); "" for anything else.
  std::string Scalar() const;
  // A JSON boolean, or a string yaml-cpp reads as one ("true", "yes", "on"...).
  bool DecodeBool(bool* out) const;

  size_t size() const;                      // Elements of a list, members of a mapping, else 0.
  JsonNode operator[](size_t i) const;      // Undefined when out of range or not a list.
  JsonNode operator[](const char* key) const;  // Undefined when missing or not a mapping.

  // Each member of a mapping, in document order: fn(std::string key, JsonNode value).
  template <typename F>
  void ForEachMember(F&& fn) const {
    if (!IsMap()) return;
    for (const auto& kv : v_->get_object()) fn(std::string(kv.key()), JsonNode(&kv.value()));
  }

  const boost::json::value* value() const { return v_; }

 private:
  const boost::json::value* v_ = nullptr;
};

// A JSON number as yaml-cpp saw it when it parsed the same text.
std::string JsonNumberText(const boost::json::value& v);

}  // namespace podium::k8s
