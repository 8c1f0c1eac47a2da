#include "remote/grpc_plugin_process.h"

#include <atomic>
#include <thread>

#include "absl/synchronization/notification.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"

namespace podium::scheduler {
namespace {

// A plugin process written in the test: answers Open, then behaves as told.
class FakePlugin final : public v1::Plugin::Service {
 public:
  enum class Mode { kEcho, kWrongKind, kSilent, kCloseAfterOpen };
  std::atomic<Mode> mode{Mode::kEcho};
  std::atomic<int> opens{0};
  std::atomic<bool> last_delta_reset{false};
  std::atomic<int> last_delta_nodes{0};
  std::atomic<bool> send_permit_decision{false};

  grpc::Status Run(grpc::ServerContext* ctx,
                   grpc::ServerReaderWriter<v1::PluginToScheduler, v1::SchedulerToPlugin>* stream) override {
    v1::SchedulerToPlugin in;
    while (stream->Read(&in)) {
      v1::PluginToScheduler out;
      out.set_id(in.id());
      if (in.has_open()) {
        ++opens;
        auto* reg = out.mutable_registration();
        reg->set_protocol_version(1);
        reg->add_plugins()->set_name("Fit");
        stream->Write(out);
        if (send_permit_decision) {
          v1::PluginToScheduler d;
          d.mutable_permit_decision()->set_pod_uid("p1");
          d.mutable_permit_decision()->set_allow(true);
          stream->Write(d);
        }
        if (mode == Mode::kCloseAfterOpen) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "bye");
        continue;
      }
      if (in.has_delta()) {
        last_delta_reset = in.delta().reset();
        last_delta_nodes = in.delta().node_upserts_size();
      }
      switch (mode.load()) {
        case Mode::kEcho: out.mutable_cycle()->set_nodes_evaluated(7); break;
        case Mode::kWrongKind: out.mutable_permit(); break;
        case Mode::kSilent: continue;
        case Mode::kCloseAfterOpen: return grpc::Status::OK;
      }
      stream->Write(out);
    }
    return grpc::Status::OK;
  }
};

// Full state: one node per call, so a reset is visible; deltas: nothing.
class FakeState final : public StateSource {
 public:
  bool ReadDelta(uint64_t, uint64_t, v1::StateDelta*) override { return true; }
  void FullState(uint64_t seq, v1::StateDelta* out) override {
    out->set_reset(true);
    out->set_generation(seq);
    out->add_node_upserts()->set_id(1);
  }
};

class GrpcPluginProcessTest : public testing::Test {
 protected:
  void SetUp() override {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    builder.RegisterService(&plugin_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
  }
  void TearDown() override {
    if (process_) process_->Shutdown();
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  }

  GrpcPluginProcess& Start(absl::Duration timeout = absl::Seconds(2)) {
    PluginEndpointOptions options;
    options.name = "host";
    options.address = "127.0.0.1:" + std::to_string(port_);
    options.timeout = timeout;
    options.reconnect_initial_backoff = absl::Milliseconds(20);
    process_ = std::make_unique<GrpcPluginProcess>(options, state_, [this](const v1::PermitDecision& d) {
      decision_uid_ = d.pod_uid();
      decided_.Notify();
    });
    EXPECT_TRUE(process_->Start().ok());
    return *process_;
  }

  static v1::SchedulerToPlugin Cycle() {
    v1::SchedulerToPlugin m;
    m.mutable_cycle()->set_cycle_id(1);
    return m;
  }

  FakePlugin plugin_;
  FakeState state_;
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<GrpcPluginProcess> process_;
  std::string decision_uid_;
  absl::Notification decided_;
};

TEST_F(GrpcPluginProcessTest, HandshakeThenAnswersMatchedById) {
  GrpcPluginProcess& p = Start();
  EXPECT_TRUE(p.ready());
  ASSERT_EQ(p.registration().plugins_size(), 1);
  EXPECT_EQ(p.registration().plugins(0).name(), "Fit");
  PluginAnswer a = p.Call(Cycle(), 5).get();
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->cycle().nodes_evaluated(), 7u);
  // The first request carries the whole state; the mirror is then current.
  EXPECT_TRUE(plugin_.last_delta_reset);
  EXPECT_EQ(p.mirror_seq(), 5u);
}

TEST_F(GrpcPluginProcessTest, AnswerOfTheWrongKindIsInvalidAndCounted) {
  plugin_.mode = FakePlugin::Mode::kWrongKind;
  GrpcPluginProcess& p = Start();
  PluginAnswer a = p.Call(Cycle(), std::nullopt).get();
  EXPECT_EQ(a.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(a.status().message().find("answered cycle request"), std::string::npos) << a.status();
  EXPECT_EQ(p.stats().invalid_answers, 1u);
}

TEST_F(GrpcPluginProcessTest, SilentPluginMissesItsDeadline) {
  plugin_.mode = FakePlugin::Mode::kSilent;
  GrpcPluginProcess& p = Start(absl::Milliseconds(100));
  const absl::Time start = absl::Now();
  PluginAnswer a = p.Call(Cycle(), std::nullopt).get();
  EXPECT_EQ(a.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_LT(absl::Now() - start, absl::Seconds(2));
  EXPECT_EQ(p.stats().timeouts, 1u);
}

TEST_F(GrpcPluginProcessTest, ReconnectsAndResendsTheWholeState) {
  GrpcPluginProcess& p = Start();
  ASSERT_TRUE(p.Call(Cycle(), 5).get().ok());
  plugin_.last_delta_reset = false;
  // The plugin process drops every stream right after the handshake once.
  plugin_.mode = FakePlugin::Mode::kCloseAfterOpen;
  server_->Shutdown(std::chrono::system_clock::now());  // Breaks the current stream.
  server_->Wait();
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:" + std::to_string(port_), grpc::InsecureServerCredentials());
  FakePlugin second;
  builder.RegisterService(&second);
  server_ = builder.BuildAndStart();
  ASSERT_NE(server_, nullptr);
  // Calls fail fast while disconnected; after the reconnect the mirror is reset.
  PluginAnswer a = absl::UnavailableError("");
  for (int i = 0; i < 200 && !(a.ok()); ++i) {
    a = p.Call(Cycle(), 6).get();
    if (!a.ok()) absl::SleepFor(absl::Milliseconds(20));
  }
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_TRUE(second.last_delta_reset);
  EXPECT_GE(p.stats().reconnects, 1u);
  server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
}

TEST_F(GrpcPluginProcessTest, PluginMaySpeakFirstWithPermitDecisions) {
  plugin_.send_permit_decision = true;
  Start();
  ASSERT_TRUE(decided_.WaitForNotificationWithTimeout(absl::Seconds(5)));
  EXPECT_EQ(decision_uid_, "p1");
}

TEST_F(GrpcPluginProcessTest, UnreachableEndpointFailsToStartWithItsName) {
  PluginEndpointOptions options;
  options.name = "python";
  options.address = "unix:///nonexistent/podium-test.sock";
  options.handshake_timeout = absl::Seconds(2);
  GrpcPluginProcess p(options, state_, nullptr);
  absl::Status s = p.Start();
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("plugin endpoint python"), std::string::npos) << s;
  PluginAnswer a = p.Call(Cycle(), std::nullopt).get();
  EXPECT_EQ(a.status().code(), absl::StatusCode::kUnavailable);
  p.Shutdown();
}

}  // namespace
}  // namespace podium::scheduler
