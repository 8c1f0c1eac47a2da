// podiumctl pause | resume | activate: the mutating commands.
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "commands.h"

namespace podium::ctl {

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
  // Resolve names to uids first, so nothing moves when a name is wrong.
  v1::ListQueuedPodsRequest list;
  if (inv.all_unschedulable) {
    list.set_queue(v1::UNSCHEDULABLE);
    list.set_namespace_(inv.namespace_);
  }
  auto queued = ctx.client.ListQueuedPods(list);
  if (!queued.ok()) return queued.status();

  v1::MovePodsToActiveQueueRequest request;
  boost::json::array requested;
  std::vector<std::string> missing, already_active;
  auto add = [&](const v1::QueuedPod& p) {
    *request.add_pods() = p.pod();
    requested.emplace_back(absl::StrCat(p.pod().namespace_(), "/", p.pod().name()));
    if (p.queue() == v1::ACTIVE) already_active.push_back(absl::StrCat(p.pod().namespace_(), "/", p.pod().name()));
  };
  if (inv.all_unschedulable) {
    for (const auto& p : queued->pods()) add(p);
  } else {
    for (const PodName& name : inv.pods) {
      const v1::QueuedPod* found = nullptr;
      for (const auto& p : queued->pods()) {
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
    return out;
  });
  return absl::OkStatus();
}

}  // namespace podium::ctl
