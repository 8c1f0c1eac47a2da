// The commands against a real in-process Admin server (loopback, port 0) that
// answers with canned responses and records what it was asked.
#include "commands.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "boost/json/parse.hpp"
#include "format.h"

namespace podium::ctl {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

const absl::Time kNow = absl::FromUnixSeconds(1795000000);

int64_t Us(absl::Time t) { return absl::ToUnixMicros(t); }

v1::QueuedPod Queued(const std::string& ns, const std::string& name, v1::QueueName q, int attempts,
                     std::vector<std::string> plugins = {}) {
  v1::QueuedPod p;
  p.mutable_pod()->set_kind("Pod");
  p.mutable_pod()->set_uid("uid-" + name);
  p.mutable_pod()->set_namespace_(ns);
  p.mutable_pod()->set_name(name);
  p.set_queue(q);
  p.set_attempts(attempts);
  p.set_enqueued_us(Us(kNow - absl::Seconds(95)));
  for (auto& pl : plugins) p.add_unschedulable_plugins(pl);
  return p;
}

// A pod assumed on node-3, waiting 5 s so far for Coscheduling (25 s left).
v1::QueuedPod WaitingOnCoscheduling(const std::string& ns, const std::string& name, int attempts) {
  v1::QueuedPod held = Queued(ns, name, v1::WAITING_ON_PERMIT, attempts);
  v1::PermitWait* wait = held.mutable_permit_wait();
  wait->set_node_name("node-3");
  wait->set_waiting_since_us(Us(kNow - absl::Seconds(5)));
  v1::PermitWait::Plugin* p = wait->add_plugins();
  p->set_name("Coscheduling");
  p->set_deadline_us(Us(kNow + absl::Seconds(25)));
  return held;
}

class FakeAdmin final : public v1::Admin::Service {
 public:
  grpc::Status ListQueuedPods(grpc::ServerContext*, const v1::ListQueuedPodsRequest* req,
                              v1::ListQueuedPodsResponse* resp) override {
    absl::MutexLock lock(&mu);
    list_requests.push_back(*req);
    // As the scheduler pages: offsets as "o:N" tokens, page_size (or the
    // older limit) pods per page, 500 when neither is set.
    std::vector<const v1::QueuedPod*> matching;
    for (const auto& p : queued) {
      if (req->queue() != v1::QUEUE_UNSPECIFIED && p.queue() != req->queue()) continue;
      if (!req->namespace_().empty() && p.pod().namespace_() != req->namespace_()) continue;
      if (!req->plugin().empty() &&
          std::find(p.unschedulable_plugins().begin(), p.unschedulable_plugins().end(), req->plugin()) ==
              p.unschedulable_plugins().end()) {
        continue;
      }
      matching.push_back(&p);
    }
    size_t offset = 0;
    if (!req->page_token().empty()) {
      if (req->page_token().rfind("o:", 0) != 0) {
        return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "page_token: not a token");
      }
      offset = std::stoul(req->page_token().substr(2));
    }
    size_t size = req->page_size() > 0 ? req->page_size() : (req->limit() > 0 ? req->limit() : 500);
    for (size_t i = offset; i < matching.size() && i < offset + size; ++i) *resp->add_pods() = *matching[i];
    if (offset + size < matching.size()) resp->set_next_page_token("o:" + std::to_string(offset + size));
    resp->set_total(static_cast<int>(matching.size()));
    return grpc::Status::OK;
  }
  grpc::Status ExplainPod(grpc::ServerContext*, const v1::ExplainPodRequest* req,
                          v1::ExplainPodResponse* resp) override {
    absl::MutexLock lock(&mu);
    if (req->name() != "giant") {
      return grpc::Status(grpc::StatusCode::NOT_FOUND, "no failed scheduling attempt recorded for pod " +
                                                           req->namespace_() + "/" + req->name());
    }
    *resp = explain;
    return grpc::Status::OK;
  }
  grpc::Status DumpCache(grpc::ServerContext*, const v1::DumpCacheRequest* req, v1::DumpCacheResponse* resp) override {
    absl::MutexLock lock(&mu);
    *resp = cache;
    return grpc::Status::OK;
  }
  grpc::Status ListPlugins(grpc::ServerContext*, const v1::ListPluginsRequest*, v1::ListPluginsResponse* resp) override {
    absl::MutexLock lock(&mu);
    *resp = plugins;
    return grpc::Status::OK;
  }
  grpc::Status SetSchedulingPaused(grpc::ServerContext* ctx, const v1::SetSchedulingPausedRequest* req,
                                   v1::SetSchedulingPausedResponse* resp) override {
    absl::MutexLock lock(&mu);
    auto auth = ctx->client_metadata().find("authorization");
    if (auth == ctx->client_metadata().end()) {
      if (require_token) return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "no token");
    } else {
      authorization.assign(auth->second.data(), auth->second.size());
    }
    paused = req->paused();
    resp->set_paused(paused);
    return grpc::Status::OK;
  }
  grpc::Status GetStatus(grpc::ServerContext*, const v1::GetStatusRequest*, v1::SchedulerStatus* resp) override {
    absl::MutexLock lock(&mu);
    *resp = status;
    resp->set_paused(paused);
    resp->set_log_verbosity(log_verbosity);
    return grpc::Status::OK;
  }
  grpc::Status SetLogVerbosity(grpc::ServerContext* ctx, const v1::SetLogVerbosityRequest* req,
                               v1::SetLogVerbosityResponse* resp) override {
    absl::MutexLock lock(&mu);
    if (require_token && ctx->client_metadata().find("authorization") == ctx->client_metadata().end()) {
      return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "no token");
    }
    resp->set_previous(log_verbosity);
    log_verbosity = req->verbosity();
    resp->set_verbosity(log_verbosity);
    return grpc::Status::OK;
  }
  grpc::Status MovePodsToActiveQueue(grpc::ServerContext*, const v1::MovePodsToActiveQueueRequest* req,
                                     v1::MovePodsToActiveQueueResponse* resp) override {
    absl::MutexLock lock(&mu);
    move_requests.push_back(*req);
    int moved = 0;
    for (const auto& ref : req->pods()) {
      for (auto& p : queued) {
        // As the scheduler's queue: from backoffQ and the pool only (not
        // gated, not in flight or waiting at Permit).
        if (p.pod().uid() == ref.uid() && (p.queue() == v1::BACKOFF || p.queue() == v1::UNSCHEDULABLE)) {
          p.set_queue(v1::ACTIVE);
          ++moved;
        }
      }
    }
    resp->set_moved(moved);
    return grpc::Status::OK;
  }
  // The canned decisions, two per message (the last alone when odd).
  grpc::Status WatchDecisionBatches(grpc::ServerContext* ctx, const v1::WatchDecisionsRequest*,
                                    grpc::ServerWriter<v1::DecisionBatch>* writer) override {
    std::vector<v1::SchedulingDecision> copy;
    {
      absl::MutexLock lock(&mu);
      copy = decisions;
    }
    for (size_t i = 0; i < copy.size(); i += 2) {
      v1::DecisionBatch batch;
      for (size_t j = i; j < std::min(copy.size(), i + 2); ++j) *batch.add_decisions() = copy[j];
      if (!writer->Write(batch)) return grpc::Status::CANCELLED;
    }
    return grpc::Status::OK;  // The stream ends after the canned decisions.
  }

  absl::Mutex mu;
  std::vector<v1::QueuedPod> queued ABSL_GUARDED_BY(mu);
  v1::ExplainPodResponse explain ABSL_GUARDED_BY(mu);
  v1::DumpCacheResponse cache ABSL_GUARDED_BY(mu);
  v1::ListPluginsResponse plugins ABSL_GUARDED_BY(mu);
  v1::SchedulerStatus status ABSL_GUARDED_BY(mu);  // GetStatus; paused and log_verbosity as set.
  std::vector<v1::SchedulingDecision> decisions ABSL_GUARDED_BY(mu);
  bool paused ABSL_GUARDED_BY(mu) = false;
  int log_verbosity ABSL_GUARDED_BY(mu) = 0;
  bool require_token ABSL_GUARDED_BY(mu) = false;
  std::string authorization ABSL_GUARDED_BY(mu);
  std::vector<v1::ListQueuedPodsRequest> list_requests ABSL_GUARDED_BY(mu);
  std::vector<v1::MovePodsToActiveQueueRequest> move_requests ABSL_GUARDED_BY(mu);
};

class PodiumctlCommandsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(&fake_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    address_ = "127.0.0.1:" + std::to_string(port);
    {
      absl::MutexLock lock(&fake_.mu);
      fake_.queued = {Queued("default", "web-1", v1::ACTIVE, 0),
                      Queued("default", "giant", v1::UNSCHEDULABLE, 3, {"NodeResourcesFit", "TaintToleration"}),
                      Queued("batch", "job-7", v1::BACKOFF, 1, {"NodeAffinity"}),
                      Queued("batch", "gated-1", v1::GATED, 0)};
      fake_.queued[1].set_message("0/3 nodes are available: 1 node(s) had untolerated taint {dedicated: infra}, "
                                  "2 Insufficient cpu.");
      fake_.queued[2].set_backoff_expiry_us(Us(kNow + absl::Milliseconds(3200)));
      fake_.queued[3].set_gated_by("SchedulingGates");
      fake_.queued[3].set_message("waiting for scheduling gates: example.com/quota");
    }
  }
  void TearDown() override { server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1)); }

  // Runs `podiumctl ARGS --address <fake>`; returns the exit status.
  absl::Status Run(std::vector<std::string> args) {
    out_.str("");
    err_.str("");
    args.push_back("--address=" + address_);
    auto inv = ParseCommandLine(args, std::nullopt);
    if (!inv.ok()) return inv.status();
    invocation_ = *inv;
    auto options = AdminClient::OptionsFrom(invocation_);
    if (!options.ok()) return options.status();
    AdminClient client(std::move(*options));
    CommandContext ctx{invocation_, client, out_, err_, kNow, nullptr};
    return RunCommand(ctx);
  }

  // Rows of a table: cells split on runs of two or more spaces.
  static std::vector<std::vector<std::string>> Rows(const std::string& table) {
    std::vector<std::vector<std::string>> rows;
    static const std::regex kGap(" {2,}");
    for (absl::string_view view : absl::StrSplit(table, '\n')) {
      if (view.empty()) break;  // The table ends at the first blank line.
      const std::string line(view);
      rows.emplace_back(std::sregex_token_iterator(line.begin(), line.end(), kGap, -1), std::sregex_token_iterator());
    }
    return rows;
  }

  FakeAdmin fake_;
  std::unique_ptr<grpc::Server> server_;
  std::string address_;
  Invocation invocation_;
  std::ostringstream out_, err_;
};

TEST_F(PodiumctlCommandsTest, QueueTableListsEveryQueueInOrderWithSummary) {
  ASSERT_TRUE(Run({"queue"}).ok());
  const std::string out = out_.str();
  auto rows = Rows(out);
  ASSERT_EQ(rows.size(), 5u) << out;
  EXPECT_THAT(rows[0],
              ElementsAre("NAMESPACE", "NAME", "QUEUE", "ATTEMPTS", "AGE", "BACKOFF", "REJECTED BY", "WAITING ON"));
  EXPECT_THAT(rows[1], ElementsAre("default", "web-1", "active", "0", "95s", "-", "<none>", "<none>"));
  EXPECT_THAT(rows[2], ElementsAre("batch", "job-7", "backoff", "1", "95s", "4s", "NodeAffinity", "<none>"));
  EXPECT_THAT(rows[3], ElementsAre("default", "giant", "unschedulable", "3", "95s", "-",
                                   "NodeResourcesFit,TaintToleration", "<none>"));
  EXPECT_THAT(rows[4], ElementsAre("batch", "gated-1", "gated", "0", "95s", "-", "<none>", "SchedulingGates"));
  EXPECT_THAT(out,
              HasSubstr("\n4 pods: 1 active, 1 backoff, 1 unschedulable, 1 gated, 0 in-flight, 0 waiting-on-permit\n"));
}

TEST_F(PodiumctlCommandsTest, QueueJsonCarriesWhatTheTableShows) {
  ASSERT_TRUE(Run({"queue", "-o", "wide"}).ok());
  auto rows = Rows(out_.str());
  ASSERT_TRUE(Run({"queue", "-o", "json"}).ok());
  boost::json::value doc = boost::json::parse(out_.str());
  const auto& pods = doc.at("pods").as_array();
  ASSERT_EQ(pods.size() + 1, rows.size());
  for (size_t i = 0; i < pods.size(); ++i) {
    const auto& p = pods[i].as_object();
    const auto& row = rows[i + 1];
    EXPECT_EQ(row[0], p.at("namespace").as_string());
    EXPECT_EQ(row[1], p.at("name").as_string());
    EXPECT_EQ(row[2], p.at("queue").as_string());
    EXPECT_EQ(row[3], std::to_string(p.at("attempts").as_int64()));
    EXPECT_EQ(row[4], FormatAge(absl::Seconds(p.at("age_seconds").as_int64())));
    const std::string plugins = JoinCell(p.at("unschedulable_plugins"));
    EXPECT_EQ(row[6], plugins.empty() ? "<none>" : plugins);
    EXPECT_EQ(row[12], p.at("uid").as_string());
  }
  EXPECT_EQ(doc.at("counts").at("unschedulable").as_int64(), 1);
  EXPECT_EQ(doc.at("total").as_int64(), 4);
  EXPECT_EQ(pods[1].at("backoff_expiry").as_string(), "2026-11-18T11:06:43Z");
  EXPECT_DOUBLE_EQ(pods[1].at("backoff_remaining_seconds").as_double(), 3.2);
  EXPECT_EQ(pods[2].at("message").as_string(),
            "0/3 nodes are available: 1 node(s) had untolerated taint {dedicated: infra}, 2 Insufficient cpu.");
}

// A pod being scheduled and one held at Permit by Coscheduling: listed after
// the queues, with what the held one waits on, in the table and in JSON.
TEST_F(PodiumctlCommandsTest, QueueShowsPodsInFlightAndWaitingOnPermit) {
  {
    absl::MutexLock lock(&fake_.mu);
    v1::QueuedPod held = WaitingOnCoscheduling("ml", "worker-0", 2);
    held.set_enqueued_us(Us(kNow - absl::Seconds(5)));
    fake_.queued.push_back(held);
    fake_.queued.push_back(Queued("ml", "worker-1", v1::IN_FLIGHT, 1));
  }
  ASSERT_TRUE(Run({"queue"}).ok());
  auto rows = Rows(out_.str());
  ASSERT_EQ(rows.size(), 7u) << out_.str();
  EXPECT_THAT(rows[5], ElementsAre("ml", "worker-1", "in-flight", "1", "95s", "-", "<none>", "<none>"));
  EXPECT_THAT(rows[6], ElementsAre("ml", "worker-0", "waiting-on-permit", "2", "5s", "-", "<none>", "Coscheduling"));
  EXPECT_THAT(out_.str(), HasSubstr("6 pods: 1 active, 1 backoff, 1 unschedulable, 1 gated, 1 in-flight, "
                                    "1 waiting-on-permit\n"));
  ASSERT_TRUE(Run({"queue", "-o", "wide", "--queue", "waiting-on-permit"}).ok());
  rows = Rows(out_.str());
  ASSERT_EQ(rows.size(), 2u) << out_.str();
  EXPECT_EQ(rows[0][8], "NODE");
  EXPECT_EQ(rows[1][8], "node-3");
  EXPECT_EQ(rows[0][9], "PERMIT DEADLINE");
  EXPECT_EQ(rows[1][9], "in 25s");
  {
    absl::MutexLock lock(&fake_.mu);
    EXPECT_EQ(fake_.list_requests.back().queue(), v1::WAITING_ON_PERMIT);
  }
  ASSERT_TRUE(Run({"queue", "-o", "json", "--queue", "waiting-on-permit"}).ok());
  boost::json::value doc = boost::json::parse(out_.str());
  const auto& pod = doc.at("pods").as_array().at(0);
  EXPECT_EQ(pod.at("queue").as_string(), "waiting-on-permit");
  const auto& wait = pod.at("permit_wait");
  EXPECT_EQ(wait.at("node").as_string(), "node-3");
  EXPECT_DOUBLE_EQ(wait.at("waited_seconds").as_double(), 5.0);
  EXPECT_EQ(wait.at("plugins").at(0).at("name").as_string(), "Coscheduling");
  EXPECT_DOUBLE_EQ(wait.at("plugins").at(0).at("remaining_seconds").as_double(), 25.0);
  EXPECT_EQ(doc.at("counts").at("waiting-on-permit").as_int64(), 1);
  ASSERT_TRUE(Run({"queue", "-o", "yaml", "--queue", "in-flight"}).ok());
  EXPECT_THAT(out_.str(), HasSubstr("worker-1"));
  EXPECT_THAT(out_.str(), HasSubstr("in-flight"));
  EXPECT_THAT(std::string(Run({"queue", "--queue", "permit"}).message()), HasSubstr("waiting-on-permit"));
}

