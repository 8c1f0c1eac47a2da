#include "gang/gang.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace podium::scheduler::gang {
namespace {

v1::PodGroup Group(int32_t min) {
  v1::PodGroup g;
  g.mutable_meta()->set_namespace_("batch");
  g.mutable_meta()->set_name("train");
  g.set_min_member(min);
  return g;
}

v1::Pod Member(std::string uid, std::string group, std::string ns = "batch") {
  v1::Pod p;
  p.mutable_meta()->set_uid(uid);
  p.mutable_meta()->set_name(uid);
  p.mutable_meta()->set_namespace_(ns);
  p.set_pod_group(group);
  return p;
}

TEST(GangTest, Satisfied) {
  struct Case {
    int32_t min;
    size_t placed, assigned;
    bool want;
  };
  for (const Case& tc : std::vector<Case>{{8, 7, 0, false}, {8, 8, 0, true}, {8, 3, 5, true}, {8, 0, 7, false},
                                          {0, 0, 0, false}, {0, 1, 0, true}, {1, 1, 0, true}}) {
    EXPECT_EQ(Satisfied(Group(tc.min), tc.placed, tc.assigned), tc.want)
        << tc.min << " " << tc.placed << " " << tc.assigned;
  }
}

TEST(GangTest, UnfitMessageSaysWhyNoneIsBound) {
  PassOutcome o{.members = 8, .placed = 7, .assigned = 0, .failed_pod = "batch/train-7",
                .failed_message = "0/7 nodes are available: 7 Insufficient cpu."};
  EXPECT_EQ(UnfitMessage(Group(8), o),
            "pod group batch/train (minMember 8): only 7 of 8 members can be placed together, so none is bound; "
            "batch/train-7: 0/7 nodes are available: 7 Insufficient cpu.");
  PassOutcome few{.members = 3, .placed = 0, .assigned = 2, .failed_pod = "", .failed_message = ""};
  EXPECT_EQ(UnfitMessage(Group(8), few),
            "pod group batch/train (minMember 8): only 5 of 8 members are pending or placed, so none is bound");
}

TEST(GangTest, GroupKeyAndSameGroup) {
  EXPECT_EQ(GroupKey(Member("a", "train")), "batch/train");
  EXPECT_EQ(GroupKey(Member("a", "")), "");
  EXPECT_TRUE(SameGroup(Member("a", "train"), Member("b", "train")));
  EXPECT_FALSE(SameGroup(Member("a", "train"), Member("b", "train", "web")));
  EXPECT_FALSE(SameGroup(Member("a", ""), Member("b", "")));
}

TEST(GangTest, MemberRegistryCountsPodsNamingEachGroup) {
  MemberRegistry r;
  r.Set(Member("a", "train"), true);
  r.Set(Member("b", "train"), true);
  r.Set(Member("b", "train"), true);  // An update: still one pod.
  r.Set(Member("c", "train", "web"), true);
  r.Set(Member("d", ""), true);  // Not a member of anything.
  EXPECT_EQ(r.Count("batch", "train"), 2u);
  EXPECT_EQ(r.Count("web", "train"), 1u);
  r.Set(Member("a", "train"), false);
  r.Set(Member("zzz", "train"), false);  // Unknown: nothing happens.
  EXPECT_EQ(r.Count("batch", "train"), 1u);
  r.Set(Member("b", "train"), false);
  EXPECT_EQ(r.Count("batch", "train"), 0u);
}

TEST(GangTest, AssignedMembersCountsBoundAndAssumedPodsOfTheGroup) {
  class OneNode : public sdk::Snapshot {
   public:
    OneNode() : info_(1, std::make_shared<const v1::Node>()) { nodes_.push_back(&info_); }
    sdk::NodeInfo info_;
    std::vector<const sdk::NodeInfo*> nodes_;
    const std::vector<const sdk::NodeInfo*>& Nodes() const override { return nodes_; }
    const sdk::NodeInfo* Get(std::string_view) const override { return &info_; }
    const sdk::NodeInfo* GetById(uint32_t) const override { return &info_; }
    size_t NumNodes() const override { return 1; }
  } snapshot;
  snapshot.info_.AddPod(sdk::PodInfo::Create(Member("a", "train")));
  snapshot.info_.AddPod(sdk::PodInfo::Create(Member("b", "train")));
  snapshot.info_.AddPod(sdk::PodInfo::Create(Member("c", "train", "web")));
  snapshot.info_.AddPod(sdk::PodInfo::Create(Member("d", "")));
  EXPECT_EQ(AssignedMembers(snapshot, "batch", "train"), 2u);
  EXPECT_EQ(AssignedMembers(snapshot, "web", "train"), 1u);
  EXPECT_EQ(AssignedMembers(snapshot, "batch", "other"), 0u);
}

}  // namespace
}  // namespace podium::scheduler::gang
