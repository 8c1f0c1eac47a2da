#!/usr/bin/python3
"""podium-scheduler --logging-format=json: every line it writes to stderr, from
start-up to shutdown, is one JSON object with ts, level, component and msg.

The scheduler places integration/clusters/podiumctl.yaml (pods bound, one
unschedulable, so scheduling records are written too), then stops on SIGTERM
(the shutdown lines). A missing binary FAILS the test.

podium-plugin-host and podium-k8s-adapter --logging-format=json: the same for
their lines (component = the process name), with the adapter against the fake
kube-apiserver of test_k8s_adapter.py; an unknown format is refused naming the
flag."""

import json
import os
import signal
import subprocess
import sys
import time

import podium_testlib as lib
import test_k8s_adapter as k8s

ADAPTER = None


def json_records(test, process, component):
    """Every stderr line of `process` as a JSON record of `component`."""
    records = []
    for n, line in enumerate(process.stderr().splitlines(), 1):
        try:
            record = json.loads(line)
        except ValueError as e:
            test.fail(f"{process.name} stderr line {n} is not JSON ({e}): {line!r}")
        test.assertIsInstance(record, dict, f"line {n}: {line!r}")
        for key in ("ts", "level", "component", "msg"):
            test.assertIn(key, record, f"line {n} has no {key!r}: {line!r}")
        test.assertEqual(record["component"], component, f"line {n}: {line!r}")
        test.assertFalse(record["msg"].startswith(component), f"line {n} kept its prefix: {line!r}")
        test.assertFalse(record["msg"].endswith("\n"), f"line {n}: {line!r}")
        records.append(record)
    return records