TEST_F(PodiumctlCommandsTest, QueueFiltersServerSide) {
  ASSERT_TRUE(Run({"queue", "-n", "batch", "--queue", "backoff", "-o", "name"}).ok());
  EXPECT_EQ(out_.str(), "batch/job-7\n");
  {
    absl::MutexLock lock(&fake_.mu);
    ASSERT_FALSE(fake_.list_requests.empty());
    EXPECT_EQ(fake_.list_requests.back().namespace_(), "batch");
    EXPECT_EQ(fake_.list_requests.back().queue(), v1::BACKOFF);
  }
  ASSERT_TRUE(Run({"queue", "--plugin", "TaintToleration", "-o", "name"}).ok());
  EXPECT_EQ(out_.str(), "default/giant\n");
  {
    absl::MutexLock lock(&fake_.mu);
    EXPECT_EQ(fake_.list_requests.back().plugin(), "TaintToleration");
  }
  ASSERT_TRUE(Run({"queue", "--plugin", "NoSuch"}).ok());
  EXPECT_EQ(out_.str(), "");
  EXPECT_THAT(err_.str(), HasSubstr("No pods in the scheduling queue"));
}

TEST_F(PodiumctlCommandsTest, QueueLimitKeepsTheTotal) {
  ASSERT_TRUE(Run({"queue", "--limit", "1", "-o", "json"}).ok());
  boost::json::value doc = boost::json::parse(out_.str());
  EXPECT_EQ(doc.at("pods").as_array().size(), 1u);
  EXPECT_EQ(doc.at("total").as_int64(), 4);
}

// The bug this replaced: only the first page (500 pods) was ever read.
TEST_F(PodiumctlCommandsTest, QueueFollowsPageTokensToTheEnd) {
  {
    absl::MutexLock lock(&fake_.mu);
    for (int i = 0; i < 1203; ++i) fake_.queued.push_back(Queued("bulk", "pod-" + std::to_string(i), v1::ACTIVE, 0));
  }
  ASSERT_TRUE(Run({"queue", "-o", "json"}).ok());
  boost::json::value doc = boost::json::parse(out_.str());
  EXPECT_EQ(doc.at("pods").as_array().size(), 1207u);
  EXPECT_EQ(doc.at("total").as_int64(), 1207);
  EXPECT_EQ(doc.at("continue").as_string(), "");
  absl::MutexLock lock(&fake_.mu);
  ASSERT_EQ(fake_.list_requests.size(), 3u);
  EXPECT_EQ(fake_.list_requests[0].page_size(), 500);
  EXPECT_EQ(fake_.list_requests[0].page_token(), "");
  EXPECT_EQ(fake_.list_requests[1].page_token(), "o:500");
  EXPECT_EQ(fake_.list_requests[2].page_token(), "o:1000");
}

TEST_F(PodiumctlCommandsTest, QueueLimitAndContinueWalkTheListingInPieces) {
  // --limit 3 with pages of 2: two calls, then the token of the fourth pod.
  // A page keeps the scheduler's order (here the fake's: as the pods were added).
  ASSERT_TRUE(Run({"queue", "--limit", "3", "--chunk-size", "2", "-o", "name"}).ok());
  EXPECT_EQ(out_.str(), "default/web-1\ndefault/giant\nbatch/job-7\n");
  EXPECT_THAT(err_.str(), HasSubstr("More pods: podiumctl queue --limit 3 --chunk-size 2 --continue o:3\n"));
  {
    absl::MutexLock lock(&fake_.mu);
    ASSERT_EQ(fake_.list_requests.size(), 2u);
    EXPECT_EQ(fake_.list_requests[0].page_size(), 2);
    EXPECT_EQ(fake_.list_requests[1].page_size(), 1) << "the last page asks only for what --limit leaves";
  }
  ASSERT_TRUE(Run({"queue", "--limit", "3", "--continue", "o:3", "-o", "json"}).ok());
  boost::json::value doc = boost::json::parse(out_.str());
  ASSERT_EQ(doc.at("pods").as_array().size(), 1u);
  EXPECT_EQ(doc.at("pods").as_array()[0].at("name").as_string(), "gated-1");
  EXPECT_EQ(doc.at("continue").as_string(), "");
  // In JSON the token is a field, not a line on stderr.
  ASSERT_TRUE(Run({"queue", "--limit", "2", "-o", "json"}).ok());
  EXPECT_EQ(boost::json::parse(out_.str()).at("continue").as_string(), "o:2");
  EXPECT_EQ(err_.str(), "");
  // A token the scheduler does not know is its INVALID_ARGUMENT, a usage error
  // naming the flag the operator typed, not the request's field.
  absl::Status bogus = Run({"queue", "--continue", "bogus"});
  EXPECT_TRUE(absl::IsInvalidArgument(bogus)) << bogus;
  EXPECT_THAT(std::string(bogus.message()), HasSubstr("--continue: \"bogus\" is not a page token"));
  EXPECT_THAT(std::string(bogus.message()), Not(HasSubstr("page_token")));
}

// The hint repeats every filter: the token is an offset into their listing.
TEST_F(PodiumctlCommandsTest, QueueNextPageHintRepeatsTheFilters) {
  {
    absl::MutexLock lock(&fake_.mu);
    for (int i = 0; i < 3; ++i) {
      fake_.queued.push_back(Queued("bulk", "pod-" + std::to_string(i), v1::UNSCHEDULABLE, 1, {"NodeResourcesFit"}));
    }
  }
  ASSERT_TRUE(Run({"queue", "-n", "bulk", "--queue", "unschedulable", "--plugin", "NodeResourcesFit", "--limit", "1",
                   "--chunk-size", "7", "-o", "name"}).ok());
  EXPECT_EQ(out_.str(), "bulk/pod-0\n");
  const std::string next =
      "queue -n bulk --queue unschedulable --plugin NodeResourcesFit --limit 1 --chunk-size 7 --continue o:1";
  ASSERT_EQ(err_.str(), "More pods: podiumctl " + next + "\n");
  // Running the hint continues the same listing.
  std::vector<std::string> args = absl::StrSplit(next, ' ');
  args.push_back("-o=name");
  ASSERT_TRUE(Run(args).ok());
  EXPECT_EQ(out_.str(), "bulk/pod-1\n");
  // A value the shell would split or expand is quoted.
  auto inv = ParseCommandLine({"queue", "--plugin", "My Plugin", "--limit", "1"}, std::nullopt);
  ASSERT_TRUE(inv.ok());
  EXPECT_EQ(NextPageCommand(*inv, "o:1"), "podiumctl queue --plugin 'My Plugin' --limit 1 --continue o:1");
}

