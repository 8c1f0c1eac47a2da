// Test fixtures for the default plugins: pod/node builders, a snapshot and a
// handle over NodeInfos the test owns.
#pragma once

#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "podium/sdk/framework.h"

namespace podium::plugins::testing {

class PodBuilder {
 public:
  explicit PodBuilder(std::string name = "p") {
    pod_.mutable_meta()->set_name(name);
    pod_.mutable_meta()->set_namespace_("default");
    pod_.mutable_meta()->set_uid("uid-" + name);
  }
  PodBuilder& Uid(std::string uid) {
    pod_.mutable_meta()->set_uid(std::move(uid));
    return *this;
  }
  PodBuilder& Label(std::string k, std::string v) {
    (*pod_.mutable_meta()->mutable_labels())[k] = v;
    return *this;
  }
  PodBuilder& Namespace(std::string ns) {
    pod_.mutable_meta()->set_namespace_(std::move(ns));
    return *this;
  }
  PodBuilder& OwnedBy(std::string kind, std::string name = "owner") {
    v1::OwnerReference* ref = pod_.mutable_meta()->add_owner_references();
    ref->set_kind(std::move(kind));
    ref->set_name(std::move(name));
    ref->set_controller(true);
    return *this;
  }
  PodBuilder& Terminating() {
    pod_.mutable_meta()->set_deletion_timestamp_us(1);
    return *this;
  }
  PodBuilder& NodeName(std::string n) {
    pod_.set_node_name(std::move(n));
    return *this;
  }
  // A container requesting milli-CPU and memory bytes.
  PodBuilder& Container(int64_t milli_cpu, int64_t memory, std::string image = "") {
    v1::Container* c = pod_.add_containers();
    c->set_name("c" + std::to_string(pod_.containers_size()));
    c->mutable_requests()->set_milli_cpu(milli_cpu);
    c->mutable_requests()->set_memory_bytes(memory);
    c->set_image(std::move(image));
    return *this;
  }
  PodBuilder& Image(std::string image) { return Container(0, 0, std::move(image)); }
  PodBuilder& InitContainer(int64_t milli_cpu, int64_t memory, bool restartable = false) {
    v1::Container* c = pod_.add_init_containers();
    c->set_name("i" + std::to_string(pod_.init_containers_size()));
    c->mutable_requests()->set_milli_cpu(milli_cpu);
    c->mutable_requests()->set_memory_bytes(memory);
    c->set_restartable(restartable);
    return *this;
  }
  // Sets a request on the last container (creating one if needed).
  PodBuilder& Ephemeral(int64_t bytes) {
    LastContainer()->mutable_requests()->set_ephemeral_storage_bytes(bytes);
    return *this;
  }
  PodBuilder& Scalar(std::string name, int64_t value) {
    (*LastContainer()->mutable_requests()->mutable_scalar())[name] = value;
    return *this;
  }
  PodBuilder& Overhead(int64_t milli_cpu, int64_t memory) {
    pod_.mutable_overhead()->set_milli_cpu(milli_cpu);
    pod_.mutable_overhead()->set_memory_bytes(memory);
    return *this;
  }
  PodBuilder& HostPort(int32_t port, std::string protocol = "", std::string ip = "") {
    v1::ContainerPort* p = LastContainer()->add_ports();
    p->set_container_port(port);
    p->set_host_port(port);
    p->set_protocol(std::move(protocol));
    p->set_host_ip(std::move(ip));
    return *this;
  }
  PodBuilder& NodeSelector(std::string k, std::string v) {
    (*pod_.mutable_node_selector())[k] = v;
    return *this;
  }
  PodBuilder& Toleration(std::string key, v1::Toleration::Operator op, std::string value,
                         v1::TaintEffect effect) {
    v1::Toleration* t = pod_.add_tolerations();
    t->set_key(std::move(key));
    t->set_operator_(op);
    t->set_value(std::move(value));
    t->set_effect(effect);
    return *this;
  }
  v1::NodeAffinity* MutableNodeAffinity() {
    return pod_.mutable_affinity()->mutable_node_affinity();
  }
  v1::Pod& mutable_pod() { return pod_; }
  v1::Pod Build() const { return pod_; }
  sdk::PodInfoPtr Info() const { return sdk::PodInfo::Create(pod_); }

