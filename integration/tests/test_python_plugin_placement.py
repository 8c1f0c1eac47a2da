#!/usr/bin/python3
"""A plugin written in Python, with no SDK, changes where podium-sim places pods.

Each case runs the same small cluster twice: with the default plugins only (the
control) and with the Python plugin added, and asserts on the difference."""

import podium_testlib as lib
from podium_testlib import cluster_yaml, node_yaml, pod_yaml

PREFERRED = {"podium.dev/preferred-zone": "zone-b"}


class PythonPluginPlacementTest(lib.IntegrationTest):
    def setUp(self):
        super().setUp()
        lib.require_binaries(self, "sim", "scheduler", "plugin_host")

    def run_both(self, cluster_text):
        cluster = self.write("cluster.yaml", cluster_text)
        rc, out, err = self.run_sim(cluster, config=lib.config_path("default-plugins.yaml"))
        self.assertEqual(rc, 0, f"control run failed:\n{err[-4000:]}")
        control = lib.parse_report(out)
        self.assertEqual(control.outcome, "completed")
        addr = self.start_plugin()
        rc, out, err = self.run_sim(cluster, config=lib.config_path("with-python-plugin.yaml"),
                                    endpoints=[("python", addr)])
        self.assertEqual(rc, 0, f"run with the Python plugin failed:\n{err[-4000:]}")
        report = lib.parse_report(out)
        self.assertEqual(report.outcome, "completed")
        return control, report

    def test_python_plugin_changes_placement(self):
        # Two nodes alike but for their zone; node-b already runs a pod, so the
        # default scorers (least allocated, balanced) prefer node-a.
        control, report = self.run_both(cluster_yaml(
            node_yaml("node-a", zone="zone-a"),
            node_yaml("node-b", zone="zone-b"),
            pod_yaml("busy", cpu="1", memory="1Gi", node_name="node-b"),
            pod_yaml("web-1", annotations=PREFERRED),
            pod_yaml("web-2", annotations=PREFERRED),
        ))
        self.assertEqual(control.node_of("web-1"), "node-a")
        self.assertEqual(control.node_of("web-2"), "node-a")
        self.assertEqual(report.node_of("web-1"), "node-b")
        self.assertEqual(report.node_of("web-2"), "node-b")
        self.assertIn("open from scheduler", self.plugin_process.stderr())

    def test_deny_label_filter(self):
        # node-m is empty but under maintenance; node-n is small and half used.
        control, report = self.run_both(cluster_yaml(
            node_yaml("node-m", zone="zone-a", cpu="8",
                      labels={"podium.dev/maintenance": "true"}),
            node_yaml("node-n", zone="zone-a", cpu="2"),
            pod_yaml("busy", cpu="1", node_name="node-n"),
            pod_yaml("small", cpu="200m"),
            pod_yaml("big", cpu="4"),
        ))
        self.assertEqual(control.node_of("small"), "node-m")
        self.assertEqual(control.node_of("big"), "node-m")
        self.assertEqual(report.node_of("small"), "node-n")
        self.assertIsNone(report.node_of("big"))
        msg = report.message_of("big")
        self.assertIn("0/2 nodes are available", msg)
        self.assertIn("node(s) are under maintenance", msg)
        self.assertIn("Insufficient cpu", msg)


if __name__ == "__main__":
    lib.main()