// Pages walked with --limit/--continue join up into the scheduler's listing:
// each page keeps its order instead of being sorted on its own.
TEST_F(PodiumctlCommandsTest, QueuePagesJoinUpInTheSchedulersOrder) {
  {
    // As the scheduler lists: activeQ in pop order, backoffQ, then the pool
    // (unschedulable and gated together) by time.
    absl::MutexLock lock(&fake_.mu);
    fake_.queued = {Queued("default", "web-2", v1::ACTIVE, 0), Queued("default", "web-1", v1::ACTIVE, 0),
                    Queued("batch", "job-7", v1::BACKOFF, 1), Queued("batch", "gated-1", v1::GATED, 0),
                    Queued("default", "giant", v1::UNSCHEDULABLE, 3)};
  }
  const std::string server_order = "default/web-2\ndefault/web-1\nbatch/job-7\nbatch/gated-1\ndefault/giant\n";
  std::string walked;
  std::vector<std::string> args = {"queue", "--limit", "2", "-o", "name"};
  for (int page = 0; page < 5; ++page) {
    ASSERT_TRUE(Run(args).ok());
    walked += out_.str();
    const std::string err = err_.str();
    std::smatch token;
    if (!std::regex_search(err, token, std::regex("--continue (\\S+)\n"))) break;
    args = {"queue", "--limit", "2", "-o", "name", "--continue", token[1]};
  }
  EXPECT_EQ(walked, server_order);
  ASSERT_TRUE(Run({"queue", "--limit", "5", "-o", "name"}).ok());
  EXPECT_EQ(out_.str(), server_order);
  // Without paging, the listing is sorted by queue, then namespace/name.
  ASSERT_TRUE(Run({"queue", "-o", "name"}).ok());
  EXPECT_EQ(out_.str(), "default/web-1\ndefault/web-2\nbatch/job-7\ndefault/giant\nbatch/gated-1\n");
}

class LoopingAdmin final : public v1::Admin::Service {
 public:
  grpc::Status ListQueuedPods(grpc::ServerContext*, const v1::ListQueuedPodsRequest*,
                              v1::ListQueuedPodsResponse* resp) override {
    resp->set_total(1);
    resp->set_next_page_token("again");
    return grpc::Status::OK;
  }
};

TEST(PodiumctlQueuePagingTest, AServerThatNeverEndsThePagesIsAnError) {
  LoopingAdmin admin;
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&admin);
  auto server = builder.BuildAndStart();
  ASSERT_NE(server, nullptr);
  AdminClient client(AdminClient::Options{.address = "127.0.0.1:" + std::to_string(port)});
  Invocation inv;
  inv.command = Command::kQueue;
  auto listing = ListQueue(client, inv);
  EXPECT_FALSE(listing.ok());
  EXPECT_THAT(listing.status().message(), HasSubstr("without reaching the end"));
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
}

v1::NodeVerdict Verdict(const std::string& node, v1::Status::Code code, const std::string& plugin,
                        std::vector<std::string> reasons) {
  v1::NodeVerdict v;
  v.set_node_name(node);
  v.mutable_status()->set_code(code);
  v.mutable_status()->set_plugin(plugin);
  for (auto& r : reasons) v.mutable_status()->add_reasons(r);
  return v;
}

void SetExplain(FakeAdmin& fake) {
  absl::MutexLock lock(&fake.mu);
  *fake.explain.mutable_pod() = fake.queued[1];
  fake.explain.set_message(fake.queued[1].message());
  const char* taint = "node(s) had untolerated taint {dedicated: infra}";
  *fake.explain.add_nodes() = Verdict("node-a", v1::Status::UNSCHEDULABLE, "NodeResourcesFit", {"Insufficient cpu"});
  *fake.explain.add_nodes() =
      Verdict("node-c", v1::Status::UNSCHEDULABLE_AND_UNRESOLVABLE, "TaintToleration", {taint});
  *fake.explain.add_nodes() = Verdict("node-b", v1::Status::UNSCHEDULABLE, "NodeResourcesFit", {"Insufficient cpu"});
}

TEST_F(PodiumctlCommandsTest, ExplainGroupsVerdictsByReasonAsTheMessageCountsThem) {
  SetExplain(fake_);
  ASSERT_TRUE(Run({"explain", "default/giant"}).ok());
  const std::string out = out_.str();
  EXPECT_THAT(out, HasSubstr("Pod:          default/giant\n"));
  EXPECT_THAT(out, HasSubstr("Queue:        unschedulable (entered 95s ago), 3 attempts\n"));
  EXPECT_THAT(out, HasSubstr("Rejected by:  NodeResourcesFit, TaintToleration\n"));
  EXPECT_THAT(out, HasSubstr("Message:      0/3 nodes are available: 1 node(s) had untolerated taint "
                             "{dedicated: infra}, 2 Insufficient cpu.\n"));
  const std::string table = out.substr(out.find("\n\n") + 2);
  auto rows = Rows(table);
  ASSERT_EQ(rows.size(), 3u) << table;
  EXPECT_THAT(rows[0], ElementsAre("NODES", "REASON", "PLUGIN", "SAMPLE NODES"));
  EXPECT_THAT(rows[1], ElementsAre("2", "Insufficient cpu", "NodeResourcesFit", "node-a, node-b"));
  EXPECT_THAT(rows[2],
              ElementsAre("1", "node(s) had untolerated taint {dedicated: infra}", "TaintToleration", "node-c"));
}

TEST_F(PodiumctlCommandsTest, ExplainSamplesNodesUnlessWide) {
  SetExplain(fake_);
  {
    absl::MutexLock lock(&fake_.mu);
    for (const char* n : {"node-d", "node-e"}) {
      *fake_.explain.add_nodes() = Verdict(n, v1::Status::UNSCHEDULABLE, "NodeResourcesFit", {"Insufficient cpu"});
    }
  }
  ASSERT_TRUE(Run({"explain", "default/giant"}).ok());
  EXPECT_THAT(out_.str(), HasSubstr("node-a, node-b, node-d (+1 more)"));
  {
    // Listed by name, whatever order the scheduler evaluated them in.
    absl::MutexLock lock(&fake_.mu);
    std::swap(*fake_.explain.mutable_nodes(0), *fake_.explain.mutable_nodes(4));
  }
  ASSERT_TRUE(Run({"explain", "default/giant"}).ok());
  EXPECT_THAT(out_.str(), HasSubstr("node-a, node-b, node-d (+1 more)"));
  ASSERT_TRUE(Run({"explain", "default/giant", "-o", "wide"}).ok());
  EXPECT_THAT(out_.str(), HasSubstr("node-a, node-b, node-d, node-e"));
  EXPECT_THAT(out_.str(), HasSubstr("UnschedulableAndUnresolvable"));
  ASSERT_TRUE(Run({"explain", "default/giant", "-o", "json"}).ok());
  boost::json::value doc = boost::json::parse(out_.str());
  const auto& first = doc.at("reasons").as_array()[0];
  EXPECT_EQ(first.at("count").as_int64(), 4);
  EXPECT_EQ(first.at("nodes").as_array().size(), 4u);
  EXPECT_EQ(doc.at("nodes").as_array().size(), 5u);
  EXPECT_EQ(doc.at("queued").at("attempts").as_int64(), 3);
}

TEST_F(PodiumctlCommandsTest, ExplainRejectedBeforeFilterHasOnlyTheMessage) {
  {
    absl::MutexLock lock(&fake_.mu);
    fake_.explain.set_message("0/3 nodes are available: pod has unbound immediate PersistentVolumeClaims.");
  }
  ASSERT_TRUE(Run({"explain", "default/giant"}).ok());
  EXPECT_THAT(out_.str(), HasSubstr("Queue:        not queued now"));
  EXPECT_THAT(out_.str(), HasSubstr("No per-node verdicts: the pod was rejected before Filter"));
  ASSERT_TRUE(Run({"explain", "default/giant", "-o", "json"}).ok());
  boost::json::value doc = boost::json::parse(out_.str());
  EXPECT_TRUE(doc.at("queued").is_null());
  EXPECT_TRUE(doc.at("reasons").as_array().empty());
  EXPECT_EQ(doc.at("message").as_string(), "0/3 nodes are available: pod has unbound immediate PersistentVolumeClaims.");
}