 private:
  v1::Container* LastContainer() {
    if (pod_.containers_size() == 0) Container(0, 0);
    return pod_.mutable_containers(pod_.containers_size() - 1);
  }
  v1::Pod pod_;
};

class NodeBuilder {
 public:
  explicit NodeBuilder(std::string name = "n") { node_.mutable_meta()->set_name(name); }
  NodeBuilder& Allocatable(int64_t milli_cpu, int64_t memory, int64_t pods = 110) {
    node_.mutable_allocatable()->set_milli_cpu(milli_cpu);
    node_.mutable_allocatable()->set_memory_bytes(memory);
    node_.mutable_allocatable()->set_pods(pods);
    return *this;
  }
  NodeBuilder& Ephemeral(int64_t bytes) {
    node_.mutable_allocatable()->set_ephemeral_storage_bytes(bytes);
    return *this;
  }
  NodeBuilder& Scalar(std::string name, int64_t value) {
    (*node_.mutable_allocatable()->mutable_scalar())[name] = value;
    return *this;
  }
  NodeBuilder& Label(std::string k, std::string v) {
    (*node_.mutable_meta()->mutable_labels())[k] = v;
    return *this;
  }
  NodeBuilder& Taint(std::string key, std::string value, v1::TaintEffect effect) {
    v1::Taint* t = node_.add_taints();
    t->set_key(std::move(key));
    t->set_value(std::move(value));
    t->set_effect(effect);
    return *this;
  }
  NodeBuilder& Unschedulable() {
    node_.set_unschedulable(true);
    return *this;
  }
  v1::Node Build() const { return node_; }

 private:
  v1::Node node_;
};

inline sdk::NodeInfo MakeNodeInfo(const v1::Node& node, const std::vector<v1::Pod>& pods = {},
                                  uint32_t id = 1) {
  sdk::NodeInfo info(id, std::make_shared<const v1::Node>(node));
  for (const v1::Pod& p : pods) info.AddPod(sdk::PodInfo::Create(p));
  return info;
}

class FakeSnapshot : public sdk::Snapshot {
 public:
  sdk::NodeInfo& Add(sdk::NodeInfo info) {
    owned_.push_back(std::make_unique<sdk::NodeInfo>(std::move(info)));
    nodes_.push_back(owned_.back().get());
    return *owned_.back();
  }
  const std::vector<const sdk::NodeInfo*>& Nodes() const override {
    ++nodes_calls_;
    return nodes_;
  }
  // As the mirror keeps them, without counting as a scan.
  std::vector<const sdk::NodeInfo*> NodesHavingPodsWithAffinity() const override {
    std::vector<const sdk::NodeInfo*> out;
    for (const sdk::NodeInfo* n : nodes_) {
      if (!n->pods_with_affinity().empty()) out.push_back(n);
    }
    return out;
  }
  std::vector<const sdk::NodeInfo*> NodesHavingPodsWithRequiredAntiAffinity() const override {
    std::vector<const sdk::NodeInfo*> out;
    for (const sdk::NodeInfo* n : nodes_) {
      if (!n->pods_with_required_anti_affinity().empty()) out.push_back(n);
    }
    return out;
  }
  // How often a plugin asked for every node (a scan), for tests of the
  // label-index path.
  int nodes_calls() const { return nodes_calls_; }
  // With a label index, ForEachPodWithLabel answers as the SDK's mirror does
  // (here by a scan the plugin does not see); without, it answers false.
  void set_label_index(bool on) { label_index_ = on; }
  // How many pods ForEachPodWithLabel has visited: what a plugin pays for
  // counting through the index.
  int index_visits() const { return index_visits_; }
  bool ForEachPodWithLabel(std::string_view key, std::string_view value, const PodVisitor& visit) const override {
    if (!label_index_) return false;
    for (const sdk::NodeInfo* n : nodes_) {
      for (const sdk::PodInfoPtr& p : n->pods()) {
        auto it = p->pod->meta().labels().find(std::string(key));
        if (it != p->pod->meta().labels().end() && it->second == value) {
          ++index_visits_;
          visit(*p, *n);
        }
      }
    }
    return true;
  }
  const sdk::NodeInfo* Get(std::string_view name) const override {
    for (const sdk::NodeInfo* n : nodes_) {
      if (n->name() == name) return n;
    }
    return nullptr;
  }
  const sdk::NodeInfo* GetById(uint32_t id) const override {
    for (const sdk::NodeInfo* n : nodes_) {
      if (n->id() == id) return n;
    }
    return nullptr;
  }
  size_t NumNodes() const override { return nodes_.size(); }
  // Adds (or replaces) a Namespace with these labels.
  void AddNamespace(const std::string& name, const std::map<std::string, std::string>& labels = {}) {
    auto ns = std::make_unique<v1::Namespace>();
    ns->mutable_meta()->set_name(name);
    ns->mutable_meta()->set_uid("ns-" + name);
    for (const auto& [k, v] : labels) (*ns->mutable_meta()->mutable_labels())[k] = v;
    namespaces_[name] = std::move(ns);
  }
  const v1::Namespace* GetNamespace(std::string_view name) const override {
    auto it = namespaces_.find(std::string(name));
    return it == namespaces_.end() ? nullptr : it->second.get();
  }
  std::vector<const v1::Namespace*> Namespaces() const override {
    std::vector<const v1::Namespace*> out;
    for (const auto& [name, ns] : namespaces_) out.push_back(ns.get());
    return out;
  }

