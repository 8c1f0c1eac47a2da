// podiumctl explain NAMESPACE/POD: why the pod's last attempt failed.
#include <algorithm>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "commands.h"
#include "format.h"

namespace podium::ctl {
namespace {

constexpr size_t kSampleNodes = 3;

std::string StatusCodeName(v1::Status::Code code) { return CamelCase(v1::Status::Code_Name(code)); }

std::string Str(const boost::json::value& v) { return v.is_string() ? std::string(v.as_string()) : ""; }

std::vector<std::string> StringList(const boost::json::value& v) {
  std::vector<std::string> out;
  for (const auto& s : v.as_array()) out.push_back(Str(s));
  return out;
}

// "waiting on Coscheduling (deadline 2026-11-27T16:40:05Z, in 25s), on node-1, since 5s ago"
std::string PermitLine(const boost::json::value& wait) {
  std::vector<std::string> plugins;
  for (const auto& p : wait.at("plugins").as_array()) {
    const double remaining = p.at("remaining_seconds").as_double();
    plugins.push_back(absl::StrCat(
        Str(p.at("name")), " (deadline ", Str(p.at("deadline")), ", ",
        remaining > 0 ? absl::StrCat("in ", FormatAge(absl::Ceil(absl::Seconds(remaining), absl::Seconds(1))))
                      : "due",
        ")"));
  }
  std::string line = absl::StrCat("waiting on ", plugins.empty() ? "<none>" : absl::StrJoin(plugins, ", "));
  if (!Str(wait.at("node")).empty()) absl::StrAppend(&line, ", on ", Str(wait.at("node")));
  if (const auto& waited = wait.at("waited_seconds"); waited.is_double()) {
    absl::StrAppend(&line, ", since ", Str(wait.at("waiting_since")), " (",
                    FormatAge(absl::Seconds(static_cast<int64_t>(waited.as_double()))), " ago)");
  }
  return line;
}

// {"cpu": "2", "memory": "128Mi"}: the resources a resize is about.
boost::json::object ResourcesJson(const v1::ResourceList& r) {
  boost::json::object out;
  if (r.milli_cpu() != 0) out["cpu"] = FormatMilliCpu(r.milli_cpu());
  if (r.memory_bytes() != 0) out["memory"] = FormatBytes(r.memory_bytes());
  if (r.ephemeral_storage_bytes() != 0) out["ephemeral-storage"] = FormatBytes(r.ephemeral_storage_bytes());
  for (const auto& [name, value] : r.scalar()) out[name] = absl::StrCat(value);
  return out;
}

std::string ResourcesText(const boost::json::value& v) {
  std::vector<std::string> parts;
  for (const auto& [name, value] : v.as_object()) parts.push_back(absl::StrCat(std::string(name), " ", Str(value)));
  return parts.empty() ? "nothing" : absl::StrJoin(parts, ", ");
}

boost::json::value ResizeJson(const v1::ExplainPodResponse& response) {
  if (!response.has_resize()) return nullptr;
  const v1::ResizeExplanation& r = response.resize();
  return {{"node", r.node_name()},
          {"state", r.state()},
          {"wanted", ResourcesJson(r.wanted())},
          {"admitted", ResourcesJson(r.admitted())},
          {"preemption_message", r.preemption_message()},
          {"waiting_for_room", r.waiting_for_room()},
          {"queued", r.queued()}};
}

}  // namespace

boost::json::value ExplainDocument(const PodName& pod, const v1::ExplainPodResponse& response, absl::Time now) {
  boost::json::object doc;
  doc["pod"] = {{"namespace", pod.namespace_}, {"name", pod.name}};
  doc["queued"] = response.has_pod() ? boost::json::value(QueuedPodJson(response.pod(), now))
                                     : boost::json::value(nullptr);
  doc["message"] = response.message();
  doc["nominated_node"] = response.nominated_node_name().empty() ? boost::json::value(nullptr)
                                                                  : boost::json::value(response.nominated_node_name());
  // Verdicts grouped by reason, as the FailedScheduling message counts them:
  // a node with two reasons counts once under each.
  struct Group {
    std::set<std::string> plugins, codes;
    std::vector<std::string> nodes;
  };
  std::map<std::string, Group> groups;
  // By node name, so the output is the same whatever order the nodes were evaluated in.
  std::vector<const v1::NodeVerdict*> verdicts;
  for (const auto& v : response.nodes()) verdicts.push_back(&v);
  std::sort(verdicts.begin(), verdicts.end(),
            [](const v1::NodeVerdict* a, const v1::NodeVerdict* b) { return a->node_name() < b->node_name(); });
  boost::json::array nodes;
  for (const v1::NodeVerdict* v : verdicts) {
    const v1::NodeVerdict& verdict = *v;
    const v1::Status& st = verdict.status();
    boost::json::array reasons;
    for (const auto& r : st.reasons()) {
      reasons.emplace_back(r);
      Group& g = groups[r];
      if (!st.plugin().empty()) g.plugins.insert(st.plugin());
      g.codes.insert(StatusCodeName(st.code()));
      g.nodes.push_back(verdict.node_name());
    }
    nodes.push_back({{"node", verdict.node_name()},
                     {"code", StatusCodeName(st.code())},
                     {"plugin", st.plugin()},
                     {"reasons", std::move(reasons)}});
  }
  std::vector<std::pair<std::string, Group>> sorted(groups.begin(), groups.end());
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const auto& a, const auto& b) { return a.second.nodes.size() > b.second.nodes.size(); });
  boost::json::array reasons;
  for (auto& [reason, g] : sorted) {
    boost::json::array plugins(g.plugins.begin(), g.plugins.end());
    boost::json::array codes(g.codes.begin(), g.codes.end());
    boost::json::array node_names(g.nodes.begin(), g.nodes.end());
    reasons.push_back({{"reason", reason},
                       {"count", static_cast<int64_t>(g.nodes.size())},
                       {"plugins", std::move(plugins)},
                       {"codes", std::move(codes)},
                       {"nodes", std::move(node_names)}});
  }
  doc["reasons"] = std::move(reasons);
  doc["nodes"] = std::move(nodes);
  doc["resize"] = ResizeJson(response);
  // ExplainPod's error field (an attempt that ended in an error rather than a
  // verdict) plugs in here as doc["error"], and prints as an "Error:" line.
  return doc;
}

