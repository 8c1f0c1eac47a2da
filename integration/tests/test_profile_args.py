#!/usr/bin/python3
"""pluginConfig args per profile (issue 5 item 6), end to end: two profiles give
the out-of-process NodeResourcesFit different scoring strategies, and the same
pod is placed differently by each, as kube-scheduler would."""

import os
import re

import podium_testlib as lib
from podium_testlib import cluster_yaml, node_yaml, pod_yaml

CONFIG = """\
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: spread-out
  plugins:
    score:
      disabled: [{name: "*"}]
      enabled: [{name: NodeResourcesFit}]
  pluginConfig:
  - name: NodeResourcesFit
    args: {scoringStrategy: {type: LeastAllocated}}
- schedulerName: pack
  plugins:
    score:
      disabled: [{name: "*"}]
      enabled: [{name: NodeResourcesFit}]
  pluginConfig:
  - name: NodeResourcesFit
    args: {scoringStrategy: {type: MostAllocated}}
---
apiVersion: podium.dev/v1alpha1
kind: PodiumConfiguration
pluginEndpoints:
- name: host
  address: unix:///run/podium/host.sock
  plugins: [NodeUnschedulable, NodeName, TaintToleration, NodeAffinity, NodePorts, NodeResourcesFit, PodTopologySpread, InterPodAffinity, NodeResourcesBalancedAllocation, ImageLocality]
"""


def pod_for(name, profile, cpu="100m", node_name=None):
    doc = pod_yaml(name, cpu=cpu, node_name=node_name)
    return doc.replace("spec:\n", f"spec:\n  schedulerName: {profile}\n", 1)


class ProfileArgsTest(lib.IntegrationTest):
    def setUp(self):
        super().setUp()
        for name in ("sim", "scheduler", "plugin_host"):
            path = getattr(lib.Flags, name)
            self.assertTrue(path and os.path.exists(path), f"--{name} binary missing: {path}")

    def test_two_profiles_score_the_same_pod_with_their_own_args(self):
        # busy has 2 of its 4 CPUs requested; idle none. LeastAllocated prefers
        # idle, MostAllocated busy.
        cluster = self.write("cluster.yaml", cluster_yaml(
            node_yaml("busy", cpu="4", memory="8Gi"), node_yaml("idle", cpu="4", memory="8Gi"),
            pod_for("running", "pack", cpu="2", node_name="busy"),
            pod_for("spread-me", "spread-out"), pod_for("pack-me", "pack")))
        config = self.write("config.yaml", CONFIG)
        rc, out, err = self.run_sim(cluster, config=config)
        self.assertEqual(rc, 0, f"podium-sim failed (the config must be accepted):\n{err[-4000:]}")
        report = lib.parse_report(out)
        self.assertEqual(report.outcome, "completed", out[-4000:])
        self.assertEqual(report.node_of("spread-me"), "idle")
        self.assertEqual(report.node_of("pack-me"), "busy")


def readme_configuration_example():
    """The first yaml block under README.md's "## Configuration"."""
    with open(os.path.join(lib.Flags.repo, "README.md")) as f:
        text = f.read()
    section = text[text.index("\n## Configuration\n"):]
    match = re.search(r"```yaml\n(.*?)```", section, re.S)
    assert match, "README.md's Configuration section has no yaml block"
    return match.group(1)


class ReadmeConfigurationTest(lib.IntegrationTest):
    def test_the_readme_configuration_example_schedules(self):
        # The example a reader copies: its endpoints must serve every plugin
        # its profile enables, and its python endpoint's PreferZone (weight
        # 10) must steer a pod to its preferred zone.
        plugin = self.start_plugin()
        config = self.write("readme.yaml", readme_configuration_example())
        cluster = self.write("cluster.yaml", cluster_yaml(
            node_yaml("a1", zone="a"), node_yaml("b1", zone="b"),
            pod_yaml("to-b", annotations={"podium.dev/preferred-zone": "b"}),
            pod_yaml("to-a", annotations={"podium.dev/preferred-zone": "a"})))
        rc, out, err = self.run_sim(cluster, config=config, endpoints=[("python", plugin)])
        self.assertEqual(rc, 0, f"podium-sim failed (README's example must be accepted):\n{err[-4000:]}")
        report = lib.parse_report(out)
        self.assertEqual(report.outcome, "completed", out[-4000:])
        self.assertEqual(report.node_of("to-b"), "b1")
        self.assertEqual(report.node_of("to-a"), "a1")


if __name__ == "__main__":
    lib.main()
