// podiumctl's commands. Each builds one JSON document from the Admin API's
// answer (what -o json/yaml print), and renders its table from that same
// document, so the table never shows what the JSON lacks. The document
// builders and table renderers are pure, for the unit tests.
#pragma once

#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "admin_client.h"
#include "boost/json/value.hpp"
#include "cli.h"
#include "podium/v1/admin.pb.h"

namespace podium::ctl {

struct CommandContext {
  const Invocation& invocation;
  AdminClient& client;
  std::ostream& out;
  std::ostream& err;
  absl::Time now;
  // Set by main: registers what an interrupt (SIGINT/SIGTERM) should do while
  // a long-running command (watch) runs. Empty in tests.
  std::function<void(std::function<void()>)> on_interrupt;
};

// Dispatches on invocation.command (not kHelp or kCompletion).
absl::Status RunCommand(CommandContext& ctx);

// Prints `doc` as the invocation asks: table/wide via `table`, json, yaml,
// or `names` (one per line) for -o name.
void PrintDocument(const CommandContext& ctx, const boost::json::value& doc,
                   const std::function<std::string(bool wide)>& table,
                   const std::function<std::string()>& names = nullptr);

// --- queue (queue_command.cc)
absl::Status RunQueue(CommandContext& ctx);
// What `queue` read: every page from --continue's (or the first) to the end,
// or until --limit pods.
struct QueueListing {
  std::vector<v1::QueuedPod> pods;
  int total = 0;               // Pods matching the filters, as the first page counted them.
  std::string continue_token;  // Where the next page starts; empty at the end.
};
// Follows ListQueuedPods' next_page_token, --chunk-size pods per call; the
// filters (namespace, queue, plugin) travel in the request.
absl::StatusOr<QueueListing> ListQueue(AdminClient& client, const Invocation& inv);
// The queued pods, sorted by queue then namespace/name; or, with
// `server_order` (a --limit/--continue page), as the scheduler listed them,
// so that consecutive pages join up into one listing.
boost::json::value QueueDocument(const std::vector<v1::QueuedPod>& pods, int server_total, absl::Time now,
                                 const std::string& continue_token = "", bool server_order = false);
// The command that lists the next page: `podiumctl queue` with the
// invocation's filters, --limit and --chunk-size, and --continue `token`.
std::string NextPageCommand(const Invocation& inv, const std::string& token);
std::string QueueTable(const boost::json::value& doc, bool wide);
// The JSON object of one queued pod (shared with explain).
boost::json::object QueuedPodJson(const v1::QueuedPod& pod, absl::Time now);
// A pod waiting at Permit: node, since when, and per plugin its deadline.
boost::json::object PermitWaitJson(const v1::PermitWait& wait, absl::Time now);
std::string QueueNameString(v1::QueueName q);

// --- explain (explain_command.cc)
absl::Status RunExplain(CommandContext& ctx);
boost::json::value ExplainDocument(const PodName& pod, const v1::ExplainPodResponse& response, absl::Time now);
std::string ExplainText(const boost::json::value& doc, bool wide);

// --- nodes (nodes_command.cc)
absl::Status RunNodes(CommandContext& ctx);
boost::json::value NodesDocument(const v1::DumpCacheResponse& response);
std::string NodesTable(const boost::json::value& doc, bool wide);

// --- plugins (plugins_command.cc)
absl::Status RunPlugins(CommandContext& ctx);
boost::json::value PluginsDocument(const v1::ListPluginsResponse& response);
std::string PluginsTable(const boost::json::value& doc, bool wide);

// --- pause, resume, activate (control_commands.cc)
absl::Status RunPause(CommandContext& ctx, bool paused);
absl::Status RunActivate(CommandContext& ctx);
// log-level [N]: GetStatus's log_verbosity, or SetLogVerbosity(N).
absl::Status RunLogLevel(CommandContext& ctx);

// --- status (status_command.cc)
absl::Status RunStatus(CommandContext& ctx);
boost::json::value StatusDocument(const v1::SchedulerStatus& status);
std::string StatusText(const boost::json::value& doc, bool wide);

// --- watch (watch_command.cc)
// Runs until --count decisions (0 = no limit), the stream ends, or an
// interrupt cancels the stream (a clean end: exit 0).
absl::Status RunWatch(CommandContext& ctx);
boost::json::object DecisionJson(const v1::SchedulingDecision& d);
std::string DecisionHeader(bool wide);
std::string DecisionLine(const boost::json::object& d, bool wide);

// --- completion (completion.cc)
std::string BashCompletion();

}  // namespace podium::ctl
