#include "watch/decision_watcher.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "podium/v1/cluster.grpc.pb.h"

namespace podium::sim {
namespace {

// Streams `count` decisions (pod-0, pod-1, ...) in batches of one, two and
// three in turn, then either ends the stream or holds it open until the
// client cancels it.
class FakeAdmin final : public v1::Admin::Service {
 public:
  FakeAdmin(int count, bool hold_open) : count_(count), hold_open_(hold_open) {}

  grpc::Status WatchDecisionBatches(grpc::ServerContext* context, const v1::WatchDecisionsRequest*,
                                    grpc::ServerWriter<v1::DecisionBatch>* writer) override {
    for (int i = 0, size = 1; i < count_; size = size % 3 + 1) {
      v1::DecisionBatch batch;
      for (int end = std::min(count_, i + size); i < end; ++i) {
        v1::SchedulingDecision* d = batch.add_decisions();
        d->mutable_pod()->set_namespace_("default");
        d->mutable_pod()->set_name(absl::StrCat("pod-", i));
        d->set_result(v1::SchedulingDecision::SCHEDULED);
        d->set_attempt_ms(0.5 + i);
      }
      if (!writer->Write(batch)) return grpc::Status::CANCELLED;
    }
    if (!hold_open_) return grpc::Status::OK;
    while (!context->IsCancelled()) absl::SleepFor(absl::Milliseconds(1));
    return grpc::Status::CANCELLED;
  }

 private:
  const int count_;
  const bool hold_open_;
};

class DecisionWatcherTest : public ::testing::Test {
 protected:
  void Serve(grpc::Service* service) {
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(service);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    channel_ = grpc::CreateChannel(absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials());
  }
  void TearDown() override {
    if (server_) server_->Shutdown();
  }

  std::unique_ptr<grpc::Server> server_;
  std::shared_ptr<grpc::Channel> channel_;
};

void WaitUntilEnded(const DecisionWatcher& watcher) {
  while (!watcher.ended()) absl::SleepFor(absl::Milliseconds(1));
}

TEST_F(DecisionWatcherTest, CollectsEveryDecisionOfEveryBatchInOrderUntilTheStreamEnds) {
  FakeAdmin admin(250, /*hold_open=*/false);
  Serve(&admin);
  DecisionWatcher watcher(channel_);
  watcher.Start();
  WaitUntilEnded(watcher);
  std::vector<v1::SchedulingDecision> got = watcher.Decisions();
  ASSERT_EQ(got.size(), 250u);
  for (int i = 0; i < 250; ++i) {
    EXPECT_EQ(got[i].pod().name(), absl::StrCat("pod-", i));
    EXPECT_EQ(got[i].attempt_ms(), 0.5 + i);
  }
  EXPECT_FALSE(watcher.unimplemented());
  watcher.Stop();
}

// The thread collects only every `interval`; Decisions() must not wait for
// the next pass (an hour here) to see what has arrived, nor Stop() for it.
TEST_F(DecisionWatcherTest, DecisionsCollectsWhatArrivedWithoutWaitingForTheInterval) {
  FakeAdmin admin(3, /*hold_open=*/true);
  Serve(&admin);
  DecisionWatcher watcher(channel_, absl::Hours(1));
  watcher.Start();
  std::vector<v1::SchedulingDecision> got;
  while (got.size() < 3) {
    absl::SleepFor(absl::Milliseconds(1));
    got = watcher.Decisions();
  }
  EXPECT_EQ(got.size(), 3u);
  EXPECT_EQ(got[2].pod().name(), "pod-2");
  EXPECT_FALSE(watcher.ended());
  watcher.Stop();
  EXPECT_TRUE(watcher.ended());
  EXPECT_EQ(watcher.Decisions().size(), 3u);
  EXPECT_FALSE(watcher.unimplemented());
}

TEST_F(DecisionWatcherTest, ASchedulerWithoutTheRpcIsUnimplemented) {
  v1::Cluster::Service other;  // A server needs a service; not Admin.
  Serve(&other);
  DecisionWatcher watcher(channel_);
  watcher.Start();
  WaitUntilEnded(watcher);
  EXPECT_TRUE(watcher.unimplemented());
  EXPECT_TRUE(watcher.Decisions().empty());
}

}  // namespace
}  // namespace podium::sim