TEST_F(PodiumctlCommandsTest, ExplainAPodWaitingAtPermitShowsTheWaitNotARejection) {
  {
    absl::MutexLock lock(&fake_.mu);
    v1::QueuedPod held = WaitingOnCoscheduling("default", "giant", 1);
    *fake_.explain.mutable_pod() = held;
    fake_.explain.set_attempts(1);
  }
  ASSERT_TRUE(Run({"explain", "default/giant"}).ok());
  const std::string out = out_.str();
  EXPECT_THAT(out, HasSubstr("Queue:        waiting-on-permit"));
  EXPECT_THAT(out, HasSubstr("Permit:       waiting on Coscheduling (deadline " + FormatTimestamp(kNow + absl::Seconds(25)) +
                             ", in 25s), on node-3, since " + FormatTimestamp(kNow - absl::Seconds(5)) +
                             " (5s ago)\n"));
  EXPECT_THAT(out, Not(HasSubstr("rejected before Filter")));
  EXPECT_THAT(out, HasSubstr("No failed attempt: the pod passed Filter and waits at Permit"));
  ASSERT_TRUE(Run({"explain", "default/giant", "-o", "json"}).ok());
  boost::json::value doc = boost::json::parse(out_.str());
  EXPECT_EQ(doc.at("queued").at("permit_wait").at("plugins").at(0).at("name").as_string(), "Coscheduling");
}

// A preemptor held while its victims leave: gated by DefaultPreemption,
// nominated to the node it will take, its failed attempt's verdicts below.
TEST_F(PodiumctlCommandsTest, ExplainAHeldPreemptorSaysWhatGatesItAndWhereItIsNominated) {
  {
    absl::MutexLock lock(&fake_.mu);
    v1::QueuedPod held = Queued("default", "giant", v1::GATED, 1, {"NodeResourcesFit"});
    held.set_gated_by("DefaultPreemption");
    held.set_message("waiting for the preemption for this pod to be finished");
    *fake_.explain.mutable_pod() = held;
    fake_.explain.set_attempts(1);
    fake_.explain.set_nominated_node_name("node-a");
    fake_.explain.set_message("0/1 nodes are available: 1 Insufficient cpu.");
  }
  ASSERT_TRUE(Run({"explain", "default/giant"}).ok());
  const std::string out = out_.str();
  EXPECT_THAT(out, HasSubstr("Queue:        gated"));
  EXPECT_THAT(out, HasSubstr("Gated:        by DefaultPreemption: waiting for the preemption for this pod to be finished\n"));
  EXPECT_THAT(out, HasSubstr("Nominated:    node-a\n"));
  ASSERT_TRUE(Run({"explain", "default/giant", "-o", "json"}).ok());
  boost::json::value doc = boost::json::parse(out_.str());
  EXPECT_EQ(doc.at("queued").at("gated_by").as_string(), "DefaultPreemption");
  EXPECT_EQ(doc.at("nominated_node").as_string(), "node-a");
}

// A pod gated before its first attempt (spec.schedulingGates) was said to be
// "rejected before Filter": it was never tried.
TEST_F(PodiumctlCommandsTest, ExplainAGatedPodNeverTriedSaysItIsHeldNotRejected) {
  {
    absl::MutexLock lock(&fake_.mu);
    v1::QueuedPod gated = Queued("default", "giant", v1::GATED, 0);
    gated.set_gated_by("SchedulingGates");
    gated.set_message("waiting for scheduling gates: [example.com/later]");
    *fake_.explain.mutable_pod() = gated;
  }
  ASSERT_TRUE(Run({"explain", "default/giant"}).ok());
  EXPECT_THAT(out_.str(), Not(HasSubstr("rejected before Filter")));
  EXPECT_THAT(out_.str(), HasSubstr("No attempt yet: a PreEnqueue plugin holds the pod out of the scheduling cycles"));
}

TEST_F(PodiumctlCommandsTest, ExplainAPodNeverTriedSaysSoNotRejectedBeforeFilter) {
  {
    absl::MutexLock lock(&fake_.mu);
    *fake_.explain.mutable_pod() = Queued("default", "giant", v1::ACTIVE, 0);
  }
  ASSERT_TRUE(Run({"explain", "default/giant"}).ok());
  EXPECT_THAT(out_.str(), Not(HasSubstr("rejected before Filter")));
  EXPECT_THAT(out_.str(), HasSubstr("No failed attempt recorded"));
  EXPECT_THAT(out_.str(), Not(HasSubstr("Permit:")));
}

// KEP-5836: a bound pod whose resize its kubelet deferred and for which
// preemption on its node found no victims.
TEST_F(PodiumctlCommandsTest, ExplainADeferredResizeSaysWhatItWantsAndWhyPreemptionCannotHelp) {
  {
    absl::MutexLock lock(&fake_.mu);
    auto* r = fake_.explain.mutable_resize();
    r->set_node_name("node-a");
    r->set_state("Deferred");
    r->mutable_wanted()->set_milli_cpu(2000);
    r->mutable_wanted()->set_memory_bytes(int64_t{128} << 20);
    r->mutable_admitted()->set_milli_cpu(1500);
    r->mutable_admitted()->set_memory_bytes(int64_t{128} << 20);
    r->set_preemption_message("preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod.");
    r->set_waiting_for_room(true);
  }
  ASSERT_TRUE(Run({"explain", "default/giant"}).ok());
  const std::string out = out_.str();
  EXPECT_THAT(out, HasSubstr("Resize:       Deferred on node-a: wants cpu 2, memory 128Mi; admitted cpu 1500m, "
                             "memory 128Mi\n"));
  EXPECT_THAT(out, HasSubstr("Preemption:   preemption: 0/1 nodes are available: 1 No preemption victims found "
                             "for incoming pod. (tried again when a pod leaves node-a)\n"));
  EXPECT_THAT(out, Not(HasSubstr("No failed attempt recorded")));
  ASSERT_TRUE(Run({"explain", "default/giant", "-o", "json"}).ok());
  boost::json::value doc = boost::json::parse(out_.str());
  EXPECT_EQ(doc.at("resize").at("wanted").at("cpu").as_string(), "2");
  EXPECT_EQ(doc.at("resize").at("admitted").at("cpu").as_string(), "1500m");
  EXPECT_TRUE(doc.at("resize").at("waiting_for_room").as_bool());

  // While it is queued for its preemption attempt.
  {
    absl::MutexLock lock(&fake_.mu);
    fake_.explain.mutable_resize()->set_preemption_message("");
    fake_.explain.mutable_resize()->set_waiting_for_room(false);
    fake_.explain.mutable_resize()->set_queued(true);
  }
  ASSERT_TRUE(Run({"explain", "default/giant"}).ok());
  EXPECT_THAT(out_.str(), HasSubstr("Preemption:   queued: the scheduler looks for lower-priority pods on the node "
                                    "to evict\n"));
  // Not a resize: no such lines, and "resize" is null in JSON.
  {
    absl::MutexLock lock(&fake_.mu);
    fake_.explain.clear_resize();
    fake_.explain.set_message("0/1 nodes are available: 1 Insufficient cpu.");
  }
  ASSERT_TRUE(Run({"explain", "default/giant"}).ok());
  EXPECT_THAT(out_.str(), Not(HasSubstr("Resize:")));
  ASSERT_TRUE(Run({"explain", "default/giant", "-o", "json"}).ok());
  EXPECT_TRUE(boost::json::parse(out_.str()).at("resize").is_null());
}

TEST_F(PodiumctlCommandsTest, ExplainUnknownPodIsNotFound) {
  absl::Status s = Run({"explain", "default/nope"});
  EXPECT_TRUE(absl::IsNotFound(s)) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("no failed scheduling attempt recorded for pod default/nope"));
}

