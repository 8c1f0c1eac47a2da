#!/usr/bin/python3
"""Preemption end to end: podium-sim + podium-scheduler + podium-plugin-host on
small clusters, each case asserting the exact victims and the preemptor's node.

Victims are bound at load (spec.nodeName); the preemptor is created after they
settled (sim.podium.dev/create-later), so every case starts from a full cluster.
"""

import json
import os

import podium_testlib as lib
from podium_testlib import cluster_yaml, node_yaml

LATER = {"sim.podium.dev/create-later": "true"}


def pod(name, cpu, priority, node=None, labels=None, later=False, never=False, nominated=None):
    meta = {"name": name, "namespace": "default"}
    if labels:
        meta["labels"] = labels
    if later:
        meta["annotations"] = dict(LATER)
    spec = {"priority": priority,
            "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.9",
                            "resources": {"requests": {"cpu": cpu, "memory": "128Mi"}}}]}
    if node:
        spec["nodeName"] = node
    if never:
        spec["preemptionPolicy"] = "Never"
    status = {"phase": "Running" if node else "Pending"}
    if nominated:
        status["nominatedNodeName"] = nominated
    doc = {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": status}
    return json.dumps(doc) + "\n"


def pdb(name, match, min_available=None, max_unavailable=None):
    spec = {"selector": {"matchLabels": match}}
    if min_available is not None:
        spec["minAvailable"] = min_available
    if max_unavailable is not None:
        spec["maxUnavailable"] = max_unavailable
    return json.dumps({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                       "metadata": {"name": name, "namespace": "default"}, "spec": spec}) + "\n"


class PreemptionTest(lib.IntegrationTest):
    def setUp(self):
        super().setUp()
        for name in ("sim", "scheduler", "plugin_host"):
            path = getattr(lib.Flags, name)
            self.assertTrue(path and os.path.exists(path), f"--{name} binary is missing")

    def run_cluster(self, *docs, extra=()):
        cluster = self.write("cluster.yaml", cluster_yaml(*docs))
        rc, out, err = self.run_sim(cluster, config=lib.config_path("default-plugins.yaml"), extra=extra)
        self.assertEqual(rc, 0, f"podium-sim failed:\n{err[-4000:]}")
        report = lib.parse_report(out)
        self.assertEqual(report.outcome, "completed")
        return report

    @staticmethod
    def deleted(report):
        return sorted(d.split(":")[0] for d in report.raw.get("deleted_pods") or [])

    def test_minimal_victim_set(self):
        # node-a: the preemptor (2 CPU) needs only low-20 gone (low-30 and low-10
        # are reprieved). node-b: its only victim is of higher priority (50).
        report = self.run_cluster(
            node_yaml("node-a", cpu="4"), node_yaml("node-b", cpu="4"),
            pod("low-10", "1", 10, node="node-a"),
            pod("low-20", "2", 20, node="node-a"),
            pod("low-30", "1", 30, node="node-a"),
            pod("mid-50", "4", 50, node="node-b"),
            pod("preemptor", "2", 100, later=True))
        self.assertEqual(report.node_of("preemptor"), "node-a")
        self.assertEqual(self.deleted(report), ["default/low-20"])
        for name in ("low-10", "low-30"):
            self.assertEqual(report.node_of(name), "node-a")
        self.assertEqual(report.node_of("mid-50"), "node-b")

    def test_preemption_policy_never_never_evicts(self):
        report = self.run_cluster(
            node_yaml("node-a", cpu="2"),
            pod("low", "2", 10, node="node-a"),
            pod("polite", "2", 100, later=True, never=True))
        self.assertIsNone(report.node_of("polite"))
        self.assertEqual(self.deleted(report), [])
        self.assertEqual(report.node_of("low"), "node-a")
        self.assertEqual(report.message_of("polite"),
                         "0/1 nodes are available: 1 Insufficient cpu. "
                         "preemption: not eligible due to preemptionPolicy=Never.")

    def test_no_lower_priority_pod_no_preemption(self):
        report = self.run_cluster(
            node_yaml("node-a", cpu="2"),
            pod("high", "2", 1000, node="node-a"),
            pod("preemptor", "2", 100, later=True))
        self.assertIsNone(report.node_of("preemptor"))
        self.assertEqual(self.deleted(report), [])
        self.assertEqual(report.message_of("preemptor"),
                         "0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes are "
                         "available: 1 No preemption victims found for incoming pod.")

    def test_pdb_respected_when_another_candidate_exists(self):
        # Without the PDB node-a would win (its victim has the lower priority).
        report = self.run_cluster(
            node_yaml("node-a", cpu="2"), node_yaml("node-b", cpu="2"),
            pod("db-1", "2", 10, node="node-a", labels={"app": "db"}),
            pod("web-1", "2", 20, node="node-b", labels={"app": "web"}),
            pdb("db", {"app": "db"}, min_available=1),
            pod("preemptor", "2", 100, later=True))
        self.assertEqual(report.node_of("preemptor"), "node-b")
        self.assertEqual(self.deleted(report), ["default/web-1"])

    def test_pdb_violated_only_when_no_other_candidate(self):
        report = self.run_cluster(
            node_yaml("node-a", cpu="2"),
            pod("db-1", "2", 10, node="node-a", labels={"app": "db"}),
            pdb("db", {"app": "db"}, min_available=1),
            pod("preemptor", "2", 100, later=True))
        self.assertEqual(report.node_of("preemptor"), "node-a")
        self.assertEqual(self.deleted(report), ["default/db-1"])

    def test_pdb_budget_left_is_not_a_violation(self):
        # maxUnavailable 1 over two healthy pods: one may go. node-a's db pod is
        # then the cheaper victim again.
        report = self.run_cluster(
            node_yaml("node-a", cpu="2"), node_yaml("node-b", cpu="2"), node_yaml("node-c", cpu="2"),
            pod("db-1", "2", 10, node="node-a", labels={"app": "db"}),
            pod("db-2", "2", 1000, node="node-c", labels={"app": "db"}),
            pod("web-1", "2", 20, node="node-b", labels={"app": "web"}),
            pdb("db", {"app": "db"}, max_unavailable=1),
            pod("preemptor", "2", 100, later=True))
        self.assertEqual(report.node_of("preemptor"), "node-a")
        self.assertEqual(self.deleted(report), ["default/db-1"])

    def test_lower_priority_pod_cannot_take_a_nominated_pods_room(self):
        # The victim terminates for 1 s, holding its 2 CPU. node-a has 1 CPU
        # free meanwhile: "late" (priority 5) would fit there if the nominated
        # preemptor (3 CPU) were not counted, and would then be preempted too.
        report = self.run_cluster(
            node_yaml("node-a", cpu="4"),
            pod("keep", "1", 1000, node="node-a"),
            pod("victim", "2", 10, node="node-a"),
            pod("preemptor", "3", 100, later=True),
            pod("late", "1", 5, later=True),
            extra=["--termination-grace", "1s"])
        self.assertEqual(report.node_of("preemptor"), "node-a")
        self.assertEqual(self.deleted(report), ["default/victim"])
        self.assertIsNone(report.node_of("late"))
        self.assertEqual(report.node_of("keep"), "node-a")

    def test_external_nominated_node_is_honoured_when_the_pod_fits_and_ignored_when_not(self):
        # status.nominatedNodeName set by another component (an autoscaler):
        # "hinted" fits on node-b and lands there although node-a is emptier
        # (LeastAllocated would pick node-a); "too-big" does not fit on node-c,
        # so every node is evaluated and it lands on node-a. Nothing is evicted.
        report = self.run_cluster(
            node_yaml("node-a", cpu="4"), node_yaml("node-b", cpu="4"), node_yaml("node-c", cpu="4"),
            pod("busy-b", "2", 0, node="node-b"),
            pod("busy-c", "3", 0, node="node-c"),
            pod("hinted", "1", 0, nominated="node-b", later=True),
            pod("too-big", "2", 0, nominated="node-c", later=True))
        self.assertEqual(report.node_of("hinted"), "node-b")
        self.assertEqual(report.node_of("too-big"), "node-a")
        self.assertEqual(self.deleted(report), [])

    def test_remote_filter_rejecting_a_node_keeps_it_from_being_a_candidate(self):
        # node-a is under maintenance (the Python plugin's DenyLabel rejects it
        # whatever is evicted); its victim has the lowest priority, so without
        # that plugin's dry run node-a would be chosen.
        cluster = self.write("cluster.yaml", cluster_yaml(
            node_yaml("node-a", cpu="2", labels={"podium.dev/maintenance": "true"}),
            node_yaml("node-b", cpu="2"),
            pod("low", "2", 10, node="node-a"),
            pod("mid", "2", 50, node="node-b"),
            pod("preemptor", "2", 100, later=True)))
        addr = self.start_plugin()
        rc, out, err = self.run_sim(cluster, config=lib.config_path("with-python-plugin.yaml"),
                                    endpoints=[("python", addr)])
        self.assertEqual(rc, 0, f"podium-sim failed:\n{err[-4000:]}")
        report = lib.parse_report(out)
        self.assertEqual(report.node_of("preemptor"), "node-b")
        self.assertEqual(self.deleted(report), ["default/mid"])
        self.assertEqual(report.node_of("low"), "node-a")


if __name__ == "__main__":
    lib.main()
