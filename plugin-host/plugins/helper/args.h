// Reading pluginConfig args (JSON objects, KubeSchedulerConfiguration field
// names) with errors that name the plugin and the field.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "boost/json/object.hpp"
#include "boost/json/value.hpp"
#include "podium/v1/objects.pb.h"

namespace podium::plugins {

// "<plugin> args: <path>: <message>".
absl::Status ArgsError(std::string_view plugin, std::string_view path, std::string_view message);

// Rejects fields not in `known`. At the top level (empty `path`), apiVersion
// and kind are accepted too, since configs often carry them.
absl::Status CheckKnownFields(const boost::json::object& object, std::string_view plugin,
                              std::string_view path, std::initializer_list<std::string_view> known);

// For plugins that take no args.
inline absl::Status ExpectNoArgs(const boost::json::object& args, std::string_view plugin) {
  return CheckKnownFields(args, plugin, "", {});
}

std::string JoinPath(std::string_view path, std::string_view field);
std::string IndexPath(std::string_view path, size_t index);

absl::Status ReadString(const boost::json::value& v, std::string_view plugin, std::string_view path,
                        std::string* out);
absl::Status ReadInt(const boost::json::value& v, std::string_view plugin, std::string_view path,
                     int64_t* out);
absl::Status ReadArray(const boost::json::value& v, std::string_view plugin, std::string_view path,
                       const boost::json::array** out);
absl::Status ReadObject(const boost::json::value& v, std::string_view plugin, std::string_view path,
                        const boost::json::object** out);

// A NodeSelector / PreferredSchedulingTerm list in Kubernetes' JSON shape
// ({nodeSelectorTerms: [{matchExpressions: [{key, operator, values}],
// matchFields: [...]}]}).
absl::Status ReadNodeSelector(const boost::json::value& v, std::string_view plugin,
                              std::string_view path, v1::NodeSelector* out);
absl::Status ReadPreferredSchedulingTerms(
    const boost::json::value& v, std::string_view plugin, std::string_view path,
    google::protobuf::RepeatedPtrField<v1::PreferredSchedulingTerm>* out);

}  // namespace podium::plugins
