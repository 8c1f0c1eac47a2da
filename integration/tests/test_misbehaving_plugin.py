#!/usr/bin/python3
"""A plugin that answers wrongly, never answers or dies mid-run: the scheduler
drops its answer (counted and logged), applies the endpoint's failurePolicy, and
keeps running; podium-sim's report completes.

  failurePolicy Ignore -> the pods are still scheduled (without the plugin's say);
  failurePolicy Fail   -> the pods are reported not scheduled, with a message.

The test runs podium-scheduler itself (podium-sim dials it with --scheduler) so
that it can read the scheduler's log, and after the run ask it, through
Admin.ListPlugins, whether it is alive and what it counted."""

import podium_testlib as lib
from podium_testlib import cluster_yaml, node_yaml, pod_yaml

PREFERRED = {"podium.dev/preferred-zone": "zone-b"}
PODS = [f"web-{i}" for i in range(1, 5)]


class MisbehavingPluginTest(lib.IntegrationTest):
    def setUp(self):
        super().setUp()
        lib.require_binaries(self, "sim", "scheduler", "plugin_host")
        self.cluster = self.write("cluster.yaml", cluster_yaml(
            node_yaml("node-a", zone="zone-a"),
            node_yaml("node-b", zone="zone-b"),
            *[pod_yaml(p, annotations=PREFERRED) for p in PODS]))

    def run_with(self, misbehave, failure_policy):
        """Returns podium-sim's report."""
        plugin = self.start_plugin(misbehave=misbehave)
        config = self.config_variant("with-python-plugin.yaml", failure_policy=failure_policy)
        self.scheduler = self.start_scheduler(config, endpoints=[("python", plugin)])
        rc, out, err = self.run_sim(self.cluster, scheduler=self.scheduler, sim_timeout="20s")
        report = lib.parse_report(out)
        # Pods whose attempts failed with an error are errors, not
        # "unschedulable": the run says so and exits 4 (defect 18).
        if report.errors:
            self.assertEqual(failure_policy, "Fail", f"errors under Ignore: {report.raw}")
            self.assertEqual(rc, 4, f"podium-sim exited {rc} with scheduling errors:\n{err[-4000:]}")
            self.assertEqual(report.outcome, "scheduling_errors")
            self.assertEqual(report.raw.get("scheduling_errors"), len(report.errors))
        else:
            self.assertEqual(rc, 0, f"podium-sim exited {rc}; the run must complete:\n{err[-4000:]}")
            self.assertEqual(report.outcome, "completed")
        for p in PODS:
            report.node_of(p)  # Every pod is in the report.
        self.assertTrue(self.scheduler_process.alive(), "podium-scheduler died")
        return report

    def counters(self):
        """The python endpoint's counters, from the scheduler that outlived the
        misbehaving plugin and still answers Admin RPCs."""
        endpoints = self.list_plugins(self.scheduler)
        self.assertIn("python", endpoints)
        self.assertTrue(self.scheduler_process.alive(), "podium-scheduler died")
        return endpoints["python"]

    def assertAllScheduled(self, report):
        self.assertEqual(report.unschedulable(), [], f"not scheduled: {report.raw}")

    def assertNoneScheduled(self, report):
        for p in PODS:
            self.assertIsNone(report.node_of(p), f"{p} was scheduled despite failurePolicy Fail")
            self.assertTrue(report.message_of(p),
                            f"{p} is not reported unschedulable with a message: {report.raw}")

    def assertPluginDid(self, what):
        self.assertIn(what, self.plugin_process.stderr())

    def assertSchedulerLogged(self, pattern):
        self.assertRegex(self.scheduler_process.stderr(), pattern)

    def test_score_out_of_range_ignore(self):
        report = self.run_with("score-out-of-range", "Ignore")
        self.assertPluginDid("misbehave: returning score 1000")
        self.assertAllScheduled(report)
        self.assertSchedulerLogged(r'"Invalid plugin answer" endpoint="python".*1000')
        self.assertGreater(self.counters().invalid_answers, 0)

    def test_score_out_of_range_fail(self):
        report = self.run_with("score-out-of-range", "Fail")
        self.assertPluginDid("misbehave: returning score 1000")
        self.assertNoneScheduled(report)
        self.assertGreater(self.counters().invalid_answers, 0)

    def test_unknown_node_ignore(self):
        report = self.run_with("unknown-node", "Ignore")
        self.assertPluginDid("misbehave: reporting unknown node id")
        self.assertAllScheduled(report)
        self.assertSchedulerLogged(r'"Invalid plugin answer" endpoint="python".*not in the request')
        self.assertGreater(self.counters().invalid_answers, 0)

    def test_unknown_node_fail(self):
        report = self.run_with("unknown-node", "Fail")
        self.assertPluginDid("misbehave: reporting unknown node id")
        self.assertNoneScheduled(report)
        self.assertGreater(self.counters().invalid_answers, 0)

    def test_hang_ignore(self):
        # Each cycle waits out the endpoint's timeout (1s), then goes on without it.
        report = self.run_with("hang", "Ignore")
        self.assertPluginDid("misbehave: leaving a cycle request unanswered")
        self.assertAllScheduled(report)
        self.assertGreater(self.counters().timeouts, 0)

    def test_crash_mid_run_ignore(self):
        # One cycle request (web-1's: filter and score ride in one request, sent
        # to both processes at once) gets its answer, then the process dies.
        report = self.run_with("crash-after=1", "Ignore")
        self.assertPluginDid("misbehave: exiting after 1 cycle requests")
        self.assertFalse(self.plugin_process.alive())
        self.assertAllScheduled(report)
        self.assertEqual(report.node_of("web-1"), "node-b")
        self.assertSchedulerLogged(r'"Plugin stream broke" endpoint="python"')
        from podium.v1 import admin_pb2
        python = self.counters()
        self.assertNotEqual(python.state, admin_pb2.PluginEndpointInfo.READY)
        # ListPlugins says why (the stream's end, or a redial that failed since).
        self.assertTrue(python.last_error, python)

    def test_crash_mid_run_fail(self):
        report = self.run_with("crash-after=1", "Fail")
        self.assertFalse(self.plugin_process.alive())
        self.assertEqual(report.node_of("web-1"), "node-b")
        for p in PODS[1:]:
            self.assertIsNone(report.node_of(p))
            self.assertTrue(report.message_of(p), f"{p} reported without a message: {report.raw}")
        # The endpoint is down: the other pods' attempts failed with an error,
        # which is not "unschedulable" (defect 18).
        for p in PODS[1:]:
            self.assertIn(f"default/{p}", report.errors, f"{p} is not reported as an error: {report.raw}")
        self.assertEqual(report.raw.get("unschedulable"), 0, report.raw)


if __name__ == "__main__":
    lib.main()
