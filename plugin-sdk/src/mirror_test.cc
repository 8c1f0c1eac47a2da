#include "mirror.h"

#include <algorithm>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace podium::sdk::internal {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

v1::MirroredNode* AddNode(v1::StateDelta& delta, uint32_t id, const std::string& name,
                          std::vector<std::vector<std::string>> images = {}) {
  v1::MirroredNode* upsert = delta.add_node_upserts();
  upsert->set_id(id);
  upsert->mutable_node()->mutable_meta()->set_name(name);
  upsert->mutable_node()->mutable_allocatable()->set_pods(110);
  for (const auto& names : images) {
    v1::ContainerImage* image = upsert->mutable_node()->add_images();
    for (const auto& n : names) image->add_names(n);
    image->set_size_bytes(1000);
  }
  return upsert;
}

void AddPod(v1::StateDelta& delta, uint32_t node_id, const std::string& uid, int64_t milli_cpu) {
  v1::MirroredPod* upsert = delta.add_pod_upserts();
  upsert->set_node_id(node_id);
  upsert->mutable_pod()->mutable_meta()->set_uid(uid);
  upsert->mutable_pod()->mutable_meta()->set_name(uid);
  upsert->mutable_pod()->add_containers()->mutable_requests()->set_milli_cpu(milli_cpu);
}

std::vector<uint32_t> Ids(const Mirror& mirror) {
  std::vector<uint32_t> ids;
  for (const NodeInfo* node : mirror.Nodes()) ids.push_back(node->id());
  return ids;
}

int32_t NumNodesWithImage(const Mirror& mirror, const std::string& node, const std::string& image) {
  const NodeInfo* info = mirror.Get(node);
  if (info == nullptr) return -1;
  auto it = info->images().find(image);
  return it == info->images().end() ? 0 : it->second.num_nodes;
}

TEST(SdkMirrorTest, ResetUpsertsAndRemovalsKeepNodesInIdOrder) {
  Mirror mirror;
  v1::StateDelta reset;
  reset.set_reset(true);
  reset.set_generation(7);
  AddNode(reset, 5, "n5");
  AddNode(reset, 2, "n2");
  AddNode(reset, 9, "n9");
  ASSERT_TRUE(mirror.Apply(reset).ok());
  EXPECT_THAT(Ids(mirror), ElementsAre(2, 5, 9));
  EXPECT_EQ(mirror.generation(), 7u);
  EXPECT_EQ(mirror.Get("n5")->id(), 5u);
  EXPECT_EQ(mirror.GetById(9)->name(), "n9");
  EXPECT_EQ(mirror.GetById(3), nullptr);

  v1::StateDelta delta;
  delta.add_node_removals(5);
  AddNode(delta, 3, "n3");
  ASSERT_TRUE(mirror.Apply(delta).ok());
  EXPECT_THAT(Ids(mirror), ElementsAre(2, 3, 9));
  EXPECT_EQ(mirror.Get("n5"), nullptr);

  v1::StateDelta again;
  again.set_reset(true);
  AddNode(again, 10, "n10");
  ASSERT_TRUE(mirror.Apply(again).ok());
  EXPECT_THAT(Ids(mirror), ElementsAre(10));
  EXPECT_EQ(mirror.Get("n2"), nullptr);
}

