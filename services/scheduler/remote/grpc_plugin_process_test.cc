#include "remote/grpc_plugin_process.h"

#include <unistd.h>

#include <future>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <functional>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"

#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "test_support/time_scale.h"

namespace podium::scheduler {
namespace {

using test_support::Scaled;

// A plugin process written in the test: answers Open, then behaves as told.
class FakePlugin final : public v1::Plugin::Service {
 public:
  // kCrash: the handler ends the stream with an error instead of answering,
  // as a plugin process that dies mid-request leaves it.
  enum class Mode { kEcho, kWrongKind, kSilent, kCrash };
  std::atomic<Mode> mode{Mode::kEcho};
  std::atomic<int> opens{0};
  std::atomic<bool> last_delta_reset{false};
  std::atomic<int> last_delta_nodes{0};
  std::atomic<bool> send_permit_decision{false};
  // Answer `error` to the n-th request after Open (1-based; 0 = never), as the
  // SDK does when a delta does not apply.
  std::atomic<int> error_on_request{0};
  // Each answer is followed by a copy of it and by one with a made-up id.
  std::atomic<bool> answer_extra{false};
  // Registers without Spread, as a process rolled back to a build without it.
  std::atomic<bool> without_spread{false};
  std::atomic<int> requests{0};
  absl::Mutex mu;
  std::vector<bool> resets ABSL_GUARDED_BY(mu);  // Per request: did its delta reset?
  std::vector<std::vector<uint64_t>> finished ABSL_GUARDED_BY(mu);  // Per request.

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
        auto* fit = reg->add_plugins();
        fit->set_name("Fit");
        fit->add_extension_points(v1::FILTER);
        fit->add_extension_points(v1::PERMIT);
        auto* gate = reg->add_plugins();
        gate->set_name("Gate");
        gate->add_extension_points(v1::PERMIT);
        if (!without_spread) {
          auto* score = reg->add_plugins();
          score->set_name("Spread");
          score->add_extension_points(v1::SCORE);
        }
        reg->mutable_mirror()->set_nodes(true);
        stream->Write(out);
        if (send_permit_decision) {
          // First for plugins this endpoint does not serve at Permit (Other is
          // not registered, Spread not at Permit, Gate is registered at Permit
          // but the configuration does not assign it here), then for its own.
          for (const char* plugin : {"Other", "Spread", "Gate", "Fit"}) {
            v1::PluginToScheduler d;
            d.mutable_permit_decision()->set_pod_uid(std::string("p-") + plugin);
            d.mutable_permit_decision()->set_plugin(plugin);
            d.mutable_permit_decision()->set_allow(true);
            stream->Write(d);
          }
        }
        continue;
      }
      if (in.has_delta()) {
        last_delta_reset = in.delta().reset();
        last_delta_nodes = in.delta().node_upserts_size();
      }
      {
        absl::MutexLock lock(&mu);
        resets.push_back(in.has_delta() && in.delta().reset());
        finished.emplace_back(in.finished_cycles().begin(), in.finished_cycles().end());
      }
      if (++requests == error_on_request) {
        out.set_error("delta.pod_upserts[0].node_id: unknown node id 9");
        stream->Write(out);
        continue;
      }
      switch (mode.load()) {
        case Mode::kEcho: out.mutable_cycle()->set_nodes_evaluated(7); break;
        case Mode::kWrongKind: out.mutable_permit(); break;
        case Mode::kSilent: continue;
        case Mode::kCrash: return grpc::Status(grpc::StatusCode::UNAVAILABLE, "plugin process died");
      }
      // Read before the answer goes: the test clears the flag once the
      // answer arrived, which may be before this thread reads it again.
      const bool extra = answer_extra;
      stream->Write(out);
      if (extra) {
        stream->Write(out);
        out.set_id(in.id() + 1000);
        stream->Write(out);
      }
    }
    return grpc::Status::OK;
  }
};

