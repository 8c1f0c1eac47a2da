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

    def test_sim_refuses_what_the_scheduler_refuses(self):
        # Defect 16: podium-sim loaded these and waited for its timeout with
        # the pods "pending" and no reason.
        lib.require_binaries(self, "sim")
        for name, pod, field in (
                ("host-port", pod_yaml("web").replace(
                    "  containers:\n  - name: main\n",
                    "  containers:\n  - name: main\n    ports: [{containerPort: 80, hostPort: 70000}]\n"),
                 "spec.containers[0].ports[0].hostPort"),
                ("forged-name", pod_yaml("web").replace("name: web", 'name: "web\\nE0000 forged"'),
                 "metadata.name")):
            cluster = self.write(f"{name}.yaml", cluster_yaml(node_yaml("node-a"), pod))
            self.assertIn(field.split(".")[-1].split("[")[0], pod, "the fixture did not apply")
            rc, out, err = self.run_sim(cluster, config=lib.config_path("default-plugins.yaml"), timeout=30)
            self.assertCleanFailure(rc, err)
            self.assertNotEqual(rc, 3, f"timed out instead of refusing:\n{err[-4000:]}")
            self.assertIn(f"{name}.yaml: document 2", err)
            self.assertIn(field, err)
            self.assertNotIn("\nE0000 forged", err, "a name forged a log line")

    def test_missing_kind_and_alias_bomb_are_errors(self):
        # Defect 15: an item without kind aborted podium-sim; aliases blew it up.
        lib.require_binaries(self, "sim")
        truncated = self.write("truncated.yaml",
                               "apiVersion: v1\nkind: List\nitems:\n" +
                               "".join("- " + line + "\n" if i == 0 else "  " + line + "\n"
                                       for i, line in enumerate(node_yaml("node-a").splitlines())) +
                               "- apiVersion: v1\n  metadata:\n    name: web-")
        rc, out, err = self.run_sim(truncated, config=lib.config_path("default-plugins.yaml"), timeout=30)
        self.assertCleanFailure(rc, err)
        self.assertIn("truncated.yaml: document 1 item 2: kind: missing", err)

        laughs = ["a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
        for i in range(1, 9):
            laughs.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]")
        bomb = self.write("bomb.yaml", "kind: Pod\nmetadata: {name: lol}\n" + "\n".join(laughs) + "\n")
        rc, out, err = self.run_sim(bomb, config=lib.config_path("default-plugins.yaml"), timeout=30)
        self.assertCleanFailure(rc, err)
        self.assertIn("bomb.yaml: document 1", err)
        self.assertIn("alias amplification", err)

    def test_spawn_needs_the_plugin_host_endpoint(self):
        # Item 7: --spawn silently needed an endpoint named "host".
        lib.require_binaries(self, "sim", "scheduler", "plugin_host")
        config = self.write("no-host.yaml", (
            "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n---\n"
            "apiVersion: podium.dev/v1alpha1\nkind: PodiumConfiguration\npluginEndpoints:\n"
            "- name: plugins\n  address: unix:///run/podium/plugins.sock\n"
            "  plugins: [NodeUnschedulable, NodeName, TaintToleration, NodeAffinity, NodePorts,\n"
            "            NodeResourcesFit, NodeResourcesBalancedAllocation, ImageLocality,\n"
            "            PodTopologySpread, InterPodAffinity]\n"))
        cluster = self.write("cluster.yaml", cluster_yaml(node_yaml("node-a"), pod_yaml("web")))
        rc, out, err = self.run_sim(cluster, config=config, timeout=30)
        self.assertEqual(rc, 2, err[-4000:])
        self.assertIn('plugin endpoint "host"', err)
        self.assertIn("--plugin-host-endpoint", err)
        rc, out, err = self.run_sim(cluster, config=config, extra=["--plugin-host-endpoint", "plugins"],
                                    timeout=60)
        self.assertEqual(rc, 0, err[-4000:])
        self.assertEqual(lib.parse_report(out).node_of("web"), "node-a")

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