TEST_F(PodiumctlCommandsTest, NodesShowRequestedAgainstAllocatable) {
  {
    absl::MutexLock lock(&fake_.mu);
    auto* n = fake_.cache.add_nodes();
    n->set_name("node-a");
    n->set_generation(7);
    n->mutable_allocatable()->set_milli_cpu(2000);
    n->mutable_allocatable()->set_memory_bytes(int64_t{4} << 30);
    n->mutable_allocatable()->set_pods(110);
    (*n->mutable_allocatable()->mutable_scalar())["nvidia.com/gpu"] = 4;
    n->mutable_requested()->set_milli_cpu(1500);
    n->mutable_requested()->set_memory_bytes(int64_t{1} << 30);
    (*n->mutable_requested()->mutable_scalar())["nvidia.com/gpu"] = 1;
    auto* pod = n->add_pods();
    pod->set_namespace_("default");
    pod->set_name("web-1");
    auto* assumed = n->add_assumed_pods();
    assumed->set_namespace_("default");
    assumed->set_name("web-2");
    fake_.cache.set_assumed_pods(1);
  }
  ASSERT_TRUE(Run({"nodes"}).ok());
  auto rows = Rows(out_.str());
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_THAT(rows[0], ElementsAre("NAME", "CPU", "CPU%", "MEMORY", "MEMORY%", "PODS", "ASSUMED", "NOMINATED"));
  EXPECT_THAT(rows[1], ElementsAre("node-a", "1500m/2", "75%", "1Gi/4Gi", "25%", "2/110", "1", "0"));
  ASSERT_TRUE(Run({"nodes", "-o", "wide"}).ok());
  EXPECT_THAT(Rows(out_.str())[1], ElementsAre("node-a", "1500m/2", "75%", "1Gi/4Gi", "25%", "2/110", "1", "0",
                                               "0/0", "nvidia.com/gpu=1/4", "7"));
  ASSERT_TRUE(Run({"nodes", "-o", "yaml"}).ok());
  EXPECT_THAT(out_.str(), HasSubstr("- default/web-2"));
  EXPECT_THAT(out_.str(), HasSubstr("nominated_pods: []"));
  ASSERT_TRUE(Run({"nodes", "-o", "json"}).ok());
  boost::json::value doc = boost::json::parse(out_.str());
  EXPECT_EQ(doc.at("nodes").at(0).at("requested").at("milli_cpu").as_int64(), 1500);
  EXPECT_EQ(doc.at("assumed_pods").as_int64(), 1);
}

TEST_F(PodiumctlCommandsTest, PluginsShowEndpointCountersAndExtensionPoints) {
  {
    absl::MutexLock lock(&fake_.mu);
    auto* e = fake_.plugins.add_endpoints();
    e->set_endpoint("host (unix:///run/podium/host.sock)");
    e->set_state(v1::PluginEndpointInfo::READY);
    e->set_requests(120);
    e->set_errors(2);
    e->set_timeouts(1);
    e->set_invalid_answers(3);
    e->set_latency_p50_ms(0.042);
    e->set_latency_p99_ms(0.31);
    e->set_reconnects(1);
    auto* p = e->add_plugins();
    p->set_name("NodeResourcesFit");
    p->add_extension_points(v1::PRE_FILTER);
    p->add_extension_points(v1::FILTER);
    p->add_extension_points(v1::SCORE);
    auto* py = fake_.plugins.add_endpoints();
    py->set_endpoint("python (unix:///run/podium/python.sock)");
    py->set_state(v1::PluginEndpointInfo::FAILED);
    py->set_ignorable(true);
    py->set_last_error("stream ended: UNAVAILABLE: Socket closed");
    auto* breaker = fake_.plugins.add_endpoints();  // Its circuit breaker open.
    breaker->set_endpoint("gpu (unix:///run/podium/gpu.sock)");
    breaker->set_state(v1::PluginEndpointInfo::FAILED);
    breaker->set_connection_state("CIRCUIT_OPEN");
  }
  ASSERT_TRUE(Run({"plugins"}).ok());
  const std::string out = out_.str();
  auto rows = Rows(out);
  ASSERT_EQ(rows.size(), 4u) << out;
  EXPECT_THAT(rows[1], ElementsAre("host", "Ready", "Fail", "1", "120", "2", "1", "3", "0.042ms", "0.310ms"));
  EXPECT_THAT(rows[2], ElementsAre("python", "Failed", "Ignore", "0", "0", "0", "0", "0", "0.000ms", "0.000ms"));
  EXPECT_THAT(rows[3], ElementsAre("gpu", "CircuitOpen", "Fail", "0", "0", "0", "0", "0", "0.000ms", "0.000ms"));
  const std::string after_endpoints = out.substr(out.find("\n\n") + 2);
  auto plugin_rows = Rows(after_endpoints);
  ASSERT_EQ(plugin_rows.size(), 2u);
  EXPECT_THAT(plugin_rows[1], ElementsAre("NodeResourcesFit", "host", "PreFilter,Filter,Score"));
  // Why the endpoint that is not ready failed, in a table of its own.
  auto error_rows = Rows(after_endpoints.substr(after_endpoints.find("\n\n") + 2));
  ASSERT_EQ(error_rows.size(), 2u) << out;
  EXPECT_THAT(error_rows[0], ElementsAre("ENDPOINT", "LAST ERROR"));
  EXPECT_THAT(error_rows[1], ElementsAre("python", "stream ended: UNAVAILABLE: Socket closed"));
  ASSERT_TRUE(Run({"plugins", "-o", "json"}).ok());
  boost::json::value doc = boost::json::parse(out_.str());
  EXPECT_EQ(doc.at("endpoints").at(0).at("address").as_string(), "unix:///run/podium/host.sock");
  EXPECT_EQ(doc.at("endpoints").at(0).at("reconnects").to_number<int>(), 1);
  EXPECT_EQ(doc.at("endpoints").at(0).at("last_error").as_string(), "");
  EXPECT_EQ(doc.at("endpoints").at(1).at("last_error").as_string(), "stream ended: UNAVAILABLE: Socket closed");
}

TEST_F(PodiumctlCommandsTest, StatusSaysWhetherItSchedulesAndWhatBatchingDid) {
  {
    absl::MutexLock lock(&fake_.mu);
    fake_.status.set_adapter_connected(true);
    fake_.status.set_adapter("podium-k8s-adapter");
    fake_.status.set_pending_actions(3);
    fake_.status.set_refused_actions(1);
    v1::BatchingStatus* b = fake_.status.mutable_batching();
    b->set_hits(998);
    b->set_misses(2);
    b->set_unsignable(1000);
    b->set_hits_without_request(816);
    b->set_nominated_checks_sent(1005);
    b->set_nominated_check_hits(933);
    (*b->mutable_pods_by_result())["miss_new"] = 2;
    (*b->mutable_pods_by_result())["hit_unschedulable"] = 998;
    (*b->mutable_pods_by_result())["unsignable"] = 1000;
    (*b->mutable_unsignable_reasons())["the pod has a nominated node"] = 1000;
  }
  ASSERT_TRUE(Run({"status"}).ok());
  std::string out = out_.str();
  EXPECT_THAT(out, HasSubstr("Scheduling:       yes\n"));
  EXPECT_THAT(out, HasSubstr("Adapter:          podium-k8s-adapter\n"));
  EXPECT_THAT(out, HasSubstr("Pending actions:  3 (sent to the adapter, no result yet)\n"));
  EXPECT_THAT(out, HasSubstr("0 adapter streams, 1 actions (outbox full)"));
  EXPECT_THAT(out, HasSubstr("Batching:         998 hits (816 without a plugin request), 2 misses, 1000 unsignable\n"));
  EXPECT_THAT(out, Not(HasSubstr("Nominated checks")));  // -o wide only.
  // The results, the largest first, then why pods were unsignable.
  auto results = Rows(out.substr(out.find("RESULT")));
  ASSERT_GE(results.size(), 4u) << out;
  EXPECT_THAT(results[0], ElementsAre("RESULT", "PODS"));
  EXPECT_THAT(results[1], ElementsAre("unsignable", "1000"));
  EXPECT_THAT(results[2], ElementsAre("hit_unschedulable", "998"));
  EXPECT_THAT(results[3], ElementsAre("miss_new", "2"));
  EXPECT_THAT(out, HasSubstr("UNSIGNABLE BECAUSE"));
  EXPECT_THAT(out, HasSubstr("the pod has a nominated node   1000"));

  ASSERT_TRUE(Run({"status", "-o", "wide"}).ok());
  EXPECT_THAT(out_.str(), HasSubstr("Nominated checks: 1005 asked, 933 pods decided by one\n"));

  // Paused, and no adapter: not scheduling, and why.
  {
    absl::MutexLock lock(&fake_.mu);
    fake_.paused = true;
    fake_.status.set_scheduling_held_because("paused by an operator");
    fake_.status.set_adapter_connected(false);
    fake_.status.clear_adapter();
  }
  ASSERT_TRUE(Run({"status"}).ok());
  EXPECT_THAT(out_.str(), HasSubstr("Scheduling:       no: paused by an operator\n"));
  EXPECT_THAT(out_.str(), HasSubstr("Adapter:          <none>\n"));
  ASSERT_TRUE(Run({"status", "-o", "json"}).ok());
  boost::json::value doc = boost::json::parse(out_.str());
  EXPECT_FALSE(doc.at("scheduling").as_bool());
  EXPECT_EQ(doc.at("held_because").as_string(), "paused by an operator");
  EXPECT_TRUE(doc.at("paused").as_bool());
  EXPECT_EQ(doc.at("batching").at("pods_by_result").at("hit_unschedulable").to_number<int>(), 998);
  EXPECT_EQ(doc.at("batching").at("nominated_check_hits").to_number<int>(), 933);
  // -o name has no meaning here, and status takes no arguments.
  EXPECT_TRUE(absl::IsInvalidArgument(Run({"status", "-o", "name"})));
  EXPECT_TRUE(absl::IsInvalidArgument(Run({"status", "extra"})));
}

