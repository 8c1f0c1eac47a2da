#include "common/dial/scheduler_dial.h"

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "podium/v1/cluster.grpc.pb.h"

namespace podium::adapter {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Records the authorization metadata of each Sync call, then ends it.
class RecordingScheduler final : public v1::Cluster::Service {
 public:
  grpc::Status Sync(grpc::ServerContext* context,
                    grpc::ServerReaderWriter<v1::SchedulerMessage, v1::ClusterMessage>*) override {
    std::string got = "<none>";
    for (const auto& [key, value] : context->client_metadata()) {
      if (key == "authorization") got.assign(value.data(), value.size());
    }
    absl::MutexLock lock(&mu_);
    seen_.push_back(got);
    return grpc::Status::OK;
  }
  std::vector<std::string> seen() {
    absl::MutexLock lock(&mu_);
    return seen_;
  }

 private:
  absl::Mutex mu_;
  std::vector<std::string> seen_ ABSL_GUARDED_BY(mu_);
};

class SchedulerDialTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/podium-dial-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    address_ = absl::StrCat("unix://", dir_, "/sched.sock");
    grpc::ServerBuilder builder;
    builder.AddListeningPort(address_, grpc::InsecureServerCredentials());
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
  }
  void TearDown() override {
    server_->Shutdown(std::chrono::system_clock::now());
    std::system(absl::StrCat("rm -rf ", dir_).c_str());
  }
  std::string Write(const std::string& name, const std::string& content) {
    const std::string path = absl::StrCat(dir_, "/", name);
    // Replace, as a rotated token file is (a new inode).
    const std::string tmp = path + ".tmp";
    std::ofstream(tmp, std::ios::trunc) << content;
    EXPECT_EQ(std::rename(tmp.c_str(), path.c_str()), 0);
    return path;
  }
  void Call(const std::shared_ptr<grpc::Channel>& channel) {
    auto stub = v1::Cluster::NewStub(channel);
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    auto stream = stub->Sync(&context);
    stream->WritesDone();
    ASSERT_TRUE(stream->Finish().ok());
  }

  std::string dir_, address_;
  RecordingScheduler service_;
  std::unique_ptr<grpc::Server> server_;
};

TEST_F(SchedulerDialTest, SendsTheTokenOnEveryCallAndRereadsTheFileWhenItChanges) {
  const std::string file = Write("token", "first-token\n");
  auto channel = DialScheduler(address_, {.token_file = file});
  ASSERT_TRUE(channel.ok()) << channel.status();
  Call(*channel);
  Call(*channel);
  Write("token", "second-token-longer\n");
  Call(*channel);
  // A file caught mid-rewrite (empty) keeps the token read last.
  Write("token", "");
  Call(*channel);
  EXPECT_THAT(service_.seen(), ElementsAre("Bearer first-token", "Bearer first-token", "Bearer second-token-longer",
                                           "Bearer second-token-longer"));
}

TEST_F(SchedulerDialTest, NoTokenFileSendsNoAuthorization) {
  auto channel = DialScheduler(address_, {});
  ASSERT_TRUE(channel.ok()) << channel.status();
  Call(*channel);
  EXPECT_THAT(service_.seen(), ElementsAre("<none>"));
}

TEST_F(SchedulerDialTest, BadTokenFilesAreErrorsNamingTheFlagAndFile) {
  auto missing = DialScheduler(address_, {.token_file = dir_ + "/nope"});
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr("--scheduler-token-file: " + dir_ + "/nope"));
  auto empty = DialScheduler(address_, {.token_file = Write("empty", "\n")});
  EXPECT_THAT(empty.status().message(), HasSubstr("is empty"));
  auto two = DialScheduler(address_, {.token_file = Write("two", "a b\n")});
  EXPECT_THAT(two.status().message(), HasSubstr("must hold one token"));
}

TEST_F(SchedulerDialTest, BadTlsSettingsAreErrorsNamingTheFlag) {
  auto no_ca = DialScheduler(address_, {.tls_cert_file = "c.pem", .tls_key_file = "k.pem"});
  EXPECT_THAT(no_ca.status().message(), HasSubstr("need --scheduler-tls-ca-file"));
  auto missing = DialScheduler(address_, {.tls_ca_file = dir_ + "/ca.pem"});
  EXPECT_THAT(missing.status().message(), HasSubstr("--scheduler-tls-ca-file: cannot read " + dir_ + "/ca.pem"));
  const std::string not_pem = Write("ca.txt", "hello\n");
  auto bad = DialScheduler(address_, {.tls_ca_file = not_pem});
  EXPECT_THAT(bad.status().message(), HasSubstr("is not PEM"));
  auto half = DialScheduler(address_, {.tls_ca_file = not_pem, .tls_cert_file = not_pem});
  EXPECT_THAT(half.status().message(), HasSubstr("go together"));
}

TEST(SchedulerDialFlagsTest, ParsesItsFlagsAndLeavesOthers) {
  SchedulerDialOptions o;
  absl::Status error;
  EXPECT_TRUE(ParseSchedulerDialFlag("--scheduler-token-file", "/t", o, error));
  EXPECT_TRUE(ParseSchedulerDialFlag("--scheduler-tls-ca-file", "/ca", o, error));
  EXPECT_TRUE(ParseSchedulerDialFlag("--scheduler-tls-cert-file", "/c", o, error));
  EXPECT_TRUE(ParseSchedulerDialFlag("--scheduler-tls-key-file", "/k", o, error));
  EXPECT_TRUE(ParseSchedulerDialFlag("--scheduler-tls-server-name", "podium", o, error));
  EXPECT_TRUE(ParseSchedulerDialFlag("--scheduler-tls-reload-seconds", "5", o, error));
  EXPECT_TRUE(error.ok()) << error;
  EXPECT_EQ(o.token_file, "/t");
  EXPECT_EQ(o.tls_ca_file, "/ca");
  EXPECT_EQ(o.tls_cert_file, "/c");
  EXPECT_EQ(o.tls_key_file, "/k");
  EXPECT_EQ(o.tls_server_name, "podium");
  EXPECT_EQ(o.tls_reload_seconds, 5);
  EXPECT_FALSE(ParseSchedulerDialFlag("--scheduler", "x", o, error));
  EXPECT_TRUE(ParseSchedulerDialFlag("--scheduler-tls-reload-seconds", "0", o, error));
  EXPECT_THAT(error.message(), HasSubstr("--scheduler-tls-reload-seconds"));
  EXPECT_TRUE(ParseSchedulerDialFlag("--scheduler-token-file", "", o, error));
  EXPECT_THAT(error.message(), HasSubstr("--scheduler-token-file: empty"));
}

}  // namespace
}  // namespace podium::adapter
