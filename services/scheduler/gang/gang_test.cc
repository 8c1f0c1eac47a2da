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

TEST(GangTest, CountAssignedAsksOnlyAboutTheGangsOwnPods) {
  MemberRegistry r;
  r.Set(Member("a", "train"), true);
  r.Set(Member("b", "train"), true);
  r.Set(Member("c", "train"), true);
  r.Set(Member("d", "train", "web"), true);
  r.Set(Member("e", "other"), true);
  std::vector<std::string> asked;
  auto on_node = [&](std::string_view uid) {
    asked.emplace_back(uid);
    return uid == "a" || uid == "c" || uid == "d";
  };
  EXPECT_EQ(r.CountAssigned("batch", "train", on_node), 2u);
  EXPECT_THAT(asked, testing::UnorderedElementsAre("a", "b", "c"));
  asked.clear();
  EXPECT_EQ(r.CountAssigned("web", "train", on_node), 1u);
  EXPECT_EQ(r.CountAssigned("batch", "nowhere", on_node), 0u);
  EXPECT_THAT(asked, testing::ElementsAre("d"));
}

}  // namespace
}  // namespace podium::scheduler::gang
