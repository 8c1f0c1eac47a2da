// Lookahead verdicts (plugin protocol version 4) with every default plugin:
// the verdicts a request of pod p answers for the next pod q must be what a
// request of q narrowed to the same nodes says, on the nodes as they are
// (node_ids) and on each node with p assumed there (after_node_ids).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "plugins/default_plugins_stream_test.h"

namespace podium::plugins {
namespace {

using Verdict = v1::WhatIfVerdicts;
using stream_test::Cluster;
using stream_test::Node;
using stream_test::Nominee;
using stream_test::Pod;
using stream_test::Stream;

class LookaheadTest : public stream_test::DefaultPluginsOverStream {
 protected:
  // The protocol version the stream is opened at.
  virtual uint32_t Version() const { return 4; }

  void SetUp() override {
    OpenStream(Version());
    if (HasFatalFailure()) return;
    // The cluster, once.
    v1::SchedulerToPlugin first = Cycle(Pod("warm-up", 100, 1 << 20), {1});
    *first.mutable_delta() = Cluster();
    stream_->Call(first);
  }

  v1::SchedulerToPlugin Cycle(const v1::Pod& pod, const std::vector<uint32_t>& nodes) {
    v1::SchedulerToPlugin message = CycleOf(pod);
    for (uint32_t id : nodes) message.mutable_cycle()->mutable_nodes()->add_node_ids(id);
    return message;
  }

  // `answer`'s entry `entry` against a real request of `q` narrowed to
  // `nodes`, for node `node`.
  void ExpectEqualsRequest(const v1::LookaheadVerdicts& answer, int entry, const v1::CycleResponse& real,
                           uint32_t node, const std::string& what) {
    int index = -1;
    for (int i = 0; i < real.feasible_size(); ++i) {
      if (real.feasible(i) == node) index = i;
    }
    EXPECT_EQ(answer.verdicts(entry), index >= 0 ? Verdict::FEASIBLE : Verdict::INFEASIBLE)
        << what << " node " << node;
    if (index < 0) return;
    ASSERT_EQ(real.scores_size(), static_cast<int>(score_.size()));
    for (const v1::PluginScores& s : real.scores()) {
      bool found = false;
      for (const v1::PluginScores& a : answer.scores()) {
        if (a.plugin() != s.plugin()) continue;
        found = true;
        EXPECT_EQ(a.scores(entry), s.scores(index)) << s.plugin() << ", " << what << " node " << node;
      }
      EXPECT_TRUE(found) << s.plugin();
    }
  }

  // p's request (narrowed to p_nodes) carries q's lookahead for now_nodes and
  // after_nodes; every entry must equal q's own request. Returns the answer.
  v1::LookaheadVerdicts Check(const v1::Pod& p, const v1::Pod& q, const std::vector<uint32_t>& p_nodes,
                              const std::vector<uint32_t>& now_nodes, const std::vector<uint32_t>& after_nodes) {
    v1::SchedulerToPlugin request = Cycle(p, p_nodes);
    v1::Lookahead& lookahead = *request.mutable_cycle()->mutable_lookahead();
    *lookahead.mutable_pod() = q;
    for (uint32_t id : now_nodes) lookahead.add_node_ids(id);
    for (uint32_t id : after_nodes) lookahead.add_after_node_ids(id);
    const v1::CycleResponse answer = stream_->Call(request).cycle();
    EXPECT_TRUE(answer.has_lookahead());
    return Verify(answer.lookahead(), p, q, now_nodes, after_nodes);
  }