TEST_F(PodiumctlCommandsTest, TheTokenFileTravelsAsABearerToken) {
  const std::string path = ::testing::TempDir() + "/podiumctl-token";
  {
    std::ofstream f(path);
    f << "  s3cret-token\n";
  }
  {
    absl::MutexLock lock(&fake_.mu);
    fake_.require_token = true;
  }
  absl::Status refused = Run({"pause"});
  EXPECT_TRUE(absl::IsUnauthenticated(refused)) << refused;
  EXPECT_THAT(refused.message(), HasSubstr("give --token-file or $PODIUM_TOKEN_FILE"));
  ASSERT_TRUE(Run({"pause", "--token-file", path}).ok());
  {
    absl::MutexLock lock(&fake_.mu);
    EXPECT_EQ(fake_.authorization, "Bearer s3cret-token");
  }
  EXPECT_TRUE(absl::IsInvalidArgument(Run({"pause", "--token-file", path + ".missing"})));
  {
    std::ofstream f(path);
    f << "two tokens\n";
  }
  EXPECT_TRUE(absl::IsInvalidArgument(Run({"pause", "--token-file", path})));
}

// A file that is not PEM is the operator's mistake (exit 1), named; not a
// scheduler gRPC cannot reach.
TEST_F(PodiumctlCommandsTest, ATlsFileThatIsNotPemIsAUsageError) {
  const std::string path = ::testing::TempDir() + "/podiumctl-junk.pem";
  {
    std::ofstream f(path);
    f << "garbage\n";
  }
  absl::Status s = Run({"queue", "--tls-ca-file", path});
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("--tls-ca-file: " + path + " is not a PEM certificate"));
  s = Run({"queue", "--tls-ca-file", path, "--tls-cert-file", path, "--tls-key-file", path});
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
}

TEST_F(PodiumctlCommandsTest, PauseAndResumeSetTheState) {
  ASSERT_TRUE(Run({"pause"}).ok());
  EXPECT_THAT(out_.str(), HasSubstr("scheduling paused"));
  {
    absl::MutexLock lock(&fake_.mu);
    EXPECT_TRUE(fake_.paused);
  }
  ASSERT_TRUE(Run({"resume", "-o", "json"}).ok());
  EXPECT_EQ(boost::json::parse(out_.str()), boost::json::parse(R"({"paused": false})"));
  absl::MutexLock lock(&fake_.mu);
  EXPECT_FALSE(fake_.paused);
}

TEST_F(PodiumctlCommandsTest, LogLevelPrintsOrSetsTheVerbosity) {
  ASSERT_TRUE(Run({"log-level"}).ok());
  EXPECT_EQ(out_.str(), "log verbosity: 0\n");
  ASSERT_TRUE(Run({"log-level", "4"}).ok());
  EXPECT_EQ(out_.str(), "log verbosity: 4 (was 0)\n");
  {
    absl::MutexLock lock(&fake_.mu);
    EXPECT_EQ(fake_.log_verbosity, 4);
  }
  ASSERT_TRUE(Run({"log-level", "2", "-o", "json"}).ok());
  EXPECT_EQ(boost::json::parse(out_.str()), boost::json::parse(R"({"verbosity": 2, "previous": 4})"));
  ASSERT_TRUE(Run({"log-level", "-o", "json"}).ok());
  EXPECT_EQ(boost::json::parse(out_.str()), boost::json::parse(R"({"verbosity": 2})"));
  // Out of range or not a number: a usage error, nothing sent.
  EXPECT_EQ(Run({"log-level", "11"}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Run({"log-level", "loud"}).code(), absl::StatusCode::kInvalidArgument);
  absl::MutexLock lock(&fake_.mu);
  EXPECT_EQ(fake_.log_verbosity, 2);
}

TEST_F(PodiumctlCommandsTest, ActivateNamedPodsByUid) {
  ASSERT_TRUE(Run({"activate", "default/giant", "batch/job-7"}).ok());
  EXPECT_THAT(out_.str(), HasSubstr("2 pods moved to the active queue"));
  absl::MutexLock lock(&fake_.mu);
  ASSERT_EQ(fake_.move_requests.size(), 1u);
  ASSERT_EQ(fake_.move_requests[0].pods_size(), 2);
  EXPECT_EQ(fake_.move_requests[0].pods(0).uid(), "uid-giant");
  EXPECT_EQ(fake_.move_requests[0].pods(1).uid(), "uid-job-7");
}

TEST_F(PodiumctlCommandsTest, ActivateUnknownPodMovesNothing) {
  absl::Status s = Run({"activate", "default/giant", "default/ghost"});
  EXPECT_TRUE(absl::IsNotFound(s)) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("default/ghost is not in the scheduling queue"));
  absl::MutexLock lock(&fake_.mu);
  EXPECT_TRUE(fake_.move_requests.empty());
}

// The bug this replaced: only the first page (500 pods) was searched.
TEST_F(PodiumctlCommandsTest, ActivateFindsPodsPastTheFirstPage) {
  {
    absl::MutexLock lock(&fake_.mu);
    for (int i = 0; i < 700; ++i) {
      fake_.queued.push_back(Queued("bulk", "pod-" + std::to_string(i), v1::UNSCHEDULABLE, 1, {"NodeResourcesFit"}));
    }
  }
  ASSERT_TRUE(Run({"activate", "bulk/pod-650"}).ok());
  EXPECT_EQ(out_.str(), "1 pod moved to the active queue\n");
  ASSERT_TRUE(Run({"activate", "--all-unschedulable", "-o", "json"}).ok());
  boost::json::value doc = boost::json::parse(out_.str());
  EXPECT_EQ(doc.at("requested").as_array().size(), 700u) << "giant and pod-0..699 but pod-650";
  EXPECT_EQ(doc.at("moved").as_int64(), 700);
}

// Pods activeQ cannot take: the output says why each stays.
TEST_F(PodiumctlCommandsTest, ActivateSaysWhyAGatedOrPermitWaitingPodStays) {
  {
    absl::MutexLock lock(&fake_.mu);
    fake_.queued.push_back(WaitingOnCoscheduling("ml", "worker-0", 1));
  }
  ASSERT_TRUE(Run({"activate", "ml/worker-0", "batch/gated-1"}).ok());
  EXPECT_EQ(out_.str(),
            "0 pods moved to the active queue\n"
            "not moved: ml/worker-0 waits at Permit on Coscheduling (node node-3): it is being scheduled, not in a "
            "queue\n"
            "not moved: batch/gated-1 is gated by SchedulingGates (it enters the queue once that plugin lets it)\n");
}

