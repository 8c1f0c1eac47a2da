#include "sim/report.h"

#include <algorithm>
#include <cmath>

#include <boost/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace podium::sim {
namespace {

boost::json::value Opt(const std::optional<double>& v) {
  if (!v) return nullptr;
  return std::round(*v * 1000.0) / 1000.0;
}

std::string Ms(const std::optional<double>& v) { return v ? absl::StrFormat("%.2f ms", *v) : "n/a"; }

}  // namespace

std::optional<double> Percentile(std::vector<double> samples, double p) {
  if (samples.empty()) return std::nullopt;
  std::sort(samples.begin(), samples.end());
  size_t rank = static_cast<size_t>(std::ceil(p / 100.0 * static_cast<double>(samples.size())));
  return samples[std::clamp<size_t>(rank, 1, samples.size()) - 1];
}

void SummarizeGangs(const std::vector<std::pair<std::string, std::pair<std::string, int>>>& groups,
                    const std::vector<GangMember>& members, Report* r) {
  for (const auto& [ns, name_min] : groups) {
    Report::Gang g;
    g.ns = ns;
    g.name = name_min.first;
    g.min_member = name_min.second;
    size_t unschedulable = 0;
    std::string reason;
    for (const GangMember& m : members) {
      if (m.ns != ns || m.group != g.name) continue;
      ++g.members;
      if (m.bound) ++g.bound;
      if (!m.bound && m.unschedulable) {
        ++unschedulable;
        if (reason.empty()) reason = m.message;
      }
    }
    if (g.bound >= static_cast<size_t>(std::max(1, g.min_member))) {
      g.outcome = "bound";
      ++r->gangs_bound;
    } else if (g.bound > 0) {
      g.outcome = "partially bound";
      ++r->gangs_partially_bound;
    } else if (unschedulable > 0 && unschedulable == g.members) {
      g.outcome = "unschedulable";
      g.reason = reason;
      ++r->gangs_unschedulable;
    } else {
      g.outcome = "waiting";
      if (g.members < static_cast<size_t>(g.min_member)) {
        g.reason = absl::StrCat(g.members, " of minMember ", g.min_member, " pods exist");
      } else if (!reason.empty()) {
        g.reason = reason;
      }
      ++r->gangs_waiting;
    }
    r->gangs.push_back(std::move(g));
  }
}