  // A lookahead answer for q (now_nodes as they are, after_nodes with p
  // added, then `chain_nodes` entries checked by the caller) against q's
  // own requests.
  v1::LookaheadVerdicts Verify(const v1::LookaheadVerdicts& verdicts, const v1::Pod& p, const v1::Pod& q,
                               const std::vector<uint32_t>& now_nodes, const std::vector<uint32_t>& after_nodes,
                               size_t chain_nodes = 0) {
    const int total = static_cast<int>(now_nodes.size() + after_nodes.size() + chain_nodes);
    EXPECT_EQ(verdicts.verdicts_size(), total);
    EXPECT_EQ(verdicts.scores_size(), static_cast<int>(score_.size()));
    if (verdicts.verdicts_size() != total) return verdicts;
    // The nodes as they are: one request of q narrowed to them.
    const v1::CycleResponse now = stream_->Call(Cycle(q, now_nodes)).cycle();
    for (size_t k = 0; k < now_nodes.size(); ++k) {
      ExpectEqualsRequest(verdicts, static_cast<int>(k), now, now_nodes[k], "as is,");
    }
    // Each node with p assumed there.
    uint64_t generation = 1;
    for (size_t k = 0; k < after_nodes.size(); ++k) {
      v1::SchedulerToPlugin with_p = Cycle(q, {after_nodes[k]});
      v1::StateDelta& delta = *with_p.mutable_delta();
      delta.set_generation(++generation);
      v1::MirroredPod& assumed = *delta.add_pod_upserts();
      assumed.set_node_id(after_nodes[k]);
      assumed.set_assumed(true);
      *assumed.mutable_pod() = p;
      const v1::CycleResponse real = stream_->Call(with_p).cycle();
      ExpectEqualsRequest(verdicts, static_cast<int>(now_nodes.size() + k), real, after_nodes[k], "with p,");
      v1::SchedulerToPlugin restore = Cycle(q, {after_nodes[k]});
      restore.mutable_delta()->set_generation(++generation);
      restore.mutable_delta()->add_pod_removals(p.meta().uid());
      stream_->Call(restore);
    }
    return verdicts;
  }
};

v1::Pod Other(const std::string& name, int64_t milli_cpu, int64_t memory, int32_t host_port = 0) {
  v1::Pod pod = Pod(name, milli_cpu, memory, host_port);
  (*pod.mutable_meta()->mutable_labels())["app"] = "api";
  pod.mutable_containers(0)->set_image("registry/api:2");
  return pod;
}

TEST_F(LookaheadTest, VerdictsEqualTheNextPodsOwnRequest) {
  // p 1500m, q 3000m: "tight" (id 2, 4000m) holds either alone, not both.
  // No PreFilter extension is active for q: the "after" nodes share one copy
  // of the state (cycle_runner.cc StateForEachNode).
  const v1::Pod p = Pod("web", 1500, int64_t{1} << 30);
  const v1::Pod q = Other("api", 3000, int64_t{2} << 30);
  const auto verdicts = Check(p, q, {1, 2, 3}, {4, 5, 6, 7}, {1, 2, 3, 4, 5, 6, 7});
  ASSERT_EQ(verdicts.verdicts_size(), 11);
  EXPECT_EQ(verdicts.verdicts(4 + 1), Verdict::INFEASIBLE);  // "tight" with p.
  EXPECT_EQ(verdicts.verdicts(4 + 0), Verdict::FEASIBLE);    // "plain" with p.
}

TEST_F(LookaheadTest, SameLabelsAndAHostPort) {
  // q shares p's labels (InterPodAffinity's counts) and p's host port: every
  // node with p is infeasible for q; "guarded" (id 7) rejects both.
  const v1::Pod p = Pod("web", 500, int64_t{1} << 30, 8080);
  const v1::Pod q = Pod("web-2", 700, int64_t{1} << 29, 8080);
  const auto verdicts = Check(p, q, {5, 6}, {1, 2, 3, 7}, {4, 5, 6});
  ASSERT_EQ(verdicts.verdicts_size(), 7);
  EXPECT_EQ(verdicts.verdicts(3), Verdict::INFEASIBLE);
  for (int k = 4; k < 7; ++k) EXPECT_EQ(verdicts.verdicts(k), Verdict::INFEASIBLE) << k;
}

TEST_F(LookaheadTest, ASpreadConstraintCountsPOnEachNodeAlone) {
  // q spreads over hostnames (maxSkew 1, app=web): PodTopologySpread's
  // PreFilter extension counts p on each "after" node, and each node's
  // verdict must count p there only. Counted on every node evaluated before
  // it too, the last one ("cached") would see no node below 1 and admit q.
  const v1::Pod p = Pod("web", 500, int64_t{1} << 28);
  v1::Pod q = Pod("web-2", 500, int64_t{1} << 28);
  v1::TopologySpreadConstraint& spread = *q.add_topology_spread_constraints();
  spread.set_max_skew(1);
  spread.set_topology_key("kubernetes.io/hostname");
  spread.set_when_unsatisfiable(v1::TopologySpreadConstraint::DO_NOT_SCHEDULE);
  (*spread.mutable_label_selector()->mutable_match_labels())["app"] = "web";
  const auto verdicts = Check(p, q, {1, 2}, {3, 4}, {6, 7, 1, 2, 3, 4, 5});
  ASSERT_EQ(verdicts.verdicts_size(), 9);
  EXPECT_EQ(verdicts.verdicts(8), Verdict::INFEASIBLE);  // "cached" with p: skew 2.
}

TEST_F(LookaheadTest, NotAnsweredWithNominatedPods) {
  v1::SchedulerToPlugin request = Cycle(Pod("web", 1500, 1 << 20), {1, 2});
  *request.mutable_cycle()->add_nominated_pods() = Nominee();
  v1::Lookahead& lookahead = *request.mutable_cycle()->mutable_lookahead();
  *lookahead.mutable_pod() = Other("api", 100, 1 << 20);
  lookahead.add_node_ids(3);
  const v1::CycleResponse answer = stream_->Call(request).cycle();
  EXPECT_EQ(answer.feasible_size(), 2);
  EXPECT_FALSE(answer.has_lookahead());
}

TEST_F(LookaheadTest, NotAnsweredOnAStreamOfAnOlderProtocol) {
  std::unique_ptr<Stream> old = OpenFitOnlyStream(3);
  v1::SchedulerToPlugin cycle = FitOnlyCycle(Pod("web", 1500, 1 << 20));
  *cycle.mutable_cycle()->mutable_lookahead()->mutable_pod() = Other("api", 100, 1 << 20);
  cycle.mutable_cycle()->mutable_lookahead()->add_node_ids(1);
  const v1::CycleResponse answer = old->Call(cycle).cycle();
  EXPECT_EQ(answer.feasible_size(), 7);
  EXPECT_FALSE(answer.has_lookahead());
}

// Protocol version 5: the pods after q (later_lookaheads), each answered as
// q's lookahead is, with chain nodes: a node with the chain's earlier pods
// (p: 0, q: 1, later_lookaheads[k]: k + 2) added there.
class LaterLookaheadsTest : public LookaheadTest {
 protected:
  uint32_t Version() const override { return 5; }

