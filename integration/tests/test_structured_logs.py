#!/usr/bin/python3
"""podium-scheduler --logging-format=json: every line it writes to stderr, from
start-up to shutdown, is one JSON object with ts, level, component and msg.

The scheduler places integration/clusters/podiumctl.yaml (pods bound, one
unschedulable, so scheduling records are written too), then stops on SIGTERM
(the shutdown lines). A missing binary FAILS the test."""

import json
import os
import signal

import podium_testlib as lib


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
        sched.wait_for_stderr(r"podium-scheduler listening on", timeout=40)
        rc, out, err = self.run_sim(os.path.join(lib.Flags.repo, "integration", "clusters", "podiumctl.yaml"),
                                    scheduler=addr)
        self.assertEqual(rc, 0, err[-3000:])
        self.assertEqual(lib.parse_report(out).unschedulable(), ["default/giant"])
        sched.proc.send_signal(signal.SIGTERM)
        self.assertEqual(sched.wait(20), 0, sched.stderr()[-3000:])

        records = []
        for n, line in enumerate(sched.stderr().splitlines(), 1):
            try:
                record = json.loads(line)
            except ValueError as e:
                self.fail(f"stderr line {n} is not JSON ({e}): {line!r}")
            self.assertIsInstance(record, dict, f"line {n}: {line!r}")
            for key in ("ts", "level", "component", "msg"):
                self.assertIn(key, record, f"line {n} has no {key!r}: {line!r}")
            self.assertEqual(record["component"], "podium-scheduler", f"line {n}: {line!r}")
            records.append(record)
        by_msg = {r["msg"]: r for r in records}
        # Start-up: the endpoint and the listener, with their values as fields.
        listening = [r for r in records if r["msg"].startswith("podium-scheduler listening on ")]
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


if __name__ == "__main__":
    lib.main()
