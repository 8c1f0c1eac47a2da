// Parallel evaluation of one request's nodes: the answer is the one serial
// evaluation gives (feasible nodes, rejections, where the early stop fell,
// scores), and the pool's threads really take part.
#include "parallelizer.h"

#include <set>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "cycle_runner.h"
#include "gtest/gtest.h"
#include "google/protobuf/util/message_differencer.h"

namespace podium::sdk::internal {
namespace {

TEST(Parallelizer, RunsEveryChunkOnceAndAStopLeavesAPrefix) {
  Parallelizer pool(2);
  ASSERT_EQ(pool.parallelism(), 2);
  std::vector<std::atomic<int>> runs(100);
  pool.ParallelFor(100, [&](int chunk) {
    runs[chunk].fetch_add(1);
    return true;
  });
  for (int c = 0; c < 100; ++c) EXPECT_EQ(runs[c].load(), 1) << c;

  std::vector<std::atomic<int>> stopped(100);
  pool.ParallelFor(100, [&](int chunk) {
    stopped[chunk].fetch_add(1);
    return chunk < 10;
  });
  int ran = 0;
  while (ran < 100 && stopped[ran].load() == 1) ++ran;
  EXPECT_GE(ran, 11);
  for (int c = ran; c < 100; ++c) EXPECT_EQ(stopped[c].load(), 0) << "chunk " << c << " ran after a gap";
}

// Rejects every third node (an error at one node id when asked), scores by id
// and normalises by the maximum: order-sensitive enough to catch a mix-up.
class ByIdPlugin final : public FilterPlugin, public ScorePlugin {
 public:
  std::string_view Name() const override { return "ById"; }
  Status Filter(CycleState&, const PodInfo&, const NodeInfo& node) override {
    if (node.id() == error_at) return Status(Code::kError, "broken at " + std::to_string(node.id()));
    if (node.id() % 3 == 0) return Status(Code::kUnschedulable, "third " + std::to_string(node.id() % 7));
    return Status::Success();
  }
  std::pair<int64_t, Status> Score(CycleState&, const PodInfo&, const NodeInfo& node) override {
    if (node.id() == score_error_at) return {0, Status(Code::kError, "no score for " + std::to_string(node.id()))};
    return {(node.id() * 37) % 101, Status::Success()};
  }
  bool HasNormalizeScore() const override { return true; }
  Status NormalizeScore(CycleState&, const PodInfo&, std::vector<NodeScore>& scores) override {
    int64_t max = 1;
    for (const auto& s : scores) max = std::max(max, s.score);
    for (auto& s : scores) s.score = s.score * kMaxNodeScore / max;
    return Status::Success();
  }
  uint32_t error_at = 0;
  uint32_t score_error_at = 0;
};

class ParallelCycleTest : public testing::Test {
 protected:
  void AddNodes(uint32_t n) {
    v1::StateDelta delta;
    for (uint32_t id = 1; id <= n; ++id) {
      auto* node = delta.add_node_upserts();
      node->set_id(id);
      node->mutable_node()->mutable_meta()->set_name("node-" + std::to_string(id));
    }
    ASSERT_TRUE(mirror_.Apply(delta).ok());
  }
  PluginInstance Instance(std::string name, Plugin* plugin) {
    PluginInstance instance;
    instance.name = std::move(name);
    instance.filter = dynamic_cast<FilterPlugin*>(plugin);
    instance.score = dynamic_cast<ScorePlugin*>(plugin);
    return instance;
  }
  v1::CycleResponse Run(Parallelizer* pool, PluginInstance& instance, uint32_t start, uint32_t want,
                        uint64_t cycle_id, bool score = true, PluginInstance* second = nullptr) {
    CycleRunner runner(mirror_, 16, pool);
    v1::CycleRequest request;
    request.set_cycle_id(cycle_id);
    request.mutable_pod()->mutable_meta()->set_uid("pod");
    request.mutable_nodes()->set_all_nodes(true);
    request.mutable_nodes()->set_start_index(start);
    request.set_num_feasible_to_find(want);
    v1::CycleResponse out;
    PluginList filters{&instance};
    PluginList scores;
    if (score) scores.push_back(&instance);
    if (second != nullptr) scores.push_back(second);
    EXPECT_TRUE(runner.RunCycle({}, filters, {}, scores, request, out).ok());
    out.clear_durations();
    return out;
  }