TEST(SdkMirrorTest, PodsAreAddedMovedAndRemoved) {
  Mirror mirror;
  v1::StateDelta delta;
  delta.set_reset(true);
  AddNode(delta, 1, "a");
  AddNode(delta, 2, "b");
  AddPod(delta, 1, "p1", 100);
  AddPod(delta, 1, "p2", 200);
  ASSERT_TRUE(mirror.Apply(delta).ok());
  EXPECT_EQ(mirror.Get("a")->pods().size(), 2u);
  EXPECT_EQ(mirror.Get("a")->requested().milli_cpu, 300);

  v1::StateDelta move;
  AddPod(move, 2, "p1", 150);  // Upsert to another node moves the pod.
  ASSERT_TRUE(mirror.Apply(move).ok());
  EXPECT_EQ(mirror.Get("a")->requested().milli_cpu, 200);
  EXPECT_EQ(mirror.Get("b")->requested().milli_cpu, 150);
  EXPECT_EQ(mirror.NumPods(), 2u);

  v1::StateDelta remove;
  remove.add_pod_removals("p2");
  remove.add_pod_removals("never-seen");  // Removals are idempotent.
  ASSERT_TRUE(mirror.Apply(remove).ok());
  EXPECT_TRUE(mirror.Get("a")->pods().empty());

  // A node update keeps the node's pods.
  v1::StateDelta update;
  AddNode(update, 2, "b")->mutable_node()->set_unschedulable(true);
  ASSERT_TRUE(mirror.Apply(update).ok());
  EXPECT_TRUE(mirror.Get("b")->node().unschedulable());
  EXPECT_EQ(mirror.Get("b")->pods().size(), 1u);

  // Removing a node forgets its pods.
  v1::StateDelta drop;
  drop.add_node_removals(2);
  ASSERT_TRUE(mirror.Apply(drop).ok());
  EXPECT_EQ(mirror.NumPods(), 0u);
}

TEST(SdkMirrorTest, ImageStatesCountNodesHavingTheImage) {
  Mirror mirror;
  v1::StateDelta delta;
  delta.set_reset(true);
  AddNode(delta, 1, "a", {{"nginx:1", "nginx@sha256:1"}, {"redis:7"}});
  AddNode(delta, 2, "b", {{"nginx:1"}});
  ASSERT_TRUE(mirror.Apply(delta).ok());
  EXPECT_EQ(NumNodesWithImage(mirror, "a", "nginx:1"), 2);
  EXPECT_EQ(NumNodesWithImage(mirror, "b", "nginx:1"), 2);
  EXPECT_EQ(NumNodesWithImage(mirror, "a", "nginx@sha256:1"), 1);
  EXPECT_EQ(NumNodesWithImage(mirror, "a", "redis:7"), 1);
  EXPECT_EQ(mirror.Get("a")->images().at("redis:7").size_bytes, 1000);

  v1::StateDelta add;
  AddNode(add, 3, "c", {{"redis:7"}, {"nginx:1"}});
  ASSERT_TRUE(mirror.Apply(add).ok());
  EXPECT_EQ(NumNodesWithImage(mirror, "a", "nginx:1"), 3);
  EXPECT_EQ(NumNodesWithImage(mirror, "a", "redis:7"), 2);

  v1::StateDelta update;  // Node a drops redis.
  AddNode(update, 1, "a", {{"nginx:1", "nginx@sha256:1"}});
  ASSERT_TRUE(mirror.Apply(update).ok());
  EXPECT_EQ(NumNodesWithImage(mirror, "a", "redis:7"), 0);
  EXPECT_EQ(NumNodesWithImage(mirror, "c", "redis:7"), 1);
  EXPECT_EQ(NumNodesWithImage(mirror, "a", "nginx:1"), 3);

  v1::StateDelta remove;
  remove.add_node_removals(2);
  ASSERT_TRUE(mirror.Apply(remove).ok());
  EXPECT_EQ(NumNodesWithImage(mirror, "a", "nginx:1"), 2);
  EXPECT_EQ(NumNodesWithImage(mirror, "c", "nginx:1"), 2);
}

