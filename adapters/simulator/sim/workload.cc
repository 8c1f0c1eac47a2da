#include "sim/workload.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

namespace podium::sim {
namespace {

v1::Pod BasicPod(const std::string& ns, const std::string& name, int64_t created_us) {
  v1::Pod p;
  p.mutable_meta()->set_namespace_(ns);
  p.mutable_meta()->set_name(name);
  p.mutable_meta()->set_uid(k8s::NewUid());
  p.mutable_meta()->set_creation_timestamp_us(created_us);
  v1::Container* c = p.add_containers();
  c->set_name("pause");
  c->set_image("registry.k8s.io/pause:3.9");
  c->mutable_requests()->set_milli_cpu(100);
  c->mutable_requests()->set_memory_bytes(500LL << 20);
  return p;
}

constexpr char kZoneLabel[] = "topology.kubernetes.io/zone";
constexpr char kHostnameLabel[] = "kubernetes.io/hostname";

// app=spread; zone maxSkew 1 DoNotSchedule, hostname maxSkew 1 ScheduleAnyway.
void AddTopologySpread(v1::Pod& p) {
  (*p.mutable_meta()->mutable_labels())["app"] = "spread";
  for (const auto& [key, when] : {std::pair{kZoneLabel, v1::TopologySpreadConstraint::DO_NOT_SCHEDULE},
                                  std::pair{kHostnameLabel, v1::TopologySpreadConstraint::SCHEDULE_ANYWAY}}) {
    v1::TopologySpreadConstraint* c = p.add_topology_spread_constraints();
    c->set_max_skew(1);
    c->set_topology_key(key);
    c->set_when_unsatisfiable(when);
    (*c->mutable_label_selector()->mutable_match_labels())["app"] = "spread";
  }
}

// app=anti, with required hostname anti-affinity against app=anti.
void AddHostAntiAffinity(v1::Pod& p) {
  (*p.mutable_meta()->mutable_labels())["app"] = "anti";
  v1::PodAffinityTerm* t = p.mutable_affinity()->mutable_pod_anti_affinity()->add_required();
  (*t->mutable_label_selector()->mutable_match_labels())["app"] = "anti";
  t->set_topology_key(kHostnameLabel);
}

}  // namespace

std::optional<WorkloadShape> FindWorkload(const std::string& name) {
  if (name == "spread-1000") {
    WorkloadShape w{name, 1000, 0, 1000};
    w.rule = WorkloadShape::Rule::kTopologySpread;
    w.zones = 3;
    return w;
  }
  if (name == "antiaffinity-500") {
    WorkloadShape w{name, 500, 0, 500};
    w.rule = WorkloadShape::Rule::kHostAntiAffinity;
    return w;
  }
  if (name == "basic-500") return WorkloadShape{name, 500, 500, 1000};
  if (name == "basic-5000") return WorkloadShape{name, 5000, 1000, 10000};
  if (name == "gang-1000") {
    // Issue 7's gang shape: 1 000 nodes, 100 gangs of 8 pods created at once.
    WorkloadShape w{name, 1000, 0, 800};
    w.gangs = 100;
    w.gang_size = 8;
    return w;
  }
  if (name == "basic-5000-mixed") {
    WorkloadShape w{name, 5000, 0, 10000};
    w.mixed_deployments = 40;
    return w;
  }
  if (name == "preempt-edge-10" || name == "preempt-500") {
    // The preemption issue's shapes: full nodes of priority-100 pods, then
    // priority-1000 pods that fit only by evicting some.
    const bool edge = name == "preempt-edge-10";
    WorkloadShape w;
    w.name = name;
    w.preempt = true;
    w.nodes = edge ? 10 : 500;
    w.node_milli_cpu = edge ? 2000 : 4000;
    w.node_memory = edge ? 4LL << 30 : 32LL << 30;
    w.init_per_node = edge ? 5 : 4;
    w.init_pods = w.nodes * w.init_per_node;
    w.init_milli_cpu = edge ? 400 : 1000;
    w.init_memory = edge ? 800LL << 20 : 500LL << 20;
    w.init_priority = 100;
    w.measured_pods = edge ? 20 : 1000;
    w.measured_milli_cpu = edge ? 1000 : 2000;
    w.measured_memory = edge ? 2LL << 30 : 500LL << 20;
    w.measured_priority = 1000;
    w.sequential = edge;
    return w;
  }
  return std::nullopt;
}

k8s::LoadedCluster GenerateWorkload(const WorkloadShape& shape, absl::Time now) {
  k8s::LoadedCluster c;
  int64_t t = absl::ToUnixMicros(now);
  for (int i = 0; i < shape.nodes; ++i) {
    v1::Node n;
    std::string name = absl::StrCat("scheduler-perf-node-", i);
    n.mutable_meta()->set_name(name);
    n.mutable_meta()->set_uid(k8s::NewUid());
    n.mutable_meta()->set_creation_timestamp_us(t++);
    // Keys as std::string: GCC 12 warns (-Warray-bounds, a false positive) on
    // protobuf's Map::operator[] with a char-array key copied into it.
    auto& labels = *n.mutable_meta()->mutable_labels();
    labels[std::string(kHostnameLabel)] = name;
    if (shape.zones > 0) labels[std::string(kZoneLabel)] = absl::StrCat("zone-", i % shape.zones);
    v1::ResourceList r;
    r.set_milli_cpu(shape.node_milli_cpu);
    r.set_memory_bytes(shape.node_memory);
    r.set_pods(110);
    *n.mutable_capacity() = r;
    *n.mutable_allocatable() = r;
    if (shape.mixed_deployments > 0) {
      (*n.mutable_meta()->mutable_labels())["topology.kubernetes.io/zone"] = absl::StrCat("zone-", i % 10);
      (*n.mutable_meta()->mutable_labels())["pool"] = absl::StrCat("pool-", i % 4);
      if (i % 10 == 9) {
        v1::Taint* t = n.add_taints();
        t->set_key("dedicated");
        t->set_value("batch");
        t->set_effect(v1::NO_SCHEDULE);
      }
    }
    c.nodes.push_back(std::move(n));
  }
  if (shape.mixed_deployments > 0) {
    // Deployment d has weight 1 + d % 8 of the measured pods; requests, a pool
    // selector (every fourth) and a toleration (every fifth) vary with d.
    const int d_count = shape.mixed_deployments;
    std::vector<int> sizes(d_count);
    int weights = 0, assigned = 0;
    for (int d = 0; d < d_count; ++d) weights += 1 + d % 8;
    for (int d = 0; d < d_count; ++d) assigned += sizes[d] = shape.measured_pods * (1 + d % 8) / weights;
    sizes[d_count - 1] += shape.measured_pods - assigned;
    std::vector<int> created(d_count, 0);
    for (int made = 0; made < shape.measured_pods;) {
      for (int d = 0; d < d_count; ++d) {  // Interleaved: one of each in turn.
        if (created[d] == sizes[d]) continue;
        v1::Pod p = BasicPod("sched-test", absl::StrCat("deploy-", d, "-", created[d]++), t++);
        (*p.mutable_meta()->mutable_labels())["app"] = absl::StrCat("deploy-", d);
        p.mutable_containers(0)->mutable_requests()->set_milli_cpu(100 + 50 * (d % 5));
        p.mutable_containers(0)->mutable_requests()->set_memory_bytes((256LL + 128 * (d % 4)) << 20);
        if (d % 4 == 1) (*p.mutable_node_selector())["pool"] = absl::StrCat("pool-", d % 3);
        if (d % 5 == 0) {
          v1::Toleration* tol = p.add_tolerations();
          tol->set_key("dedicated");
          tol->set_value("batch");
          tol->set_effect(v1::NO_SCHEDULE);
        }
        c.pods.push_back({std::move(p), true});
        ++made;
      }
    }
    return c;
  }
  if (shape.preempt) {
    // Init pods bound at load, init_per_node on each node.
    for (int i = 0; i < shape.init_pods; ++i) {
      v1::Pod p = BasicPod("sched-setup", absl::StrCat("pod-init-", i), t++);
      p.set_node_name(c.nodes[i / shape.init_per_node].meta().name());
      p.set_phase(v1::RUNNING);
      p.set_priority(shape.init_priority);
      p.mutable_containers(0)->mutable_requests()->set_milli_cpu(shape.init_milli_cpu);
      p.mutable_containers(0)->mutable_requests()->set_memory_bytes(shape.init_memory);
      c.pods.push_back({std::move(p), false});
    }
    for (int i = 0; i < shape.measured_pods; ++i) {
      v1::Pod p = BasicPod("sched-test", absl::StrCat("preemptor-", i), t++);
      p.set_priority(shape.measured_priority);
      p.mutable_containers(0)->mutable_requests()->set_milli_cpu(shape.measured_milli_cpu);
      p.mutable_containers(0)->mutable_requests()->set_memory_bytes(shape.measured_memory);
      c.pods.push_back({std::move(p), true});
    }
    return c;
  }
  if (shape.gangs > 0) {
    for (int g = 0; g < shape.gangs; ++g) {
      v1::PodGroup group;
      group.mutable_meta()->set_namespace_("sched-test");
      group.mutable_meta()->set_name(absl::StrCat("gang-", g));
      group.mutable_meta()->set_uid(k8s::NewUid());
      group.mutable_meta()->set_creation_timestamp_us(t++);
      group.set_min_member(shape.gang_size);
      group.set_source(v1::PodGroup::SCHEDULER_PLUGINS);
      c.pod_groups.push_back(std::move(group));
    }
    for (int i = 0; i < shape.gangs * shape.gang_size; ++i) {
      const std::string group = absl::StrCat("gang-", i / shape.gang_size);
      v1::Pod p = BasicPod("sched-test", absl::StrCat(group, "-pod-", i % shape.gang_size), t++);
      (*p.mutable_meta()->mutable_labels())["scheduling.x-k8s.io/pod-group"] = group;
      p.set_pod_group(group);
      c.pods.push_back({std::move(p), true});
    }
    return c;
  }
  for (int i = 0; i < shape.init_pods; ++i) {
    c.pods.push_back({BasicPod("sched-setup", absl::StrCat("pod-init-", i), t++), false});
  }
  for (int i = 0; i < shape.measured_pods; ++i) {
    v1::Pod p = BasicPod("sched-test", absl::StrCat("pod-", i), t++);
    if (shape.rule == WorkloadShape::Rule::kTopologySpread) AddTopologySpread(p);
    if (shape.rule == WorkloadShape::Rule::kHostAntiAffinity) AddHostAntiAffinity(p);
    c.pods.push_back({std::move(p), true});
  }
  return c;
}

}  // namespace podium::sim
