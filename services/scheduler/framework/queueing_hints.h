// Queueing hints answered by remote plugins: one QueueingHintRequest per
// cluster event per plugin process, carrying every candidate pod.
#pragma once

#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "framework/plugin_process.h"
#include "queue/queueing_hint_evaluator.h"

namespace podium::scheduler {

class RemoteQueueingHintEvaluator final : public QueueingHintEvaluator {
 public:
  // plugin name -> the process serving it.
  explicit RemoteQueueingHintEvaluator(absl::flat_hash_map<std::string, PluginProcess*> processes)
      : processes_(std::move(processes)) {}

  std::vector<bool> Evaluate(const v1::ClusterEvent& event,
                             const std::vector<HintCandidate>& candidates) override;

 private:
  const absl::flat_hash_map<std::string, PluginProcess*> processes_;
};

}  // namespace podium::scheduler
