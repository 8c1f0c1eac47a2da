#include "cli.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace podium::ctl {
namespace {

using ::testing::HasSubstr;

absl::StatusOr<Invocation> Parse(std::vector<std::string> args, std::optional<std::string> env = std::nullopt) {
  return ParseCommandLine(args, env);
}

TEST(PodiumctlParseTest, DefaultsAddressTimeoutAndTable) {
  auto inv = Parse({"queue"});
  ASSERT_TRUE(inv.ok()) << inv.status();
  EXPECT_EQ(inv->command, Command::kQueue);
  EXPECT_EQ(inv->address, "unix:///run/podium/scheduler.sock");
  EXPECT_EQ(inv->timeout, absl::Seconds(5));
  EXPECT_EQ(inv->output, OutputFormat::kTable);
}

TEST(PodiumctlParseTest, AddressFlagWinsOverEnvironment) {
  auto from_env = Parse({"nodes"}, "unix:///tmp/env.sock");
  ASSERT_TRUE(from_env.ok());
  EXPECT_EQ(from_env->address, "unix:///tmp/env.sock");
  auto from_flag = Parse({"--address", "127.0.0.1:9000", "nodes"}, "unix:///tmp/env.sock");
  ASSERT_TRUE(from_flag.ok());
  EXPECT_EQ(from_flag->address, "127.0.0.1:9000");
  auto inline_flag = Parse({"nodes", "--address=/tmp/s.sock"});
  ASSERT_TRUE(inline_flag.ok());
  EXPECT_EQ(inline_flag->address, "unix:///tmp/s.sock") << "a bare path is a unix socket";
}

// A '/' before any ':' is a path, however relative; anything else is gRPC's.
TEST(PodiumctlAddressTest, ARelativeSocketPathIsAUnixSocket) {
  EXPECT_EQ(NormalizeAddress("./scheduler.sock"), "unix:./scheduler.sock");
  EXPECT_EQ(NormalizeAddress("run/podium/scheduler.sock"), "unix:run/podium/scheduler.sock");
  EXPECT_EQ(NormalizeAddress("/run/s.sock"), "unix:///run/s.sock");
  EXPECT_EQ(NormalizeAddress("unix:///run/s.sock"), "unix:///run/s.sock");
  EXPECT_EQ(NormalizeAddress("unix:rel/s.sock"), "unix:rel/s.sock");
  EXPECT_EQ(NormalizeAddress("127.0.0.1:9000"), "127.0.0.1:9000");
  EXPECT_EQ(NormalizeAddress("dns:///scheduler:9000"), "dns:///scheduler:9000");
  EXPECT_EQ(Parse({"nodes", "--address", "./scheduler.sock"})->address, "unix:./scheduler.sock");
}

TEST(PodiumctlParseTest, FlagsBeforeAndAfterTheCommand) {
  auto inv = Parse({"-n", "batch", "queue", "-ojson", "--queue", "unschedulable", "--plugin=NodeResourcesFit",
                    "--limit", "10", "--timeout", "1500ms"});
  ASSERT_TRUE(inv.ok()) << inv.status();
  EXPECT_EQ(inv->namespace_, "batch");
  EXPECT_EQ(inv->output, OutputFormat::kJson);
  EXPECT_EQ(inv->queue, "unschedulable");
  EXPECT_EQ(inv->plugin, "NodeResourcesFit");
  EXPECT_EQ(inv->limit, 10);
  EXPECT_EQ(inv->chunk_size, 500);
  auto creds = ParseCommandLine({"pause", "--tls-ca-file", "ca.pem", "--tls-cert-file", "c.pem", "--tls-key-file",
                                 "k.pem", "--tls-server-name", "sched"},
                                std::nullopt, "/env/token");
  ASSERT_TRUE(creds.ok()) << creds.status();
  EXPECT_EQ(creds->token_file, "/env/token");
  EXPECT_EQ(creds->tls_ca_file, "ca.pem");
  EXPECT_EQ(creds->tls_server_name, "sched");
  EXPECT_EQ(ParseCommandLine({"pause", "--token-file", "/flag"}, std::nullopt, "/env/token")->token_file, "/flag");
  auto paged = Parse({"queue", "--limit", "3", "--continue", "o:3", "--chunk-size", "2"});
  ASSERT_TRUE(paged.ok()) << paged.status();
  EXPECT_EQ(paged->continue_token, "o:3");
  EXPECT_EQ(paged->chunk_size, 2);
  EXPECT_EQ(inv->timeout, absl::Milliseconds(1500));
}

TEST(PodiumctlParseTest, TimeoutInPlainSeconds) {
  auto inv = Parse({"plugins", "--timeout", "2"});
  ASSERT_TRUE(inv.ok());
  EXPECT_EQ(inv->timeout, absl::Seconds(2));
}

TEST(PodiumctlParseTest, ExplainTakesOnePodDefaultingTheNamespace) {
  auto inv = Parse({"explain", "batch/giant"});
  ASSERT_TRUE(inv.ok());
  ASSERT_EQ(inv->pods.size(), 1u);
  EXPECT_EQ(inv->pods[0], (PodName{"batch", "giant"}));
  auto bare = Parse({"explain", "giant"});
  ASSERT_TRUE(bare.ok());
  EXPECT_EQ(bare->pods[0], (PodName{"default", "giant"}));
  auto with_n = Parse({"explain", "-n", "ml", "giant"});
  ASSERT_TRUE(with_n.ok());
  EXPECT_EQ(with_n->pods[0], (PodName{"ml", "giant"}));
  EXPECT_FALSE(Parse({"explain"}).ok());
  EXPECT_FALSE(Parse({"explain", "a/b", "c/d"}).ok());
}

TEST(PodiumctlParseTest, ActivateWantsPodsOrAllUnschedulable) {
  auto pods = Parse({"activate", "default/a", "ml/b"});
  ASSERT_TRUE(pods.ok());
  EXPECT_EQ(pods->pods.size(), 2u);
  auto all = Parse({"activate", "--all-unschedulable"});
  ASSERT_TRUE(all.ok());
  EXPECT_TRUE(all->all_unschedulable);
  EXPECT_FALSE(Parse({"activate"}).ok());
  EXPECT_FALSE(Parse({"activate", "a/b", "--all-unschedulable"}).ok());
}

TEST(PodiumctlParseTest, UsageErrorsNameTheFlagOrArgument) {
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  const Case cases[] = {
      {{}, "no command"},
      {{"frobnicate"}, "unknown command \"frobnicate\""},
      {{"queue", "--bogus"}, "unknown flag --bogus"},
      {{"queue", "-o", "xml"}, "unknown format \"xml\""},
      {{"queue", "--queue", "waiting"}, "--queue: unknown queue \"waiting\""},
      {{"queue", "--limit", "-3"}, "--limit"},
      {{"queue", "--chunk-size", "0"}, "--chunk-size: want 1 to 5000"},
      {{"pause", "--tls-cert-file", "c.pem"}, "--tls-cert-file and --tls-key-file go together"},
      {{"pause", "--token-file="}, "--token-file: empty value"},
      {{"queue", "--chunk-size", "5001"}, "--chunk-size: want 1 to 5000"},
      {{"queue", "--continue="}, "--continue: empty token"},
      {{"nodes", "--continue", "x"}, "--continue does not apply to \"nodes\""},
      {{"queue", "--timeout", "soon"}, "--timeout: invalid duration \"soon\""},
      {{"queue", "--timeout", "0s"}, "--timeout: must be positive"},
      {{"nodes", "--queue", "active"}, "--queue does not apply to \"nodes\""},
      {{"watch", "--count"}, "--count needs a value"},
      {{"nodes", "extra"}, "\"nodes\" takes no arguments"},
      {{"explain", "a/b/c"}, "want NAMESPACE/POD"},
      {{"explain", "/x"}, "empty namespace"},
      {{"explain", "-o", "name", "a/b"}, "-o name does not apply to \"explain\""},
      {{"completion", "zsh"}, "bash"},
      {{"pause", "--all-unschedulable"}, "does not apply to \"pause\""},
      {{"activate", "--all-unschedulable=yes"}, "takes no value"},
      {{"explain", "default/" + std::string(254, 'a')}, "254 characters; a pod name has at most 253"},
      {{"explain", std::string(64, 'n') + "/x"}, "64 characters; a namespace has at most 63"},
      {{"explain", "-n", std::string(64, 'n'), "x"}, "-n/--namespace: 64 characters"},
      {{"queue", "--queue", "waiting"},
       "--queue: unknown queue \"waiting\" (active, backoff, unschedulable, gated, in-flight, waiting-on-permit)"},
  };
  for (const auto& c : cases) {
    auto inv = Parse(c.args);
    ASSERT_FALSE(inv.ok()) << ::testing::PrintToString(c.args);
    EXPECT_TRUE(absl::IsInvalidArgument(inv.status()));
    EXPECT_THAT(std::string(inv.status().message()), HasSubstr(c.message)) << ::testing::PrintToString(c.args);
  }
}

TEST(PodiumctlParseTest, HelpForTheToolAndForACommand) {
  auto top = Parse({"--help"});
  ASSERT_TRUE(top.ok());
  EXPECT_EQ(top->command, Command::kHelp);
  EXPECT_EQ(top->help_topic, "");
  auto cmd = Parse({"queue", "-h"});
  ASSERT_TRUE(cmd.ok());
  EXPECT_EQ(cmd->command, Command::kHelp);
  EXPECT_EQ(cmd->help_topic, "queue");
  auto word = Parse({"help", "explain"});
  ASSERT_TRUE(word.ok());
  EXPECT_EQ(word->help_topic, "explain");
  EXPECT_FALSE(Parse({"help", "nope"}).ok());
}

TEST(PodiumctlUsageTest, DocumentsEveryCommandAndTheExitCodes) {
  const std::string usage = Usage();
  for (const auto& c : CommandNames()) EXPECT_THAT(usage, HasSubstr("  " + c + " ")) << c;
  EXPECT_THAT(usage, HasSubstr("PODIUM_ADDRESS"));
  EXPECT_THAT(usage, HasSubstr("0  success"));
  EXPECT_THAT(usage, HasSubstr("1  usage error"));
  EXPECT_THAT(usage, HasSubstr("2  the scheduler is unreachable"));
  EXPECT_THAT(usage, HasSubstr("3  not found"));
  EXPECT_THAT(Usage("activate"), HasSubstr("--all-unschedulable"));
  EXPECT_THAT(usage, HasSubstr("mutating commands (pause, resume, activate, log-level N)"));
}

TEST(PodiumctlParseTest, AcceptsNamesUpToKubernetesLimits) {
  auto longest = Parse({"explain", std::string(63, 'n') + "/" + std::string(253, 'p')});
  ASSERT_TRUE(longest.ok()) << longest.status();
  EXPECT_EQ(longest->pods[0].name.size(), 253u);
}

}  // namespace
}  // namespace podium::ctl