TEST(SdkMirrorTest, NamespacesByName) {
  Mirror mirror;
  auto add = [](v1::StateDelta& d, const std::string& name, const std::string& team) {
    v1::Namespace* ns = d.add_namespace_upserts();
    ns->mutable_meta()->set_name(name);
    if (!team.empty()) (*ns->mutable_meta()->mutable_labels())["team"] = team;
  };
  v1::StateDelta reset;
  reset.set_reset(true);
  add(reset, "prod", "data");
  add(reset, "dev", "");
  ASSERT_TRUE(mirror.Apply(reset).ok());
  ASSERT_NE(mirror.GetNamespace("prod"), nullptr);
  EXPECT_EQ(mirror.GetNamespace("prod")->meta().labels().at("team"), "data");
  EXPECT_EQ(mirror.Namespaces().size(), 2u);
  EXPECT_EQ(mirror.GetNamespace("other"), nullptr);

  v1::StateDelta delta;
  delta.add_namespace_removals("dev");
  add(delta, "prod", "web");
  ASSERT_TRUE(mirror.Apply(delta).ok());
  EXPECT_EQ(mirror.GetNamespace("dev"), nullptr);
  EXPECT_EQ(mirror.GetNamespace("prod")->meta().labels().at("team"), "web");
  EXPECT_EQ(mirror.NumNamespaces(), 1u);

  // An invalid delta names the field and changes nothing.
  v1::StateDelta bad;
  add(bad, "", "x");
  absl::Status s = mirror.Apply(bad);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), ::testing::HasSubstr("delta.namespace_upserts[0].meta.name"));
  EXPECT_EQ(mirror.NumNamespaces(), 1u);

  v1::StateDelta empty;
  empty.set_reset(true);
  ASSERT_TRUE(mirror.Apply(empty).ok());
  EXPECT_EQ(mirror.NumNamespaces(), 0u);
}

TEST(SdkMirrorTest, PodDisruptionBudgetsAndPodGroupsByNamespaceAndName) {
  Mirror mirror;
  v1::StateDelta reset;
  reset.set_reset(true);
  auto add_pdb = [](v1::StateDelta& d, const std::string& uid, const std::string& ns,
                    const std::string& name) {
    v1::PodDisruptionBudget* pdb = d.add_pdb_upserts();
    pdb->mutable_meta()->set_uid(uid);
    pdb->mutable_meta()->set_namespace_(ns);
    pdb->mutable_meta()->set_name(name);
  };
  auto add_group = [](v1::StateDelta& d, const std::string& uid, const std::string& ns,
                      const std::string& name, int32_t min_member) {
    v1::PodGroup* group = d.add_pod_group_upserts();
    group->mutable_meta()->set_uid(uid);
    group->mutable_meta()->set_namespace_(ns);
    group->mutable_meta()->set_name(name);
    group->set_min_member(min_member);
  };
  add_pdb(reset, "u1", "batch", "b");
  add_pdb(reset, "u2", "batch", "a");
  add_pdb(reset, "u3", "web", "w");
  add_group(reset, "g1", "batch", "train", 4);
  ASSERT_TRUE(mirror.Apply(reset).ok());
  std::vector<std::string> names;
  for (const auto* pdb : mirror.PodDisruptionBudgets("batch")) names.push_back(pdb->meta().name());
  EXPECT_THAT(names, ElementsAre("a", "b"));
  ASSERT_NE(mirror.GetPodGroup("batch", "train"), nullptr);
  EXPECT_EQ(mirror.GetPodGroup("batch", "train")->min_member(), 4);
  EXPECT_EQ(mirror.GetPodGroup("web", "train"), nullptr);

  v1::StateDelta delta;
  delta.add_pdb_removals("u2");
  add_group(delta, "g1", "batch", "train", 6);
  ASSERT_TRUE(mirror.Apply(delta).ok());
  EXPECT_EQ(mirror.PodDisruptionBudgets("batch").size(), 1u);
  EXPECT_EQ(mirror.GetPodGroup("batch", "train")->min_member(), 6);
  v1::StateDelta removal;
  removal.add_pod_group_removals("g1");
  ASSERT_TRUE(mirror.Apply(removal).ok());
  EXPECT_EQ(mirror.GetPodGroup("batch", "train"), nullptr);

  // A reset replaces them too.
  v1::StateDelta empty;
  empty.set_reset(true);
  ASSERT_TRUE(mirror.Apply(empty).ok());
  EXPECT_EQ(mirror.NumPodDisruptionBudgets(), 0u);

  v1::StateDelta bad;
  bad.add_pdb_upserts()->mutable_meta()->set_name("no-uid");
  absl::Status status = mirror.Apply(bad);
  EXPECT_THAT(std::string(status.message()), HasSubstr("delta.pdb_upserts[0].meta.uid"));
}