std::string ReportJson(const Report& r) {
  boost::json::object o;
  if (r.workload.empty()) o["workload"] = nullptr;
  else o["workload"] = r.workload;
  o["outcome"] = r.outcome;
  o["nodes"] = r.nodes;
  o["pods"] = r.pods;
  o["measured_pods"] = r.measured_pods;
  o["bound"] = r.bound;
  o["unschedulable"] = r.unschedulable;
  o["scheduling_errors"] = r.scheduling_errors;
  o["error_attempts"] = r.error_attempts;
  o["gated"] = r.gated;
  o["other_scheduler"] = r.other_scheduler;
  o["pending"] = r.pending;
  o["deleted"] = r.deleted;
  o["held"] = r.held;
  o["seconds"] = std::round(r.seconds * 1e6) / 1e6;
  o["pods_per_second"] = Opt(r.pods_per_second);
  o["e2e_p50_ms"] = Opt(r.e2e_p50_ms);
  o["e2e_p99_ms"] = Opt(r.e2e_p99_ms);
  o["first_bind_ms"] = Opt(r.first_bind_ms);
  o["attempt_p50_ms"] = Opt(r.attempt_p50_ms);
  o["attempt_p99_ms"] = Opt(r.attempt_p99_ms);
  o["attempts"] = r.attempts;
  o["scheduler_peak_rss_mb"] = Opt(r.scheduler_peak_rss_mb);
  o["plugin_host_peak_rss_mb"] = Opt(r.plugin_host_peak_rss_mb);
  if (r.scheduler_cost || r.plugin_host_cost || r.sim_cost) {
    boost::json::object cost;
    auto add = [&cost](const char* name, const std::optional<Report::Cost>& c) {
      if (!c) return;
      cost[name] = {{"cpu_ms_per_pod", std::round(c->cpu_ms_per_pod * 1e4) / 1e4},
                    {"context_switches_per_pod", std::round(c->context_switches_per_pod * 100) / 100}};
    };
    add("scheduler", r.scheduler_cost);
    add("plugin_host", r.plugin_host_cost);
    add("sim", r.sim_cost);
    o["cost"] = std::move(cost);
  }
  o["actions"] = {{"bind", r.actions_bind},
                  {"delete_pod", r.actions_delete},
                  {"patch_pod_status", r.actions_patch},
                  {"record_event", r.actions_event},
                  {"failed", r.actions_failed}};
  boost::json::array placements;
  for (const auto& p : r.placements) placements.push_back({{"namespace", p.ns}, {"name", p.name}, {"node", p.node}});
  o["placements"] = std::move(placements);
  boost::json::array unsched;
  for (const auto& u : r.unschedulable_pods)
    unsched.push_back({{"namespace", u.ns}, {"name", u.name}, {"message", u.message}, {"nominated_node", u.nominated_node}});
  o["unschedulable_pods"] = std::move(unsched);
  boost::json::array errors;
  for (const auto& u : r.error_pods) errors.push_back({{"namespace", u.ns}, {"name", u.name}, {"message", u.message}});
  o["error_pods"] = std::move(errors);
  boost::json::array pending;
  for (const auto& p : r.pending_pods) pending.push_back(boost::json::string(p));
  o["pending_pods"] = std::move(pending);
  boost::json::array deleted;
  for (const auto& p : r.deleted_pods) deleted.push_back(boost::json::string(p));
  o["deleted_pods"] = std::move(deleted);
  boost::json::array resizes;
  for (const auto& z : r.resizes) {
    resizes.push_back({{"namespace", z.ns}, {"name", z.name}, {"node", z.node}, {"resize_status", z.status},
                       {"applied", z.applied}, {"message", z.message}});
  }
  o["resizes"] = std::move(resizes);
  boost::json::array gangs;
  for (const auto& g : r.gangs) {
    gangs.push_back({{"namespace", g.ns}, {"name", g.name}, {"min_member", g.min_member}, {"members", g.members},
                     {"bound", g.bound}, {"outcome", g.outcome}, {"reason", g.reason}});
  }
  o["gangs"] = std::move(gangs);
  boost::json::array held;
  for (const auto& u : r.held_pods) held.push_back({{"namespace", u.ns}, {"name", u.name}, {"message", u.message}});
  o["held_pods"] = std::move(held);
  o["gangs_bound"] = r.gangs_bound;
  o["gangs_waiting"] = r.gangs_waiting;
  o["gangs_unschedulable"] = r.gangs_unschedulable;
  o["gangs_partially_bound"] = r.gangs_partially_bound;
  o["seconds_per_gang"] = Opt(r.seconds_per_gang);
  return boost::json::serialize(o) + "\n";
}

