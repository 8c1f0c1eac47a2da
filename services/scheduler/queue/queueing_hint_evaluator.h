#pragma once

#include <string>
#include <vector>

#include "podium/v1/plugin.pb.h"

namespace podium::scheduler {

// A pod in the unschedulable pool and the plugins whose queueing hint for the
// event must be asked (rejecting plugins registered for the event with a hint).
struct HintCandidate {
  const v1::Pod* pod = nullptr;
  std::vector<std::string> plugins;
};

// Asks plugins' queueing hints. The scheduling queue calls it once per cluster
// event with every candidate, never while holding its lock; the implementation
// groups by plugin process (one request per event per process).
class QueueingHintEvaluator {
 public:
  virtual ~QueueingHintEvaluator() = default;
  // Per candidate, in order: whether any of its listed plugins says Queue. A
  // plugin that cannot answer should count as Queue (kube-scheduler requeues
  // when a hint fails).
  virtual std::vector<bool> Evaluate(const v1::ClusterEvent& event,
                                     const std::vector<HintCandidate>& candidates) = 0;
};

}  // namespace podium::scheduler
