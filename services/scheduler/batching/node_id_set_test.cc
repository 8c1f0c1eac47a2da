#include "batching/node_id_set.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <vector>

namespace podium::scheduler::batching {
namespace {

using ::testing::ElementsAre;

std::vector<uint32_t> Members(const NodeIdSet& set) { return {set.begin(), set.end()}; }

TEST(NodeIdSetTest, MembersInInsertionOrderOnceEach) {
  NodeIdSet set;
  EXPECT_TRUE(set.empty());
  EXPECT_TRUE(set.insert(70));
  EXPECT_TRUE(set.insert(3));
  EXPECT_FALSE(set.insert(70));
  EXPECT_TRUE(set.insert(200));  // Past the bitmap's first words.
  EXPECT_THAT(Members(set), ElementsAre(70, 3, 200));
  EXPECT_EQ(set.size(), 3u);
  EXPECT_TRUE(set.contains(3));
  EXPECT_TRUE(set.contains(200));
  EXPECT_FALSE(set.contains(4));
  EXPECT_FALSE(set.contains(100000));  // Beyond the bitmap: not a member.
}

TEST(NodeIdSetTest, EraseAndClear) {
  NodeIdSet set;
  for (uint32_t id : {1u, 64u, 65u, 128u}) set.insert(id);
  set.erase(64);
  set.erase(999);  // Not a member: nothing happens.
  EXPECT_THAT(Members(set), ElementsAre(1, 65, 128));
  EXPECT_FALSE(set.contains(64));
  EXPECT_TRUE(set.insert(64));  // Again, once.
  EXPECT_THAT(Members(set), ElementsAre(1, 65, 128, 64));
  set.clear();
  EXPECT_TRUE(set.empty());
  for (uint32_t id : {1u, 64u, 65u, 128u}) EXPECT_FALSE(set.contains(id)) << id;
  EXPECT_TRUE(set.insert(65));
  EXPECT_THAT(Members(set), ElementsAre(65));
}

}  // namespace
}  // namespace podium::scheduler::batching
