#include "batching/node_id_set.h"

#include "batching/node_id_map.h"

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

TEST(NodeIdMapTest, PutFindEraseAndVisitInIdOrder) {
  NodeIdMap<int> map;
  EXPECT_TRUE(map.empty());
  EXPECT_EQ(map.Find(7), nullptr);
  map.Put(7, 70);
  map.Put(2, 20);
  map.Put(300, 3000);  // Grows.
  map.Put(7, 71);      // Replaces.
  EXPECT_EQ(map.size(), 3u);
  ASSERT_NE(map.Find(7), nullptr);
  EXPECT_EQ(*map.Find(7), 71);
  *map.Find(2) = 21;
  std::vector<std::pair<uint32_t, int>> seen;
  map.ForEach([&](uint32_t id, const int& v) { seen.emplace_back(id, v); });
  EXPECT_THAT(seen, ElementsAre(std::pair(2u, 21), std::pair(7u, 71), std::pair(300u, 3000)));
  map.Erase(7);
  map.Erase(8);  // Absent: nothing happens.
  EXPECT_EQ(map.size(), 2u);
  EXPECT_FALSE(map.Has(7));
  EXPECT_EQ(map.Find(100000), nullptr);
  map.Clear();
  EXPECT_TRUE(map.empty());
  EXPECT_FALSE(map.Has(2));
}

}  // namespace
}  // namespace podium::scheduler::batching
