// podiumctl pause | resume | activate: the mutating commands.
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "commands.h"

namespace podium::ctl {
namespace {

// Why MovePodsToActiveQueue leaves a pod where it is (nullopt: it moves).
std::optional<std::string> WhyNotMovable(const v1::QueuedPod& p) {
  switch (p.queue()) {
    case v1::GATED:
      return absl::StrCat(" is gated by ", p.gated_by().empty() ? "a PreEnqueue plugin" : p.gated_by(),
                          " (it enters the queue once that plugin lets it)");
    case v1::WAITING_ON_PERMIT: {
      std::vector<std::string> plugins;
      for (const auto& w : p.permit_wait().plugins()) plugins.push_back(w.name());
      return absl::StrCat(" waits at Permit", plugins.empty() ? "" : " on " + absl::StrJoin(plugins, ", "),
                          p.permit_wait().node_name().empty() ? "" : " (node " + p.permit_wait().node_name() + ")",
                          ": it is being scheduled, not in a queue");
    }
    case v1::IN_FLIGHT: return std::string(" is being scheduled (in flight), not in a queue");
    default: return std::nullopt;
  }
}

}  // namespace

absl::Status RunPause(CommandContext& ctx, bool paused) {
  auto response = ctx.client.SetSchedulingPaused(paused);
  if (!response.ok()) return response.status();
  boost::json::object doc;
  doc["paused"] = response->paused();
  PrintDocument(ctx, doc, [&](bool) {
    return std::string(response->paused() ? "scheduling paused: no new scheduling cycles start\n"
                                          : "scheduling resumed\n");
  });
  return absl::OkStatus();
}

absl::Status RunLogLevel(CommandContext& ctx) {
  boost::json::object doc;
  if (!ctx.invocation.log_level) {
    auto status = ctx.client.GetStatus();
    if (!status.ok()) return status.status();
    doc["verbosity"] = status->log_verbosity();
    PrintDocument(ctx, doc, [&](bool) { return absl::StrCat("log verbosity: ", status->log_verbosity(), "\n"); });
    return absl::OkStatus();
  }
  auto response = ctx.client.SetLogVerbosity(*ctx.invocation.log_level);
  if (!response.ok()) return response.status();
  doc["verbosity"] = response->verbosity();
  doc["previous"] = response->previous();
  PrintDocument(ctx, doc, [&](bool) {
    return absl::StrCat("log verbosity: ", response->verbosity(), " (was ", response->previous(), ")\n");
  });
  return absl::OkStatus();
}

absl::Status RunActivate(CommandContext& ctx) {
  const Invocation& inv = ctx.invocation;
  // Resolve names to uids first, so nothing moves when a name is wrong. Every
  // page, as `queue` reads them.
  Invocation list;
  if (inv.all_unschedulable) {
    list.queue = "unschedulable";
    list.namespace_ = inv.namespace_;
  }
  auto queued = ListQueue(ctx.client, list);
  if (!queued.ok()) return queued.status();

  v1::MovePodsToActiveQueueRequest request;
  boost::json::array requested;
  std::vector<std::string> missing, already_active, held;
  auto add = [&](const v1::QueuedPod& p) {
    *request.add_pods() = p.pod();
    const std::string key = absl::StrCat(p.pod().namespace_(), "/", p.pod().name());
    requested.emplace_back(key);
    if (p.queue() == v1::ACTIVE) already_active.push_back(key);
    if (auto why = WhyNotMovable(p)) held.push_back(absl::StrCat(key, *why));
  };
  if (inv.all_unschedulable) {
    for (const auto& p : queued->pods) add(p);
  } else {
    for (const PodName& name : inv.pods) {
      const v1::QueuedPod* found = nullptr;
      for (const auto& p : queued->pods) {
        if (p.pod().namespace_() == name.namespace_ && p.pod().name() == name.name) found = &p;
      }
      if (found == nullptr) missing.push_back(absl::StrCat(name.namespace_, "/", name.name));
      else add(*found);
    }
    if (!missing.empty()) {
      return absl::NotFoundError(absl::StrCat(missing.size() == 1 ? "pod " : "pods ", absl::StrJoin(missing, ", "),
                                              missing.size() == 1 ? " is" : " are",
                                              " not in the scheduling queue; nothing moved"));
    }
  }

  int32_t moved = 0;
  if (request.pods_size() > 0) {
    // An empty request would mean "every pod": only send one that names pods.
    auto response = ctx.client.MovePodsToActiveQueue(request);
    if (!response.ok()) return response.status();
    moved = response->moved();
  }
  boost::json::object doc;
  doc["requested"] = std::move(requested);
  doc["moved"] = moved;
  PrintDocument(ctx, doc, [&](bool) {
    if (request.pods_size() == 0) return std::string("No unschedulable pods to activate.\n");
    std::string out = absl::StrCat(moved, moved == 1 ? " pod" : " pods", " moved to the active queue\n");
    if (!already_active.empty()) absl::StrAppend(&out, "already active: ", absl::StrJoin(already_active, ", "), "\n");
    for (const std::string& why : held) absl::StrAppend(&out, "not moved: ", why, "\n");
    return out;
  });
  return absl::OkStatus();
}

}  // namespace podium::ctl
