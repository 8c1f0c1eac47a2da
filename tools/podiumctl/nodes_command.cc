// podiumctl nodes: the scheduler's cluster cache, per node.
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "commands.h"
#include "format.h"

namespace podium::ctl {
namespace {

boost::json::object ResourcesJson(const v1::ResourceList& r) {
  boost::json::object scalar;
  // Sorted, so the output is the same on every run.
  std::map<std::string, int64_t> sorted(r.scalar().begin(), r.scalar().end());
  for (const auto& [k, v] : sorted) scalar[k] = v;
  return {{"milli_cpu", r.milli_cpu()},
          {"memory_bytes", r.memory_bytes()},
          {"ephemeral_storage_bytes", r.ephemeral_storage_bytes()},
          {"pods", r.pods()},
          {"scalar", std::move(scalar)}};
}

boost::json::array Refs(const google::protobuf::RepeatedPtrField<v1::ObjectRef>& refs) {
  boost::json::array a;
  for (const auto& r : refs) a.emplace_back(absl::StrCat(r.namespace_(), "/", r.name()));
  return a;
}

int64_t Int(const boost::json::object& o, const char* key) { return o.at(key).to_number<int64_t>(); }

}  // namespace

boost::json::value NodesDocument(const v1::DumpCacheResponse& response) {
  boost::json::array nodes;
  for (const auto& n : response.nodes()) {
    nodes.push_back({{"name", n.name()},
                     {"generation", n.generation()},
                     {"allocatable", ResourcesJson(n.allocatable())},
                     {"requested", ResourcesJson(n.requested())},
                     {"pods", Refs(n.pods())},
                     {"assumed_pods", Refs(n.assumed_pods())},
                     {"nominated_pods", Refs(n.nominated_pods())}});
  }
  boost::json::object doc;
  doc["nodes"] = std::move(nodes);
  doc["generation"] = response.generation();
  doc["assumed_pods"] = response.assumed_pods();
  return doc;
}

std::string NodesTable(const boost::json::value& doc, bool wide) {
  std::vector<std::string> headers = {"NAME", "CPU", "CPU%", "MEMORY", "MEMORY%", "PODS", "ASSUMED", "NOMINATED"};
  if (wide) {
    for (const char* h : {"EPHEMERAL STORAGE", "EXTENDED", "GENERATION"}) headers.push_back(h);
  }
  Table table(headers);
  for (const auto& v : doc.at("nodes").as_array()) {
    const auto& n = v.as_object();
    const auto& alloc = n.at("allocatable").as_object();
    const auto& req = n.at("requested").as_object();
    const int64_t bound = static_cast<int64_t>(n.at("pods").as_array().size());
    const int64_t assumed = static_cast<int64_t>(n.at("assumed_pods").as_array().size());
    std::vector<std::string> row = {
        std::string(n.at("name").as_string()),
        absl::StrCat(FormatMilliCpu(Int(req, "milli_cpu")), "/", FormatMilliCpu(Int(alloc, "milli_cpu"))),
        FormatPercent(Int(req, "milli_cpu"), Int(alloc, "milli_cpu")),
        absl::StrCat(FormatBytes(Int(req, "memory_bytes")), "/", FormatBytes(Int(alloc, "memory_bytes"))),
        FormatPercent(Int(req, "memory_bytes"), Int(alloc, "memory_bytes")),
        absl::StrCat(bound + assumed, "/", Int(alloc, "pods")),
        absl::StrCat(assumed),
        absl::StrCat(n.at("nominated_pods").as_array().size()),
    };
    if (wide) {
      row.push_back(absl::StrCat(FormatBytes(Int(req, "ephemeral_storage_bytes")), "/",
                                 FormatBytes(Int(alloc, "ephemeral_storage_bytes"))));
      std::vector<std::string> extended;
      const auto& alloc_scalar = alloc.at("scalar").as_object();
      const auto& req_scalar = req.at("scalar").as_object();
      std::map<std::string, std::pair<int64_t, int64_t>> names;
      for (const auto& kv : alloc_scalar) names[std::string(kv.key())].second = kv.value().as_int64();
      for (const auto& kv : req_scalar) names[std::string(kv.key())].first = kv.value().as_int64();
      for (const auto& [name, used_total] : names) {
        extended.push_back(absl::StrCat(name, "=", used_total.first, "/", used_total.second));
      }
      row.push_back(absl::StrJoin(extended, ","));
      row.push_back(absl::StrCat(n.at("generation").to_number<uint64_t>()));
    }
    table.AddRow(std::move(row));
  }
  return table.Render();
}

absl::Status RunNodes(CommandContext& ctx) {
  v1::DumpCacheRequest request;
  request.set_include_pods(true);
  auto response = ctx.client.DumpCache(request);
  if (!response.ok()) return response.status();
  boost::json::value doc = NodesDocument(*response);
  const OutputFormat f = ctx.invocation.output;
  if (response->nodes_size() == 0 && (f == OutputFormat::kTable || f == OutputFormat::kWide)) {
    ctx.err << "No nodes in the scheduler's cache.\n";
    return absl::OkStatus();
  }
  PrintDocument(
      ctx, doc, [&](bool wide) { return NodesTable(doc, wide); },
      [&] {
        std::string out;
        for (const auto& n : doc.at("nodes").as_array()) absl::StrAppend(&out, std::string(n.at("name").as_string()), "\n");
        return out;
      });
  return absl::OkStatus();
}

}  // namespace podium::ctl
