#include "plugins/helper/args.h"

#include <cmath>

#include "boost/json/array.hpp"
#include "boost/json/string.hpp"
#include "plugins/helper/str.h"

namespace podium::plugins {
namespace json = boost::json;

absl::Status ArgsError(std::string_view plugin, std::string_view path, std::string_view message) {
  if (path.empty()) return absl::InvalidArgumentError(Cat(plugin, " args: ", message));
  return absl::InvalidArgumentError(Cat(plugin, " args: ", path, ": ", message));
}

std::string JoinPath(std::string_view path, std::string_view field) {
  if (path.empty()) return std::string(field);
  return Cat(path, ".", field);
}

std::string IndexPath(std::string_view path, size_t index) { return Cat(path, "[", index, "]"); }

absl::Status CheckKnownFields(const json::object& object, std::string_view plugin,
                              std::string_view path,
                              std::initializer_list<std::string_view> known) {
  for (const auto& kv : object) {
    std::string_view key(kv.key().data(), kv.key().size());
    bool ok = path.empty() && (key == "apiVersion" || key == "kind");
    for (std::string_view k : known) ok = ok || k == key;
    if (!ok) return ArgsError(plugin, JoinPath(path, key), "unknown field");
  }
  return absl::OkStatus();
}

absl::Status ReadString(const json::value& v, std::string_view plugin, std::string_view path,
                        std::string* out) {
  if (!v.is_string()) return ArgsError(plugin, path, "must be a string");
  const json::string& s = v.get_string();
  out->assign(s.data(), s.size());
  return absl::OkStatus();
}

absl::Status ReadInt(const json::value& v, std::string_view plugin, std::string_view path,
                     int64_t* out) {
  if (v.is_int64()) {
    *out = v.get_int64();
    return absl::OkStatus();
  }
  if (v.is_uint64() && v.get_uint64() <= static_cast<uint64_t>(INT64_MAX)) {
    *out = static_cast<int64_t>(v.get_uint64());
    return absl::OkStatus();
  }
  if (v.is_double()) {
    double d = v.get_double();
    if (std::isfinite(d) && std::trunc(d) == d && std::abs(d) < 9.0e15) {
      *out = static_cast<int64_t>(d);
      return absl::OkStatus();
    }
  }
  return ArgsError(plugin, path, "must be an integer");
}

absl::Status ReadArray(const json::value& v, std::string_view plugin, std::string_view path,
                       const json::array** out) {
  if (!v.is_array()) return ArgsError(plugin, path, "must be a list");
  *out = &v.get_array();
  return absl::OkStatus();
}

absl::Status ReadObject(const json::value& v, std::string_view plugin, std::string_view path,
                        const json::object** out) {
  if (!v.is_object()) return ArgsError(plugin, path, "must be an object");
  *out = &v.get_object();
  return absl::OkStatus();
}

namespace {

absl::Status ReadRequirements(
    const json::value& v, std::string_view plugin, std::string_view path,
    google::protobuf::RepeatedPtrField<v1::NodeSelectorRequirement>* out) {
  const json::array* list;
  if (absl::Status s = ReadArray(v, plugin, path, &list); !s.ok()) return s;
  for (size_t i = 0; i < list->size(); ++i) {
    const std::string p = IndexPath(path, i);
    const json::object* o;
    if (absl::Status s = ReadObject((*list)[i], plugin, p, &o); !s.ok()) return s;
    if (absl::Status s = CheckKnownFields(*o, plugin, p, {"key", "operator", "values"}); !s.ok()) {
      return s;
    }
    v1::NodeSelectorRequirement* r = out->Add();
    if (const json::value* key = o->if_contains("key")) {
      if (absl::Status s = ReadString(*key, plugin, JoinPath(p, "key"), r->mutable_key());
          !s.ok()) {
        return s;
      }
    }
    std::string op;
    if (const json::value* opv = o->if_contains("operator")) {
      if (absl::Status s = ReadString(*opv, plugin, JoinPath(p, "operator"), &op); !s.ok()) {
        return s;
      }
    }
    if (op == "In") {
      r->set_operator_(v1::NodeSelectorRequirement::IN);
    } else if (op == "NotIn") {
      r->set_operator_(v1::NodeSelectorRequirement::NOT_IN);
    } else if (op == "Exists") {
      r->set_operator_(v1::NodeSelectorRequirement::EXISTS);
    } else if (op == "DoesNotExist") {
      r->set_operator_(v1::NodeSelectorRequirement::DOES_NOT_EXIST);
    } else if (op == "Gt") {
      r->set_operator_(v1::NodeSelectorRequirement::GT);
    } else if (op == "Lt") {
      r->set_operator_(v1::NodeSelectorRequirement::LT);
    } else {
      return ArgsError(plugin, JoinPath(p, "operator"), Cat("unknown value \"", op, "\""));
    }
    if (const json::value* values = o->if_contains("values")) {
      const json::array* vals;
      const std::string vp = JoinPath(p, "values");
      if (absl::Status s = ReadArray(*values, plugin, vp, &vals); !s.ok()) return s;
      for (size_t j = 0; j < vals->size(); ++j) {
        if (absl::Status s = ReadString((*vals)[j], plugin, IndexPath(vp, j), r->add_values());
            !s.ok()) {
          return s;
        }
      }
    }
  }
  return absl::OkStatus();
}

absl::Status ReadTerm(const json::value& v, std::string_view plugin, std::string_view path,
                      v1::NodeSelectorTerm* out) {
  const json::object* o;
  if (absl::Status s = ReadObject(v, plugin, path, &o); !s.ok()) return s;
  if (absl::Status s = CheckKnownFields(*o, plugin, path, {"matchExpressions", "matchFields"});
      !s.ok()) {
    return s;
  }
  if (const json::value* e = o->if_contains("matchExpressions")) {
    if (absl::Status s = ReadRequirements(*e, plugin, JoinPath(path, "matchExpressions"),
                                          out->mutable_match_expressions());
        !s.ok()) {
      return s;
    }
  }
  if (const json::value* f = o->if_contains("matchFields")) {
    if (absl::Status s = ReadRequirements(*f, plugin, JoinPath(path, "matchFields"),
                                          out->mutable_match_fields());
        !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ReadNodeSelector(const json::value& v, std::string_view plugin, std::string_view path,
                              v1::NodeSelector* out) {
  const json::object* o;
  if (absl::Status s = ReadObject(v, plugin, path, &o); !s.ok()) return s;
  if (absl::Status s = CheckKnownFields(*o, plugin, path, {"nodeSelectorTerms"}); !s.ok()) return s;
  const json::value* terms = o->if_contains("nodeSelectorTerms");
  if (terms == nullptr) return absl::OkStatus();
  const std::string tp = JoinPath(path, "nodeSelectorTerms");
  const json::array* list;
  if (absl::Status s = ReadArray(*terms, plugin, tp, &list); !s.ok()) return s;
  for (size_t i = 0; i < list->size(); ++i) {
    if (absl::Status s = ReadTerm((*list)[i], plugin, IndexPath(tp, i), out->add_terms());
        !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

absl::Status ReadPreferredSchedulingTerms(
    const json::value& v, std::string_view plugin, std::string_view path,
    google::protobuf::RepeatedPtrField<v1::PreferredSchedulingTerm>* out) {
  const json::array* list;
  if (absl::Status s = ReadArray(v, plugin, path, &list); !s.ok()) return s;
  for (size_t i = 0; i < list->size(); ++i) {
    const std::string p = IndexPath(path, i);
    const json::object* o;
    if (absl::Status s = ReadObject((*list)[i], plugin, p, &o); !s.ok()) return s;
    if (absl::Status s = CheckKnownFields(*o, plugin, p, {"weight", "preference"}); !s.ok()) {
      return s;
    }
    v1::PreferredSchedulingTerm* term = out->Add();
    int64_t weight = 0;
    if (const json::value* w = o->if_contains("weight")) {
      if (absl::Status s = ReadInt(*w, plugin, JoinPath(p, "weight"), &weight); !s.ok()) return s;
    }
    if (weight < 1 || weight > 100) {
      return ArgsError(plugin, JoinPath(p, "weight"), "must be in the range 1-100");
    }
    term->set_weight(static_cast<int32_t>(weight));
    if (const json::value* pref = o->if_contains("preference")) {
      if (absl::Status s =
              ReadTerm(*pref, plugin, JoinPath(p, "preference"), term->mutable_preference());
          !s.ok()) {
        return s;
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace podium::plugins
