#include "plugins/coscheduling/coscheduling.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "boost/json/parse.hpp"
#include "plugins/helper/testing.h"

namespace podium::plugins {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::UnorderedElementsAre;
using testing::MakeNodeInfo;
using testing::NodeBuilder;
using testing::PodBuilder;

// A mirror with pod groups, and a handle that records plugin-initiated decisions.
class GroupSnapshot : public testing::FakeSnapshot {
 public:
  void AddGroup(v1::PodGroup g) { groups_.push_back(std::move(g)); }
  // Like the SDK's mirror: a group index (here computed from the nodes).
  void KeepGroupIndex() { indexed_ = true; }
  bool ForEachAssignedPodInGroup(std::string_view ns, std::string_view group,
                                 const PodVisitor& visit) const override {
    if (!indexed_) return false;
    ++index_lookups;
    for (const sdk::NodeInfo* node : Nodes()) {
      for (const sdk::PodInfoPtr& pod : node->pods()) {
        if (pod->pod->meta().namespace_() == ns && pod->pod->pod_group() == group) visit(*pod, *node);
      }
    }
    return true;
  }
  mutable int index_lookups = 0;
  const v1::PodGroup* GetPodGroup(std::string_view ns, std::string_view name) const override {
    for (const auto& g : groups_) {
      if (g.meta().namespace_() == ns && g.meta().name() == name) return &g;
    }
    return nullptr;
  }

 private:
  std::vector<v1::PodGroup> groups_;
  bool indexed_ = false;
};

class RecordingHandle : public sdk::Handle {
 public:
  GroupSnapshot snapshot_;
  std::vector<std::string> allowed, rejected, reasons;
  const sdk::Snapshot& snapshot() const override { return snapshot_; }
  bool AllowWaitingPod(std::string_view uid, std::string_view plugin) override {
    EXPECT_EQ(plugin, "Coscheduling");
    allowed.emplace_back(uid);
    return true;
  }
  bool RejectWaitingPod(std::string_view uid, std::string_view plugin, std::string_view reason) override {
    EXPECT_EQ(plugin, "Coscheduling");
    rejected.emplace_back(uid);
    reasons.emplace_back(reason);
    return true;
  }
};

v1::PodGroup Group(std::string name, int32_t min_member, int32_t timeout_seconds = 0) {
  v1::PodGroup g;
  g.mutable_meta()->set_namespace_("default");
  g.mutable_meta()->set_name(std::move(name));
  g.mutable_meta()->set_uid("uid-group");
  g.set_min_member(min_member);
  g.set_schedule_timeout_seconds(timeout_seconds);
  return g;
}

v1::Pod Member(std::string name, std::string group, std::string node = "") {
  v1::Pod p = PodBuilder(std::move(name)).NodeName(std::move(node)).Build();
  p.set_pod_group(std::move(group));
  return p;
}

TEST(CoschedulingTest, PreEnqueueHoldsMembersUntilTheGroupAndItsMinimumExist) {
  const v1::PodGroup train = Group("train", 8);
  const v1::PodGroup basic = Group("solo", 1);
  struct Case {
    std::string name;
    std::string group;             // The pod's pod_group.
    const v1::PodGroup* existing;  // What the scheduler sent.
    uint32_t pods;
    sdk::Code want;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"not a gang member", "", nullptr, 0, sdk::Code::kSuccess, ""},
      {"group does not exist", "train", nullptr, 8, sdk::Code::kUnschedulableAndUnresolvable,
       "waiting for pod group default/train: it does not exist"},
      {"fewer pods than minMember", "train", &train, 5, sdk::Code::kUnschedulableAndUnresolvable,
       "waiting for pod group default/train: fewer than minMember 8 pods exist"},
      {"exactly minMember pods", "train", &train, 8, sdk::Code::kSuccess, ""},
      {"more pods than minMember", "train", &train, 9, sdk::Code::kSuccess, ""},
      {"basic policy (min 1)", "solo", &basic, 1, sdk::Code::kSuccess, ""},
  };
  RecordingHandle handle;
  Coscheduling plugin(handle, 60);
  for (const Case& tc : cases) {
    SCOPED_TRACE(tc.name);
    sdk::PreEnqueuePlugin::Context context{tc.existing, tc.pods};
    sdk::Status s = plugin.PreEnqueue(*sdk::PodInfo::Create(Member("p", tc.group)), context);
    EXPECT_EQ(s.code(), tc.want);
    EXPECT_EQ(s.Message(), tc.message);
  }
}

