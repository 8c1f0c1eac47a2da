// podiumctl status: whether the scheduler is scheduling (and if not, why),
// its adapter, the actions in flight, and what opportunistic batching did.
#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "commands.h"
#include "format.h"

namespace podium::ctl {
namespace {

uint64_t U(const boost::json::value& v) { return v.to_number<uint64_t>(); }

std::string Str(const boost::json::value& v) { return v.is_string() ? std::string(v.as_string()) : ""; }

// A proto map as a JSON object (boost::json keeps insertion order; the keys
// are sorted so the output is stable).
boost::json::object CountsJson(const google::protobuf::Map<std::string, uint64_t>& counts) {
  std::vector<std::pair<std::string, uint64_t>> sorted(counts.begin(), counts.end());
  std::sort(sorted.begin(), sorted.end());
  boost::json::object out;
  for (const auto& [key, n] : sorted) out[key] = n;
  return out;
}

// "Key:" padded to a column, then the value: kubectl describe's look.
void Field(std::string& out, const std::string& key, const std::string& value) {
  constexpr size_t kColumn = 18;
  const std::string pad(kColumn > key.size() + 1 ? kColumn - key.size() - 1 : 1, ' ');
  out += absl::StrCat(key, ":", pad, value, "\n");
}

// Rows of a {key: count} object, the largest count first.
void CountsTable(std::string& out, const char* header, const boost::json::value& counts) {
  std::vector<std::pair<std::string, uint64_t>> rows;
  for (const auto& [key, n] : counts.as_object()) rows.emplace_back(std::string(key), U(n));
  if (rows.empty()) return;
  std::stable_sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  Table table({header, "PODS"});
  for (auto& [key, n] : rows) table.AddRow({std::move(key), absl::StrCat(n)});
  absl::StrAppend(&out, "\n", table.Render());
}

}  // namespace

boost::json::value StatusDocument(const v1::SchedulerStatus& status) {
  const v1::BatchingStatus& b = status.batching();
  boost::json::object batching{
      {"hits", b.hits()},
      {"misses", b.misses()},
      {"unsignable", b.unsignable()},
      {"pods_by_result", CountsJson(b.pods_by_result())},
      {"unsignable_reasons", CountsJson(b.unsignable_reasons())},
      {"nodes_reevaluated", b.nodes_reevaluated()},
      {"what_if_verdicts", b.what_if_verdicts()},
      {"hits_without_request", b.hits_without_request()},
      {"lookaheads_sent", b.lookaheads_sent()},
      {"lookahead_hits", b.lookahead_hits()},
      {"nominated_checks_sent", b.nominated_checks_sent()},
      {"nominated_check_hits", b.nominated_check_hits()},
      {"preemption_what_if_hits", b.preemption_what_if_hits()},
      {"preemption_what_if_gone_nodes", b.preemption_what_if_gone_nodes()},
  };
  return boost::json::object{
      {"scheduling", status.scheduling_held_because().empty()},
      {"held_because", status.scheduling_held_because()},
      {"paused", status.paused()},
      {"adapter_connected", status.adapter_connected()},
      {"adapter", status.adapter()},
      {"pending_actions", status.pending_actions()},
      {"refused_adapter_streams", status.refused_adapter_streams()},
      {"refused_actions", status.refused_actions()},
      {"unknown_action_results", status.unknown_action_results()},
      {"log_verbosity", status.log_verbosity()},
      {"batching", std::move(batching)},
  };
}

std::string StatusText(const boost::json::value& doc, bool wide) {
  const auto& d = doc.as_object();
  std::string out;
  Field(out, "Scheduling",
        d.at("scheduling").as_bool() ? "yes" : absl::StrCat("no: ", Str(d.at("held_because"))));
  Field(out, "Adapter",
        d.at("adapter_connected").as_bool()
            ? (Str(d.at("adapter")).empty() ? std::string("connected") : Str(d.at("adapter")))
            : std::string("<none>"));
  Field(out, "Pending actions", absl::StrCat(U(d.at("pending_actions")), " (sent to the adapter, no result yet)"));
  Field(out, "Refused",
        absl::StrCat(U(d.at("refused_adapter_streams")), " adapter streams, ", U(d.at("refused_actions")),
                     " actions (outbox full); ", U(d.at("unknown_action_results")), " results of unknown actions"));
  Field(out, "Log verbosity", absl::StrCat(U(d.at("log_verbosity"))));
  const auto& b = d.at("batching").as_object();
  Field(out, "Batching",
        absl::StrCat(U(b.at("hits")), " hits (", U(b.at("hits_without_request")), " without a plugin request), ",
                     U(b.at("misses")), " misses, ", U(b.at("unsignable")), " unsignable"));
  if (wide) {
    Field(out, "Re-evaluated",
          absl::StrCat(U(b.at("nodes_reevaluated")), " nodes over the hits, ", U(b.at("what_if_verdicts")),
                       " taken from what-if verdicts instead"));
    Field(out, "Lookaheads", absl::StrCat(U(b.at("lookaheads_sent")), " asked, ", U(b.at("lookahead_hits")),
                                          " pods decided by one"));
    Field(out, "Nominated checks", absl::StrCat(U(b.at("nominated_checks_sent")), " asked, ",
                                                U(b.at("nominated_check_hits")), " pods decided by one"));
    Field(out, "Preemption",
          absl::StrCat(U(b.at("preemption_what_if_hits")), " pods that fit nowhere served from what-ifs, ",
                       U(b.at("preemption_what_if_gone_nodes")), " nodes from what-ifs of victims gone"));
  }
  CountsTable(out, "RESULT", b.at("pods_by_result"));
  CountsTable(out, "UNSIGNABLE BECAUSE", b.at("unsignable_reasons"));
  return out;
}

absl::Status RunStatus(CommandContext& ctx) {
  auto status = ctx.client.GetStatus();
  if (!status.ok()) return status.status();
  boost::json::value doc = StatusDocument(*status);
  PrintDocument(ctx, doc, [&](bool wide) { return StatusText(doc, wide); });
  return absl::OkStatus();
}

}  // namespace podium::ctl
