#!/usr/bin/python3
"""pluginConfig args per profile (issue 5 item 6), end to end: two profiles give
the out-of-process NodeResourcesFit different scoring strategies, and the same
pod is placed differently by each, as kube-scheduler would."""

import os

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


if __name__ == "__main__":
    lib.main()
