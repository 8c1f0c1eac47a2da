// The default plugins over 5000 nodes for one pod, as the plugin host runs
// them: every PreFilter, Filter on every node, then PreScore, Score and
// NormalizeScore on the feasible nodes. Reported per node.
#include <memory>
#include <string>
#include <vector>

#include "benchmark/benchmark.h"
#include "plugins/default_plugins.h"
#include "plugins/helper/testing.h"

namespace podium::plugins {
namespace {

using testing::FakeHandle;
using testing::NodeBuilder;
using testing::PodBuilder;

constexpr int kNodes = 5000;
constexpr int64_t kGi = 1024LL * 1024 * 1024;

struct Fixture {
  FakeHandle handle;
  std::vector<sdk::PluginPtr> plugins;
  sdk::PodInfoPtr pod;

  Fixture() {
    for (int i = 0; i < kNodes; ++i) {
      NodeBuilder nb("node-" + std::to_string(i));
      nb.Allocatable(32000, 128 * kGi)
          .Label("kubernetes.io/hostname", "node-" + std::to_string(i))
          .Label("topology.kubernetes.io/zone", "zone-" + std::to_string(i % 3))
          .Label("node.kubernetes.io/instance-type", i % 2 ? "m5.xlarge" : "c5.xlarge");
      if (i % 10 == 0) nb.Taint("dedicated", "infra", v1::NO_SCHEDULE);
      if (i % 7 == 0) nb.Taint("spot", "true", v1::PREFER_NO_SCHEDULE);
      std::vector<v1::Pod> pods;
      for (int p = 0; p < 10; ++p) {
        pods.push_back(PodBuilder("p-" + std::to_string(i) + "-" + std::to_string(p))
                           .Container(500, kGi)
                           .NodeName("node-" + std::to_string(i))
                           .Build());
      }
      if (i % 5 == 0) pods.push_back(PodBuilder("hp-" + std::to_string(i)).HostPort(8080).Build());
      sdk::NodeInfo& info =
          handle.fake_snapshot().Add(testing::MakeNodeInfo(nb.Build(), pods, i + 1));
      if (i % 4 == 0) info.mutable_images()["registry.k8s.io/app:v1"] = {300 << 20, kNodes / 4};
    }
    for (const sdk::PluginDefinition& def : DefaultPlugins()) {
      plugins.push_back(*def.factory(boost::json::object(), handle));
    }
    PodBuilder pb("incoming");
    pb.Container(1000, 2 * kGi, "registry.k8s.io/app:v1")
        .HostPort(9090)
        .NodeSelector("node.kubernetes.io/instance-type", "m5.xlarge")
        .Toleration("spot", v1::Toleration::EXISTS, "", v1::PREFER_NO_SCHEDULE);
    v1::PreferredSchedulingTerm* pref = pb.MutableNodeAffinity()->add_preferred();
    pref->set_weight(10);
    v1::NodeSelectorRequirement* r = pref->mutable_preference()->add_match_expressions();
    r->set_key("topology.kubernetes.io/zone");
    r->set_operator_(v1::NodeSelectorRequirement::IN);
    r->add_values("zone-1");
    pod = pb.Info();
  }
};

void BM_DefaultPluginsCycle(benchmark::State& bench) {
  static Fixture* f = new Fixture();
  const auto& all = f->handle.snapshot().Nodes();
  std::vector<const sdk::NodeInfo*> feasible;
  std::vector<sdk::NodeScore> scores;
  feasible.reserve(all.size());
  for (auto _ : bench) {
    sdk::CycleState state;
    std::vector<sdk::FilterPlugin*> filters;
    for (const sdk::PluginPtr& p : f->plugins) {
      bool skip = false;
      if (auto* pre = dynamic_cast<sdk::PreFilterPlugin*>(p.get())) {
        skip = pre->PreFilter(state, *f->pod, f->handle.snapshot()).second.IsSkip();
      }
      if (auto* filter = dynamic_cast<sdk::FilterPlugin*>(p.get()); filter && !skip) {
        filters.push_back(filter);
      }
    }
    feasible.clear();
    for (const sdk::NodeInfo* node : all) {
      bool ok = true;
      for (sdk::FilterPlugin* filter : filters) {
        if (!filter->Filter(state, *f->pod, *node).IsSuccess()) {
          ok = false;
          break;
        }
      }
      if (ok) feasible.push_back(node);
    }
    for (const sdk::PluginPtr& p : f->plugins) {
      auto* score = dynamic_cast<sdk::ScorePlugin*>(p.get());
      if (score == nullptr) continue;
      if (auto* pre = dynamic_cast<sdk::PreScorePlugin*>(p.get())) {
        if (pre->PreScore(state, *f->pod, feasible).IsSkip()) continue;
      }
      scores.clear();
      for (const sdk::NodeInfo* node : feasible) {
        scores.push_back({node, score->Score(state, *f->pod, *node).first});
      }
      if (score->HasNormalizeScore()) score->NormalizeScore(state, *f->pod, scores);
    }
    benchmark::DoNotOptimize(scores.data());
  }
  bench.counters["feasible"] = static_cast<double>(feasible.size());
  bench.counters["ns_per_node"] = benchmark::Counter(
      static_cast<double>(bench.iterations()) * kNodes,
      benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_DefaultPluginsCycle)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace podium::plugins

BENCHMARK_MAIN();
