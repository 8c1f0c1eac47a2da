// podiumctl watch: one line per scheduling decision, as they happen.
#include <atomic>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "commands.h"
#include "format.h"

namespace podium::ctl {
namespace {

std::string Str(const boost::json::value& v) { return v.is_string() ? std::string(v.as_string()) : ""; }

}  // namespace

boost::json::object DecisionJson(const v1::SchedulingDecision& d) {
  std::string result = absl::AsciiStrToLower(v1::SchedulingDecision::Result_Name(d.result()));
  boost::json::object o;
  o["time"] = d.time_us() == 0 ? boost::json::value(nullptr)
                               : boost::json::value(absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ",
                                                                     absl::FromUnixMicros(d.time_us()),
                                                                     absl::UTCTimeZone()));
  o["namespace"] = d.pod().namespace_();
  o["name"] = d.pod().name();
  o["result"] = result;
  o["node"] = d.node_name().empty() ? boost::json::value(nullptr) : boost::json::value(d.node_name());
  o["nominated_node"] = d.nominated_node_name().empty() ? boost::json::value(nullptr)
                                                        : boost::json::value(d.nominated_node_name());
  o["attempt_ms"] = d.attempt_ms();
  o["profile"] = d.profile();
  o["message"] = d.message();
  return o;
}

std::string DecisionHeader(bool wide) {
  return wide ? absl::StrFormat("%-24s   %-13s   %-40s   %-20s   %-10s   %-18s   %s\n", "TIME", "RESULT", "POD",
                                "NODE", "ATTEMPT", "PROFILE", "MESSAGE")
              : absl::StrFormat("%-8s   %-13s   %-40s   %-20s   %-10s   %s\n", "TIME", "RESULT", "POD", "NODE",
                                "ATTEMPT", "MESSAGE");
}

std::string DecisionLine(const boost::json::object& d, bool wide) {
  std::string time = Str(d.at("time"));
  if (!wide && time.size() >= 19) time = time.substr(11, 8);  // HH:MM:SS
  if (time.empty()) time = "-";
  const std::string pod = absl::StrCat(Str(d.at("namespace")), "/", Str(d.at("name")));
  std::string node = Str(d.at("node"));
  // An unschedulable pod that preempted waits for its nominated node.
  if (const std::string nominated = Str(d.at("nominated_node")); node.empty() && !nominated.empty()) {
    node = absl::StrCat("nominated:", nominated);
  }
  if (node.empty()) node = "-";
  std::string message = Str(d.at("message"));
  if (message.empty()) message = "-";
  const std::string attempt = absl::StrFormat("%.3fms", d.at("attempt_ms").to_number<double>());
  if (wide) {
    std::string profile = Str(d.at("profile"));
    if (profile.empty()) profile = "-";
    return absl::StrFormat("%-24s   %-13s   %-40s   %-20s   %-10s   %-18s   %s\n", time, Str(d.at("result")), pod, node,
                           attempt, profile, message);
  }
  return absl::StrFormat("%-8s   %-13s   %-40s   %-20s   %-10s   %s\n", time, Str(d.at("result")), pod, node, attempt,
                         message);
}

absl::Status RunWatch(CommandContext& ctx) {
  const Invocation& inv = ctx.invocation;
  grpc::ClientContext context;
  auto reader = ctx.client.WatchDecisionBatches(context);
  if (!reader.ok()) return reader.status();
  // Ctrl-C cancels the stream: a clean end. Unregistered on every return, as
  // the action refers to this frame.
  std::atomic<bool> interrupted{false};
  struct InterruptScope {
    const CommandContext& ctx;
    ~InterruptScope() {
      if (ctx.on_interrupt) ctx.on_interrupt(nullptr);
    }
  } scope{ctx};
  if (ctx.on_interrupt) {
    ctx.on_interrupt([&] {
      interrupted.store(true);
      context.TryCancel();
    });
  }

  const bool table = inv.output == OutputFormat::kTable || inv.output == OutputFormat::kWide;
  const bool wide = inv.output == OutputFormat::kWide;
  if (table) ctx.out << DecisionHeader(wide) << std::flush;
  int printed = 0;
  const auto done = [&] { return inv.count > 0 && printed >= inv.count; };
  v1::DecisionBatch batch;
  while (!done() && (*reader)->Read(&batch)) {
    for (const v1::SchedulingDecision& decision : batch.decisions()) {
      if (done()) break;
      if (!inv.namespace_.empty() && decision.pod().namespace_() != inv.namespace_) continue;
      boost::json::object d = DecisionJson(decision);
      if (table) ctx.out << DecisionLine(d, wide);
      else if (inv.output == OutputFormat::kYaml) ctx.out << "---\n" << RenderYaml(d);
      else ctx.out << RenderJsonLine(d);
      ++printed;
    }
    ctx.out << std::flush;
  }
  if (done()) context.TryCancel();
  grpc::Status status = (*reader)->Finish();
  if (done() || interrupted.load()) return absl::OkStatus();
  if (status.ok()) return absl::UnavailableError(absl::StrCat("the scheduler at ", ctx.client.address(),
                                                              " ended the decision stream"));
  return ctx.client.Translate(status, "WatchDecisionBatches");
}

}  // namespace podium::ctl