TEST(SdkMirrorTest, InvalidDeltaIsRejectedWholeNamingTheField) {
  Mirror mirror;
  v1::StateDelta delta;
  delta.set_reset(true);
  AddNode(delta, 1, "a");
  ASSERT_TRUE(mirror.Apply(delta).ok());

  v1::StateDelta bad;
  AddNode(bad, 2, "b");
  AddPod(bad, 1, "p1", 100);
  AddPod(bad, 42, "p2", 100);
  absl::Status status = mirror.Apply(bad);
  EXPECT_THAT(std::string(status.message()), HasSubstr("pod_upserts[1].node_id"));
  EXPECT_THAT(std::string(status.message()), HasSubstr("42"));
  // Nothing of it was applied.
  EXPECT_EQ(mirror.GetById(2), nullptr);
  EXPECT_TRUE(mirror.Get("a")->pods().empty());

  v1::StateDelta removed_node;
  removed_node.add_node_removals(1);
  AddPod(removed_node, 1, "p1", 100);
  EXPECT_THAT(std::string(mirror.Apply(removed_node).message()),
              HasSubstr("pod_upserts[0].node_id"));

  v1::StateDelta no_node;
  no_node.add_node_upserts()->set_id(3);
  EXPECT_THAT(std::string(mirror.Apply(no_node).message()), HasSubstr("node_upserts[0].node"));

  v1::StateDelta duplicate_name;
  AddNode(duplicate_name, 4, "a");
  EXPECT_THAT(std::string(mirror.Apply(duplicate_name).message()),
              HasSubstr("node_upserts[0].node.meta.name"));
}

v1::Pod Nominated(const std::string& uid, const std::string& node) {
  v1::Pod pod;
  pod.mutable_meta()->set_uid(uid);
  pod.mutable_meta()->set_name(uid);
  pod.set_nominated_node_name(node);
  return pod;
}

std::vector<std::string> NominatedOn(const Mirror& mirror, const std::string& node) {
  std::vector<std::string> uids;
  if (const auto* pods = mirror.NominatedPodsOn(node)) {
    for (const PodInfoPtr& pod : *pods) uids.push_back(pod->uid());
  }
  return uids;
}

TEST(SdkMirrorTest, NominatedPodsAreKeptPerNodeMovedRemovedAndReset) {
  Mirror mirror;
  v1::StateDelta delta;
  delta.set_reset(true);
  AddNode(delta, 1, "a");
  AddNode(delta, 2, "b");
  *delta.add_nominated_pod_upserts() = Nominated("p1", "a");
  *delta.add_nominated_pod_upserts() = Nominated("p2", "a");
  *delta.add_nominated_pod_upserts() = Nominated("p3", "not-yet-a-node");
  ASSERT_TRUE(mirror.Apply(delta).ok());
  EXPECT_THAT(NominatedOn(mirror, "a"), ElementsAre("p1", "p2"));
  EXPECT_EQ(mirror.NominatedPodsOn("a")->front()->pod->node_name(), "a");  // Counted there.
  EXPECT_EQ(mirror.NumNominatedPods(), 3u);

  v1::StateDelta moved;
  *moved.add_nominated_pod_upserts() = Nominated("p1", "b");
  moved.add_nominated_pod_removals("p3");
  moved.add_nominated_pod_removals("never-nominated");  // Not an error.
  ASSERT_TRUE(mirror.Apply(moved).ok());
  EXPECT_THAT(NominatedOn(mirror, "a"), ElementsAre("p2"));
  EXPECT_THAT(NominatedOn(mirror, "b"), ElementsAre("p1"));
  EXPECT_EQ(mirror.NominatedPodsOn("not-yet-a-node"), nullptr);

  v1::StateDelta bad;
  *bad.add_nominated_pod_upserts() = Nominated("p4", "");
  EXPECT_THAT(std::string(mirror.Apply(bad).message()),
              HasSubstr("nominated_pod_upserts[0].nominated_node_name"));

  v1::StateDelta reset;
  reset.set_reset(true);
  AddNode(reset, 1, "a");
  ASSERT_TRUE(mirror.Apply(reset).ok());
  EXPECT_EQ(mirror.NumNominatedPods(), 0u);
  EXPECT_EQ(mirror.NominatedPodsOn("b"), nullptr);
}

