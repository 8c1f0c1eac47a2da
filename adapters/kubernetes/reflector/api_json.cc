#include "reflector/api_json.h"

#include <boost/json.hpp>

#include "absl/strings/str_cat.h"
#include "common/translate/json_node.h"

namespace podium::kube {

namespace json = boost::json;

absl::StatusOr<json::value> ParseApiJson(std::string_view text, std::string_view what) {
  json::parse_options options;
  // Deeper than the schemas of the kinds we watch ever nest. Kept well
  // below Go's 10000: destroying a parsed value recurses once per level, on
  // the reflector's thread stack. A deeper watch event is undecodable (the
  // reflector relists).
  options.max_depth = 256;
  boost::system::error_code ec;
  // One arena per document, kept alive by the values in it: a list page's
  // items are freed together when the page is done.
  json::storage_ptr storage = json::make_shared_resource<json::monotonic_resource>();
  json::value v = json::parse(json::string_view(text.data(), text.size()), ec, std::move(storage), options);
  if (ec) return absl::DataLossError(absl::StrCat(std::string(what), ": not JSON: ", ec.message()));
  return v;
}

const json::value* Member(const json::value* v, std::string_view key) {
  if (v == nullptr || !v->is_object()) return nullptr;
  return v->get_object().if_contains(json::string_view(key.data(), key.size()));
}

std::string ScalarText(const json::value* v) {
  if (v == nullptr) return "";
  return k8s::JsonNode(v).Scalar();
}

}  // namespace podium::kube