std::string ExplainText(const boost::json::value& v, bool wide) {
  const auto& doc = v.as_object();
  const auto& pod = doc.at("pod").as_object();
  std::string out;
  auto field = [&](const char* name, const std::string& value) {
    absl::StrAppend(&out, name, std::string(14 - std::string_view(name).size(), ' '),
                    value.empty() ? "<none>" : value, "\n");
  };
  field("Pod:", absl::StrCat(Str(pod.at("namespace")), "/", Str(pod.at("name"))));
  if (const auto& q = doc.at("queued"); q.is_object()) {
    const auto& qp = q.as_object();
    std::string queue = Str(qp.at("queue"));
    if (!qp.at("age_seconds").is_null()) {
      absl::StrAppend(&queue, " (entered ", FormatAge(absl::Seconds(qp.at("age_seconds").as_int64())), " ago)");
    }
    absl::StrAppend(&queue, ", ", qp.at("attempts").as_int64(),
                    qp.at("attempts").as_int64() == 1 ? " attempt" : " attempts");
    if (!qp.at("backoff_remaining_seconds").is_null()) {
      absl::StrAppend(&queue, ", backoff ends at ", Str(qp.at("backoff_expiry")));
    }
    field("Queue:", queue);
    field("Rejected by:", absl::StrJoin(StringList(qp.at("unschedulable_plugins")), ", "));
    if (const auto& wait = qp.at("permit_wait"); wait.is_object()) field("Permit:", PermitLine(wait));
    if (Str(qp.at("queue")) == "gated") {
      const std::string by = Str(qp.at("gated_by"));
      const std::string why = Str(qp.at("message"));
      field("Gated:", by.empty() ? why : why.empty() ? absl::StrCat("by ", by) : absl::StrCat("by ", by, ": ", why));
    }
    if (!qp.at("pending_plugins").as_array().empty()) {
      field("Pending:", absl::StrJoin(StringList(qp.at("pending_plugins")), ", "));
    }
  } else {
    field("Queue:", "not queued now (bound, deleted, or in a scheduling cycle)");
  }
  field("Nominated:", Str(doc.at("nominated_node")));
  field("Message:", Str(doc.at("message")));
  // A bound pod whose in-place resize its kubelet deferred (KEP-5836).
  if (const auto* rv = doc.if_contains("resize"); rv != nullptr && rv->is_object()) {
    const auto& r = rv->as_object();
    field("Resize:", absl::StrCat(Str(r.at("state")), " on ", Str(r.at("node")), ": wants ",
                                  ResourcesText(r.at("wanted")), "; admitted ", ResourcesText(r.at("admitted"))));
    std::string preemption;
    if (r.at("queued").as_bool()) {
      preemption = "queued: the scheduler looks for lower-priority pods on the node to evict";
    } else if (r.at("waiting_for_room").as_bool()) {
      preemption = absl::StrCat(Str(r.at("preemption_message")), " (tried again when a pod leaves ",
                                Str(r.at("node")), ")");
    }
    field("Preemption:", preemption);
    return out;
  }

  const auto& reasons = doc.at("reasons").as_array();
  if (reasons.empty()) {
    const auto& q = doc.at("queued");
    const std::string queue = q.is_object() ? Str(q.at("queue")) : "";
    const bool never_tried = q.is_object() && q.as_object().contains("attempts") && q.at("attempts").is_number() &&
                             q.at("attempts").to_number<int64_t>() == 0;
    if (queue == "waiting-on-permit") {
      out += "\nNo failed attempt: the pod passed Filter and waits at Permit (see Permit).\n";
    } else if (queue == "gated" && never_tried) {
      out += "\nNo attempt yet: a PreEnqueue plugin holds the pod out of the scheduling cycles (see Gated).\n";
    } else if (Str(doc.at("message")).empty() && (!q.is_object() || Str(q.at("message")).empty())) {
      out += "\nNo failed attempt recorded: the pod has not been tried yet, or its attempt is in progress.\n";
    } else {
      out += "\nNo per-node verdicts: the pod was rejected before Filter (see Message).\n";
    }
    return out;
  }
  std::vector<std::string> headers = {"NODES", "REASON", "PLUGIN"};
  if (wide) headers.push_back("CODE");
  headers.push_back(wide ? "NODE NAMES" : "SAMPLE NODES");
  Table table(headers);
  for (const auto& rv : reasons) {
    const auto& r = rv.as_object();
    std::vector<std::string> names = StringList(r.at("nodes"));
    std::string sample;
    if (wide || names.size() <= kSampleNodes) {
      sample = absl::StrJoin(names, ", ");
    } else {
      sample = absl::StrCat(absl::StrJoin(names.begin(), names.begin() + kSampleNodes, ", "), " (+",
                            names.size() - kSampleNodes, " more)");
    }
    std::vector<std::string> row = {absl::StrCat(r.at("count").as_int64()), Str(r.at("reason")),
                                    JoinCell(r.at("plugins"))};
    if (wide) row.push_back(JoinCell(r.at("codes")));
    row.push_back(sample);
    table.AddRow(std::move(row));
  }
  absl::StrAppend(&out, "\n", table.Render());
  if (wide) {
    Table per_node({"NODE", "CODE", "PLUGIN", "REASONS"});
    for (const auto& nv : doc.at("nodes").as_array()) {
      const auto& n = nv.as_object();
      per_node.AddRow({Str(n.at("node")), Str(n.at("code")), Str(n.at("plugin")), JoinCell(n.at("reasons"), "; ")});
    }
    absl::StrAppend(&out, "\n", per_node.Render());
  }
  return out;
}

absl::Status RunExplain(CommandContext& ctx) {
  const PodName& pod = ctx.invocation.pods.at(0);
  v1::ExplainPodRequest request;
  request.set_namespace_(pod.namespace_);
  request.set_name(pod.name);
  auto response = ctx.client.ExplainPod(request);
  if (!response.ok()) {
    if (absl::IsNotFound(response.status())) {
      const std::string key = absl::StrCat(pod.namespace_, "/", pod.name);
      std::string message(response.status().message());
      if (message.find(key) == std::string::npos) message = absl::StrCat("pod ", key, ": ", message);
      return absl::NotFoundError(
          absl::StrCat(message, " (podiumctl queue lists the pods the scheduler holds)"));
    }
    return response.status();
  }
  boost::json::value doc = ExplainDocument(pod, *response, ctx.now);
  PrintDocument(ctx, doc, [&](bool wide) { return ExplainText(doc, wide); });
  return absl::OkStatus();
}

}  // namespace podium::ctl