std::vector<uint32_t> IdsOf(const std::vector<const NodeInfo*>& nodes) {
  std::vector<uint32_t> ids;
  for (const NodeInfo* node : nodes) ids.push_back(node->id());
  return ids;
}

TEST(SdkMirrorTest, KeepsTheNodesThatHavePodsWithAffinity) {
  Mirror mirror;
  v1::StateDelta reset;
  reset.set_reset(true);
  AddNode(reset, 1, "n1");
  AddNode(reset, 2, "n2");
  AddNode(reset, 3, "n3");
  AddPod(reset, 1, "plain", 100);
  AddPod(reset, 2, "anti", 100);
  auto* anti = reset.mutable_pod_upserts(1)->mutable_pod()->mutable_affinity();
  anti->mutable_pod_anti_affinity()->add_required()->set_topology_key("zone");
  AddPod(reset, 3, "preferred", 100);
  reset.mutable_pod_upserts(2)->mutable_pod()->mutable_affinity()->mutable_pod_affinity()
      ->add_preferred()->set_weight(1);
  ASSERT_TRUE(mirror.Apply(reset).ok());
  EXPECT_THAT(IdsOf(mirror.NodesHavingPodsWithAffinity()), ElementsAre(2, 3));
  EXPECT_THAT(IdsOf(mirror.NodesHavingPodsWithRequiredAntiAffinity()), ElementsAre(2));

  v1::StateDelta remove;
  remove.add_pod_removals("anti");
  ASSERT_TRUE(mirror.Apply(remove).ok());
  EXPECT_THAT(IdsOf(mirror.NodesHavingPodsWithAffinity()), ElementsAre(3));
  EXPECT_TRUE(mirror.NodesHavingPodsWithRequiredAntiAffinity().empty());

  v1::StateDelta drop_node;
  drop_node.add_node_removals(3);
  ASSERT_TRUE(mirror.Apply(drop_node).ok());
  EXPECT_TRUE(mirror.NodesHavingPodsWithAffinity().empty());
}

// The pods a snapshot's visiting call visits, as "uid@node", sorted; the call
// must say it could visit them (it returns true).
template <class Call>
std::vector<std::string> Visited(const Call& call) {
  std::vector<std::string> out;
  EXPECT_TRUE(call([&](const PodInfo& pod, const NodeInfo& node) { out.push_back(pod.uid() + "@" + node.name()); }));
  std::sort(out.begin(), out.end());
  return out;
}

// The label index (MirrorNeeds::pod_label_index) follows pods as they are
// added, relabelled, moved, removed, dropped with their node and reset; a
// mirror without it answers false.
TEST(SdkMirrorTest, LabelIndexFollowsThePods) {
  auto labelled = [](v1::StateDelta& d, uint32_t node, const std::string& uid, const std::string& app) {
    AddPod(d, node, uid, 100);
    (*d.mutable_pod_upserts()->rbegin()->mutable_pod()->mutable_meta()->mutable_labels())["app"] = app;
  };
  auto with_label = [](const Mirror& m, const std::string& app) {
    return Visited([&](const auto& visit) { return m.ForEachPodWithLabel("app", app, visit); });
  };
  Mirror mirror;
  v1::StateDelta reset;
  reset.set_reset(true);
  AddNode(reset, 1, "n1");
  AddNode(reset, 2, "n2");
  labelled(reset, 1, "a", "web");
  ASSERT_TRUE(mirror.Apply(reset).ok());
  EXPECT_FALSE(mirror.ForEachPodWithLabel("app", "web", [](const PodInfo&, const NodeInfo&) {}));
  mirror.EnableLabelIndex();  // Indexes what is mirrored already.
  EXPECT_THAT(with_label(mirror, "web"), ElementsAre("a@n1"));

  v1::StateDelta d1;
  labelled(d1, 2, "b", "web");
  labelled(d1, 2, "c", "db");
  ASSERT_TRUE(mirror.Apply(d1).ok());
  EXPECT_THAT(with_label(mirror, "web"), ElementsAre("a@n1", "b@n2"));
  EXPECT_THAT(with_label(mirror, "db"), ElementsAre("c@n2"));
  EXPECT_THAT(with_label(mirror, "none"), ElementsAre());

  v1::StateDelta d2;
  labelled(d2, 1, "b", "db");  // Relabelled and moved.
  d2.add_pod_removals("a");
  ASSERT_TRUE(mirror.Apply(d2).ok());
  EXPECT_THAT(with_label(mirror, "web"), ElementsAre());
  EXPECT_THAT(with_label(mirror, "db"), ElementsAre("b@n1", "c@n2"));

  v1::StateDelta d3;
  d3.add_node_removals(2);  // Its pods go with it.
  ASSERT_TRUE(mirror.Apply(d3).ok());
  EXPECT_THAT(with_label(mirror, "db"), ElementsAre("b@n1"));

  v1::StateDelta d4;
  d4.set_reset(true);
  AddNode(d4, 3, "n3");
  labelled(d4, 3, "z", "db");
  ASSERT_TRUE(mirror.Apply(d4).ok());
  EXPECT_THAT(with_label(mirror, "db"), ElementsAre("z@n3"));
}

