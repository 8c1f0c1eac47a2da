#include "diagnosis_store.h"

#include "gtest/gtest.h"

namespace podium::scheduler {
namespace {

v1::Pod Pod(const std::string& name) {
  v1::Pod pod;
  pod.mutable_meta()->set_namespace_("default");
  pod.mutable_meta()->set_name(name);
  pod.mutable_meta()->set_uid("uid-" + name);
  return pod;
}

// A diagnosis as a 1 000-node cluster gives it: a status per node.
Diagnosis Rejected(int nodes) {
  Diagnosis d;
  d.num_all_nodes = nodes;
  for (int i = 0; i < nodes; ++i) {
    d.node_statuses.emplace_back("node-" + std::to_string(i),
                                 MakeSharedStatus(sdk::Status(sdk::Code::kUnschedulable,
                                                              i % 2 ? "Insufficient cpu" : "node(s) had untolerated taint")));
  }
  return d;
}

TEST(DiagnosisStoreTest, KeepsCountsPerReasonAndABoundedSample) {
  DiagnosisStore store;
  store.RecordUnschedulable(Pod("big"), Rejected(1000), "0/1000 nodes are available: ...");
  auto d = store.Find("default", "big");
  ASSERT_TRUE(d);
  EXPECT_EQ(d->num_all_nodes, 1000u);
  EXPECT_EQ(d->sample.size(), 20u);
  ASSERT_EQ(d->reason_counts.size(), 2u);
  EXPECT_EQ(d->reason_counts[0], std::make_pair(std::string("Insufficient cpu"), 500u));
  EXPECT_EQ(d->reason_counts[1], std::make_pair(std::string("node(s) had untolerated taint"), 500u));
  // A few KB, not a status per node.
  EXPECT_LT(store.bytes(), 8u << 10);
}

TEST(DiagnosisStoreTest, StaysWithinItsMemoryBoundDroppingTheOldest) {
  DiagnosisStore store({.max_sample_nodes = 20, .max_message_bytes = 4096, .max_bytes = 64 << 10});
  for (int i = 0; i < 1000; ++i) {
    store.RecordUnschedulable(Pod("pod-" + std::to_string(i)), Rejected(1000), "0/1000 nodes are available");
  }
  EXPECT_LE(store.bytes(), 64u << 10);
  EXPECT_GT(store.size(), 0u);
  EXPECT_LT(store.size(), 1000u);
  EXPECT_FALSE(store.Find("default", "pod-0"));
  EXPECT_TRUE(store.Find("default", "pod-999"));
}

TEST(DiagnosisStoreTest, EraseFreesTheEntryAndAnErrorIsAnError) {
  DiagnosisStore store;
  store.RecordError(Pod("web"), "plugin endpoint host timed out");
  auto d = store.Find("default", "web");
  ASSERT_TRUE(d);
  EXPECT_TRUE(d->error);
  store.Erase("uid-web");
  EXPECT_FALSE(store.Find("default", "web"));
  EXPECT_EQ(store.size(), 0u);
  EXPECT_EQ(store.bytes(), 0u);
}

TEST(DiagnosisStoreTest, AMessageIsTruncated) {
  DiagnosisStore store({.max_sample_nodes = 20, .max_message_bytes = 16, .max_bytes = 1 << 20});
  store.RecordError(Pod("web"), std::string(10000, 'x'));
  EXPECT_LE(store.Find("default", "web")->message.size(), 19u);
}

}  // namespace
}  // namespace podium::scheduler
