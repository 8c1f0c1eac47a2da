#!/usr/bin/python3
"""Bad input from outside gets a clear error naming the object and field, never a
crash: malformed cluster YAML, an invalid quantity, an unknown plugin in the
scheduler's configuration."""

import os
import signal

import podium_testlib as lib
from podium_testlib import cluster_yaml, node_yaml, pod_yaml


class BadInputTest(lib.IntegrationTest):
    def assertCleanFailure(self, rc, err):
        """Non-zero exit, by choice rather than by a signal (crash, abort)."""
        self.assertNotEqual(rc, 0, "expected a non-zero exit")
        self.assertGreater(rc, 0, f"killed by signal {-rc}:\n{err[-4000:]}")
        self.assertNotIn(rc, (128 + signal.SIGABRT, 128 + signal.SIGSEGV),
                         f"crashed:\n{err[-4000:]}")
        self.assertNotIn("terminate called", err)

    def test_malformed_cluster_yaml(self):
        lib.require_binaries(self, "sim")
        cluster = self.write("broken-cluster.yaml", cluster_yaml(
            node_yaml("node-a"),
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: broken\n"
            "spec:\n  containers: [ {name: main\n    image: x\n",  # Unclosed flow sequence.
        ))
        rc, out, err = self.run_sim(cluster, config=lib.config_path("default-plugins.yaml"))
        self.assertCleanFailure(rc, err)
        self.assertIn("broken-cluster.yaml", err)
        # Which document: "document 2", "doc 2" or a line number of the second one.
        self.assertRegex(err.lower(), r"document|doc\b|line")

    def test_invalid_quantity_names_pod_and_field(self):
        lib.require_binaries(self, "sim")
        cluster = self.write("cluster.yaml", cluster_yaml(
            node_yaml("node-a"),
            pod_yaml("greedy-pod", cpu="12x"),
        ))
        rc, out, err = self.run_sim(cluster, config=lib.config_path("default-plugins.yaml"))
        self.assertCleanFailure(rc, err)
        self.assertIn("greedy-pod", err)
        self.assertIn("cpu", err)
        self.assertIn("12x", err)

    def test_unknown_plugin_refuses_to_start(self):
        lib.require_binaries(self, "scheduler")
        sock = self.path("scheduler.sock")
        p = lib.Process([lib.Flags.scheduler, "--config", lib.config_path("unknown-plugin.yaml"),
                         "--listen", f"unix://{sock}"], self.dir, "podium-scheduler")
        self.processes.append(p)
        try:
            rc = p.wait(30)
        except Exception:
            self.fail(f"podium-scheduler started with an unknown plugin:\n{p.stderr()}")
        err = p.stderr() + p.stdout()
        self.assertCleanFailure(rc, err)
        self.assertIn("unknown plugin", err.lower())
        self.assertIn("NoSuchPlugin", err)
        self.assertIn("profiles[0].plugins.score", err)  # The field, by path.
        self.assertFalse(os.path.exists(sock) and p.alive())


if __name__ == "__main__":
    lib.main()
