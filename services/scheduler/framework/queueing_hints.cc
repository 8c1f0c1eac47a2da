#include "framework/queueing_hints.h"
#include "logging/logger.h"

#include <algorithm>
#include <cstdio>
#include <future>

namespace podium::scheduler {

std::vector<bool> RemoteQueueingHintEvaluator::Evaluate(
    const v1::ClusterEvent& event, const std::vector<HintCandidate>& candidates) {
  std::vector<bool> queue(candidates.size(), false);
  // process -> plugin -> candidate indexes.
  absl::flat_hash_map<PluginProcess*, absl::flat_hash_map<std::string, std::vector<size_t>>> asks;
  for (size_t i = 0; i < candidates.size(); ++i) {
    for (const auto& plugin : candidates[i].plugins) {
      auto it = processes_.find(plugin);
      if (it == processes_.end()) {
        queue[i] = true;  // Nobody to ask: requeue, as a failed hint does.
        continue;
      }
      asks[it->second][plugin].push_back(i);
    }
  }
  struct Call {
    PluginProcess* process;
    std::vector<std::pair<std::string, const std::vector<size_t>*>> order;
    std::future<PluginAnswer> answer;
    absl::Time sent;
    size_t hints = 0;
  };
  std::vector<Call> calls;
  for (auto& [process, plugins] : asks) {
    v1::SchedulerToPlugin message;
    auto* request = message.mutable_queueing_hint();
    *request->mutable_event() = event;
    Call call{process, {}, {}};
    for (auto& [plugin, indexes] : plugins) {
      auto* query = request->add_queries();
      query->set_plugin(plugin);
      for (size_t i : indexes) *query->add_pods() = *candidates[i].pod;
      call.order.emplace_back(plugin, &indexes);
      call.hints += indexes.size();
    }
    call.sent = absl::Now();
    call.answer = process->Call(std::move(message), std::nullopt);
    calls.push_back(std::move(call));
  }
  for (auto& call : calls) {
    PluginAnswer answer = call.answer.get();
    const absl::Duration per_hint = (absl::Now() - call.sent) / static_cast<int64_t>(std::max<size_t>(call.hints, 1));
    absl::flat_hash_map<std::string, const v1::HintAnswer*> by_plugin;
    if (answer.ok()) {
      for (const auto& a : answer->queueing_hint().answers()) by_plugin[a.plugin()] = &a;
    } else {
      PODIUM_LOG(Warning, "Queueing hints failed; requeueing", {"endpoint", call.process->name()},
                 {"err", answer.status().message()});
    }
    for (const auto& [plugin, indexes] : call.order) {
      auto it = by_plugin.find(plugin);
      const bool usable = it != by_plugin.end() &&
                          static_cast<size_t>(it->second->queue_size()) == indexes->size();
      if (answer.ok() && !usable) call.process->CountInvalidAnswer();
      size_t queued = 0;
      for (size_t k = 0; k < indexes->size(); ++k) {
        if (!usable || it->second->queue(k)) {
          queue[(*indexes)[k]] = true;
          ++queued;
        }
      }
      if (observer_) {
        if (!usable) {
          observer_(plugin, event, "Error", per_hint, indexes->size());
        } else {
          if (queued > 0) observer_(plugin, event, "Queue", per_hint, queued);
          if (queued < indexes->size()) observer_(plugin, event, "QueueSkip", per_hint, indexes->size() - queued);
        }
      }
    }
  }
  return queue;
}

}  // namespace podium::scheduler
