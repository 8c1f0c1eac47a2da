// PodTopologySpread and InterPodAffinity over 1000 nodes for one pod, in the
// shapes of make bench's spread-1000 and antiaffinity-500 half-way through
// (one matching pod on every other node): PreFilter, Filter on every node,
// PreScore, Score and NormalizeScore on the feasible ones. Not a test.
#include <memory>
#include <string>
#include <vector>

#include "benchmark/benchmark.h"
#include "plugins/helper/testing.h"
#include "plugins/inter_pod_affinity/inter_pod_affinity.h"
#include "plugins/pod_topology_spread/pod_topology_spread.h"

namespace podium::plugins {
namespace {

using testing::FakeHandle;
using testing::NodeBuilder;
using testing::PodBuilder;

constexpr int kNodes = 1000;
constexpr int64_t kGi = 1024LL * 1024 * 1024;

v1::LabelSelector AppSelector(const std::string& app) {
  v1::LabelSelector s;
  (*s.mutable_match_labels())["app"] = app;
  return s;
}

PodBuilder SpreadPod(const std::string& name) {
  PodBuilder b(name);
  b.Container(100, kGi / 2).Label("app", "spread");
  auto* zone = b.mutable_pod().add_topology_spread_constraints();
  zone->set_max_skew(1);
  zone->set_topology_key("topology.kubernetes.io/zone");
  *zone->mutable_label_selector() = AppSelector("spread");
  auto* host = b.mutable_pod().add_topology_spread_constraints();
  host->set_max_skew(1);
  host->set_topology_key("kubernetes.io/hostname");
  host->set_when_unsatisfiable(v1::TopologySpreadConstraint::SCHEDULE_ANYWAY);
  *host->mutable_label_selector() = AppSelector("spread");
  return b;
}

PodBuilder AntiPod(const std::string& name) {
  PodBuilder b(name);
  b.Container(100, kGi / 2).Label("app", "anti");
  auto* t = b.mutable_pod().mutable_affinity()->mutable_pod_anti_affinity()->add_required();
  *t->mutable_label_selector() = AppSelector("anti");
  t->set_topology_key("kubernetes.io/hostname");
  return b;
}

struct Fixture {
  FakeHandle handle;
  explicit Fixture(PodBuilder (*make)(const std::string&)) {
    for (int i = 0; i < kNodes; ++i) {
      const std::string name = "node-" + std::to_string(i);
      NodeBuilder nb(name);
      nb.Allocatable(4000, 32 * kGi)
          .Label("kubernetes.io/hostname", name)
          .Label("topology.kubernetes.io/zone", "zone-" + std::to_string(i % 3));
      std::vector<v1::Pod> pods;
      for (int p = 0; p < 4; ++p) {
        pods.push_back(PodBuilder(name + "-other-" + std::to_string(p))
                           .Container(100, kGi)
                           .Label("app", "other")
                           .NodeName(name)
                           .Build());
      }
      if (i % 2 == 0) pods.push_back(make(name + "-placed").NodeName(name).Build());
      handle.fake_snapshot().Add(testing::MakeNodeInfo(nb.Build(), pods, i + 1));
    }
  }
};

template <typename Plugin>
void RunCycle(benchmark::State& bench, Fixture& f, const sdk::PodInfo& pod) {
  auto made = Plugin::New(boost::json::object(), f.handle);
  auto* plugin = dynamic_cast<Plugin*>(made->get());
  const auto& all = f.handle.snapshot().Nodes();
  std::vector<const sdk::NodeInfo*> feasible;
  std::vector<sdk::NodeScore> scores;
  for (auto _ : bench) {
    sdk::CycleState state;
    const bool skip = plugin->PreFilter(state, pod, f.handle.snapshot()).second.IsSkip();
    feasible.clear();
    for (const sdk::NodeInfo* node : all) {
      if (skip || plugin->Filter(state, pod, *node).IsSuccess()) feasible.push_back(node);
    }
    scores.clear();
    if (!plugin->PreScore(state, pod, feasible).IsSkip()) {
      for (const sdk::NodeInfo* node : feasible) {
        scores.push_back({node, plugin->Score(state, pod, *node).first});
      }
      plugin->NormalizeScore(state, pod, scores);
    }
    benchmark::DoNotOptimize(scores.data());
  }
  bench.counters["feasible"] = static_cast<double>(feasible.size());
}

void BM_PodTopologySpreadCycle(benchmark::State& bench) {
  static Fixture* f = new Fixture(&SpreadPod);
  sdk::PodInfoPtr pod = SpreadPod("incoming").Info();
  RunCycle<PodTopologySpread>(bench, *f, *pod);
}
BENCHMARK(BM_PodTopologySpreadCycle)->Unit(benchmark::kMicrosecond);

// The same with the plugin host mirror's label index and pod change log: the
// domains and matching pods per node are kept across cycles (no pod changes
// between these cycles), as in the plugin host.
void BM_PodTopologySpreadCycleKept(benchmark::State& bench) {
  static Fixture* f = [] {
    auto* fixture = new Fixture(&SpreadPod);
    fixture->handle.fake_snapshot().set_label_index(true);
    fixture->handle.fake_snapshot().EnablePodChangeLog();
    return fixture;
  }();
  sdk::PodInfoPtr pod = SpreadPod("incoming").Info();
  RunCycle<PodTopologySpread>(bench, *f, *pod);
}
BENCHMARK(BM_PodTopologySpreadCycleKept)->Unit(benchmark::kMicrosecond);

void BM_InterPodAffinityCycle(benchmark::State& bench) {
  static Fixture* f = new Fixture(&AntiPod);
  sdk::PodInfoPtr pod = AntiPod("incoming").Info();
  RunCycle<InterPodAffinity>(bench, *f, *pod);
}
BENCHMARK(BM_InterPodAffinityCycle)->Unit(benchmark::kMicrosecond);

// The same with the plugin host mirror's label index and pod change log:
// the anti-affinity counts are kept across cycles (no pod changes between
// these cycles).
void BM_InterPodAffinityCycleKept(benchmark::State& bench) {
  static Fixture* f = [] {
    auto* fixture = new Fixture(&AntiPod);
    fixture->handle.fake_snapshot().set_label_index(true);
    fixture->handle.fake_snapshot().EnablePodChangeLog();
    return fixture;
  }();
  sdk::PodInfoPtr pod = AntiPod("incoming").Info();
  RunCycle<InterPodAffinity>(bench, *f, *pod);
}
BENCHMARK(BM_InterPodAffinityCycleKept)->Unit(benchmark::kMicrosecond);

// A pod with no terms in the same cluster: what every other pod pays.
void BM_InterPodAffinityPlainPod(benchmark::State& bench) {
  static Fixture* f = new Fixture(&AntiPod);
  sdk::PodInfoPtr pod = PodBuilder("plain").Container(100, kGi).Label("app", "web").Info();
  RunCycle<InterPodAffinity>(bench, *f, *pod);
}
BENCHMARK(BM_InterPodAffinityPlainPod)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace podium::plugins

BENCHMARK_MAIN();
