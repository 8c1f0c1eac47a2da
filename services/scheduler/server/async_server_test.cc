// The scheduler's server set-up: one AsyncDriver, started before the server
// is built, serving grpc.health.v1.Health (grpc_support::HealthService) and
// client calls on the same queue.
#include <unistd.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "grpc_support/async_driver.h"
#include "grpc_support/health_service.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "server/listener.h"
#include "test_support/generic_stream_call.h"

namespace podium::scheduler {
namespace {

using ::testing::HasSubstr;

// A server whose only thread waiting on a completion queue is the driver.
struct HealthServer {
  explicit HealthServer(const std::string& name) : health(name) {
    grpc::ServerBuilder builder;
    health.Register(builder);
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    driver = std::make_unique<grpc_support::AsyncDriver>(builder.AddCompletionQueue(true));
    driver->Start();
    server = builder.BuildAndStart();
    EXPECT_NE(server, nullptr);
    health.Start(driver->server_queue());
  }
  ~HealthServer() { Stop(); }
  void Stop() {
    if (server == nullptr) return;
    server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
    health.Stop();
    driver->Stop();
    server.reset();
  }
  std::string address() const { return absl::StrCat("127.0.0.1:", port); }

  grpc_support::HealthService health;  // Outlives the driver.
  int port = 0;
  std::unique_ptr<grpc_support::AsyncDriver> driver;
  std::unique_ptr<grpc::Server> server;
};

// A unary call through the generic stub on a caller's queue; completes through
// a Completion, as the scheduler's plugin client does on the driver's queue.
class UnaryCall final {
 public:
  UnaryCall(grpc::GenericStub& stub, const std::string& method, const std::string& request,
            grpc::CompletionQueue* queue) {
    context_.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
    grpc::Slice slice(request);
    request_ = grpc::ByteBuffer(&slice, 1);
    call_ = stub.PrepareUnaryCall(&context_, method, request_, queue);
    call_->StartCall();
    call_->Finish(&response_, &status_, &finished_);
  }
  bool Wait() { return done_.WaitForNotificationWithTimeout(absl::Seconds(20)); }
  const grpc::Status& status() const { return status_; }
  std::string response() {
    std::vector<grpc::Slice> slices;
    std::string out;
    if (!response_.Dump(&slices).ok()) return out;
    for (const grpc::Slice& s : slices) out.append(reinterpret_cast<const char*>(s.begin()), s.size());
    return out;
  }

 private:
  void OnFinished(bool /*ok*/) { done_.Notify(); }

