// Access control and TLS through real gRPC: a server on a temporary unix
// socket or on loopback with the credentials main builds, fake Admin and
// Cluster services behind them, and clients with and without credentials.
// Certificates are made at test time with the openssl CLI.
#include "server/access_control.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <sstream>
#include <filesystem>
#include <fstream>
#include <thread>

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "podium/v1/admin.grpc.pb.h"
#include "podium/v1/cluster.grpc.pb.h"
#include "server/transport_security.h"

namespace podium::scheduler {
namespace {

using ::testing::HasSubstr;

class FakeAdmin final : public v1::Admin::Service {
 public:
  grpc::Status GetStatus(grpc::ServerContext*, const v1::GetStatusRequest*, v1::SchedulerStatus* r) override {
    r->set_paused(paused_);
    return grpc::Status::OK;
  }
  grpc::Status SetSchedulingPaused(grpc::ServerContext* ctx, const v1::SetSchedulingPausedRequest* req,
                                   v1::SetSchedulingPausedResponse* r) override {
    paused_ = req->paused();
    r->set_paused(paused_);
    // Who the interceptor said the caller is.
    auto users = ctx->auth_context()->FindPropertyValues("podium_user");
    if (!users.empty()) ctx->AddTrailingMetadata("x-user", std::string(users[0].data(), users[0].size()));
    return grpc::Status::OK;
  }
  std::atomic<bool> paused_{false};
};

class FakeCluster final : public v1::Cluster::Service {
 public:
  grpc::Status Sync(grpc::ServerContext*,
                    grpc::ServerReaderWriter<v1::SchedulerMessage, v1::ClusterMessage>*) override {
    return grpc::Status::OK;
  }
};

std::string TempDir() {
  std::string tmpl = (std::filesystem::temp_directory_path() / "podium-auth-XXXXXX").string();
  const char* dir = ::mkdtemp(tmpl.data());
  EXPECT_NE(dir, nullptr);
  return tmpl;
}

void WriteFile(const std::string& path, const std::string& content) {
  // Written beside and renamed, as an operator's rotation (or kubelet's) does.
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << content;
  }
  std::filesystem::rename(tmp, path);
}

// A server with the credentials ServerCredentialsFor builds.
class TestServer {
 public:
  TestServer(const std::string& address, const ListenerSecurity& security) {
    auto creds = ServerCredentialsFor(address, security);
    EXPECT_TRUE(creds.ok()) << creds.status();
    if (!creds.ok()) return;
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort(address, *creds, &port);
    builder.RegisterService(&admin_);
    builder.RegisterService(&cluster_);
    server_ = builder.BuildAndStart();
    EXPECT_NE(server_, nullptr);
    target_ = address;
    if (address.rfind("unix:", 0) != 0) target_ = absl::StrCat(address.substr(0, address.rfind(':')), ":", port);
  }
  ~TestServer() {
    if (server_) server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  }
  const std::string& target() const { return target_; }
  FakeAdmin admin_;

