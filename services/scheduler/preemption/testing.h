// Shared fixtures of the preemption tests: a cluster in a real Cache and
// Snapshot, and scripted plugin processes at the PluginProcess seam.
#pragma once

#include <map>
#include <string>

#include "cache/cache.h"
#include "cache/snapshot.h"
#include "framework/mock_plugin_process.h"

namespace podium::scheduler::preemption::testing {

inline v1::Pod MakePod(const std::string& name, int32_t priority, int64_t milli_cpu,
                       const std::string& node = "") {
  v1::Pod pod;
  pod.mutable_meta()->set_uid("uid-" + name);
  pod.mutable_meta()->set_namespace_("default");
  pod.mutable_meta()->set_name(name);
  pod.set_priority(priority);
  pod.add_containers()->mutable_requests()->set_milli_cpu(milli_cpu);
  pod.set_node_name(node);
  return pod;
}

inline v1::Node MakeNode(const std::string& name, int64_t milli_cpu) {
  v1::Node node;
  node.mutable_meta()->set_name(name);
  node.mutable_meta()->set_uid("uid-" + name);
  node.mutable_allocatable()->set_milli_cpu(milli_cpu);
  node.mutable_allocatable()->set_pods(110);
  return node;
}

// A dry-run answer: per node id, victims (uids) or a rejection reason.
struct ScriptedNode {
  std::vector<std::string> victims;
  std::string rejection;  // Non-empty: UNSCHEDULABLE with this reason.
};

inline v1::PluginToScheduler DryRunAnswer(const std::map<uint32_t, ScriptedNode>& nodes) {
  v1::PluginToScheduler out;
  auto* r = out.mutable_preemption_dry_run();
  for (const auto& [id, n] : nodes) {
    auto* node = r->add_nodes();
    node->set_node_id(id);
    if (!n.rejection.empty()) {
      node->mutable_status()->set_code(v1::Status::UNSCHEDULABLE);
      node->mutable_status()->add_reasons(n.rejection);
      node->mutable_status()->set_plugin("NodeResourcesFit");
      continue;
    }
    for (const auto& v : n.victims) node->add_victims(v);
  }
  return out;
}

}  // namespace podium::scheduler::preemption::testing
