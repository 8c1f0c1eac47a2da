#include "plugins/default_plugins.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "plugins/helper/testing.h"

namespace podium::plugins {
namespace {

using ::testing::ElementsAre;

TEST(DefaultPluginsTest, AllWithWorkingFactories) {
  std::vector<sdk::PluginDefinition> defs = DefaultPlugins();
  std::vector<std::string> names;
  testing::FakeHandle handle;
  for (const sdk::PluginDefinition& def : defs) {
    names.push_back(def.name);
    absl::StatusOr<sdk::PluginPtr> plugin = def.factory(boost::json::object(), handle);
    ASSERT_TRUE(plugin.ok()) << def.name << ": " << plugin.status();
    EXPECT_EQ((*plugin)->Name(), def.name);
    // Every default plugin declares its events (possibly none).
    EXPECT_NE(dynamic_cast<sdk::EnqueueExtensions*>(plugin->get()), nullptr) << def.name;
  }
  EXPECT_THAT(names, ElementsAre("NodeUnschedulable", "NodeName", "TaintToleration", "NodeAffinity",
                                 "NodePorts", "NodeResourcesFit", "PodTopologySpread", "InterPodAffinity",
                                 "NodeResourcesBalancedAllocation",
                                 "ImageLocality", "Coscheduling"));
}

TEST(DefaultPluginsTest, EveryPluginOfACycleSignsPods) {
  // A plugin at PreFilter/Filter/PreScore/Score that does not sign would make
  // every pod of the default profile unsignable (no batching).
  testing::FakeHandle handle;
  for (const sdk::PluginDefinition& def : DefaultPlugins()) {
    absl::StatusOr<sdk::PluginPtr> plugin = def.factory(boost::json::object(), handle);
    ASSERT_TRUE(plugin.ok()) << def.name;
    sdk::Plugin* p = plugin->get();
    const bool in_cycle = dynamic_cast<sdk::PreFilterPlugin*>(p) != nullptr ||
                          dynamic_cast<sdk::FilterPlugin*>(p) != nullptr ||
                          dynamic_cast<sdk::PreScorePlugin*>(p) != nullptr ||
                          dynamic_cast<sdk::ScorePlugin*>(p) != nullptr;
    const auto* sign = dynamic_cast<sdk::SignPlugin*>(p);
    EXPECT_EQ(sign != nullptr, in_cycle) << def.name;
    if (def.name == "PodTopologySpread" || def.name == "InterPodAffinity") {
      // Pods spread or attracted against other nodes' pods are never batched.
      ASSERT_NE(sign, nullptr) << def.name;
      EXPECT_FALSE(sign->SignatureSpec().unsignable_when_set.empty()) << def.name;
    }
  }
}

TEST(DefaultPluginsTest, ArgsCarryingApiVersionAndKindAreAccepted) {
  testing::FakeHandle handle;
  boost::json::object args;
  args["apiVersion"] = "kubescheduler.config.k8s.io/v1";
  args["kind"] = "NodeResourcesFitArgs";
  for (const sdk::PluginDefinition& def : DefaultPlugins()) {
    EXPECT_TRUE(def.factory(args, handle).ok()) << def.name;
  }
}

}  // namespace
}  // namespace podium::plugins