 private:
  FakeCluster cluster_;
  std::unique_ptr<grpc::Server> server_;
  std::string target_;
};

struct CallResult {
  grpc::StatusCode code;
  std::string message;
  std::string user;
};

std::unique_ptr<grpc::ClientContext> Context(const std::string& token) {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  if (!token.empty()) ctx->AddMetadata("authorization", "Bearer " + token);
  return ctx;
}

std::shared_ptr<grpc::Channel> Channel(const std::string& target,
                                       std::shared_ptr<grpc::ChannelCredentials> creds = nullptr,
                                       const std::string& server_name = "") {
  grpc::ChannelArguments args;
  if (!server_name.empty()) args.SetSslTargetNameOverride(server_name);
  return grpc::CreateCustomChannel(target, creds ? creds : grpc::InsecureChannelCredentials(), args);
}

CallResult Pause(const std::shared_ptr<grpc::Channel>& channel, const std::string& token = "") {
  auto ctx = Context(token);
  v1::SetSchedulingPausedRequest req;
  req.set_paused(true);
  v1::SetSchedulingPausedResponse resp;
  grpc::Status s = v1::Admin::NewStub(channel)->SetSchedulingPaused(ctx.get(), req, &resp);
  std::string user;
  auto it = ctx->GetServerTrailingMetadata().find("x-user");
  if (it != ctx->GetServerTrailingMetadata().end()) user.assign(it->second.data(), it->second.size());
  return {s.error_code(), s.error_message(), user};
}

CallResult Status(const std::shared_ptr<grpc::Channel>& channel, const std::string& token = "") {
  auto ctx = Context(token);
  v1::SchedulerStatus resp;
  grpc::Status s = v1::Admin::NewStub(channel)->GetStatus(ctx.get(), v1::GetStatusRequest(), &resp);
  return {s.error_code(), s.error_message(), ""};
}

CallResult Sync(const std::shared_ptr<grpc::Channel>& channel, const std::string& token = "") {
  auto ctx = Context(token);
  auto stream = v1::Cluster::NewStub(channel)->Sync(ctx.get());
  stream->WritesDone();
  v1::SchedulerMessage m;
  while (stream->Read(&m)) {
  }
  grpc::Status s = stream->Finish();
  return {s.error_code(), s.error_message(), ""};
}

constexpr char kTokens[] =
    "# token,user,uid,groups\n"
    "admin-token,alice,1,\"podium:admins,ops\"\n"
    "viewer-token,bob,2\n"
    "adapter-token,podium-adapter,3,system:podium\n";

AccessPolicy Policy(const std::string& dir) {
  WriteFile(dir + "/tokens.csv", kTokens);
  auto file = TokenFile::Load(dir + "/tokens.csv");
  EXPECT_TRUE(file.ok()) << file.status();
  AccessPolicy policy;
  policy.tokens = std::shared_ptr<TokenFile>(std::move(*file));
  policy.adapter_identity = "podium-adapter";
  return policy;
}

// --- the rules, apart from gRPC ----------------------------------------------

TEST(AccessControlRulesTest, MethodsAreReadMutatingOrTheClusterStream) {
  EXPECT_EQ(ClassifyMethod("/podium.v1.Admin/ListQueuedPods"), MethodAccess::kRead);
  EXPECT_EQ(ClassifyMethod("/podium.v1.Admin/WatchDecisions"), MethodAccess::kRead);
  EXPECT_EQ(ClassifyMethod("/podium.v1.Admin/WatchDecisionBatches"), MethodAccess::kRead);
  EXPECT_EQ(ClassifyMethod("/grpc.health.v1.Health/Check"), MethodAccess::kRead);
  EXPECT_EQ(ClassifyMethod("/podium.v1.Admin/SetSchedulingPaused"), MethodAccess::kMutate);
  EXPECT_EQ(ClassifyMethod("/podium.v1.Admin/SetLogVerbosity"), MethodAccess::kMutate);
  EXPECT_EQ(ClassifyMethod("/podium.v1.Admin/MovePodsToActiveQueue"), MethodAccess::kMutate);
  EXPECT_EQ(ClassifyMethod("/podium.v1.Admin/SomeFutureRpc"), MethodAccess::kMutate)
      << "an Admin RPC nobody listed as read-only is protected";
  EXPECT_EQ(ClassifyMethod("/podium.v1.Cluster/Sync"), MethodAccess::kClusterSync);
  EXPECT_EQ(ClassifyMethod("/other.Service/Method"), MethodAccess::kUnknown);
}

TEST(AccessControlRulesTest, DecisionsPerMethodIdentityAndListener) {
  AccessPolicy policy;
  policy.adapter_identity = "podium-adapter";
  const CallerIdentity admin{"alice", {"podium:admins"}};
  const CallerIdentity viewer{"bob", {}};
  const CallerIdentity adapter{"podium-adapter", {}};
  struct Case {
    const char* method;
    std::optional<CallerIdentity> who;
    bool local;
    absl::StatusCode want;
  };
  const Case cases[] = {
      {"/podium.v1.Admin/GetStatus", std::nullopt, true, absl::StatusCode::kOk},
      {"/podium.v1.Admin/GetStatus", std::nullopt, false, absl::StatusCode::kUnauthenticated},
      {"/podium.v1.Admin/GetStatus", viewer, false, absl::StatusCode::kOk},
      {"/podium.v1.Admin/SetSchedulingPaused", std::nullopt, true, absl::StatusCode::kUnauthenticated},
      {"/podium.v1.Admin/SetSchedulingPaused", viewer, true, absl::StatusCode::kPermissionDenied},
      {"/podium.v1.Admin/SetSchedulingPaused", admin, false, absl::StatusCode::kOk},
      {"/podium.v1.Admin/MovePodsToActiveQueue", viewer, false, absl::StatusCode::kPermissionDenied},
      {"/podium.v1.Cluster/Sync", std::nullopt, true, absl::StatusCode::kUnauthenticated},
      {"/podium.v1.Cluster/Sync", admin, true, absl::StatusCode::kPermissionDenied},
      {"/podium.v1.Cluster/Sync", adapter, false, absl::StatusCode::kOk},
      {"/other.Service/Method", admin, true, absl::StatusCode::kPermissionDenied},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(Authorize(policy, c.method, c.who, c.local).code(), c.want)
        << c.method << " by " << (c.who ? c.who->user : "nobody") << (c.local ? " on a unix socket" : "");
  }
  // Without a configured adapter identity, a local caller without credentials
  // is the adapter (as before access control); a remote one never is.
  policy.adapter_identity.clear();
  EXPECT_TRUE(Authorize(policy, "/podium.v1.Cluster/Sync", std::nullopt, true).ok());
  EXPECT_EQ(Authorize(policy, "/podium.v1.Cluster/Sync", adapter, false).code(), absl::StatusCode::kPermissionDenied);
}

TEST(TokenFileTest, ParsesKubernetesStaticTokenLines) {
  auto tokens = TokenFile::Parse(kTokens, "tokens.csv");
  ASSERT_TRUE(tokens.ok()) << tokens.status();
  ASSERT_EQ(tokens->size(), 3u);
  EXPECT_EQ(tokens->at("admin-token"), (CallerIdentity{"alice", {"podium:admins", "ops"}}));
  EXPECT_EQ(tokens->at("viewer-token"), (CallerIdentity{"bob", {}}));
}

TEST(TokenFileTest, BadLinesNameTheLineAndField) {
  struct Case {
    const char* content;
    const char* message;
  };
  const Case cases[] = {
      {"a,b\n", "tokens.csv:1: want token,user,uid"},
      {"# c\n,bob,1\n", "tokens.csv:2: token: empty"},
      {"t,,1\n", "tokens.csv:1: user: empty"},
      {"t,u,1,\"g\n", "tokens.csv:1: unterminated quote"},
      {"t,u,1\nt,v,2\n", "tokens.csv:2: token: listed twice"},
      {"t t,u,1\n", "tokens.csv:1: token: only printable characters"},
  };
  for (const auto& c : cases) {
    auto tokens = TokenFile::Parse(c.content, "tokens.csv");
    ASSERT_FALSE(tokens.ok()) << c.content;
    EXPECT_THAT(tokens.status().message(), HasSubstr(c.message));
  }
  EXPECT_FALSE(TokenFile::Load("/nonexistent/tokens.csv").ok());
}

// --- through gRPC --------------------------------------------------------------

TEST(AccessControlGrpcTest, UnixSocketServesReadsToAnyoneAndMutationsToAdmins) {
  const std::string dir = TempDir();
  ListenerSecurity security{.access = Policy(dir)};
  TestServer server("unix://" + dir + "/s.sock", security);
  auto channel = Channel(server.target());

  EXPECT_EQ(Status(channel).code, grpc::StatusCode::OK) << "a local read needs no credentials";
  CallResult anonymous = Pause(channel);
  EXPECT_EQ(anonymous.code, grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_THAT(anonymous.message, HasSubstr("podium.v1.Admin/SetSchedulingPaused"));
  EXPECT_FALSE(server.admin_.paused_);
  EXPECT_EQ(Pause(channel, "no-such-token").code, grpc::StatusCode::UNAUTHENTICATED);
  CallResult viewer = Pause(channel, "viewer-token");
  EXPECT_EQ(viewer.code, grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(viewer.message, HasSubstr("user \"bob\" may not call podium.v1.Admin/SetSchedulingPaused"));
  EXPECT_FALSE(server.admin_.paused_);
  CallResult admin = Pause(channel, "admin-token");
  EXPECT_EQ(admin.code, grpc::StatusCode::OK) << admin.message;
  EXPECT_EQ(admin.user, "alice");
  EXPECT_TRUE(server.admin_.paused_);

  // Only the adapter's identity may open the Cluster stream.
  EXPECT_EQ(Sync(channel).code, grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(Sync(channel, "admin-token").code, grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(Sync(channel, "adapter-token").code, grpc::StatusCode::OK);
  std::filesystem::remove_all(dir);
}

TEST(AccessControlGrpcTest, ARotatedTokenFileTakesEffectWithoutARestart) {
  const std::string dir = TempDir();
  ListenerSecurity security{.access = Policy(dir)};
  TestServer server("unix://" + dir + "/s.sock", security);
  auto channel = Channel(server.target());
  ASSERT_EQ(Pause(channel, "admin-token").code, grpc::StatusCode::OK);

  WriteFile(dir + "/tokens.csv", "rotated-token,alice,1,podium:admins\n");
  EXPECT_EQ(Pause(channel, "admin-token").code, grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(Pause(channel, "rotated-token").code, grpc::StatusCode::OK);
  // A file that no longer parses keeps the tokens read last.
  WriteFile(dir + "/tokens.csv", "broken\n");
  EXPECT_EQ(Pause(channel, "rotated-token").code, grpc::StatusCode::OK);
  EXPECT_FALSE(security.access->tokens->last_reload_error().ok());
  std::filesystem::remove_all(dir);
}

TEST(AccessControlGrpcTest, LoopbackTcpNeedsCredentialsEvenToRead) {
  const std::string dir = TempDir();
  ListenerSecurity security{.access = Policy(dir)};
  TestServer server("127.0.0.1:0", security);
  auto channel = Channel(server.target());
  EXPECT_EQ(Status(channel).code, grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(Status(channel, "viewer-token").code, grpc::StatusCode::OK);
  EXPECT_EQ(Pause(channel, "admin-token").code, grpc::StatusCode::OK);
  std::filesystem::remove_all(dir);
}

TEST(AccessControlGrpcTest, NonLoopbackTcpWithoutTlsIsRefused) {
  ListenerSecurity security{.access = AccessPolicy{}};
  auto creds = ServerCredentialsFor("0.0.0.0:0", security);
  ASSERT_FALSE(creds.ok());
  EXPECT_THAT(creds.status().message(), HasSubstr("without TLS"));
  EXPECT_TRUE(IsLoopbackAddress("127.0.0.1:80"));
  EXPECT_TRUE(IsLoopbackAddress("localhost:80"));
  EXPECT_TRUE(IsLoopbackAddress("[::1]:80"));
  EXPECT_FALSE(IsLoopbackAddress("10.0.0.1:80"));
  EXPECT_FALSE(IsLoopbackAddress("[::]:80"));
}

// --- TLS and mTLS ------------------------------------------------------------

// A CA, a server certificate for localhost, and client certificates:
// "alice" in podium:admins, "podium-adapter", and "mallory" signed by another CA.
class Pki {
 public:
  explicit Pki(const std::string& dir) : dir_(dir) {
    Run("openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 -subj /CN=podium-test-ca -keyout ca.key -out ca.crt");
    Run("openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 -subj /CN=other-ca -keyout other-ca.key -out other-ca.crt");
    Issue("server", "/CN=podium-scheduler", "ca", "subjectAltName=DNS:localhost,IP:127.0.0.1");
    Issue("alice", "/O=podium:admins/CN=alice", "ca");
    Issue("adapter", "/CN=podium-adapter", "ca");
    Issue("mallory", "/O=podium:admins/CN=mallory", "other-ca");
  }
  void Issue(const std::string& name, const std::string& subject, const std::string& ca,
             const std::string& ext = "") {
    Run(absl::StrCat("openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj ", subject, " -keyout ", name, ".key -out ", name,
                     ".csr"));
    std::string extfile;
    if (!ext.empty()) {
      WriteFile(dir_ + "/" + name + ".ext", ext + "\n");
      extfile = absl::StrCat(" -extfile ", name, ".ext");
    }
    Run(absl::StrCat("openssl x509 -req -in ", name, ".csr -CA ", ca, ".crt -CAkey ", ca, ".key -CAcreateserial -days 2",
                     extfile, " -out ", name, ".crt"));
  }
  std::string Path(const std::string& file) const { return dir_ + "/" + file; }
  TlsFiles Client(const std::string& name) const {
    TlsFiles f;
    f.ca_file = Path("ca.crt");
    if (!name.empty()) {
      f.cert_file = Path(name + ".crt");
      f.key_file = Path(name + ".key");
    }
    return f;
  }

 private:
  void Run(const std::string& cmd) {
    const std::string full = absl::StrCat("cd '", dir_, "' && ", cmd, " >/dev/null 2>openssl.err");
    ASSERT_EQ(std::system(full.c_str()), 0) << "openssl failed (it is a test dependency): " << cmd;
  }
  std::string dir_;
};

std::shared_ptr<grpc::Channel> TlsChannel(const std::string& target, const TlsFiles& files) {
  auto creds = ChannelCredentialsFor(files);
  EXPECT_TRUE(creds.ok()) << creds.status();
  return Channel(target, *creds, "localhost");
}

TEST(TransportSecurityTest, MutualTlsIdentifiesCallersByCertificate) {
  const std::string dir = TempDir();
  Pki pki(dir);
  ListenerSecurity security;
  security.tls = TlsFiles{.cert_file = pki.Path("server.crt"), .key_file = pki.Path("server.key"),
                          .ca_file = pki.Path("ca.crt")};
  security.access = Policy(dir);
  TestServer server("127.0.0.1:0", security);

  // The CN is the user and O the groups, as Kubernetes reads client certificates.
  CallResult alice = Pause(TlsChannel(server.target(), pki.Client("alice")));
  EXPECT_EQ(alice.code, grpc::StatusCode::OK) << alice.message;
  EXPECT_EQ(alice.user, "alice");
  EXPECT_EQ(Pause(TlsChannel(server.target(), pki.Client("adapter"))).code, grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(Sync(TlsChannel(server.target(), pki.Client("adapter"))).code, grpc::StatusCode::OK);
  EXPECT_EQ(Sync(TlsChannel(server.target(), pki.Client("alice"))).code, grpc::StatusCode::PERMISSION_DENIED);
  // TLS without a client certificate: a token instead, or nothing at all.
  EXPECT_EQ(Status(TlsChannel(server.target(), pki.Client(""))).code, grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(Pause(TlsChannel(server.target(), pki.Client("")), "admin-token").code, grpc::StatusCode::OK);
  // A certificate from another CA never gets a connection.
  CallResult mallory = Pause(TlsChannel(server.target(), pki.Client("mallory")));
  EXPECT_EQ(mallory.code, grpc::StatusCode::UNAVAILABLE) << mallory.message;
  // Nor does a plaintext client.
  EXPECT_EQ(Status(Channel(server.target())).code, grpc::StatusCode::UNAVAILABLE);
  std::filesystem::remove_all(dir);
}

TEST(TransportSecurityTest, ClientRefusesAServerItsCaDidNotSign) {
  const std::string dir = TempDir();
  Pki pki(dir);
  ListenerSecurity security;
  security.tls = TlsFiles{.cert_file = pki.Path("server.crt"), .key_file = pki.Path("server.key")};
  TestServer server("127.0.0.1:0", security);
  EXPECT_EQ(Status(TlsChannel(server.target(), pki.Client(""))).code, grpc::StatusCode::OK);
  TlsFiles wrong_ca;
  wrong_ca.ca_file = pki.Path("other-ca.crt");
  EXPECT_EQ(Status(TlsChannel(server.target(), wrong_ca)).code, grpc::StatusCode::UNAVAILABLE);
  std::filesystem::remove_all(dir);
}

TEST(TransportSecurityTest, TheServerPicksUpARenewedCertificate) {
  const std::string dir = TempDir();
  Pki pki(dir);
  // The listener starts with a certificate from the other CA, then the files
  // are replaced with one from the CA clients trust.
  std::filesystem::copy_file(pki.Path("mallory.crt"), pki.Path("live.crt"));
  std::filesystem::copy_file(pki.Path("mallory.key"), pki.Path("live.key"));
  ListenerSecurity security;
  security.tls = TlsFiles{.cert_file = pki.Path("live.crt"), .key_file = pki.Path("live.key"),
                          .reload_interval_seconds = 1};
  TestServer server("127.0.0.1:0", security);
  EXPECT_EQ(Status(TlsChannel(server.target(), pki.Client(""))).code, grpc::StatusCode::UNAVAILABLE);

  std::ifstream key(pki.Path("server.key")), crt(pki.Path("server.crt"));
  std::stringstream k, c;
  k << key.rdbuf();
  c << crt.rdbuf();
  WriteFile(pki.Path("live.key"), k.str());
  WriteFile(pki.Path("live.crt"), c.str());
  // The watcher checks every second; each try is a new channel (a new handshake).
  grpc::StatusCode code = grpc::StatusCode::UNAVAILABLE;
  for (int i = 0; i < 50 && code != grpc::StatusCode::OK; ++i) {
    code = Status(TlsChannel(server.target(), pki.Client(""))).code;
    if (code != grpc::StatusCode::OK) std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  EXPECT_EQ(code, grpc::StatusCode::OK);
  std::filesystem::remove_all(dir);
}

TEST(TransportSecurityTest, MissingOrNonPemFilesAreNamedAtStart) {
  const std::string dir = TempDir();
  WriteFile(dir + "/not.pem", "hello\n");
  ListenerSecurity missing{.tls = TlsFiles{.cert_file = dir + "/nope.crt", .key_file = dir + "/not.pem"}};
  auto a = ServerCredentialsFor("127.0.0.1:0", missing);
  ASSERT_FALSE(a.ok());
  EXPECT_THAT(a.status().message(), HasSubstr(dir + "/nope.crt"));
  ListenerSecurity not_pem{.tls = TlsFiles{.cert_file = dir + "/not.pem", .key_file = dir + "/not.pem"}};
  auto b = ServerCredentialsFor("127.0.0.1:0", not_pem);
  ASSERT_FALSE(b.ok());
  EXPECT_THAT(b.status().message(), HasSubstr("is not PEM"));
  ListenerSecurity no_key{.tls = TlsFiles{.cert_file = dir + "/not.pem"}};
  EXPECT_FALSE(ServerCredentialsFor("127.0.0.1:0", no_key).ok());
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace podium::scheduler