  // Pod changes, logged from now on as the SDK's mirror logs them
  // (PodChangesSince): AddPod, RemovePod and SetNodeLabels below change the
  // snapshot and the log; a relabelled node is a barrier (readers rebuild).
  void EnablePodChangeLog() {
    log_enabled_ = true;
    Barrier();
  }
  const sdk::PodInfo& AddPod(std::string_view node_name, v1::Pod pod) {
    sdk::NodeInfo& node = Mutable(node_name);
    pod.set_node_name(std::string(node_name));
    sdk::PodInfoPtr info = sdk::PodInfo::Create(std::move(pod));
    node.AddPod(info);
    if (log_enabled_) log_.push_back({true, info, &node});
    return *info;
  }
  void RemovePod(std::string_view node_name, std::string_view uid) {
    sdk::NodeInfo& node = Mutable(node_name);
    for (const sdk::PodInfoPtr& p : node.pods()) {
      if (p->uid() != uid) continue;
      sdk::PodInfoPtr gone = p;
      node.RemovePod(uid);
      if (log_enabled_) log_.push_back({false, std::move(gone), &node});
      return;
    }
    std::abort();  // A test removes a pod it did not add.
  }
  void SetNodeLabels(std::string_view node_name, const std::map<std::string, std::string>& labels) {
    sdk::NodeInfo& node = Mutable(node_name);
    v1::Node updated = node.node();
    updated.mutable_meta()->clear_labels();
    for (const auto& [k, v] : labels) (*updated.mutable_meta()->mutable_labels())[k] = v;
    node.SetNode(std::make_shared<const v1::Node>(std::move(updated)));
    Barrier();
  }
  bool PodChangesSince(uint64_t* cursor, const PodChangeVisitor& visit) const override {
    const uint64_t end = log_first_ + log_.size();
    const bool known = log_enabled_ && *cursor >= barrier_ && *cursor <= end;
    if (known) {
      for (size_t i = *cursor - log_first_; i < log_.size(); ++i) {
        visit(PodChange{.added = log_[i].added, .pod = log_[i].pod.get(), .node = log_[i].node});
      }
    }
    *cursor = end;
    return known;
  }

 private:
  struct LoggedChange {
    bool added;
    sdk::PodInfoPtr pod;
    const sdk::NodeInfo* node;
  };
  sdk::NodeInfo& Mutable(std::string_view name) {
    for (auto& n : owned_) {
      if (n->name() == name) return *n;
    }
    std::abort();  // A test names a node it did not add.
  }
  void Barrier() {
    log_first_ += log_.size() + 1;
    log_.clear();
    barrier_ = log_first_;
  }
  bool log_enabled_ = false;
  std::vector<LoggedChange> log_;
  uint64_t log_first_ = 1;
  uint64_t barrier_ = 1;

