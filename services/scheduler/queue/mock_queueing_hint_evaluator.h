#pragma once

#include <vector>

#include "gmock/gmock.h"
#include "queue/queueing_hint_evaluator.h"

namespace podium::scheduler {

class MockQueueingHintEvaluator : public QueueingHintEvaluator {
 public:
  MOCK_METHOD(std::vector<bool>, Evaluate,
              (const v1::ClusterEvent& event, const std::vector<HintCandidate>& candidates),
              (override));
};

}  // namespace podium::scheduler