  static void Add(v1::Lookahead& lookahead, const v1::Pod& pod, const std::vector<uint32_t>& now,
                  const std::vector<uint32_t>& after) {
    *lookahead.mutable_pod() = pod;
    for (uint32_t id : now) lookahead.add_node_ids(id);
    for (uint32_t id : after) lookahead.add_after_node_ids(id);
  }
  static void AddChainNode(v1::Lookahead& lookahead, uint32_t node, const std::vector<uint32_t>& pods) {
    v1::ChainNode& c = *lookahead.add_chain_nodes();
    c.set_node_id(node);
    for (uint32_t p : pods) c.add_pods(p);
  }

  // Entry `entry` of `verdicts`: `pod` on `node` with `assumed` there, as
  // its own request narrowed to that node says.
  void ExpectChainEntry(const v1::LookaheadVerdicts& verdicts, int entry, const v1::Pod& pod, uint32_t node,
                        const std::vector<v1::Pod>& assumed) {
    v1::SchedulerToPlugin with = Cycle(pod, {node});
    v1::StateDelta& delta = *with.mutable_delta();
    delta.set_generation(++generation_);
    for (const v1::Pod& a : assumed) {
      v1::MirroredPod& m = *delta.add_pod_upserts();
      m.set_node_id(node);
      m.set_assumed(true);
      *m.mutable_pod() = a;
    }
    const v1::CycleResponse real = stream_->Call(with).cycle();
    ExpectEqualsRequest(verdicts, entry, real, node, "chain,");
    v1::SchedulerToPlugin restore = Cycle(pod, {node});
    restore.mutable_delta()->set_generation(++generation_);
    for (const v1::Pod& a : assumed) restore.mutable_delta()->add_pod_removals(a.meta().uid());
    stream_->Call(restore);
  }

