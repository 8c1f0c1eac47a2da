#include "sim/workload.h"

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

}  // namespace

std::optional<WorkloadShape> FindWorkload(const std::string& name) {
  if (name == "basic-500") return WorkloadShape{name, 500, 500, 1000};
  if (name == "basic-5000") return WorkloadShape{name, 5000, 1000, 10000};
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
    (*n.mutable_meta()->mutable_labels())["kubernetes.io/hostname"] = name;
    v1::ResourceList r;
    r.set_milli_cpu(4000);
    r.set_memory_bytes(32LL << 30);
    r.set_pods(110);
    *n.mutable_capacity() = r;
    *n.mutable_allocatable() = r;
    c.nodes.push_back(std::move(n));
  }
  for (int i = 0; i < shape.init_pods; ++i) {
    c.pods.push_back({BasicPod("sched-setup", absl::StrCat("pod-init-", i), t++), false});
  }
  for (int i = 0; i < shape.measured_pods; ++i) {
    c.pods.push_back({BasicPod("sched-test", absl::StrCat("pod-", i), t++), true});
  }
  return c;
}

}  // namespace podium::sim
