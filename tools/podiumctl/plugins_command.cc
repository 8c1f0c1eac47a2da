// podiumctl plugins: the plugin endpoints the scheduler dials, and what each serves.
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "commands.h"
#include "format.h"

namespace podium::ctl {
namespace {

// The server reports "NAME (ADDRESS)" in one string.
std::pair<std::string, std::string> SplitEndpoint(const std::string& endpoint) {
  const auto open = endpoint.find(" (");
  if (open == std::string::npos || endpoint.empty() || endpoint.back() != ')') return {endpoint, ""};
  return {endpoint.substr(0, open), endpoint.substr(open + 2, endpoint.size() - open - 3)};
}

std::string Str(const boost::json::value& v) { return v.is_string() ? std::string(v.as_string()) : ""; }

std::string Ms(const boost::json::value& v) { return absl::StrFormat("%.3fms", v.to_number<double>()); }

std::string Count(const boost::json::value& v) { return absl::StrCat(v.to_number<uint64_t>()); }

}  // namespace

boost::json::value PluginsDocument(const v1::ListPluginsResponse& response) {
  boost::json::array endpoints;
  for (const auto& e : response.endpoints()) {
    auto [name, address] = SplitEndpoint(e.endpoint());
    boost::json::array plugins;
    for (const auto& p : e.plugins()) {
      boost::json::array points;
      for (int ep : p.extension_points()) {
        points.emplace_back(CamelCase(v1::ExtensionPoint_Name(static_cast<v1::ExtensionPoint>(ep))));
      }
      plugins.push_back({{"name", p.name()}, {"extension_points", std::move(points)}});
    }
    // The connection's own state (Ready, Connecting, CircuitOpen) says more
    // than Ready / Failed; a scheduler that does not report it leaves the
    // coarse state.
    const std::string state = e.connection_state().empty()
                                  ? CamelCase(v1::PluginEndpointInfo::State_Name(e.state()))
                                  : CamelCase(e.connection_state());
    endpoints.push_back({{"name", name},
                         {"address", address},
                         {"state", state},
                         {"failure_policy", e.ignorable() ? "Ignore" : "Fail"},
                         {"plugins", std::move(plugins)},
                         {"requests", e.requests()},
                         {"errors", e.errors()},
                         {"timeouts", e.timeouts()},
                         {"invalid_answers", e.invalid_answers()},
                         {"latency_p50_ms", e.latency_p50_ms()},
                         {"latency_p99_ms", e.latency_p99_ms()},
                         {"reconnects", e.reconnects()},
                         {"last_error", e.last_error()}});
  }
  boost::json::object doc;
  doc["endpoints"] = std::move(endpoints);
  return doc;
}

std::string PluginsTable(const boost::json::value& doc, bool wide) {
  std::vector<std::string> headers = {"ENDPOINT", "STATE",    "POLICY", "PLUGINS", "REQUESTS",
                                      "ERRORS",   "TIMEOUTS", "INVALID", "P50",    "P99"};
  if (wide) {
    headers.push_back("RECONNECTS");
    headers.push_back("ADDRESS");
  }
  Table endpoints(headers);
  Table plugins({"PLUGIN", "ENDPOINT", "EXTENSION POINTS"});
  // Why an endpoint that is not ready failed, last: the one column that can
  // be long.
  Table errors({"ENDPOINT", "LAST ERROR"});
  for (const auto& v : doc.at("endpoints").as_array()) {
    const auto& e = v.as_object();
    if (const auto* error = e.if_contains("last_error"); error != nullptr && !Str(*error).empty()) {
      errors.AddRow({Str(e.at("name")), Str(*error)});
    }
    std::vector<std::string> row = {Str(e.at("name")),         Str(e.at("state")),
                                    Str(e.at("failure_policy")), absl::StrCat(e.at("plugins").as_array().size()),
                                    Count(e.at("requests")),   Count(e.at("errors")),
                                    Count(e.at("timeouts")),   Count(e.at("invalid_answers")),
                                    Ms(e.at("latency_p50_ms")), Ms(e.at("latency_p99_ms"))};
    if (wide) {
      row.push_back(Count(e.at("reconnects")));
      row.push_back(Str(e.at("address")));
    }
    endpoints.AddRow(std::move(row));
    for (const auto& pv : e.at("plugins").as_array()) {
      const auto& p = pv.as_object();
      plugins.AddRow({Str(p.at("name")), Str(e.at("name")), JoinCell(p.at("extension_points"))});
    }
  }
  std::string out = endpoints.Render();
  if (plugins.rows() > 0) absl::StrAppend(&out, "\n", plugins.Render());
  if (errors.rows() > 0) absl::StrAppend(&out, "\n", errors.Render());
  return out;
}

absl::Status RunPlugins(CommandContext& ctx) {
  auto response = ctx.client.ListPlugins();
  if (!response.ok()) return response.status();
  boost::json::value doc = PluginsDocument(*response);
  const OutputFormat f = ctx.invocation.output;
  if (response->endpoints_size() == 0 && (f == OutputFormat::kTable || f == OutputFormat::kWide)) {
    ctx.err << "The scheduler has no plugin endpoints.\n";
    return absl::OkStatus();
  }
  PrintDocument(
      ctx, doc, [&](bool wide) { return PluginsTable(doc, wide); },
      [&] {
        std::string out;
        for (const auto& e : doc.at("endpoints").as_array()) absl::StrAppend(&out, Str(e.at("name")), "\n");
        return out;
      });
  return absl::OkStatus();
}

}  // namespace podium::ctl