class StructuredLogsTest(lib.IntegrationTest):

    def test_every_scheduler_line_is_json(self):
        lib.require_binaries(self, "sim", "scheduler", "plugin_host")
        host_addr = f"unix://{self.path('host.sock')}"
        host = lib.Process([lib.Flags.plugin_host, "--listen", host_addr], self.dir, "podium-plugin-host")
        self.processes.append(host)
        host.wait_for_stderr(r"listening on")
        addr = f"unix://{self.path('scheduler.sock')}"
        sched = lib.Process([lib.Flags.scheduler, "--listen", addr, "--metrics-address=", "--v=3",
                             "--logging-format=json", "--plugin-endpoint", f"host={host_addr}"],
                            self.dir, "podium-scheduler")
        self.processes.append(sched)
        sched.wait_for_stderr(r'"msg":"listening on ', timeout=40)
        rc, out, err = self.run_sim(os.path.join(lib.Flags.repo, "integration", "clusters", "podiumctl.yaml"),
                                    scheduler=addr)
        self.assertEqual(rc, 0, err[-3000:])
        self.assertEqual(lib.parse_report(out).unschedulable(), ["default/giant"])
        sched.proc.send_signal(signal.SIGTERM)
        self.assertEqual(sched.wait(20), 0, sched.stderr()[-3000:])

        records = json_records(self, sched, "podium-scheduler")
        by_msg = {r["msg"]: r for r in records}
        # Start-up: the endpoint and the listener, with their values as fields.
        listening = [r for r in records if r["msg"].startswith("listening on ")]
        self.assertEqual(len(listening), 1, by_msg.keys())
        self.assertEqual(listening[0]["address"], addr)
        self.assertEqual(listening[0]["profiles"], "default-scheduler")
        endpoint = [r for r in records if r["msg"].startswith("plugin endpoint host (")]
        self.assertEqual(len(endpoint), 1, by_msg.keys())
        self.assertEqual(endpoint[0]["endpoint"], "host")
        self.assertGreater(endpoint[0]["plugins"], 0)
        # Scheduling records carry pod and node as fields.
        self.assertTrue(any(r.get("pod") == "default/giant" for r in records), by_msg.keys())
        self.assertTrue(any("node" in r and "pod" in r for r in records), by_msg.keys())
        shutdown = [r for r in records if r["msg"].startswith("shutting down")]
        self.assertEqual(len(shutdown), 1, by_msg.keys())
        self.assertEqual(shutdown[0]["signal"], signal.SIGTERM)
        stats = [r for r in records if r["msg"].startswith("plugin endpoint host:")]
        self.assertEqual(len(stats), 1, by_msg.keys())
        self.assertGreater(stats[0]["requests"], 0)

    def test_plugin_host_and_k8s_adapter_lines_are_json(self):
        lib.require_binaries(self, "scheduler", "plugin_host")
        if not ADAPTER or not os.path.exists(ADAPTER):
            self.fail("--k8s-adapter binary not given or not built")
        host_addr = f"unix://{self.path('host.sock')}"
        host = lib.Process([lib.Flags.plugin_host, "--listen", host_addr, "--logging-format=json"], self.dir,
                           "podium-plugin-host")
        self.processes.append(host)
        host.wait_for_stderr(r'"msg":"listening on ')
        addr = f"unix://{self.path('scheduler.sock')}"
        sched = lib.Process([lib.Flags.scheduler, "--config", lib.config_path("default-plugins.yaml"), "--listen", addr,
                             "--metrics-address=", "--plugin-endpoint", f"host={host_addr}"],
                            self.dir, "podium-scheduler")
        self.processes.append(sched)
        sched.wait_for_stderr(r"podium-scheduler listening on", timeout=40)
        api = k8s.FakeApiserver(self)
        # One pod the adapter cannot translate: a warning line.
        api.create([k8s.node("node-a"), k8s.pod("good"), k8s.pod("bad-quantity", cpu="lots")])
        kubeconfig = self.write("kubeconfig", (
            "apiVersion: v1\nkind: Config\ncurrent-context: fake\n"
            f"clusters:\n- name: fake\n  cluster: {{server: \"{api.url}\"}}\n"
            "contexts:\n- name: fake\n  context: {cluster: fake}\n"))
        adapter = lib.Process([ADAPTER, "--kubeconfig", kubeconfig, "--scheduler", addr,
                               "--metrics-address", "127.0.0.1:0", "--logging-format", "json"],
                              self.dir, "podium-k8s-adapter")
        self.processes.append(adapter)
        adapter.wait_for_stderr(r"cannot translate", timeout=40)
        deadline = time.monotonic() + 60
        while not api.stats()["pods"]["default/good"]["node"]:
            self.assertTrue(adapter.alive(), adapter.stderr()[-3000:])
            self.assertLess(time.monotonic(), deadline, "default/good was never bound")
            time.sleep(0.2)
        adapter.proc.send_signal(signal.SIGTERM)
        self.assertEqual(adapter.wait(30), 0, adapter.stderr()[-3000:])
        host.proc.send_signal(signal.SIGTERM)
        self.assertEqual(host.wait(20), 0, host.stderr()[-3000:])

        records = json_records(self, adapter, "podium-k8s-adapter")
        msgs = [r["msg"] for r in records]
        self.assertTrue(any(m.startswith(f"API server {api.url}") for m in msgs), msgs)
        self.assertTrue(any(m.startswith("metrics on port ") for m in msgs), msgs)
        self.assertTrue(any(m.startswith("opening Cluster.Sync with ") for m in msgs), msgs)
        bad = [r for r in records if r["msg"].startswith("Pod default/bad-quantity: cannot translate: ")]
        self.assertEqual(len(bad), 1, msgs)
        self.assertEqual(bad[0]["level"], "warning")
        self.assertTrue(records[-1]["msg"].startswith("stopped; API calls "), msgs)
        self.assertEqual(records[-1]["level"], "info")

        records = json_records(self, host, "podium-plugin-host")
        self.assertEqual([r["msg"] for r in records], [f"listening on {host_addr}", "SIGTERM, shutting down"])

    def test_unknown_logging_format_is_refused_naming_the_flag(self):
        lib.require_binaries(self, "plugin_host")
        if not ADAPTER or not os.path.exists(ADAPTER):
            self.fail("--k8s-adapter binary not given or not built")
        for argv, name in (([lib.Flags.plugin_host, "--listen", "127.0.0.1:0", "--logging-format", "yaml"],
                            "podium-plugin-host"),
                           ([ADAPTER, "--logging-format=yaml"], "podium-k8s-adapter")):
            p = subprocess.run(argv, capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
            self.assertEqual(p.returncode, 2, p.stderr)
            self.assertTrue(p.stderr.startswith(f'{name}: --logging-format: "yaml" is neither text nor json\n'),
                            p.stderr)


if __name__ == "__main__":
    ADAPTER = lib.take_flag("--k8s-adapter")  # Our own flag; the rest is podium_testlib's.
    lib.main()