TEST(SdkMirrorTest, GroupIndexFindsAGangsAssignedMembers) {
  auto member = [](v1::StateDelta& d, uint32_t node, const std::string& uid, const std::string& ns,
                   const std::string& group) {
    AddPod(d, node, uid, 100);
    v1::Pod* pod = d.mutable_pod_upserts()->rbegin()->mutable_pod();
    pod->mutable_meta()->set_namespace_(ns);
    pod->set_pod_group(group);
  };
  auto members = [](const Mirror& m, const std::string& ns, const std::string& group) {
    return Visited([&](const auto& visit) { return m.ForEachAssignedPodInGroup(ns, group, visit); });
  };
  Mirror mirror;
  v1::StateDelta reset;
  reset.set_reset(true);
  AddNode(reset, 1, "n1");
  AddNode(reset, 2, "n2");
  member(reset, 1, "a", "batch", "train");
  member(reset, 2, "b", "batch", "train");
  member(reset, 2, "c", "other", "train");  // Same group name, other namespace.
  AddPod(reset, 1, "plain", 100);           // No group.
  ASSERT_TRUE(mirror.Apply(reset).ok());
  EXPECT_THAT(members(mirror, "batch", "train"), ElementsAre("a@n1", "b@n2"));
  EXPECT_THAT(members(mirror, "other", "train"), ElementsAre("c@n2"));
  EXPECT_THAT(members(mirror, "batch", "none"), ElementsAre());

  v1::StateDelta d1;
  member(d1, 2, "a", "batch", "train");  // Moved (assumed elsewhere, then bound).
  d1.add_pod_removals("b");               // Deleted, or its assumption forgotten.
  ASSERT_TRUE(mirror.Apply(d1).ok());
  EXPECT_THAT(members(mirror, "batch", "train"), ElementsAre("a@n2"));

  v1::StateDelta d2;
  d2.add_node_removals(2);  // Its pods go with it.
  ASSERT_TRUE(mirror.Apply(d2).ok());
  EXPECT_THAT(members(mirror, "batch", "train"), ElementsAre());
  EXPECT_THAT(members(mirror, "other", "train"), ElementsAre());

  v1::StateDelta d3;
  d3.set_reset(true);
  AddNode(d3, 3, "n3");
  member(d3, 3, "z", "batch", "train");
  ASSERT_TRUE(mirror.Apply(d3).ok());
  EXPECT_THAT(members(mirror, "batch", "train"), ElementsAre("z@n3"));
}

}  // namespace
}  // namespace podium::sdk::internal

