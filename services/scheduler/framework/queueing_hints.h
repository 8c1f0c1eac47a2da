// Queueing hints answered by remote plugins: one QueueingHintRequest per
// cluster event per plugin process, carrying every candidate pod.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "framework/plugin_process.h"
#include "queue/queueing_hint_evaluator.h"

namespace podium::scheduler {

class RemoteQueueingHintEvaluator final : public QueueingHintEvaluator {
 public:
  // How long hints took (scheduler_queueing_hint_execution_duration_seconds):
  // `count` hints of `plugin` for `event` that said `hint` (Queue, QueueSkip,
  // or Error when the answer was missing or unusable), each taking
  // `per_hint`: the process's round trip spread evenly over the hints it
  // answered (a process answers all its hints for an event in one message).
  using Observer = std::function<void(std::string_view plugin, const v1::ClusterEvent& event,
                                      std::string_view hint, absl::Duration per_hint, size_t count)>;

  // plugin name -> the process serving it.
  explicit RemoteQueueingHintEvaluator(absl::flat_hash_map<std::string, PluginProcess*> processes,
                                       Observer observer = nullptr)
      : processes_(std::move(processes)), observer_(std::move(observer)) {}

  std::vector<bool> Evaluate(const v1::ClusterEvent& event,
                             const std::vector<HintCandidate>& candidates) override;

 private:
  const absl::flat_hash_map<std::string, PluginProcess*> processes_;
  const Observer observer_;
};

}  // namespace podium::scheduler