std::string ReportText(const Report& r, size_t max_rows) {
  std::string out;
  if (r.placements.size() <= max_rows) {
    size_t width = 3;
    for (const auto& p : r.placements) width = std::max(width, p.ns.size() + 1 + p.name.size());
    absl::StrAppend(&out, absl::StrFormat("%-*s  %s\n", static_cast<int>(width), "POD", "NODE"));
    for (const auto& p : r.placements)
      absl::StrAppend(&out, absl::StrFormat("%-*s  %s\n", static_cast<int>(width), absl::StrCat(p.ns, "/", p.name), p.node));
  } else {
    absl::StrAppend(&out, "(", r.placements.size(), " placements not listed; --output json has them)\n");
  }
  if (!r.unschedulable_pods.empty()) {
    absl::StrAppend(&out, "\nUnschedulable (FailedScheduling):\n");
    for (const auto& u : r.unschedulable_pods)
      absl::StrAppend(&out, "  ", u.ns, "/", u.name, ": ", u.message.empty() ? "(no message)" : u.message,
                      u.nominated_node.empty() ? "" : absl::StrCat(" (nominated to ", u.nominated_node, ")"), "\n");
  }
  if (!r.error_pods.empty()) {
    absl::StrAppend(&out, "\nScheduling errors (the attempt failed; not unschedulable):\n");
    for (const auto& u : r.error_pods)
      absl::StrAppend(&out, "  ", u.ns, "/", u.name, ": ", u.message.empty() ? "(no message)" : u.message, "\n");
  }
  if (!r.deleted_pods.empty()) {
    absl::StrAppend(&out, "\nDeleted by the scheduler:\n");
    for (const auto& d : r.deleted_pods) absl::StrAppend(&out, "  ", d, "\n");
  }
  if (!r.resizes.empty() && r.resizes.size() <= max_rows) {
    absl::StrAppend(&out, "\nIn-place resizes:\n");
    for (const auto& z : r.resizes) {
      absl::StrAppend(&out, "  ", z.ns, "/", z.name, " on ", z.node, ": ",
                      z.applied ? "applied" : z.status, z.message.empty() ? "" : ": ", z.message, "\n");
    }
  }
  if (!r.held_pods.empty() && r.held_pods.size() <= max_rows) {
    absl::StrAppend(&out, "\nHeld before the queue (SchedulingGated):\n");
    for (const auto& u : r.held_pods) absl::StrAppend(&out, "  ", u.ns, "/", u.name, ": ", u.message, "\n");
  }
  if (!r.gangs.empty() && r.gangs.size() <= max_rows) {
    absl::StrAppend(&out, "\nGangs (PodGroups):\n");
    for (const auto& g : r.gangs) {
      std::string outcome = g.outcome;
      if (g.outcome == "bound") outcome = g.bound == g.members ? "bound whole" : absl::StrCat("bound (", g.bound, " of ", g.members, ")");
      absl::StrAppend(&out, "  ", g.ns, "/", g.name, " (minMember ", g.min_member, ", ", g.members, " pods): ", outcome,
                      g.reason.empty() ? "" : absl::StrCat(": ", g.reason), "\n");
    }
  }
  if (!r.pending_pods.empty()) {
    absl::StrAppend(&out, "\nStill pending:\n");
    for (const auto& p : r.pending_pods) absl::StrAppend(&out, "  ", p, "\n");
  }
  absl::StrAppend(&out, "\n", r.workload.empty() ? "" : absl::StrCat("workload ", r.workload, ": "), r.nodes,
                  " nodes, ", r.pods, " pods: ", r.bound, " bound, ", r.unschedulable, " unschedulable");
  if (r.scheduling_errors) absl::StrAppend(&out, ", ", r.scheduling_errors, " scheduling errors");
  if (r.gated) absl::StrAppend(&out, ", ", r.gated, " gated");
  if (r.held) absl::StrAppend(&out, ", ", r.held, " held at PreEnqueue");
  if (r.other_scheduler) absl::StrAppend(&out, ", ", r.other_scheduler, " for other schedulers");
  if (r.pending) absl::StrAppend(&out, ", ", r.pending, " pending");
  if (r.deleted) absl::StrAppend(&out, ", ", r.deleted, " deleted");
  absl::StrAppend(&out, "\n");
  if (!r.gangs.empty()) {
    absl::StrAppend(&out, r.gangs.size(), " gangs: ", r.gangs_bound, " bound, ", r.gangs_unschedulable,
                    " unschedulable, ", r.gangs_waiting, " waiting, ", r.gangs_partially_bound, " partially bound");
    if (r.seconds_per_gang) absl::StrAppend(&out, absl::StrFormat(" (%.2f ms per gang)", *r.seconds_per_gang * 1000));
    absl::StrAppend(&out, "\n");
  }
  absl::StrAppend(&out, absl::StrFormat("measured %d pods in %.3f s", r.measured_pods, r.seconds));
  if (r.pods_per_second) absl::StrAppend(&out, absl::StrFormat(" (%.1f pods/s)", *r.pods_per_second));
  absl::StrAppend(&out, "; creation->bound p50 ", Ms(r.e2e_p50_ms), ", p99 ", Ms(r.e2e_p99_ms),
                  "; first bind ", Ms(r.first_bind_ms), "; attempt p50 ", Ms(r.attempt_p50_ms), ", p99 ", Ms(r.attempt_p99_ms), "\n");
  if (r.scheduler_peak_rss_mb || r.plugin_host_peak_rss_mb) {
    absl::StrAppend(&out, "peak RSS: scheduler ", r.scheduler_peak_rss_mb ? absl::StrFormat("%.1f MiB", *r.scheduler_peak_rss_mb) : "n/a",
                    ", plugin host ", r.plugin_host_peak_rss_mb ? absl::StrFormat("%.1f MiB", *r.plugin_host_peak_rss_mb) : "n/a", "\n");
  }
  if (r.scheduler_cost || r.plugin_host_cost || r.sim_cost) {
    auto cost = [](const std::optional<Report::Cost>& c) {
      return c ? absl::StrFormat("%.3f ms, %.1f", c->cpu_ms_per_pod, c->context_switches_per_pod) : std::string("n/a");
    };
    absl::StrAppend(&out, "per bound pod (CPU, context switches): scheduler ", cost(r.scheduler_cost),
                    "; plugin host ", cost(r.plugin_host_cost), "; podium-sim ", cost(r.sim_cost), "\n");
  }
  return out;
}

}  // namespace podium::sim