  Mirror mirror_;
};

TEST_F(ParallelCycleTest, AnswersAreThoseOfSerialEvaluation) {
  AddNodes(3000);
  ByIdPlugin plugin;
  ByIdPlugin other;  // A second score plugin, which may fail where the first does not.
  PluginInstance instance = Instance("ById", &plugin);
  PluginInstance second = Instance("Other", &other);
  Parallelizer pool(2);
  struct Case {
    uint32_t start, want, error_at, score_error_at, other_score_error_at;
  } cases[] = {{0, 0, 0, 0, 0},       {0, 500, 0, 0, 0},      {2900, 300, 0, 0, 0},
               {1234, 1, 0, 0, 0},    {17, 5000, 0, 0, 0},    {0, 0, 1501, 0, 0},
               {1000, 500, 1200, 0, 0}, {1000, 100, 2500, 0, 0}, {0, 0, 0, 2000, 0},
               {0, 0, 0, 0, 1000},    {0, 0, 0, 2000, 1000},  {0, 0, 0, 1000, 2000}};
  for (const Case& c : cases) {
    plugin.error_at = c.error_at;
    plugin.score_error_at = c.score_error_at;
    other.score_error_at = c.other_score_error_at;
    v1::CycleResponse serial = Run(nullptr, instance, c.start, c.want, 1, true, &second);
    v1::CycleResponse parallel = Run(&pool, instance, c.start, c.want, 1, true, &second);
    EXPECT_GT(serial.feasible_size() + serial.rejected_size(), 0);
    std::string diff;
    google::protobuf::util::MessageDifferencer differencer;
    differencer.ReportDifferencesToString(&diff);
    EXPECT_TRUE(differencer.Compare(serial, parallel))
        << "start " << c.start << " want " << c.want << " error at " << c.error_at
        << " score errors at " << c.score_error_at << "/" << c.other_score_error_at << ": " << diff;
  }
}

// Records the threads its Filter runs on. The first call waits (bounded) for
// a call on another thread, so with a pool of two the second thread must
// have taken a chunk: deterministic, no timing assumption when it works.
class ThreadRecorder final : public FilterPlugin {
 public:
  std::string_view Name() const override { return "ThreadRecorder"; }
  Status Filter(CycleState&, const PodInfo&, const NodeInfo&) override {
    bool first = false;
    {
      absl::MutexLock lock(&mu_);
      first = threads_.empty();
      threads_.insert(std::this_thread::get_id());
      if (threads_.size() > 1 && !second_.HasBeenNotified()) second_.Notify();
    }
    if (first && wait_for_second) second_.WaitForNotificationWithTimeout(absl::Seconds(10));
    return Status::Success();
  }
  bool wait_for_second = true;
  size_t NumThreads() {
    absl::MutexLock lock(&mu_);
    return threads_.size();
  }

 private:
  absl::Mutex mu_;
  std::set<std::thread::id> threads_;
  absl::Notification second_;
};

TEST_F(ParallelCycleTest, FilterOfManyNodesRunsOnMoreThanOneThread) {
  AddNodes(2000);
  ThreadRecorder plugin;
  PluginInstance instance = Instance("ThreadRecorder", &plugin);
  Parallelizer pool(2);
  v1::CycleResponse out = Run(&pool, instance, 0, 0, 1, /*score=*/false);
  EXPECT_EQ(out.feasible_size(), 2000);
  EXPECT_EQ(plugin.NumThreads(), 2u);
}

TEST_F(ParallelCycleTest, FewNodesStayOnTheCallingThread) {
  AddNodes(50);
  ThreadRecorder plugin;
  PluginInstance instance = Instance("ThreadRecorder", &plugin);
  Parallelizer pool(2);
  plugin.wait_for_second = false;
  v1::CycleResponse out = Run(&pool, instance, 0, 0, 1, /*score=*/false);
  EXPECT_EQ(out.feasible_size(), 50);
  EXPECT_EQ(plugin.NumThreads(), 1u);
}

}  // namespace
}  // namespace podium::sdk::internal
