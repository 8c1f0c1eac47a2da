#!/usr/bin/python3
"""Defect 14: a plugin sidecar that starts after the scheduler.

The scheduler and its plugin processes are often started together. One that is
not listening yet must be waited for (--plugin-wait-seconds), and an endpoint
with failurePolicy Ignore that comes up even later must be used from the moment
it connects: here the Python plugin's DenyLabel filter keeps pods off a node
under maintenance only if the scheduler calls it."""

import time

import podium_testlib as lib
from podium_testlib import cluster_yaml, node_yaml, pod_yaml


class LatePluginTest(lib.IntegrationTest):
    def setUp(self):
        super().setUp()
        lib.require_binaries(self, "sim", "scheduler", "plugin_host")
        self.cluster = self.write("cluster.yaml", cluster_yaml(
            node_yaml("node-m", zone="zone-a", cpu="8", labels={"podium.dev/maintenance": "true"}),
            node_yaml("node-n", zone="zone-a", cpu="8"),
            pod_yaml("web-1"),
            pod_yaml("web-2"),
            pod_yaml("web-3"),
        ))

    def start_scheduler_without_waiting(self, wait_seconds):
        """podium-plugin-host (up) and podium-scheduler whose python endpoint is
        not listening yet; returns (scheduler address, python socket address)."""
        host_addr = f"unix://{self.path('host.sock')}"
        host = lib.Process([lib.Flags.plugin_host, "--listen", host_addr], self.dir,
                           "podium-plugin-host")
        self.processes.append(host)
        host.wait_for_stderr(r"listening on")
        python_addr = f"unix://{self.path('python.sock')}"
        addr = f"unix://{self.path('scheduler.sock')}"
        config = self.config_variant("with-python-plugin.yaml", failure_policy="Ignore")
        argv = [lib.Flags.scheduler, "--config", config, "--listen", addr, "--metrics-address=",
                "--plugin-endpoint", f"host={host_addr}",
                "--plugin-endpoint", f"python={python_addr}",
                f"--plugin-wait-seconds={wait_seconds}"]
        self.scheduler_process = lib.Process(argv, self.dir, "podium-scheduler")
        self.processes.append(self.scheduler_process)
        return addr, python_addr

    def assert_deny_label_applied(self, scheduler):
        rc, out, err = self.run_sim(self.cluster, scheduler=scheduler, sim_timeout="20s")
        self.assertEqual(rc, 0, err[-4000:])
        report = lib.parse_report(out)
        for pod in ("web-1", "web-2", "web-3"):
            self.assertEqual(report.node_of(pod), "node-n", f"{pod}: {out[-2000:]}")

    def test_endpoint_that_starts_a_second_late_is_waited_for(self):
        scheduler, _ = self.start_scheduler_without_waiting(wait_seconds=30)
        time.sleep(1)
        self.start_plugin()
        self.scheduler_process.wait_for_stderr(r"podium-scheduler listening on", timeout=40)
        self.assertNotIn("\"Plugin stream broke\"", self.scheduler_process.stderr())
        self.assert_deny_label_applied(scheduler)

    def test_ignore_endpoint_that_connects_after_the_wait_is_used(self):
        scheduler, _ = self.start_scheduler_without_waiting(wait_seconds=1)
        self.scheduler_process.wait_for_stderr(r"podium-scheduler listening on", timeout=40)
        self.start_plugin()
        self.scheduler_process.wait_for_stderr(r'"Plugin endpoint connected" endpoint="python"',
                                               timeout=20)
        self.assert_deny_label_applied(scheduler)


if __name__ == "__main__":
    lib.main()
