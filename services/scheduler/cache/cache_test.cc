#include "cache/cache.h"

#include <algorithm>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace podium::scheduler {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::UnorderedElementsAre;

v1::Node MakeNode(const std::string& name, int64_t milli_cpu = 4000, std::string label = "") {
  v1::Node node;
  node.mutable_meta()->set_name(name);
  node.mutable_meta()->set_uid("node-" + name);
  node.mutable_allocatable()->set_milli_cpu(milli_cpu);
  node.mutable_allocatable()->set_memory_bytes(8LL << 30);
  node.mutable_allocatable()->set_pods(110);
  if (!label.empty()) (*node.mutable_meta()->mutable_labels())["l"] = label;
  return node;
}

v1::Pod MakePod(const std::string& uid, const std::string& node_name, int64_t milli_cpu = 100) {
  v1::Pod pod;
  pod.mutable_meta()->set_uid(uid);
  pod.mutable_meta()->set_namespace_("default");
  pod.mutable_meta()->set_name("pod-" + uid);
  pod.set_node_name(node_name);
  auto* c = pod.add_containers();
  c->set_name("c");
  c->mutable_requests()->set_milli_cpu(milli_cpu);
  return pod;
}

sdk::PodInfoPtr PendingPod(const std::string& uid, int64_t milli_cpu = 100) {
  return sdk::PodInfo::Create(MakePod(uid, "", milli_cpu));
}

std::vector<std::string> NodeNames(const Snapshot& s) {
  std::vector<std::string> names;
  for (const sdk::NodeInfo* n : s.Nodes()) names.push_back(n->name());
  return names;
}

// A mirror connected at position 0: the delta log keeps every entry for it.
void HoldDeltaLog(Cache& cache) {
  static const int reader = 0;
  cache.SetMirrorPosition(&reader, 0);
}

std::vector<uint32_t> UpsertedNodeIds(const v1::StateDelta& d) {
  std::vector<uint32_t> ids;
  for (const auto& n : d.node_upserts()) ids.push_back(n.id());
  return ids;
}

std::vector<std::string> UpsertedPodUids(const v1::StateDelta& d) {
  std::vector<std::string> uids;
  for (const auto& p : d.pod_upserts()) uids.push_back(p.pod().meta().uid());
  return uids;
}

