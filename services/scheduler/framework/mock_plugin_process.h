#pragma once

#include <string>

#include "framework/plugin_process.h"
#include "gmock/gmock.h"

namespace podium::scheduler {

class MockPluginProcess : public PluginProcess {
 public:
  explicit MockPluginProcess(std::string name, FailurePolicy policy = FailurePolicy::kFail)
      : name_(std::move(name)), policy_(policy) {}

  const std::string& name() const override { return name_; }
  FailurePolicy failure_policy() const override { return policy_; }
  void set_failure_policy(FailurePolicy policy) { policy_ = policy; }
  uint64_t stream_generation() const override { return generation; }
  MOCK_METHOD(bool, ready, (), (const, override));
  MOCK_METHOD(v1::Registration, registration, (), (const, override));
  MOCK_METHOD(std::future<PluginAnswer>, Call,
              (v1::SchedulerToPlugin request, std::optional<uint64_t> state_seq), (override));
  MOCK_METHOD(void, SendState, (uint64_t state_seq), (override));
  MOCK_METHOD(void, FinishCycle, (uint64_t cycle_id), (override));
  bool MirrorsNominatedPods() const override { return mirrors_nominated_pods; }
  bool RunsDryRunsInCycles() const override { return runs_dry_runs_in_cycles; }
  bool AnswersWhatIf() const override { return answers_what_if; }
  bool AnswersLookahead() const override { return answers_lookahead; }
  bool AnswersNominatedChecks() const override { return answers_nominated_checks; }
  bool LeavesPreFilterUnschedulableToPreemption() const override { return leaves_pre_filter_unschedulable; }
  absl::Duration timeout() const override { return absl::Seconds(1); }
  void CountInvalidAnswer() override { ++invalid_answers; }
  void CountIgnoredFailure() override { ++ignored_failures; }

  bool mirrors_nominated_pods = false;
  bool runs_dry_runs_in_cycles = false;
  bool answers_what_if = false;
  bool answers_lookahead = false;
  bool answers_nominated_checks = false;
  bool leaves_pre_filter_unschedulable = false;
  uint64_t generation = 0;  // Bump to play a stream that broke and was dialed again.
  int invalid_answers = 0;
  int ignored_failures = 0;

 private:
  std::string name_;
  FailurePolicy policy_;
};

// A future that is already answered.
inline std::future<PluginAnswer> Answered(PluginAnswer answer) {
  std::promise<PluginAnswer> p;
  p.set_value(std::move(answer));
  return p.get_future();
}

}  // namespace podium::scheduler