// Full state: one node per call, so a reset is visible; deltas: one node
// removal (a change the plugin must apply on the right base).
class FakeState final : public StateSource {
 public:
  bool ReadDelta(uint64_t from, uint64_t to, v1::StateDelta* out) override {
    out->set_generation(to);
    if (to > from) out->add_node_removals(99);
    return true;
  }
  void FullState(uint64_t seq, v1::StateDelta* out) override {
    out->set_reset(true);
    out->set_generation(seq);
    out->add_node_upserts()->set_id(1);
  }
};

v1::SchedulerToPlugin CycleRequestMessage() {
  v1::SchedulerToPlugin m;
  m.mutable_cycle()->set_cycle_id(1);
  return m;
}

// A plugin process serving `service` on a loopback port of its own.
std::unique_ptr<grpc::Server> StartPluginServer(grpc::Service* service, int* port) {
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), port);
  builder.RegisterService(service);
  return builder.BuildAndStart();
}

class GrpcPluginProcessTest : public testing::Test {
 protected:
  void SetUp() override {
    server_ = StartPluginServer(&plugin_, &port_);
    ASSERT_NE(server_, nullptr);
  }
  void TearDown() override {
    if (process_) process_->Shutdown();
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  }

  GrpcPluginProcess& Start(absl::Duration timeout = Scaled(absl::Seconds(2)),
                           std::function<void(PluginEndpointOptions&)> customize = nullptr,
                           absl::Status* started = nullptr) {
    PluginEndpointOptions options;
    options.name = "host";
    options.address = "127.0.0.1:" + std::to_string(port_);
    options.timeout = timeout;
    options.reconnect_initial_backoff = absl::Milliseconds(20);
    for (const char* plugin : {"Fit", "Spread"}) {
      v1::PluginArgs& args = options.plugins.emplace_back();
      args.set_name(plugin);
    }
    if (customize) customize(options);
    process_ = std::make_unique<GrpcPluginProcess>(options, state_, [this](const v1::PermitDecision& d) {
      ++decisions_;
      if (d.pod_uid() == "p-Fit") {
        decision_uid_ = d.pod_uid();
        decided_.Notify();
      }
    });
    absl::Status status = process_->Start();
    if (started != nullptr) {
      *started = std::move(status);
    } else {
      EXPECT_TRUE(status.ok()) << status;
    }
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
  std::atomic<int> decisions_{0};
  absl::Notification decided_;
};

TEST_F(GrpcPluginProcessTest, HandshakeThenAnswersMatchedById) {
  GrpcPluginProcess& p = Start();
  EXPECT_TRUE(p.ready());
  ASSERT_EQ(p.registration().plugins_size(), 3);
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
  GrpcPluginProcess& p = Start(Scaled(absl::Milliseconds(100)));
  const absl::Time start = absl::Now();
  PluginAnswer a = p.Call(Cycle(), std::nullopt).get();
  EXPECT_EQ(a.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_LT(absl::Now() - start, Scaled(absl::Seconds(2)));
  EXPECT_EQ(p.stats().timeouts, 1u);
}

// The plugin process dies mid-run and a new one starts on the same address:
// the request in flight fails, calls fail fast while it is down, and the
// client reconnects by itself; the new stream's first state is a reset, and
// later ones are deltas again.
TEST_F(GrpcPluginProcessTest, ReconnectsAfterThePluginProcessRestartsWithAFullResync) {
  GrpcPluginProcess& p = Start();
  ASSERT_TRUE(p.Call(Cycle(), 5).get().ok());
  ASSERT_TRUE(p.Call(Cycle(), 6).get().ok());
  {
    absl::MutexLock lock(&plugin_.mu);
    ASSERT_EQ(plugin_.resets, (std::vector<bool>{true, false}));
  }
  plugin_.mode = FakePlugin::Mode::kSilent;
  std::future<PluginAnswer> in_flight = p.Call(Cycle(), 7);
  server_->Shutdown(std::chrono::system_clock::now());  // The process dies.
  server_->Wait();
  EXPECT_EQ(in_flight.get().status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(p.Call(Cycle(), 8).get().status().code(), absl::StatusCode::kUnavailable);

  FakePlugin restarted;
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:" + std::to_string(port_), grpc::InsecureServerCredentials());
  builder.RegisterService(&restarted);
  server_ = builder.BuildAndStart();
  ASSERT_NE(server_, nullptr);
  const absl::Time ready_by = absl::Now() + Scaled(absl::Seconds(5));
  while (!p.ready() && absl::Now() < ready_by) absl::SleepFor(absl::Milliseconds(20));
  ASSERT_TRUE(p.ready());
  PluginAnswer a = p.Call(Cycle(), 9).get();
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->cycle().nodes_evaluated(), 7u);
  ASSERT_TRUE(p.Call(Cycle(), 10).get().ok());
  EXPECT_EQ(restarted.opens, 1);
  {
    absl::MutexLock lock(&restarted.mu);
    EXPECT_EQ(restarted.resets, (std::vector<bool>{true, false}));
  }
  EXPECT_EQ(p.mirror_seq(), 10u);
  EXPECT_EQ(p.stats().reconnects, 1u);
  // Before `restarted` goes.
  p.Shutdown();
  server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
}

// Defect 5: a plugin that answers `error` to a request carrying a delta may not
// have applied it; the next request must reset the mirror, not build on it.
TEST_F(GrpcPluginProcessTest, ErrorAnswerToARequestWithADeltaResetsTheMirror) {
  plugin_.error_on_request = 2;
  GrpcPluginProcess& p = Start();
  ASSERT_TRUE(p.Call(Cycle(), 5).get().ok());             // Reset (first state).
  EXPECT_FALSE(p.Call(Cycle(), 6).get().ok());            // Delta 5..6, refused.
  ASSERT_TRUE(p.Call(Cycle(), 7).get().ok());             // Must be a reset again.
  ASSERT_TRUE(p.Call(Cycle(), 8).get().ok());             // Then deltas resume.
  absl::MutexLock lock(&plugin_.mu);
  EXPECT_EQ(plugin_.resets, (std::vector<bool>{true, false, true, false}));
}

// An error to a request without state (or with an empty delta) costs no reset.
TEST_F(GrpcPluginProcessTest, ErrorAnswerWithoutStateKeepsTheMirror) {
  plugin_.error_on_request = 2;
  GrpcPluginProcess& p = Start();
  ASSERT_TRUE(p.Call(Cycle(), 5).get().ok());
  EXPECT_FALSE(p.Call(Cycle(), std::nullopt).get().ok());
  ASSERT_TRUE(p.Call(Cycle(), 6).get().ok());
  absl::MutexLock lock(&plugin_.mu);
  EXPECT_EQ(plugin_.resets, (std::vector<bool>{true, false, false}));
}

// Defect 7: finished cycles ride on the next message to the process.
TEST_F(GrpcPluginProcessTest, FinishedCyclesRideOnTheNextRequest) {
  GrpcPluginProcess& p = Start();
  p.FinishCycle(7);
  p.FinishCycle(8);
  ASSERT_TRUE(p.Call(Cycle(), std::nullopt).get().ok());
  ASSERT_TRUE(p.Call(Cycle(), std::nullopt).get().ok());
  absl::MutexLock lock(&plugin_.mu);
  EXPECT_EQ(plugin_.finished, (std::vector<std::vector<uint64_t>>{{7, 8}, {}}));
}

TEST_F(GrpcPluginProcessTest, PluginMaySpeakFirstWithPermitDecisions) {
  plugin_.send_permit_decision = true;
  Start();
  ASSERT_TRUE(decided_.WaitForNotificationWithTimeout(Scaled(absl::Seconds(5))));
  EXPECT_EQ(decision_uid_, "p-Fit");
}

// Defect 12: a process may decide only for the Permit plugins it serves: ones
// it registered at Permit and the configuration assigns to it. This is the
// only check of the sending endpoint (the scheduler does not repeat it).
TEST_F(GrpcPluginProcessTest, PermitDecisionsForPluginsTheEndpointDoesNotServeAreRefused) {
  plugin_.send_permit_decision = true;
  GrpcPluginProcess& p = Start();
  // Messages are handled in order: once the valid one arrived, the others were refused.
  ASSERT_TRUE(decided_.WaitForNotificationWithTimeout(Scaled(absl::Seconds(5))));
  EXPECT_EQ(decision_uid_, "p-Fit");
  EXPECT_EQ(decisions_, 1);
  EXPECT_EQ(p.stats().refused_permit_decisions, 3u);
}

// Answers nobody asked for (a second answer to one request, a made-up id)
// are dropped and counted, and the requests still get their own.
TEST_F(GrpcPluginProcessTest, AnswersToNoRequestInFlightAreCounted) {
  GrpcPluginProcess& p = Start();
  plugin_.answer_extra = true;
  ASSERT_TRUE(p.Call(Cycle(), std::nullopt).get().ok());
  plugin_.answer_extra = false;
  // Messages are handled in order: once this is answered, the extras were seen.
  ASSERT_TRUE(p.Call(Cycle(), std::nullopt).get().ok());
  EXPECT_EQ(p.stats().spurious_answers, 2u);
  EXPECT_EQ(p.stats().invalid_answers, 0u);
}

// Defect 13: an endpoint that keeps timing out fails fast, and a probe
// request is let through after the open period.
TEST_F(GrpcPluginProcessTest, HungEndpointOpensTheCircuitAndAProbeClosesIt) {
  // The probe that closes the circuit must be answered within the request
  // timeout, so the timeout leaves room for a round trip on a loaded
  // machine; the open period and the waits keep their ratio to it.
  const absl::Duration timeout = Scaled(absl::Milliseconds(150));
  const absl::Duration open = 6 * timeout;
  plugin_.mode = FakePlugin::Mode::kSilent;
  GrpcPluginProcess& p = Start(timeout, [open](PluginEndpointOptions& o) {
    o.circuit_breaker_timeouts = 3;
    o.circuit_open_initial = open;
  });
  EXPECT_EQ(p.state(), EndpointState::kReady);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(p.Call(Cycle(), std::nullopt).get().status().code(),
              absl::StatusCode::kDeadlineExceeded);
  }
  EXPECT_EQ(p.state(), EndpointState::kCircuitOpen);
  EXPECT_EQ(p.stats().circuit_opens, 1u);
  // Open: fails at once, without a request on the stream.
  PluginAnswer fast = p.Call(Cycle(), std::nullopt).get();
  EXPECT_EQ(fast.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(fast.status().message().find("circuit open"), std::string::npos) << fast.status();
  EXPECT_EQ(p.stats().circuit_fast_failures, 1u);

  // After the open period one probe goes through; it times out: open again.
  absl::SleepFor(open + timeout);
  EXPECT_EQ(p.Call(Cycle(), std::nullopt).get().status().code(),
            absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(p.state(), EndpointState::kCircuitOpen);
  EXPECT_EQ(p.stats().circuit_opens, 2u);
  EXPECT_EQ(p.Call(Cycle(), std::nullopt).get().status().code(), absl::StatusCode::kUnavailable);

  // The endpoint recovers: the next probe (the open period doubled) closes it.
  plugin_.mode = FakePlugin::Mode::kEcho;
  absl::SleepFor(2 * open + timeout);
  PluginAnswer probe = p.Call(Cycle(), std::nullopt).get();
  ASSERT_TRUE(probe.ok()) << probe.status();
  EXPECT_EQ(p.state(), EndpointState::kReady);
  EXPECT_TRUE(p.Call(Cycle(), std::nullopt).get().ok());
  // Only the 3 timed-out requests, 2 probes and the last call reached the plugin.
  EXPECT_EQ(plugin_.requests, 6);
}

// The plugin process dies with two requests on the stream: both fail as
// unavailable at once (not at their deadline), and the endpoint reconnects by
// itself, resetting the mirror of the new process.
TEST_F(GrpcPluginProcessTest, PluginProcessDyingMidRequestFailsEveryRequestInFlight) {
  GrpcPluginProcess& p = Start(Scaled(absl::Seconds(60)));
  ASSERT_TRUE(p.Call(Cycle(), 5).get().ok());
  plugin_.mode = FakePlugin::Mode::kCrash;
  std::future<PluginAnswer> first = p.Call(Cycle(), 6);
  std::future<PluginAnswer> second = p.Call(Cycle(), 7);
  const PluginAnswer a = first.get();
  const PluginAnswer b = second.get();
  EXPECT_EQ(a.status().code(), absl::StatusCode::kUnavailable) << a.status();
  EXPECT_EQ(b.status().code(), absl::StatusCode::kUnavailable) << b.status();
  EXPECT_NE(a.status().message().find("plugin endpoint host"), std::string::npos) << a.status();
  // The cause is the call's status, not a guess.
  EXPECT_NE(a.status().message().find("stream ended: UNAVAILABLE: plugin process died"), std::string::npos)
      << a.status();
  EXPECT_EQ(p.stats().timeouts, 0u);
  plugin_.mode = FakePlugin::Mode::kEcho;
  const absl::Time ready_by = absl::Now() + Scaled(absl::Seconds(5));
  while (p.stats().reconnects == 0 && absl::Now() < ready_by) absl::SleepFor(absl::Milliseconds(20));
  ASSERT_EQ(p.stats().reconnects, 1u);
  const PluginAnswer after = p.Call(Cycle(), 8).get();
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(plugin_.opens, 2);
  EXPECT_TRUE(plugin_.last_delta_reset);
}

// A process that answers the handshake without a plugin the configuration
// assigns to it is refused, naming the plugin: it is not used, and the
// scheduler's start fails on it (main.cc).
TEST_F(GrpcPluginProcessTest, AProcessWithoutAPluginTheConfigListsFailsToStartNamingIt) {
  plugin_.without_spread = true;
  absl::Status started;
  GrpcPluginProcess& p = Start(Scaled(absl::Seconds(2)), nullptr, &started);
  EXPECT_EQ(started.code(), absl::StatusCode::kNotFound) << started;
  EXPECT_THAT(std::string(started.message()),
              testing::HasSubstr("does not serve plugin \"Spread\" that the configuration assigns to it"));
  EXPECT_FALSE(p.ready());
  EXPECT_THAT(p.last_error(), testing::HasSubstr("\"Spread\""));
}

// The same process coming back (a redial after its stream broke) without the
// plugin is refused until it serves it again.
TEST_F(GrpcPluginProcessTest, AProcessBackWithoutAPluginTheConfigListsIsRefusedUntilItServesIt) {
  GrpcPluginProcess& p = Start(Scaled(absl::Seconds(60)));
  ASSERT_TRUE(p.Call(Cycle(), 5).get().ok());
  plugin_.without_spread = true;
  plugin_.mode = FakePlugin::Mode::kCrash;
  EXPECT_FALSE(p.Call(Cycle(), 6).get().ok());
  plugin_.mode = FakePlugin::Mode::kEcho;
  // Redialed at least once more (Open answered without Spread), not taken.
  const absl::Time redialed_by = absl::Now() + Scaled(absl::Seconds(5));
  while (plugin_.opens < 3 && absl::Now() < redialed_by) absl::SleepFor(absl::Milliseconds(10));
  ASSERT_GE(plugin_.opens, 3);
  EXPECT_FALSE(p.ready());
  EXPECT_EQ(p.stats().reconnects, 0u);
  EXPECT_THAT(p.last_error(), testing::HasSubstr("does not serve plugin \"Spread\""));
  const PluginAnswer refused = p.Call(Cycle(), 7).get();
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kUnavailable) << refused.status();
  plugin_.without_spread = false;
  const absl::Time ready_by = absl::Now() + Scaled(absl::Seconds(5));
  while (p.stats().reconnects == 0 && absl::Now() < ready_by) absl::SleepFor(absl::Milliseconds(10));
  ASSERT_EQ(p.stats().reconnects, 1u);
  EXPECT_TRUE(p.Call(Cycle(), 8).get().ok());
  EXPECT_TRUE(p.last_error().empty());
}

// Shutdown with requests in flight answers every one of them (cancelled), and
// the endpoint takes no request after it.
TEST_F(GrpcPluginProcessTest, ShutdownFailsTheRequestsInFlight) {
  plugin_.mode = FakePlugin::Mode::kSilent;
  GrpcPluginProcess& p = Start(Scaled(absl::Seconds(60)));
  std::vector<std::future<PluginAnswer>> in_flight;
  for (int i = 0; i < 16; ++i) in_flight.push_back(p.Call(Cycle(), std::nullopt));
  p.Shutdown();
  for (auto& answer : in_flight) {
    EXPECT_EQ(answer.get().status().code(), absl::StatusCode::kCancelled);
  }
  EXPECT_FALSE(p.ready());
  EXPECT_EQ(p.Call(Cycle(), std::nullopt).get().status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(p.stats().timeouts, 0u);
}

// A plugin process that has not read for a while (it answered Open, then
// stalls): the sender is never held up by the stream's flow control, the
// requests wait in the write queue (one write in flight at a time), and
// once the process reads again every one arrives, in the order sent, and is
// answered.
class StallingPlugin final : public v1::Plugin::Service {
 public:
  absl::Notification resume;
  absl::Mutex mu;
  std::vector<uint64_t> received ABSL_GUARDED_BY(mu);

  grpc::Status Run(grpc::ServerContext*,
                   grpc::ServerReaderWriter<v1::PluginToScheduler, v1::SchedulerToPlugin>* stream) override {
    v1::SchedulerToPlugin in;
    while (stream->Read(&in)) {
      v1::PluginToScheduler out;
      out.set_id(in.id());
      if (in.has_open()) {
        out.mutable_registration()->set_protocol_version(1);
        stream->Write(out);
        resume.WaitForNotification();
        continue;
      }
      {
        absl::MutexLock lock(&mu);
        received.push_back(in.id());
      }
      out.mutable_cycle()->set_nodes_evaluated(in.cycle().profile().size());
      stream->Write(out);
    }
    return grpc::Status::OK;
  }
};

// A plugin process that reads nothing until `plugin.resume` is notified.
class GrpcPluginProcessWritesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = StartPluginServer(&plugin, &port_);
    ASSERT_NE(server_, nullptr);
  }
  void TearDown() override {
    // A test that stopped early must not leave the handler blocked.
    if (!plugin.resume.HasBeenNotified()) plugin.resume.Notify();
    if (server_ != nullptr) server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  }

  PluginEndpointOptions Options() const {
    PluginEndpointOptions options;
    options.name = "stalling";
    options.address = "127.0.0.1:" + std::to_string(port_);
    options.timeout = Scaled(absl::Seconds(60));
    return options;
  }

  StallingPlugin plugin;
  FakeState state;

 private:
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
};

TEST_F(GrpcPluginProcessWritesTest, WritesQueueBehindAProcessThatDoesNotRead) {
  PluginEndpointOptions options = Options();
  GrpcPluginProcess process(options, state, nullptr);
  ASSERT_TRUE(process.Start().ok());
  // 64 requests of 256 KiB: far beyond what HTTP/2 flow control lets through
  // to a reader that does not read, so most wait in the write queue.
  constexpr int kRequests = 64;
  const std::string payload(256 << 10, 'x');
  std::vector<std::future<PluginAnswer>> answers;
  for (int i = 0; i < kRequests; ++i) {
    v1::SchedulerToPlugin request;
    request.mutable_cycle()->set_profile(payload);
    answers.push_back(process.Call(std::move(request), std::nullopt));
  }
  // Every Call returned while the process reads nothing; none is answered yet.
  for (auto& answer : answers) {
    EXPECT_NE(answer.wait_for(std::chrono::seconds(0)), std::future_status::ready);
  }
  plugin.resume.Notify();
  for (auto& answer : answers) {
    const PluginAnswer a = answer.get();
    ASSERT_TRUE(a.ok()) << a.status();
    EXPECT_EQ(a->cycle().nodes_evaluated(), payload.size());
  }
  {
    absl::MutexLock lock(&plugin.mu);
    ASSERT_EQ(plugin.received.size(), static_cast<size_t>(kRequests));
    EXPECT_TRUE(std::is_sorted(plugin.received.begin(), plugin.received.end()));
  }
  EXPECT_EQ(process.stats().errors, 0u);
  process.Shutdown();
}

// The write queue is bounded: behind a process that does not read, at most
// max_in_flight requests wait (HTTP/2 flow control lets only the first few
// MiB through), and a call beyond that fails at once instead of queueing; the
// ones accepted are all answered once the process reads again.
TEST_F(GrpcPluginProcessWritesTest, ABoundedWriteQueueRefusesCallsBeyondIt) {
  PluginEndpointOptions options = Options();
  options.max_in_flight = 4;
  GrpcPluginProcess process(options, state, nullptr);
  ASSERT_TRUE(process.Start().ok());
  // 32 MiB in all: more than any flow-control window lets through unread.
  constexpr int kRequests = 32;
  const std::string payload(1 << 20, 'x');
  std::vector<std::future<PluginAnswer>> accepted;
  int refused = 0;
  for (int i = 0; i < kRequests; ++i) {
    v1::SchedulerToPlugin request;
    request.mutable_cycle()->set_profile(payload);
    std::future<PluginAnswer> answer = process.Call(std::move(request), std::nullopt);
    if (answer.wait_for(std::chrono::seconds(0)) == std::future_status::ready) {
      const PluginAnswer a = answer.get();
      EXPECT_EQ(a.status().code(), absl::StatusCode::kResourceExhausted) << a.status();
      EXPECT_NE(a.status().message().find("plugin endpoint stalling: too many requests in flight"),
                std::string::npos)
          << a.status();
      ++refused;
    } else {
      accepted.push_back(std::move(answer));
    }
  }
  EXPECT_GE(refused, 1);
  EXPECT_GE(accepted.size(), static_cast<size_t>(options.max_in_flight));
  plugin.resume.Notify();
  for (auto& answer : accepted) {
    const PluginAnswer a = answer.get();
    ASSERT_TRUE(a.ok()) << a.status();
  }
  EXPECT_EQ(process.stats().errors, static_cast<uint64_t>(refused));
  process.Shutdown();
}

// Two endpoints on one driver (as podium-scheduler shares the server's): both
// are answered on the driver's thread; shutting one down leaves the other
// working on the same queue.
TEST(GrpcPluginProcessDriverTest, TwoEndpointsShareOneDriver) {
  FakePlugin plugins[2];
  std::unique_ptr<grpc::Server> servers[2];
  int ports[2] = {0, 0};
  for (int i = 0; i < 2; ++i) {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &ports[i]);
    builder.RegisterService(&plugins[i]);
    servers[i] = builder.BuildAndStart();
    ASSERT_NE(servers[i], nullptr);
  }
  grpc_support::AsyncDriver driver;
  FakeState state;
  std::atomic<int> answered_on_driver{0};
  std::atomic<int> answered_elsewhere{0};
  std::unique_ptr<GrpcPluginProcess> processes[2];
  for (int i = 0; i < 2; ++i) {
    PluginEndpointOptions options;
    options.name = "shared-" + std::to_string(i);
    options.address = "127.0.0.1:" + std::to_string(ports[i]);
    options.timeout = Scaled(absl::Seconds(30));
    options.driver = &driver;
    options.plugins.emplace_back().set_name("Fit");
    options.on_answered = [&](std::string_view, absl::Duration) {
      ++(driver.OnDriverThread() ? answered_on_driver : answered_elsewhere);
    };
    processes[i] = std::make_unique<GrpcPluginProcess>(options, state, nullptr);
    ASSERT_TRUE(processes[i]->Start().ok());
  }
  // Interleaved, both endpoints with requests in flight at once.
  std::vector<std::future<PluginAnswer>> answers;
  for (int round = 0; round < 8; ++round) {
    for (auto& process : processes) answers.push_back(process->Call(CycleRequestMessage(), round + 1));
  }
  for (auto& answer : answers) {
    const PluginAnswer a = answer.get();
    ASSERT_TRUE(a.ok()) << a.status();
    EXPECT_EQ(a->cycle().nodes_evaluated(), 7u);
  }
  processes[0]->Shutdown();
  const PluginAnswer still = processes[1]->Call(CycleRequestMessage(), 9).get();
  ASSERT_TRUE(still.ok()) << still.status();
  EXPECT_EQ(plugins[0].opens, 1);
  EXPECT_EQ(plugins[1].opens, 1);
  // 2 handshakes and 17 requests, every one read on the driver's thread.
  EXPECT_EQ(answered_on_driver, 19);
  EXPECT_EQ(answered_elsewhere, 0);
  processes[1]->Shutdown();
  driver.Stop();
  for (auto& server : servers) server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
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
  EXPECT_NE(s.message().find("no plugin process answered at unix:///nonexistent/podium-test.sock"),
            std::string::npos)
      << s;
  PluginAnswer a = p.Call(Cycle(), std::nullopt).get();
  EXPECT_EQ(a.status().code(), absl::StatusCode::kUnavailable);
  p.Shutdown();
}