namespace podium::sdk::internal {
namespace {

// "+uid@node" / "-uid@node" for each change PodChangesSince visits; "rebuild"
// when it cannot say.
std::vector<std::string> Changes(const Mirror& mirror, uint64_t* cursor) {
  std::vector<std::string> out;
  const bool known = mirror.PodChangesSince(cursor, [&](const Snapshot::PodChange& c) {
    out.push_back(std::string(c.added ? "+" : "-") + c.pod->uid() + "@" + c.node->name());
  });
  if (!known) out.push_back("rebuild");
  return out;
}

TEST(SdkMirrorTest, PodChangesAreLoggedUntilAReaderMustRebuild) {
  Mirror mirror;
  v1::StateDelta reset;
  reset.set_reset(true);
  AddNode(reset, 1, "n1");
  AddNode(reset, 2, "n2");
  AddPod(reset, 1, "p0", 100);
  ASSERT_TRUE(mirror.Apply(reset).ok());
  uint64_t cursor = 0;
  EXPECT_THAT(Changes(mirror, &cursor), ElementsAre("rebuild"));  // No log kept.

  mirror.EnablePodChangeLog(/*max_entries=*/4);
  EXPECT_THAT(Changes(mirror, &cursor), ElementsAre("rebuild"));  // Nothing logged before.
  EXPECT_THAT(Changes(mirror, &cursor), ElementsAre());

  // Added, moved (removed and added), removed.
  v1::StateDelta delta;
  AddPod(delta, 2, "p1", 100);
  AddPod(delta, 2, "p0", 100);
  delta.add_pod_removals("p1");
  delta.add_pod_removals("unknown");
  ASSERT_TRUE(mirror.Apply(delta).ok());
  // A delta's pod removals come before its upserts: p1 was not there yet.
  EXPECT_THAT(Changes(mirror, &cursor), ElementsAre("+p1@n2", "-p0@n1", "+p0@n2"));
  uint64_t stale = cursor;
  EXPECT_THAT(Changes(mirror, &cursor), ElementsAre());

  // A node update that keeps its labels changes nothing a reader keeps...
  v1::StateDelta same;
  AddNode(same, 2, "n2")->mutable_node()->mutable_allocatable()->set_pods(50);
  ASSERT_TRUE(mirror.Apply(same).ok());
  EXPECT_THAT(Changes(mirror, &cursor), ElementsAre());
  // ...one that relabels it does: every reader rebuilds.
  v1::StateDelta relabel;
  (*AddNode(relabel, 2, "n2")->mutable_node()->mutable_meta()->mutable_labels())["zone"] = "b";
  ASSERT_TRUE(mirror.Apply(relabel).ok());
  EXPECT_THAT(Changes(mirror, &cursor), ElementsAre("rebuild"));
  EXPECT_THAT(Changes(mirror, &stale), ElementsAre("rebuild"));

  // A reader the bounded log left behind rebuilds; one that kept up does not.
  uint64_t behind = cursor;
  for (int i = 0; i < 3; ++i) {
    v1::StateDelta more;
    AddPod(more, 1, "q" + std::to_string(i), 100);
    ASSERT_TRUE(mirror.Apply(more).ok());
    if (i == 0) {
      EXPECT_THAT(Changes(mirror, &cursor), ElementsAre("+q0@n1"));
    }
  }
  v1::StateDelta last;
  AddPod(last, 1, "q3", 100);
  AddPod(last, 1, "q4", 100);
  ASSERT_TRUE(mirror.Apply(last).ok());
  EXPECT_THAT(Changes(mirror, &cursor), ElementsAre("+q1@n1", "+q2@n1", "+q3@n1", "+q4@n1"));
  EXPECT_THAT(Changes(mirror, &behind), ElementsAre("rebuild"));

  // A removed node, and a reset, make every reader rebuild.
  v1::StateDelta remove;
  remove.add_node_removals(2);
  ASSERT_TRUE(mirror.Apply(remove).ok());
  EXPECT_THAT(Changes(mirror, &cursor), ElementsAre("rebuild"));
  v1::StateDelta again;
  again.set_reset(true);
  AddNode(again, 1, "n1");
  ASSERT_TRUE(mirror.Apply(again).ok());
  EXPECT_THAT(Changes(mirror, &cursor), ElementsAre("rebuild"));
  EXPECT_THAT(Changes(mirror, &cursor), ElementsAre());
}

}  // namespace
}  // namespace podium::sdk::internal