  std::map<std::string, std::unique_ptr<v1::Namespace>> namespaces_;
  std::vector<std::unique_ptr<sdk::NodeInfo>> owned_;
  std::vector<const sdk::NodeInfo*> nodes_;
  bool label_index_ = false;
  mutable int nodes_calls_ = 0;
  mutable int index_visits_ = 0;
};

class FakeHandle : public sdk::Handle {
 public:
  FakeSnapshot& fake_snapshot() { return snapshot_; }
  const sdk::Snapshot& snapshot() const override { return snapshot_; }
  bool AllowWaitingPod(std::string_view, std::string_view) override { return false; }
  bool RejectWaitingPod(std::string_view, std::string_view, std::string_view) override {
    return false;
  }

 private:
  FakeSnapshot snapshot_;
};

// Cluster events as the scheduler builds them for queueing hints (the
// action bits are the test's to give for updates).
inline v1::ClusterEvent NodeAdded(const v1::Node& node) {
  v1::ClusterEvent e;
  e.set_resource(v1::NODE);
  e.set_action(v1::ADD);
  *e.mutable_new_node() = node;
  return e;
}
inline v1::ClusterEvent NodeUpdated(const v1::Node& before, const v1::Node& after,
                                    uint32_t actions) {
  v1::ClusterEvent e;
  e.set_resource(v1::NODE);
  e.set_action(actions);
  *e.mutable_old_node() = before;
  *e.mutable_new_node() = after;
  return e;
}
inline v1::ClusterEvent NodeDeleted(const v1::Node& node) {
  v1::ClusterEvent e;
  e.set_resource(v1::NODE);
  e.set_action(v1::DELETE);
  *e.mutable_old_node() = node;
  return e;
}
inline v1::ClusterEvent PodAdded(const v1::Pod& pod) {
  v1::ClusterEvent e;
  e.set_resource(v1::POD);
  e.set_action(v1::ADD);
  *e.mutable_new_pod() = pod;
  return e;
}
inline v1::ClusterEvent PodUpdated(const v1::Pod& before, const v1::Pod& after, uint32_t actions) {
  v1::ClusterEvent e;
  e.set_resource(v1::POD);
  e.set_action(actions);
  *e.mutable_old_pod() = before;
  *e.mutable_new_pod() = after;
  return e;
}
// The pending pod's own update (the queue's UNSCHEDULED_POD event).
inline v1::ClusterEvent PendingPodUpdated(const v1::Pod& before, const v1::Pod& after, uint32_t actions) {
  v1::ClusterEvent e = PodUpdated(before, after, actions);
  e.set_resource(v1::UNSCHEDULED_POD);
  return e;
}
inline v1::ClusterEvent PodDeleted(const v1::Pod& pod) {
  v1::ClusterEvent e;
  e.set_resource(v1::POD);
  e.set_action(v1::DELETE);
  *e.mutable_old_pod() = pod;
  return e;
}

// Whether `event` requeues a pod that only this plugin rejected, decided as
// the scheduling queue and the SDK decide it: an event the plugin did not
// register for does not; a matching registration without a hint does;
// otherwise its hint says.
inline bool Requeues(const std::vector<sdk::ClusterEventWithHint>& events, const v1::Pod& pod,
                     const v1::ClusterEvent& event) {
  for (const sdk::ClusterEventWithHint& r : events) {
    if (r.resource != event.resource() || (r.action_mask & event.action()) == 0) continue;
    if (!r.hint || r.hint(pod, event) == sdk::QueueingHint::kQueue) return true;
  }
  return false;
}

// Runs a plugin's Score over `nodes` then NormalizeScore, as the framework does.
template <typename P>
std::vector<int64_t> ScoreAndNormalize(P& plugin, sdk::CycleState& state, const sdk::PodInfo& pod,
                                       const std::vector<const sdk::NodeInfo*>& nodes) {
  std::vector<sdk::NodeScore> scores;
  for (const sdk::NodeInfo* n : nodes) {
    auto [score, status] = plugin.Score(state, pod, *n);
    scores.push_back({n, score});
  }
  if (plugin.HasNormalizeScore()) plugin.NormalizeScore(state, pod, scores);
  std::vector<int64_t> out;
  for (const sdk::NodeScore& s : scores) out.push_back(s.score);
  return out;
}

}  // namespace podium::plugins::testing