// Defect 14: a plugin sidecar that starts after the scheduler is waited for
// (up to the handshake timeout), not reported as "stream closed" at once.
TEST(GrpcPluginProcessStartTest, WaitsForAnEndpointThatComesUpLate) {
  char dir[] = "/tmp/podium-late-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string address = std::string("unix://") + dir + "/late.sock";
  FakePlugin plugin;
  FakeState state;
  PluginEndpointOptions options;
  options.name = "late";
  options.address = address;
  options.handshake_timeout = Scaled(absl::Seconds(20));
  GrpcPluginProcess process(options, state, nullptr);
  std::unique_ptr<grpc::Server> server;
  std::thread starter([&] {
    absl::SleepFor(absl::Seconds(1));
    grpc::ServerBuilder builder;
    builder.AddListeningPort(address, grpc::InsecureServerCredentials());
    builder.RegisterService(&plugin);
    server = builder.BuildAndStart();
  });
  const absl::Status started = process.Start();
  starter.join();
  ASSERT_NE(server, nullptr);
  EXPECT_TRUE(started.ok()) << started;
  EXPECT_TRUE(process.ready());
  PluginAnswer answer = process.Call(CycleRequestMessage(), 1).get();
  EXPECT_TRUE(answer.ok()) << answer.status();
  process.Shutdown();
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  std::remove((std::string(dir) + "/late.sock").c_str());
  rmdir(dir);
}

}  // namespace
}  // namespace podium::scheduler