TEST_F(PodiumctlCommandsTest, ActivateAllUnschedulableNamesOnlyThePool) {
  ASSERT_TRUE(Run({"activate", "--all-unschedulable", "-o", "json"}).ok());
  boost::json::value doc = boost::json::parse(out_.str());
  EXPECT_EQ(doc.at("moved").as_int64(), 1);
  EXPECT_EQ(doc.at("requested"), boost::json::parse(R"(["default/giant"])"));
  {
    absl::MutexLock lock(&fake_.mu);
    ASSERT_EQ(fake_.move_requests.size(), 1u);
    EXPECT_EQ(fake_.move_requests[0].pods_size(), 1) << "never an empty request (that would move every pod)";
  }
  // Nothing left in the pool: no call at all.
  ASSERT_TRUE(Run({"activate", "--all-unschedulable"}).ok());
  EXPECT_THAT(out_.str(), HasSubstr("No unschedulable pods"));
  absl::MutexLock lock(&fake_.mu);
  EXPECT_EQ(fake_.move_requests.size(), 1u);
}

v1::SchedulingDecision Decision(const std::string& name, v1::SchedulingDecision::Result r, const std::string& node) {
  v1::SchedulingDecision d;
  d.mutable_pod()->set_namespace_("default");
  d.mutable_pod()->set_name(name);
  d.set_result(r);
  d.set_node_name(node);
  d.set_attempt_ms(0.125);
  d.set_time_us(Us(kNow));
  d.set_profile("default-scheduler");
  if (r == v1::SchedulingDecision::UNSCHEDULABLE) d.set_message("0/3 nodes are available: 3 Insufficient cpu.");
  return d;
}

TEST_F(PodiumctlCommandsTest, WatchPrintsOneLinePerDecisionUpToCount) {
  {
    absl::MutexLock lock(&fake_.mu);
    fake_.decisions = {Decision("web-1", v1::SchedulingDecision::SCHEDULED, "node-a"),
                       Decision("giant", v1::SchedulingDecision::UNSCHEDULABLE, ""),
                       Decision("web-2", v1::SchedulingDecision::SCHEDULED, "node-b")};
  }
  ASSERT_TRUE(Run({"watch", "--count", "2"}).ok());
  auto rows = Rows(out_.str());
  ASSERT_EQ(rows.size(), 3u) << out_.str();
  EXPECT_THAT(rows[0], ElementsAre("TIME", "RESULT", "POD", "NODE", "ATTEMPT", "MESSAGE"));
  EXPECT_THAT(rows[1], ElementsAre("11:06:40", "scheduled", "default/web-1", "node-a", "0.125ms", "-"));
  EXPECT_THAT(rows[2], ElementsAre("11:06:40", "unschedulable", "default/giant", "-", "0.125ms",
                                   "0/3 nodes are available: 3 Insufficient cpu."));
  ASSERT_TRUE(Run({"watch", "--count", "1"}).ok());  // Stops inside the first message.
  rows = Rows(out_.str());
  ASSERT_EQ(rows.size(), 2u) << out_.str();
  EXPECT_EQ(rows[1][2], "default/web-1");
  ASSERT_TRUE(Run({"watch", "--count", "3", "-o", "json"}).ok());
  std::vector<std::string> lines = absl::StrSplit(out_.str(), '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 3u);
  boost::json::value last = boost::json::parse(lines[2]);
  EXPECT_EQ(last.at("name").as_string(), "web-2");
  EXPECT_EQ(last.at("node").as_string(), "node-b");
  EXPECT_EQ(last.at("time").as_string(), "2026-11-18T11:06:40.000Z");
}

// A preemptor's failed attempt: NODE says where it is nominated.
TEST_F(PodiumctlCommandsTest, WatchShowsWhereAPreemptorIsNominated) {
  {
    absl::MutexLock lock(&fake_.mu);
    v1::SchedulingDecision preempted = Decision("giant", v1::SchedulingDecision::UNSCHEDULABLE, "");
    preempted.set_nominated_node_name("node-a");
    fake_.decisions = {preempted};
  }
  ASSERT_TRUE(Run({"watch", "--count", "1"}).ok());
  auto rows = Rows(out_.str());
  ASSERT_EQ(rows.size(), 2u) << out_.str();
  EXPECT_THAT(rows[1], ElementsAre("11:06:40", "unschedulable", "default/giant", "nominated:node-a", "0.125ms",
                                   "0/3 nodes are available: 3 Insufficient cpu."));
  ASSERT_TRUE(Run({"watch", "--count", "1", "-o", "json"}).ok());
  boost::json::value d = boost::json::parse(out_.str());
  EXPECT_TRUE(d.at("node").is_null());
  EXPECT_EQ(d.at("nominated_node").as_string(), "node-a");
}

TEST_F(PodiumctlCommandsTest, WatchReportsAStreamTheSchedulerEnded) {
  absl::Status s = Run({"watch"});  // No --count: the fake ends the stream.
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.message()), HasSubstr("ended the decision stream"));
}

// What bash completion offers for `podiumctl WORDS...` (the last word is the
// one being completed), with no podiumctl on PATH: commands and flags only.
std::vector<std::string> Complete(const std::vector<std::string>& words) {
  const std::string script = ::testing::TempDir() + "/podiumctl-completion.bash";
  {
    std::ofstream f(script);
    f << BashCompletion();
  }
  std::string command = "bash -c 'PATH=/nonexistent; source \"$0\"; COMP_WORDS=(podiumctl \"$@\"); "
                        "COMP_CWORD=$#; _podiumctl; printf \"%s\\n\" \"${COMPREPLY[@]}\"' " + script;
  for (const auto& w : words) command += " '" + w + "'";
  std::string out;
  FILE* p = popen(command.c_str(), "r");
  if (p == nullptr) return {"popen failed"};
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof(buf), p)) > 0;) out.append(buf, n);
  pclose(p);
  std::vector<std::string> words_out = absl::StrSplit(out, '\n', absl::SkipEmpty());
  std::sort(words_out.begin(), words_out.end());
  return words_out;
}

TEST(PodiumctlCompletionTest, KnowsTheCredentialFlagsAndSkipsTheirValues) {
  EXPECT_THAT(Complete({"qu"}), ElementsAre("queue"));
  // A global flag's value is not the command.
  EXPECT_THAT(Complete({"--token-file", "t.tok", "qu"}), ElementsAre("queue"));
  EXPECT_THAT(Complete({"--tls-ca-file", "ca.pem", "--tls-server-name", "sched", "qu"}), ElementsAre("queue"));
  EXPECT_THAT(Complete({"--token-file=t.tok", "queue", "--q"}), ElementsAre("--queue"));
  EXPECT_THAT(Complete({"pause", "--to"}), ElementsAre("--token-file"));
  EXPECT_THAT(Complete({"queue", "--tls-"}),
              ElementsAre("--tls-ca-file", "--tls-cert-file", "--tls-key-file", "--tls-server-name"));
  // Their values: a file name, or nothing to offer.
  EXPECT_THAT(Complete({"--tls-server-name", "qu"}), ElementsAre());
  const std::string dir = ::testing::TempDir() + "/podiumctl-completion-dir";
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/admin.token") << "t\n";
  EXPECT_THAT(Complete({"--token-file", dir + "/adm"}), ElementsAre(dir + "/admin.token"));
}

TEST(PodiumctlUnreachableTest, NamesTheAddressAndIsUnavailable) {
  const std::string address = "unix:///nonexistent-dir-podiumctl/scheduler.sock";
  auto inv = ParseCommandLine({"queue", "--address", address}, std::nullopt);
  ASSERT_TRUE(inv.ok());
  AdminClient client(AdminClient::Options{.address = inv->address, .timeout = absl::Seconds(5)});
  std::ostringstream out, err;
  CommandContext ctx{*inv, client, out, err, kNow, nullptr};
  absl::Status s = RunCommand(ctx);
  EXPECT_TRUE(absl::IsUnavailable(s)) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("cannot reach the scheduler at " + address + ": "));
  EXPECT_EQ(out.str(), "");

  auto watch = ParseCommandLine({"watch", "--address", address}, std::nullopt);
  ASSERT_TRUE(watch.ok());
  CommandContext wctx{*watch, client, out, err, kNow, nullptr};
  s = RunCommand(wctx);
  EXPECT_TRUE(absl::IsUnavailable(s)) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("cannot reach the scheduler at " + address));
}

}  // namespace
}  // namespace podium::ctl