TEST(CoschedulingTest, PermitWaitsUntilMinMemberAreAssumedThenAllowsThemAll) {
  struct Case {
    std::string name;
    int32_t min_member;
    int32_t group_timeout;
    int assigned_others;  // Members already on nodes of the mirror.
    sdk::Code want;
    int64_t want_timeout_ms;
  };
  const std::vector<Case> cases = {
      {"first of three waits, plugin default timeout", 3, 0, 0, sdk::Code::kWait, 60'000},
      {"group's scheduleTimeoutSeconds wins", 3, 10, 1, sdk::Code::kWait, 10'000},
      {"third of three completes the gang", 3, 0, 2, sdk::Code::kSuccess, 0},
      {"beyond minMember", 2, 0, 5, sdk::Code::kSuccess, 0},
      {"minMember 1", 1, 0, 0, sdk::Code::kSuccess, 0},
  };
  // With the mirror's group index (the plugin host) and without (a scan).
  for (bool indexed : {true, false}) {
    for (const Case& tc : cases) {
      SCOPED_TRACE(absl::StrCat(tc.name, indexed ? ", group index" : ", scan"));
      RecordingHandle handle;
      if (indexed) handle.snapshot_.KeepGroupIndex();
      handle.snapshot_.AddGroup(Group("train", tc.min_member, tc.group_timeout));
      std::vector<v1::Pod> on_node;
      for (int i = 0; i < tc.assigned_others; ++i) on_node.push_back(Member(absl::StrCat("m", i), "train", "n1"));
      on_node.push_back(PodBuilder("stranger").NodeName("n1").Build());
      // The pod itself may already be in the mirror (assumed): not counted twice.
      on_node.push_back(Member("me", "train", "n1"));
      handle.snapshot_.Add(MakeNodeInfo(NodeBuilder("n1").Build(), on_node));
      Coscheduling plugin(handle, 60);
      sdk::CycleState state;
      sdk::PermitResult r = plugin.Permit(state, *sdk::PodInfo::Create(Member("me", "train")), "n1");
      EXPECT_EQ(r.status.code(), tc.want);
      EXPECT_EQ(r.timeout_ms, tc.want_timeout_ms);
      EXPECT_EQ(handle.snapshot_.index_lookups, indexed ? 1 : 0);
    }
  }
}

TEST(CoschedulingTest, LastMemberAllowsEveryWaitingMember) {
  RecordingHandle handle;
  handle.snapshot_.AddGroup(Group("train", 3));
  sdk::NodeInfo& node = handle.snapshot_.Add(MakeNodeInfo(NodeBuilder("n1").Build(), {}));
  Coscheduling plugin(handle, 60);
  sdk::CycleState state;
  // Each member is assumed (in the mirror) before the next one's Permit.
  for (const char* name : {"a", "b"}) {
    v1::Pod m = Member(name, "train");
    EXPECT_TRUE(plugin.Permit(state, *sdk::PodInfo::Create(m), "n1").status.IsWait());
    m.set_node_name("n1");
    node.AddPod(sdk::PodInfo::Create(m));
  }
  EXPECT_EQ(plugin.NumWaiting("default/train"), 2u);
  EXPECT_THAT(handle.allowed, IsEmpty());
  EXPECT_TRUE(plugin.Permit(state, *sdk::PodInfo::Create(Member("c", "train")), "n1").status.IsSuccess());
  EXPECT_THAT(handle.allowed, UnorderedElementsAre("uid-a", "uid-b"));
  EXPECT_EQ(plugin.NumWaiting("default/train"), 0u);
  // Another group's members are not counted.
  handle.snapshot_.AddGroup(Group("other", 2));
  EXPECT_TRUE(plugin.Permit(state, *sdk::PodInfo::Create(Member("x", "other")), "n1").status.IsWait());
}

// A member whose group is gone (deleted, or never created: the pod joined it
// after PreEnqueue let it in) is not placed alone.
TEST(CoschedulingTest, PermitRejectsAMemberOfAGroupNotFound) {
  RecordingHandle handle;
  handle.snapshot_.Add(MakeNodeInfo(NodeBuilder("n1").Build(), {}));
  Coscheduling plugin(handle, 60);
  sdk::CycleState state;
  sdk::PermitResult r = plugin.Permit(state, *sdk::PodInfo::Create(Member("a", "train")), "n1");
  EXPECT_EQ(r.status.code(), sdk::Code::kUnschedulable);
  EXPECT_EQ(r.status.Message(), "pod group default/train not found");
  EXPECT_EQ(plugin.NumWaiting("default/train"), 0u);
  // A pod of no group is not Coscheduling's concern.
  EXPECT_TRUE(plugin.Permit(state, *sdk::PodInfo::Create(PodBuilder("solo").Build()), "n1").status.IsSuccess());
}

TEST(CoschedulingTest, UnreserveOfOneMemberRejectsTheOthersWaiting) {
  RecordingHandle handle;
  handle.snapshot_.AddGroup(Group("train", 4));
  handle.snapshot_.Add(MakeNodeInfo(NodeBuilder("n1").Build(), {}));
  Coscheduling plugin(handle, 60);
  sdk::CycleState state;
  for (const char* name : {"a", "b", "c"}) {
    ASSERT_TRUE(plugin.Permit(state, *sdk::PodInfo::Create(Member(name, "train")), "n1").status.IsWait());
  }
  // a timed out: the scheduler unreserves it; b and c must give back their room too.
  plugin.Unreserve(state, *sdk::PodInfo::Create(Member("a", "train")), "n1");
  EXPECT_THAT(handle.rejected, UnorderedElementsAre("uid-b", "uid-c"));
  ASSERT_FALSE(handle.reasons.empty());
  EXPECT_THAT(handle.reasons[0], HasSubstr("pod group default/train: member default/a gave up its place"));
  EXPECT_EQ(plugin.NumWaiting("default/train"), 0u);
  // Their own Unreserve that follows rejects nobody else.
  plugin.Unreserve(state, *sdk::PodInfo::Create(Member("b", "train")), "n1");
  EXPECT_EQ(handle.rejected.size(), 2u);
}

TEST(CoschedulingTest, Args) {
  RecordingHandle handle;
  struct Case {
    std::string json;
    bool ok;
    std::string error;
  };
  const std::vector<Case> cases = {
      {"{}", true, ""},
      {R"({"permitWaitingTimeSeconds": 30})", true, ""},
      {R"({"permitWaitingTimeSeconds": 0})", false, "permitWaitingTimeSeconds: must be between 1 and 900"},
      {R"({"permitWaitingTimeSeconds": "x"})", false, "permitWaitingTimeSeconds"},
      {R"({"minMember": 3})", false, "minMember"},
  };
  for (const Case& tc : cases) {
    SCOPED_TRACE(tc.json);
    auto plugin = Coscheduling::New(boost::json::parse(tc.json).as_object(), handle);
    EXPECT_EQ(plugin.ok(), tc.ok);
    if (!tc.ok) {
      EXPECT_THAT(std::string(plugin.status().message()), HasSubstr(tc.error));
    }
  }
  const sdk::PluginDefinition d = Coscheduling::Definition();
  EXPECT_TRUE(d.pod_group_members_only);
  EXPECT_TRUE(d.unreserve_only);
  EXPECT_TRUE(d.mirror.pod_groups);
  EXPECT_TRUE(d.mirror.assigned_pods);
}

TEST(CoschedulingTest, QueueingHints) {
  RecordingHandle handle;
  Coscheduling plugin(handle, 60);
  auto events = plugin.EventsToRegister();
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0].resource, v1::POD_GROUP);
  ASSERT_TRUE(events[0].hint);
  v1::ClusterEvent e;
  *e.mutable_new_pod_group() = Group("train", 2);
  EXPECT_EQ(events[0].hint(Member("a", "train"), e), sdk::QueueingHint::kQueue);
  EXPECT_EQ(events[0].hint(Member("a", "other"), e), sdk::QueueingHint::kQueueSkip);
  v1::Pod elsewhere = Member("a", "train");
  elsewhere.mutable_meta()->set_namespace_("batch");
  EXPECT_EQ(events[0].hint(elsewhere, e), sdk::QueueingHint::kQueueSkip);
  EXPECT_EQ(events[1].resource, v1::POD);
  EXPECT_EQ(events[1].action_mask, static_cast<uint32_t>(v1::DELETE));
  ASSERT_TRUE(events[1].hint);
  EXPECT_EQ(events[2].resource, v1::NODE);
  ASSERT_TRUE(events[2].hint);
  // Which pod deletions and node events free room is table-tested through the
  // queue (services/scheduler/queue/default_plugin_hints_test.cc).
}

}  // namespace
}  // namespace podium::plugins