TEST(CacheTest, NodeIdsAreAssignedOnFirstAddAndNeverReused) {
  Cache cache;
  EXPECT_EQ(cache.AddOrUpdateNode(MakeNode("a")), 1u);
  EXPECT_EQ(cache.AddOrUpdateNode(MakeNode("b")), 2u);
  EXPECT_EQ(cache.AddOrUpdateNode(MakeNode("a", 8000)), 1u);  // Update keeps the id.
  ASSERT_TRUE(cache.RemoveNode("a").ok());
  EXPECT_EQ(cache.NodeId("a"), std::nullopt);
  EXPECT_EQ(cache.AddOrUpdateNode(MakeNode("a")), 3u);
  EXPECT_EQ(cache.NodeId("a"), 3u);
  EXPECT_EQ(cache.NumNodes(), 2u);
  EXPECT_EQ(cache.RemoveNode("zzz").code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(cache.AddOrUpdateNode(v1::Node()), 0u);  // No name: rejected.
  EXPECT_EQ(cache.NumNodes(), 2u);
}

TEST(CacheTest, AssumeConfirmForget) {
  Cache cache;
  cache.AddOrUpdateNode(MakeNode("n1"));
  cache.AddOrUpdateNode(MakeNode("n2"));

  auto pod = PendingPod("p1", 500);
  ASSERT_TRUE(cache.AssumePod(pod, "n1").ok());
  EXPECT_TRUE(cache.IsAssumed("p1"));
  EXPECT_EQ(cache.NumAssumedPods(), 1u);
  EXPECT_THAT(cache.AssumedUids(), ::testing::UnorderedElementsAre("p1"));
  EXPECT_EQ(cache.GetPod("p1")->pod->node_name(), "n1");
  EXPECT_EQ(pod->pod->node_name(), "");  // The caller's pod is untouched.
  // Already in the cache.
  EXPECT_EQ(cache.AssumePod(pod, "n2").code(), absl::StatusCode::kAlreadyExists);
  // Unknown node.
  EXPECT_EQ(cache.AssumePod(PendingPod("p2"), "nope").code(), absl::StatusCode::kNotFound);

  Snapshot snap;
  cache.UpdateSnapshot(snap);
  EXPECT_EQ(snap.Get("n1")->requested().milli_cpu, 500);

  // Confirmed by the watch ("added after assume").
  ASSERT_TRUE(cache.AddOrUpdatePod(MakePod("p1", "n1", 500)).ok());
  EXPECT_FALSE(cache.IsAssumed("p1"));
  EXPECT_EQ(cache.NumAssumedPods(), 0u);
  EXPECT_TRUE(cache.AssumedUids().empty());
  EXPECT_EQ(cache.ForgetPod("p1").code(), absl::StatusCode::kFailedPrecondition);
  cache.UpdateSnapshot(snap);
  EXPECT_EQ(snap.Get("n1")->requested().milli_cpu, 500);
  EXPECT_EQ(snap.Get("n1")->pods().size(), 1u);

  // Assume then forget: resources come back.
  ASSERT_TRUE(cache.AssumePod(PendingPod("p3", 700), "n2").ok());
  EXPECT_THAT(cache.AssumedUids(), ::testing::UnorderedElementsAre("p3"));
  cache.UpdateSnapshot(snap);
  EXPECT_EQ(snap.Get("n2")->requested().milli_cpu, 700);
  ASSERT_TRUE(cache.ForgetPod("p3").ok());
  EXPECT_FALSE(cache.IsAssumed("p3"));
  EXPECT_TRUE(cache.AssumedUids().empty());
  EXPECT_EQ(cache.GetPod("p3"), nullptr);
  cache.UpdateSnapshot(snap);
  EXPECT_EQ(snap.Get("n2")->requested().milli_cpu, 0);
  EXPECT_EQ(cache.ForgetPod("p3").code(), absl::StatusCode::kNotFound);
}

TEST(CacheTest, AConfirmationThatChangesNothingKeepsTheNodesChangeGeneration) {
  Cache cache;
  const uint32_t n1 = cache.AddOrUpdateNode(MakeNode("n1"));
  Snapshot snapshot;
  cache.UpdateSnapshot(snapshot);
  const uint64_t added = snapshot.NodeChangeGeneration(n1);
  EXPECT_GT(added, 0u);
  Cache::AssumedAt at;
  ASSERT_TRUE(cache.AssumePod(PendingPod("p1", 500), "n1", &at).ok());
  EXPECT_EQ(at.node_id, n1);
  EXPECT_EQ(at.change_generation_before, added);
  EXPECT_GT(at.change_generation_after, added);
  cache.UpdateSnapshot(snapshot);
  EXPECT_EQ(snapshot.NodeChangeGeneration(n1), at.change_generation_after);
  // The binding's marks: a new resourceVersion, PodScheduled=True and the
  // kubelet's status.startTime (podium-sim sets it with the bind; counting
  // it as a change cost batching every hit, basic-5000 ~26 000 -> ~9 000
  // pods/s). The node is copied again (it changed for the mirror) but not
  // for any plugin.
  v1::Pod bound = MakePod("p1", "n1", 500);
  bound.mutable_meta()->set_resource_version("7");
  bound.set_start_time_us(1'700'000'000'000'000);
  v1::PodCondition* scheduled = bound.add_conditions();
  scheduled->set_type("PodScheduled");
  scheduled->set_status("True");
  ASSERT_TRUE(cache.AddOrUpdatePod(bound).ok());
  cache.UpdateSnapshot(snapshot);
  EXPECT_EQ(snapshot.last_update_changed(), std::vector<uint32_t>{n1});
  EXPECT_EQ(snapshot.NodeChangeGeneration(n1), at.change_generation_after);
  // Any other update of the pod moves it.
  bound.mutable_meta()->set_resource_version("8");
  (*bound.mutable_meta()->mutable_labels())["tier"] = "web";
  ASSERT_TRUE(cache.AddOrUpdatePod(bound).ok());
  cache.UpdateSnapshot(snapshot);
  EXPECT_GT(snapshot.NodeChangeGeneration(n1), at.change_generation_after);
}

TEST(CacheTest, AConfirmationWithOtherRequestsMovesTheNodesChangeGeneration) {
  Cache cache;
  const uint32_t n1 = cache.AddOrUpdateNode(MakeNode("n1"));
  Cache::AssumedAt at;
  ASSERT_TRUE(cache.AssumePod(PendingPod("p1", 500), "n1", &at).ok());
  ASSERT_TRUE(cache.AddOrUpdatePod(MakePod("p1", "n1", 700)).ok());
  Snapshot snapshot;
  cache.UpdateSnapshot(snapshot);
  EXPECT_GT(snapshot.NodeChangeGeneration(n1), at.change_generation_after);
}

TEST(CacheTest, AssumedPodConfirmedOnAnotherNodeMoves) {
  Cache cache;
  cache.AddOrUpdateNode(MakeNode("n1"));
  cache.AddOrUpdateNode(MakeNode("n2"));
  ASSERT_TRUE(cache.AssumePod(PendingPod("p", 300), "n1").ok());
  ASSERT_TRUE(cache.AddOrUpdatePod(MakePod("p", "n2", 300)).ok());
  Snapshot snap;
  cache.UpdateSnapshot(snap);
  EXPECT_EQ(snap.Get("n1")->requested().milli_cpu, 0);
  EXPECT_EQ(snap.Get("n2")->requested().milli_cpu, 300);
}

TEST(CacheTest, PodWithoutNodeNameIsRejected) {
  Cache cache;
  EXPECT_EQ(cache.AddOrUpdatePod(MakePod("p", "")).code(), absl::StatusCode::kInvalidArgument);
}

TEST(CacheTest, GhostPodsAreCountedWhenTheNodeArrives) {
  Cache cache;
  ASSERT_TRUE(cache.AddOrUpdatePod(MakePod("p1", "late", 250)).ok());
  EXPECT_EQ(cache.NumPods(), 1u);
  EXPECT_EQ(cache.NumNodes(), 0u);
  Snapshot snap;
  cache.UpdateSnapshot(snap);
  EXPECT_EQ(snap.NumNodes(), 0u);  // Ghosts are not schedulable nodes.

  cache.AddOrUpdateNode(MakeNode("late"));
  cache.UpdateSnapshot(snap);
  ASSERT_EQ(snap.NumNodes(), 1u);
  EXPECT_EQ(snap.Get("late")->requested().milli_cpu, 250);
  EXPECT_EQ(snap.Get("late")->pods().size(), 1u);

  // Node removed with its pod still there: a ghost again, gone from the snapshot.
  ASSERT_TRUE(cache.RemoveNode("late").ok());
  cache.UpdateSnapshot(snap);
  EXPECT_EQ(snap.NumNodes(), 0u);
  EXPECT_EQ(cache.NumPods(), 1u);
  Cache::Dumped dump = cache.Dump(true);
  ASSERT_EQ(dump.nodes.size(), 1u);
  EXPECT_EQ(dump.nodes[0].name, "late");
  EXPECT_FALSE(dump.nodes[0].allocatable.has_value());
  EXPECT_EQ(dump.nodes[0].requested.milli_cpu, 250);

  // The last pod goes: the ghost goes.
  ASSERT_TRUE(cache.RemovePod("p1").ok());
  EXPECT_TRUE(cache.Dump(true).nodes.empty());
  EXPECT_EQ(cache.RemovePod("p1").code(), absl::StatusCode::kNotFound);
}

TEST(CacheTest, SnapshotCopiesOnlyChangedNodes) {
  Cache cache;
  for (int i = 0; i < 5; ++i) cache.AddOrUpdateNode(MakeNode("n" + std::to_string(i)));
  Snapshot snap;
  cache.UpdateSnapshot(snap);
  EXPECT_EQ(snap.last_update_copied(), 5u);
  EXPECT_THAT(NodeNames(snap), ElementsAre("n0", "n1", "n2", "n3", "n4"));
  const sdk::NodeInfo* n2 = snap.Get("n2");
  const sdk::NodeInfo* n3 = snap.Get("n3");

  cache.UpdateSnapshot(snap);
  EXPECT_EQ(snap.last_update_copied(), 0u);

  ASSERT_TRUE(cache.AddOrUpdatePod(MakePod("p", "n2", 100)).ok());
  cache.UpdateSnapshot(snap);
  EXPECT_EQ(snap.last_update_copied(), 1u);
  EXPECT_EQ(snap.Get("n2"), n2);  // Updated in place.
  EXPECT_EQ(n2->requested().milli_cpu, 100);
  EXPECT_EQ(snap.Get("n3"), n3);

  cache.AddOrUpdateNode(MakeNode("n3", 9000));
  cache.AddOrUpdateNode(MakeNode("n4", 9000));
  cache.UpdateSnapshot(snap);
  EXPECT_EQ(snap.last_update_copied(), 2u);
  EXPECT_EQ(n3->allocatable().milli_cpu, 9000);
  EXPECT_EQ(snap.GetById(4), n3);
  EXPECT_GT(snap.generation(), 0u);
}

TEST(CacheTest, SnapshotHandlesRemovalsAndReAddsInIdOrder) {
  Cache cache;
  cache.AddOrUpdateNode(MakeNode("a"));  // 1
  cache.AddOrUpdateNode(MakeNode("b"));  // 2
  cache.AddOrUpdateNode(MakeNode("c"));  // 3
  Snapshot snap;
  cache.UpdateSnapshot(snap);
  ASSERT_TRUE(cache.RemoveNode("b").ok());
  cache.UpdateSnapshot(snap);
  EXPECT_THAT(NodeNames(snap), ElementsAre("a", "c"));
  EXPECT_EQ(snap.Get("b"), nullptr);
  EXPECT_EQ(snap.GetById(2), nullptr);
  EXPECT_EQ(snap.last_update_copied(), 0u);

  cache.AddOrUpdateNode(MakeNode("b"));  // 4: last in id order.
  cache.UpdateSnapshot(snap);
  EXPECT_THAT(NodeNames(snap), ElementsAre("a", "c", "b"));
  EXPECT_EQ(snap.Get("b")->id(), 4u);
  EXPECT_EQ(snap.last_update_copied(), 1u);

  // Removed and re-added between two updates.
  ASSERT_TRUE(cache.RemoveNode("a").ok());
  cache.AddOrUpdateNode(MakeNode("a"));  // 5
  cache.UpdateSnapshot(snap);
  EXPECT_THAT(NodeNames(snap), ElementsAre("c", "b", "a"));
  EXPECT_EQ(snap.GetById(1), nullptr);
  EXPECT_EQ(snap.Get("a")->id(), 5u);
}

TEST(CacheTest, SnapshotRecordsDeltaSeq) {
  Cache cache;
  cache.AddOrUpdateNode(MakeNode("a"));
  Snapshot snap;
  cache.UpdateSnapshot(snap);
  EXPECT_EQ(snap.delta_seq(), cache.delta_seq());
  EXPECT_EQ(snap.delta_seq(), 1u);
  ASSERT_TRUE(cache.AddOrUpdatePod(MakePod("p", "a")).ok());
  EXPECT_EQ(cache.delta_seq(), 2u);
  EXPECT_EQ(snap.delta_seq(), 1u);
}

TEST(CacheTest, DeltaCoalescesToNetEffect) {
  Cache cache;
  HoldDeltaLog(cache);
  cache.AddOrUpdateNode(MakeNode("a", 1000));
  cache.AddOrUpdateNode(MakeNode("a", 2000));
  cache.AddOrUpdateNode(MakeNode("b"));
  ASSERT_TRUE(cache.AddOrUpdatePod(MakePod("p1", "a")).ok());
  ASSERT_TRUE(cache.AddOrUpdatePod(MakePod("p2", "b")).ok());
  ASSERT_TRUE(cache.RemovePod("p2").ok());  // Added and removed: nothing.
  ASSERT_TRUE(cache.AssumePod(PendingPod("p3"), "b").ok());

  v1::StateDelta d;
  uint64_t seq = cache.ReadDelta(0, cache.delta_seq(), &d);
  EXPECT_EQ(seq, cache.delta_seq());
  EXPECT_EQ(d.generation(), seq);
  EXPECT_FALSE(d.reset());
  EXPECT_THAT(UpsertedNodeIds(d), ElementsAre(1, 2));
  EXPECT_EQ(d.node_upserts(0).node().allocatable().milli_cpu(), 2000);  // Final state.
  EXPECT_THAT(d.node_removals(), IsEmpty());
  EXPECT_THAT(UpsertedPodUids(d), ElementsAre("p1", "p3"));
  EXPECT_THAT(d.pod_removals(), IsEmpty());
  EXPECT_EQ(d.pod_upserts(0).node_id(), 1u);
  EXPECT_FALSE(d.pod_upserts(0).assumed());
  EXPECT_EQ(d.pod_upserts(1).node_id(), 2u);
  EXPECT_TRUE(d.pod_upserts(1).assumed());
  EXPECT_EQ(d.pod_upserts(1).pod().node_name(), "b");

  // Next delta: pod removed then re-added comes out as an upsert; a node
  // removed and re-added is a removal of the old id and an upsert of the new.
  ASSERT_TRUE(cache.RemovePod("p1").ok());
  ASSERT_TRUE(cache.AddOrUpdatePod(MakePod("p1", "a", 900)).ok());
  ASSERT_TRUE(cache.RemoveNode("b").ok());
  cache.AddOrUpdateNode(MakeNode("b"));
  ASSERT_TRUE(cache.ForgetPod("p3").ok());  // p3 sat on the old b: removed.
  uint64_t seq2 = cache.ReadDelta(seq, cache.delta_seq(), &d);
  EXPECT_EQ(seq2, cache.delta_seq());
  EXPECT_THAT(d.node_removals(), ElementsAre(2));
  EXPECT_THAT(UpsertedNodeIds(d), ElementsAre(3));
  EXPECT_THAT(d.pod_removals(), ElementsAre("p3"));
  EXPECT_THAT(UpsertedPodUids(d), ElementsAre("p1"));
  EXPECT_EQ(d.pod_upserts(0).pod().containers(0).requests().milli_cpu(), 900);

  // Empty range.
  EXPECT_EQ(cache.ReadDelta(seq2, seq2, &d), seq2);
  EXPECT_EQ(d.node_upserts_size() + d.pod_upserts_size() + d.node_removals_size(), 0);
}

TEST(CacheTest, DeltaMovesPodsWithTheirNode) {
  Cache cache;
  HoldDeltaLog(cache);
  cache.AddOrUpdateNode(MakeNode("a"));  // 1
  ASSERT_TRUE(cache.AddOrUpdatePod(MakePod("p", "a")).ok());
  uint64_t seq = cache.delta_seq();
  ASSERT_TRUE(cache.RemoveNode("a").ok());  // p becomes a ghost pod.
  v1::StateDelta d;
  seq = cache.ReadDelta(seq, cache.delta_seq(), &d);
  EXPECT_THAT(d.node_removals(), ElementsAre(1));
  EXPECT_THAT(d.pod_removals(), ElementsAre("p"));

  cache.AddOrUpdateNode(MakeNode("a"));  // 2: p visible again.
  cache.ReadDelta(seq, cache.delta_seq(), &d);
  EXPECT_THAT(UpsertedNodeIds(d), ElementsAre(2));
  ASSERT_THAT(UpsertedPodUids(d), ElementsAre("p"));
  EXPECT_EQ(d.pod_upserts(0).node_id(), 2u);

  // Across both changes at once: removal from old node 1, upsert on node 2.
  cache.ReadDelta(1 /* after node 1 added */ + 1 /* after p added */, cache.delta_seq(), &d);
  EXPECT_THAT(d.node_removals(), ElementsAre(1));
  EXPECT_THAT(UpsertedNodeIds(d), ElementsAre(2));
  EXPECT_THAT(d.pod_removals(), ElementsAre("p"));
  EXPECT_THAT(UpsertedPodUids(d), ElementsAre("p"));
}

TEST(CacheTest, DeltaUpToAnOlderPosition) {
  Cache cache;
  HoldDeltaLog(cache);
  cache.AddOrUpdateNode(MakeNode("a"));
  Snapshot snap;
  cache.UpdateSnapshot(snap);
  cache.AddOrUpdateNode(MakeNode("b"));  // After the snapshot.
  v1::StateDelta d;
  EXPECT_EQ(cache.ReadDelta(0, snap.delta_seq(), &d), snap.delta_seq());
  EXPECT_THAT(UpsertedNodeIds(d), ElementsAre(1));
}

TEST(CacheTest, TrimmedLogGivesResetAtTheRequestedPosition) {
  Cache cache;
  HoldDeltaLog(cache);
  cache.AddOrUpdateNode(MakeNode("a"));                       // 1
  cache.AddOrUpdateNode(MakeNode("b"));                       // 2
  ASSERT_TRUE(cache.AddOrUpdatePod(MakePod("p1", "a")).ok());  // 3
  cache.TrimDeltaLog(2);
  EXPECT_EQ(cache.delta_log_size(), 1u);
  const uint64_t snapshot_seq = cache.delta_seq();            // 3
  // Changes after the snapshot the cycle uses.
  cache.AddOrUpdateNode(MakeNode("c"));                        // 4
  ASSERT_TRUE(cache.RemoveNode("b").ok());                     // 5
  cache.AddOrUpdateNode(MakeNode("a", 1));                     // 6
  ASSERT_TRUE(cache.AddOrUpdatePod(MakePod("p2", "a")).ok());  // 7
  ASSERT_TRUE(cache.RemovePod("p1").ok());                     // 8

  v1::StateDelta d;
  // A reader at 1 needs entry 2, which is gone: full state at 3.
  EXPECT_EQ(cache.ReadDelta(1, snapshot_seq, &d), snapshot_seq);
  EXPECT_TRUE(d.reset());
  EXPECT_EQ(d.generation(), snapshot_seq);
  EXPECT_THAT(UpsertedNodeIds(d), ElementsAre(1, 2));
  EXPECT_EQ(d.node_upserts(0).node().allocatable().milli_cpu(), 4000);
  EXPECT_THAT(UpsertedPodUids(d), ElementsAre("p1"));

  // A reader at 2 still gets a plain delta.
  EXPECT_EQ(cache.ReadDelta(2, snapshot_seq, &d), snapshot_seq);
  EXPECT_FALSE(d.reset());
  EXPECT_THAT(UpsertedPodUids(d), ElementsAre("p1"));

  // Full current state.
  EXPECT_EQ(cache.FullState(&d), 8u);
  EXPECT_TRUE(d.reset());
  EXPECT_THAT(UpsertedNodeIds(d), ElementsAre(1, 3));
  EXPECT_THAT(UpsertedPodUids(d), ElementsAre("p2"));
}

TEST(CacheTest, LogIsCappedByOptions) {
  Cache cache(Cache::Options{.max_delta_log_entries = 3});
  HoldDeltaLog(cache);
  for (int i = 0; i < 10; ++i) cache.AddOrUpdateNode(MakeNode("n" + std::to_string(i)));
  EXPECT_EQ(cache.delta_log_size(), 3u);
  v1::StateDelta d;
  EXPECT_EQ(cache.ReadDelta(0, 10, &d), 10u);
  EXPECT_TRUE(d.reset());
  EXPECT_EQ(d.node_upserts_size(), 10);
  EXPECT_EQ(cache.ReadDelta(7, 10, &d), 10u);
  EXPECT_FALSE(d.reset());
  EXPECT_THAT(UpsertedNodeIds(d), ElementsAre(8, 9, 10));
}

TEST(CacheTest, PdbsAndPodGroupsAreMirrored) {
  Cache cache;
  HoldDeltaLog(cache);
  v1::PodDisruptionBudget pdb;
  pdb.mutable_meta()->set_uid("pdb1");
  pdb.set_disruptions_allowed(1);
  ASSERT_TRUE(cache.AddOrUpdatePdb(pdb).ok());
  v1::PodGroup group;
  group.mutable_meta()->set_uid("g1");
  group.mutable_meta()->set_namespace_("ns");
  group.mutable_meta()->set_name("gang");
  group.set_min_member(3);
  ASSERT_TRUE(cache.AddOrUpdatePodGroup(group).ok());
  EXPECT_EQ(cache.GetPodGroup("ns", "gang")->min_member(), 3);
  EXPECT_EQ(cache.GetPodGroup("ns", "other"), nullptr);
  EXPECT_EQ(cache.ListPdbs().size(), 1u);
  EXPECT_EQ(cache.AddOrUpdatePdb(v1::PodDisruptionBudget()).code(),
            absl::StatusCode::kInvalidArgument);

  v1::StateDelta d;
  uint64_t seq = cache.ReadDelta(0, cache.delta_seq(), &d);
  ASSERT_EQ(d.pdb_upserts_size(), 1);
  EXPECT_EQ(d.pdb_upserts(0).disruptions_allowed(), 1);
  ASSERT_EQ(d.pod_group_upserts_size(), 1);

  pdb.set_disruptions_allowed(0);
  ASSERT_TRUE(cache.AddOrUpdatePdb(pdb).ok());
  ASSERT_TRUE(cache.RemovePodGroup("g1").ok());
  EXPECT_EQ(cache.RemovePodGroup("g1").code(), absl::StatusCode::kNotFound);
  const uint64_t mid = cache.delta_seq();
  ASSERT_TRUE(cache.RemovePdb("pdb1").ok());
  cache.ReadDelta(seq, mid, &d);
  ASSERT_EQ(d.pdb_upserts_size(), 1);
  EXPECT_EQ(d.pdb_upserts(0).disruptions_allowed(), 0);
  EXPECT_THAT(d.pod_group_removals(), ElementsAre("g1"));

  // Full state at `mid` rolls the later PDB removal back.
  cache.TrimDeltaLog(mid);
  cache.ReadDelta(0, mid, &d);
  EXPECT_TRUE(d.reset());
  ASSERT_EQ(d.pdb_upserts_size(), 1);
  EXPECT_EQ(d.pod_group_upserts_size(), 0);
  cache.FullState(&d);
  EXPECT_EQ(d.pdb_upserts_size(), 0);
}

// Nominations travel as deltas to mirrors that keep them (preempt-500 used
// to carry every nominated pod in every cycle request).
TEST(CacheTest, NominationsAreMirroredAsTheirLatestState) {
  Cache cache;
  HoldDeltaLog(cache);
  auto nominated = [](const std::string& uid, const std::string& node) {
    auto pod = std::make_shared<v1::Pod>();
    pod->mutable_meta()->set_uid(uid);
    pod->set_nominated_node_name(node);
    return pod;
  };
  cache.SetNomination("p1", nominated("p1", "n1"));
  cache.SetNomination("p2", nominated("p2", "n2"));
  v1::StateDelta d;
  const uint64_t seq = cache.ReadDelta(0, cache.delta_seq(), &d);
  ASSERT_EQ(d.nominated_pod_upserts_size(), 2);
  EXPECT_EQ(d.nominated_pod_upserts(0).nominated_node_name(), "n1");

  // Moved, then cleared: the latest state of each. p3 came and went within
  // the range and is still removed (a reset may have carried it).
  cache.SetNomination("p1", nominated("p1", "n3"));
  cache.SetNomination("p2", nullptr);
  cache.SetNomination("p3", nominated("p3", "n1"));
  cache.SetNomination("p3", nullptr);
  const uint64_t before_noop = cache.delta_seq();
  cache.SetNomination("never", nullptr);  // Nothing to clear: not logged.
  EXPECT_EQ(cache.delta_seq(), before_noop);
  cache.ReadDelta(seq, cache.delta_seq(), &d);
  ASSERT_EQ(d.nominated_pod_upserts_size(), 1);
  EXPECT_EQ(d.nominated_pod_upserts(0).nominated_node_name(), "n3");
  EXPECT_THAT(d.nominated_pod_removals(), ElementsAre("p2", "p3"));

  v1::StateDelta full;
  cache.AddNominations(&full);
  ASSERT_EQ(full.nominated_pod_upserts_size(), 1);
  EXPECT_EQ(full.nominated_pod_upserts(0).meta().uid(), "p1");
  cache.FullState(&full);
  EXPECT_EQ(full.nominated_pod_upserts_size(), 1);
}

// The log holds what the slowest connected mirror needs, and nothing when no
// mirror is connected (it used to grow to its cap).
TEST(CacheTest, DeltaLogKeepsOnlyWhatConnectedMirrorsNeed) {
  Cache cache;
  for (int i = 0; i < 100; ++i) cache.AddOrUpdateNode(MakeNode("n" + std::to_string(i)));
  EXPECT_EQ(cache.delta_log_size(), 0u);

  const int slow = 0, fast = 0;
  cache.SetMirrorPosition(&slow, 100);
  cache.SetMirrorPosition(&fast, 100);
  for (int i = 0; i < 10; ++i) cache.AddOrUpdateNode(MakeNode("m" + std::to_string(i)));  // 101..110
  EXPECT_EQ(cache.delta_log_size(), 10u);
  cache.SetMirrorPosition(&fast, 110);
  EXPECT_EQ(cache.delta_log_size(), 10u);  // slow still needs 101..110.
  cache.SetMirrorPosition(&slow, 105);
  EXPECT_EQ(cache.delta_log_size(), 5u);
  v1::StateDelta d;
  EXPECT_EQ(cache.ReadDelta(105, 110, &d), 110u);
  EXPECT_FALSE(d.reset());
  EXPECT_THAT(UpsertedNodeIds(d), ElementsAre(106, 107, 108, 109, 110));

  // The slow mirror disconnects: only the fast one counts.
  cache.SetMirrorPosition(&slow, std::nullopt);
  EXPECT_EQ(cache.delta_log_size(), 0u);
  // The last one disconnects: nothing is kept while changes go on.
  cache.SetMirrorPosition(&fast, std::nullopt);
  for (int i = 0; i < 10; ++i) cache.AddOrUpdateNode(MakeNode("k" + std::to_string(i)));
  EXPECT_EQ(cache.delta_log_size(), 0u);
  // A reader that comes back behind the log gets a reset.
  EXPECT_TRUE((cache.ReadDelta(110, cache.delta_seq(), &d), d.reset()));
}

TEST(CacheTest, SnapshotCarriesPdbsAndPodGroups) {
  Cache cache;
  v1::PodDisruptionBudget pdb;
  pdb.mutable_meta()->set_uid("pdb1");
  pdb.mutable_meta()->set_namespace_("ns");
  pdb.mutable_meta()->set_name("budget");
  ASSERT_TRUE(cache.AddOrUpdatePdb(pdb).ok());
  v1::PodGroup group;
  group.mutable_meta()->set_uid("g1");
  group.mutable_meta()->set_namespace_("ns");
  group.mutable_meta()->set_name("gang");
  group.set_min_member(3);
  ASSERT_TRUE(cache.AddOrUpdatePodGroup(group).ok());
  Snapshot snap;
  cache.UpdateSnapshot(snap);
  ASSERT_EQ(snap.PodDisruptionBudgets("ns").size(), 1u);
  EXPECT_EQ(snap.PodDisruptionBudgets("ns")[0]->meta().name(), "budget");
  EXPECT_TRUE(snap.PodDisruptionBudgets("other").empty());
  ASSERT_NE(snap.GetPodGroup("ns", "gang"), nullptr);
  EXPECT_EQ(snap.GetPodGroup("ns", "gang")->min_member(), 3);

  // Changes after the snapshot are not in it until the next update.
  group.set_min_member(5);
  ASSERT_TRUE(cache.AddOrUpdatePodGroup(group).ok());
  ASSERT_TRUE(cache.RemovePdb("pdb1").ok());
  EXPECT_EQ(snap.GetPodGroup("ns", "gang")->min_member(), 3);
  cache.UpdateSnapshot(snap);
  EXPECT_EQ(snap.GetPodGroup("ns", "gang")->min_member(), 5);
  EXPECT_TRUE(snap.PodDisruptionBudgets("ns").empty());
}

v1::Namespace MakeNamespace(const std::string& name, const std::string& team = "") {
  v1::Namespace ns;
  ns.mutable_meta()->set_name(name);
  ns.mutable_meta()->set_uid("uid-" + name);
  if (!team.empty()) (*ns.mutable_meta()->mutable_labels())["team"] = team;
  return ns;
}

TEST(CacheTest, NamespacesAreCachedSnapshottedAndMirrored) {
  Cache cache;
  HoldDeltaLog(cache);
  ASSERT_TRUE(cache.AddOrUpdateNamespace(MakeNamespace("prod", "data")).ok());
  ASSERT_TRUE(cache.AddOrUpdateNamespace(MakeNamespace("dev")).ok());
  EXPECT_EQ(cache.AddOrUpdateNamespace(v1::Namespace()).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(cache.GetNamespace("prod")->meta().labels().at("team"), "data");
  EXPECT_EQ(cache.GetNamespace("other"), nullptr);

  Snapshot snap;
  cache.UpdateSnapshot(snap);
  ASSERT_NE(snap.GetNamespace("prod"), nullptr);
  EXPECT_EQ(snap.GetNamespace("prod")->meta().labels().at("team"), "data");
  EXPECT_EQ(snap.Namespaces().size(), 2u);

  v1::StateDelta d;
  const uint64_t seq = cache.ReadDelta(0, cache.delta_seq(), &d);
  EXPECT_EQ(d.namespace_upserts_size(), 2);

  // Relabel prod, remove dev: one upsert, one removal (by name).
  ASSERT_TRUE(cache.AddOrUpdateNamespace(MakeNamespace("prod", "web")).ok());
  ASSERT_TRUE(cache.RemoveNamespace("dev").ok());
  EXPECT_EQ(cache.RemoveNamespace("dev").code(), absl::StatusCode::kNotFound);
  const uint64_t mid = cache.delta_seq();
  cache.ReadDelta(seq, mid, &d);
  ASSERT_EQ(d.namespace_upserts_size(), 1);
  EXPECT_EQ(d.namespace_upserts(0).meta().labels().at("team"), "web");
  EXPECT_THAT(d.namespace_removals(), ElementsAre("dev"));

  // The snapshot changes only when updated.
  EXPECT_EQ(snap.GetNamespace("prod")->meta().labels().at("team"), "data");
  cache.UpdateSnapshot(snap);
  EXPECT_EQ(snap.GetNamespace("prod")->meta().labels().at("team"), "web");
  EXPECT_EQ(snap.GetNamespace("dev"), nullptr);

  // A full state at `seq` rolls the later changes back.
  ASSERT_TRUE(cache.AddOrUpdateNamespace(MakeNamespace("late")).ok());
  cache.TrimDeltaLog(mid);
  cache.ReadDelta(0, mid, &d);
  EXPECT_TRUE(d.reset());
  std::vector<std::string> names;
  for (const auto& ns : d.namespace_upserts()) names.push_back(ns.meta().name());
  EXPECT_THAT(names, ::testing::UnorderedElementsAre("prod"));
}

TEST(CacheTest, DumpListsPodsAndAssumedPods) {
  Cache cache;
  cache.AddOrUpdateNode(MakeNode("n1", 4000));
  ASSERT_TRUE(cache.AddOrUpdatePod(MakePod("b", "n1", 100)).ok());
  ASSERT_TRUE(cache.AssumePod(PendingPod("a", 200), "n1").ok());
  Cache::Dumped dump = cache.Dump(true);
  ASSERT_EQ(dump.nodes.size(), 1u);
  const auto& n = dump.nodes[0];
  ASSERT_TRUE(n.allocatable.has_value());
  EXPECT_EQ(n.allocatable->milli_cpu, 4000);
  EXPECT_EQ(n.requested.milli_cpu, 300);
  ASSERT_EQ(n.pods.size(), 1u);
  EXPECT_EQ(n.pods[0]->uid(), "b");
  ASSERT_EQ(n.assumed_pods.size(), 1u);
  EXPECT_EQ(n.assumed_pods[0]->uid(), "a");
  EXPECT_EQ(dump.assumed_pods, 1u);
  EXPECT_TRUE(cache.Dump(false).nodes[0].pods.empty());
}

}  // namespace
}  // namespace podium::scheduler