  grpc::ClientContext context_;
  grpc::ByteBuffer request_;
  grpc::ByteBuffer response_;
  grpc::Status status_;
  std::unique_ptr<grpc::GenericClientAsyncResponseReader> call_;
  grpc_support::CompletionOf<UnaryCall> finished_{this, &UnaryCall::OnFinished};
  absl::Notification done_;
};

const std::string kServing("\x08\x01", 2);
const std::string kUnknown("\x08\x03", 2);
// HealthCheckRequest{service: "podium.v1.Cluster"}.
const std::string kNamed = std::string("\x0a\x11", 2) + "podium.v1.Cluster";

// main.cc's order: the driver polls the server's queue before the server is
// built, so a client call on that queue (a plugin endpoint's handshake)
// completes while main still waits for it; the server built afterwards serves
// on the same queue.
TEST(AsyncServerTest, ClientCallsOnTheServerQueueCompleteBeforeTheServerIsBuilt) {
  HealthServer remote("remote");  // Stands for a plugin process.
  grpc::ServerBuilder builder;
  grpc_support::HealthService health("podium-scheduler");
  health.Register(builder);
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  grpc_support::AsyncDriver driver(builder.AddCompletionQueue(true));
  driver.Start();

  grpc::GenericStub remote_stub(grpc::CreateChannel(remote.address(), grpc::InsecureChannelCredentials()));
  UnaryCall early(remote_stub, "/grpc.health.v1.Health/Check", "", driver.queue());
  ASSERT_TRUE(early.Wait());
  EXPECT_TRUE(early.status().ok()) << early.status().error_message();
  EXPECT_EQ(early.response(), kServing);

  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_NE(server, nullptr);
  health.Start(driver.server_queue());
  grpc::GenericStub own_stub(grpc::CreateChannel(absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials()));
  UnaryCall served(own_stub, "/grpc.health.v1.Health/Check", "", driver.queue());
  UnaryCall later(remote_stub, "/grpc.health.v1.Health/Check", kNamed, driver.queue());
  ASSERT_TRUE(served.Wait());
  ASSERT_TRUE(later.Wait());
  EXPECT_TRUE(served.status().ok()) << served.status().error_message();
  EXPECT_EQ(served.response(), kServing);
  EXPECT_EQ(later.status().error_code(), grpc::StatusCode::NOT_FOUND);

  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  health.Stop();
  driver.Stop();
  EXPECT_EQ(health.calls(), 0u);  // The requested call completed (failed) and was forgotten.
}

TEST(AsyncServerTest, HealthCheckAnswersForTheServerAndRefusesNamedServices) {
  HealthServer server("podium-scheduler");
  grpc_support::AsyncDriver client;  // A client-only queue.
  client.Start();
  grpc::GenericStub stub(grpc::CreateChannel(server.address(), grpc::InsecureChannelCredentials()));
  UnaryCall check(stub, "/grpc.health.v1.Health/Check", "", client.queue());
  UnaryCall named(stub, "/grpc.health.v1.Health/Check", kNamed, client.queue());
  UnaryCall bad(stub, "/grpc.health.v1.Health/Check", std::string("\x0a\x05x", 3), client.queue());
  UnaryCall other(stub, "/podium.v1.Nothing/Here", "", client.queue());
  for (UnaryCall* c : {&check, &named, &bad, &other}) ASSERT_TRUE(c->Wait());
  EXPECT_TRUE(check.status().ok()) << check.status().error_message();
  EXPECT_EQ(check.response(), kServing);
  EXPECT_EQ(named.status().error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(named.status().error_message(), HasSubstr("podium.v1.Cluster"));
  EXPECT_EQ(bad.status().error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(other.status().error_code(), grpc::StatusCode::UNIMPLEMENTED);
  EXPECT_THAT(other.status().error_message(), HasSubstr("/podium.v1.Nothing/Here: not served by podium-scheduler"));
}

// Watch: the status once, then the stream stays open until the client
// cancels it or the server shuts down; the driver then stops (no call left).
TEST(AsyncServerTest, HealthWatchSendsTheStatusAndEndsWithCancelOrShutdown) {
  HealthServer server("podium-scheduler");
  {  // Cancelled by the client.
    test_support::GenericStreamCall call(server.address(), "/grpc.health.v1.Health/Watch");
    ASSERT_TRUE(call.started());
    ASSERT_TRUE(call.WriteLast(kNamed));
    EXPECT_EQ(call.Read().value_or("(ended)"), kUnknown);
    call.Cancel();
    EXPECT_EQ(call.Finish().error_code(), grpc::StatusCode::CANCELLED);
  }
  // Left open: ends with the server's shutdown.
  test_support::GenericStreamCall call(server.address(), "/grpc.health.v1.Health/Watch");
  ASSERT_TRUE(call.started());
  ASSERT_TRUE(call.WriteLast(""));
  EXPECT_EQ(call.Read().value_or("(ended)"), kServing);
  server.Stop();  // Returns: every call ended and the driver drained.
  EXPECT_EQ(server.health.calls(), 0u);
  EXPECT_FALSE(call.Read().has_value());
  EXPECT_FALSE(call.Finish().ok());
}

}  // namespace
}  // namespace podium::scheduler
