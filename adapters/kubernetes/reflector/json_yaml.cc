#include "reflector/json_yaml.h"

#include <charconv>
#include <cmath>

#include <boost/json.hpp>

#include "absl/strings/str_cat.h"

namespace podium::kube {
namespace {

namespace json = boost::json;

std::string Number(double d) {
  if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.0e15) {
    return absl::StrCat(static_cast<int64_t>(d));
  }
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), d);
  return ec == std::errc() ? std::string(buf, end) : absl::StrCat(d);
}

YAML::Node ToYaml(const json::value& v) {
  switch (v.kind()) {
    case json::kind::object: {
      YAML::Node n(YAML::NodeType::Map);
      // force_insert appends: operator[] would search the map for every key.
      for (const auto& kv : v.get_object()) n.force_insert(std::string(kv.key()), ToYaml(kv.value()));
      return n;
    }
    case json::kind::array: {
      YAML::Node n(YAML::NodeType::Sequence);
      for (const auto& e : v.get_array()) n.push_back(ToYaml(e));
      return n;
    }
    case json::kind::string: return YAML::Node(std::string(v.get_string()));
    case json::kind::int64: return YAML::Node(absl::StrCat(v.get_int64()));
    case json::kind::uint64: return YAML::Node(absl::StrCat(v.get_uint64()));
    case json::kind::double_: return YAML::Node(Number(v.get_double()));
    case json::kind::bool_: return YAML::Node(std::string(v.get_bool() ? "true" : "false"));
    case json::kind::null: break;
  }
  return YAML::Node(YAML::NodeType::Null);
}

}  // namespace

absl::StatusOr<YAML::Node> JsonToYaml(std::string_view text, std::string_view what) {
  json::monotonic_resource memory;
  json::parse_options options;
  options.max_depth = 256;
  boost::system::error_code ec;
  json::value v = json::parse(json::string_view(text.data(), text.size()), ec, &memory, options);
  if (ec) return absl::DataLossError(absl::StrCat(std::string(what), ": not JSON: ", ec.message()));
  return ToYaml(v);
}

}  // namespace podium::kube