  uint64_t generation_ = 100;
};

TEST_F(LaterLookaheadsTest, EachEqualsThatPodsOwnRequestWithTheChainsPodsAdded) {
  // p 1500m, q 1500m, r 1200m: "tight" (id 2, 4000m) holds p and q, not all three.
  const v1::Pod p = Pod("web", 1500, int64_t{1} << 30);
  const v1::Pod q = Other("api", 1500, int64_t{1} << 30);
  v1::Pod r = Other("db", 1200, int64_t{1} << 29);
  (*r.mutable_meta()->mutable_labels())["app"] = "db";
  const v1::Pod s = Pod("cache", 300, int64_t{1} << 29, 8080);
  v1::SchedulerToPlugin request = Cycle(p, {1, 2, 3});
  Add(*request.mutable_cycle()->mutable_lookahead(), q, {4, 5}, {1, 2});
  v1::Lookahead& for_r = *request.mutable_cycle()->add_later_lookaheads();
  Add(for_r, r, {6, 7}, {});
  AddChainNode(for_r, 2, {0, 1});  // p and q on "tight".
  AddChainNode(for_r, 3, {1});
  v1::Lookahead& for_s = *request.mutable_cycle()->add_later_lookaheads();
  Add(for_s, s, {1, 4}, {});
  AddChainNode(for_s, 5, {0, 2});
  const v1::CycleResponse answer = stream_->Call(request).cycle();
  ASSERT_TRUE(answer.has_lookahead());
  ASSERT_EQ(answer.later_lookaheads_size(), 2);
  Verify(answer.lookahead(), p, q, {4, 5}, {1, 2});
  const v1::LookaheadVerdicts& r_answer = answer.later_lookaheads(0);
  ASSERT_EQ(r_answer.verdicts_size(), 4);
  Verify(r_answer, p, r, {6, 7}, {}, 2);
  ExpectChainEntry(r_answer, 2, r, 2, {p, q});
  EXPECT_EQ(r_answer.verdicts(2), Verdict::INFEASIBLE);  // 1500 + 1500 + 1200 > 4000.
  ExpectChainEntry(r_answer, 3, r, 3, {q});
  const v1::LookaheadVerdicts& s_answer = answer.later_lookaheads(1);
  ASSERT_EQ(s_answer.verdicts_size(), 3);
  Verify(s_answer, p, s, {1, 4}, {}, 1);
  ExpectChainEntry(s_answer, 2, s, 5, {p, r});
}

TEST_F(LaterLookaheadsTest, AllOrNone) {
  // A later pod's node the mirror does not hold, or a chain node naming a
  // pod not before it: none of the later ones is answered; q's still is.
  for (bool unknown_node : {true, false}) {
    SCOPED_TRACE(unknown_node);
    v1::SchedulerToPlugin request = Cycle(Pod("web", 1500, 1 << 20), {1, 2});
    Add(*request.mutable_cycle()->mutable_lookahead(), Other("api", 100, 1 << 20), {3}, {});
    Add(*request.mutable_cycle()->add_later_lookaheads(), Other("db", 100, 1 << 20), {4}, {});
    v1::Lookahead& bad = *request.mutable_cycle()->add_later_lookaheads();
    Add(bad, Other("cache", 100, 1 << 20), {unknown_node ? 99u : 4u}, {});
    if (!unknown_node) AddChainNode(bad, 5, {3});  // Its own position.
    const v1::CycleResponse answer = stream_->Call(request).cycle();
    EXPECT_TRUE(answer.has_lookahead());
    EXPECT_EQ(answer.later_lookaheads_size(), 0);
  }
}

TEST_F(LookaheadTest, LaterLookaheadsNotAnsweredOnVersion4) {
  v1::SchedulerToPlugin request = Cycle(Pod("web", 1500, 1 << 20), {1, 2});
  v1::Lookahead& lookahead = *request.mutable_cycle()->mutable_lookahead();
  *lookahead.mutable_pod() = Other("api", 100, 1 << 20);
  lookahead.add_node_ids(3);
  v1::Lookahead& later = *request.mutable_cycle()->add_later_lookaheads();
  *later.mutable_pod() = Other("db", 100, 1 << 20);
  later.add_node_ids(4);
  const v1::CycleResponse answer = stream_->Call(request).cycle();
  EXPECT_TRUE(answer.has_lookahead());
  EXPECT_EQ(answer.later_lookaheads_size(), 0);
}

TEST_F(LookaheadTest, ANodeSelectorNoNodeMatchesIsInfeasibleEverywhere) {
  v1::Pod q = Other("api", 100, 1 << 20);
  (*q.mutable_node_selector())["zone"] = "nowhere";
  const auto verdicts = Check(Pod("web", 1500, 1 << 20), q, {1, 2}, {3, 4}, {1, 2});
  ASSERT_EQ(verdicts.verdicts_size(), 4);
  for (int k = 0; k < 4; ++k) EXPECT_EQ(verdicts.verdicts(k), Verdict::INFEASIBLE) << k;
}

// Nominated-node checks (plugin protocol version 6) with every default
// plugin: each check in a request must say what the pod's own request
// narrowed to its nominated node says, nominations mirrored and counted.
class NominatedChecksTest : public LookaheadTest {
 protected:
  uint32_t Version() const override { return 6; }
};

TEST_F(NominatedChecksTest, EachEqualsThatPodsOwnRequestOnItsNode) {
  // Mirrored nominations: 5 000m on "plain" at priority 10, 2 000m on
  // "tight" at priority 0 (counted only for pods of priority 0).
  v1::SchedulerToPlugin nominate = Cycle(Pod("warm-up-2", 100, 1 << 20), {1});
  nominate.mutable_delta()->set_generation(2);
  v1::Pod high = Nominee().pod();
  *nominate.mutable_delta()->add_nominated_pod_upserts() = high;
  v1::Pod low = Pod("low-nominee", 2000, int64_t{1} << 30);
  low.set_nominated_node_name("tight");
  *nominate.mutable_delta()->add_nominated_pod_upserts() = low;
  stream_->Call(nominate);

  std::vector<v1::Pod> pods;
  for (int32_t priority : {0, 10}) {
    for (auto [name, cpu, port] : {std::tuple<const char*, int64_t, int32_t>{"small", 1500, 0},
                                   {"large", 3500, 0},
                                   {"ported", 1500, 8080}}) {
      v1::Pod pod = Pod(absl::StrCat(name, "-", priority), cpu, int64_t{1} << 30, port);
      pod.set_priority(priority);
      pods.push_back(pod);
    }
  }
  int feasible = 0;
  int infeasible = 0;
  for (uint32_t node = 1; node <= 7; ++node) {
    // Every pod checked on `node` in one request of another pod (on node 6).
    v1::SchedulerToPlugin request = Cycle(Pod("requester", 100, 1 << 20), {6});
    for (const v1::Pod& pod : pods) {
      v1::NominatedCheck& check = *request.mutable_cycle()->add_nominated_checks();
      *check.mutable_pod() = pod;
      check.mutable_pod()->set_nominated_node_name("elsewhere");  // Not counted against itself anywhere.
      check.set_node_id(node);
    }
    const v1::CycleResponse answer = stream_->Call(request).cycle();
    ASSERT_EQ(answer.nominated_checks_size(), static_cast<int>(pods.size())) << "node " << node;
    for (size_t k = 0; k < pods.size(); ++k) {
      const v1::CycleResponse real = stream_->Call(Cycle(pods[k], {node})).cycle();
      const bool fits = real.feasible_size() == 1;
      EXPECT_EQ(answer.nominated_checks(static_cast<int>(k)), fits ? Verdict::FEASIBLE : Verdict::INFEASIBLE)
          << pods[k].meta().name() << " on node " << node;
      ++(fits ? feasible : infeasible);
    }
  }
  // Both kinds occur: the nominations, the host port and "guarded" decide some.
  EXPECT_GT(feasible, 10);
  EXPECT_GT(infeasible, 5);
}

TEST_F(LookaheadTest, NominatedChecksNotAnsweredOnVersion4) {
  v1::SchedulerToPlugin request = Cycle(Pod("requester", 100, 1 << 20), {6});
  v1::NominatedCheck& check = *request.mutable_cycle()->add_nominated_checks();
  *check.mutable_pod() = Pod("small", 1500, 1 << 20);
  check.set_node_id(1);
  EXPECT_EQ(stream_->Call(request).cycle().nominated_checks_size(), 0);
}

}  // namespace
}  // namespace podium::plugins
