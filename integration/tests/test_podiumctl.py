#!/usr/bin/python3
"""podiumctl against `podium-sim --spawn --serve` on integration/clusters/podiumctl.yaml
(3 nodes; default/giant fits nowhere: 2 Insufficient cpu, 1 untolerated taint).

Run by ctest with the usual flags plus --podiumctl BIN. A missing binary FAILS
the test (it never skips)."""

import argparse
import collections
import json
import os
import re
import signal
import subprocess
import sys
import time

import podium_testlib as lib

PODIUMCTL = None
GIANT_PLUGINS = {"NodeResourcesFit", "TaintToleration"}


def cluster_path():
    return os.path.join(lib.Flags.repo, "integration", "clusters", "podiumctl.yaml")


def table_rows(text):
    """The first table of `text`: a list of dicts keyed by header. Cells are
    separated by runs of two or more spaces (podiumctl never prints an empty cell)."""
    lines = text.split("\n")
    header = re.split(r" {2,}", lines[0].strip())
    rows = []
    for line in lines[1:]:
        if not line.strip():
            break
        cells = re.split(r" {2,}", line.rstrip())
        assert len(cells) == len(header), f"row {line!r} does not fit header {header}"
        rows.append(dict(zip(header, cells)))
    return rows


def message_histogram(message):
    """kube-scheduler's FailedScheduling message -> {reason: count}:
    "0/3 nodes are available: 1 node(s) had ..., 2 Insufficient cpu." (what
    PostFilter, i.e. preemption, appends after it is left out) """
    m = re.match(r"0/\d+ nodes are available: (.*?)\.(?: preemption: .*)?$", message)
    assert m, f"not a FailedScheduling message: {message!r}"
    hist = {}
    for part in m.group(1).split(", "):
        count, reason = part.split(" ", 1)
        hist[reason] = int(count)
    return hist


class PodiumctlTest(lib.IntegrationTest):

    def setUp(self):
        super().setUp()
        for flag, path in (("podiumctl", PODIUMCTL), ("sim", lib.Flags.sim),
                           ("scheduler", lib.Flags.scheduler), ("plugin-host", lib.Flags.plugin_host)):
            if not path or not os.path.exists(path):
                self.fail(f"--{flag} binary missing: {path!r}")
        self.address = None
        self.sim = None

    def tearDown(self):
        # podium-sim stops its scheduler and plugin host (up to 5 s each) when
        # it gets SIGTERM; the generic stop kills it after 3 s, which would
        # leave the plugin host behind. So give it time first.
        if self.sim is not None and self.sim.alive():
            self.sim.proc.send_signal(signal.SIGTERM)
            try:
                self.sim.wait(20)
            except subprocess.TimeoutExpired:
                pass
        super().tearDown()

    # -- helpers ---------------------------------------------------------------

    def start_sim(self, cluster, extra=()):
        """podium-sim --spawn --serve; returns once it printed the Admin address."""
        argv = [lib.Flags.sim, "--spawn", "--serve", "--cluster", cluster,
                "--scheduler-bin", lib.Flags.scheduler, "--plugin-host-bin", lib.Flags.plugin_host,
                "--output", "json", "--timeout", "60s"] + list(extra)
        self.sim = lib.Process(argv, self.dir, "podium-sim")
        self.processes.append(self.sim)
        self.address = self.sim.wait_for_stderr(r"admin: (\S+)\n", timeout=40).group(1)
        # Calls that change the scheduler need credentials; the spawned one takes this token.
        self.token_file = self.sim.wait_for_stderr(r"admin token file: (\S+)\n", timeout=10).group(1)
        return self.address

    def wait_report(self, timeout=30):
        """The report podium-sim prints once the cluster settled."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            out = self.sim.stdout()
            if out.strip().endswith("}"):
                try:
                    return lib.parse_report(out)
                except AssertionError:
                    pass
            self.assertTrue(self.sim.alive(), f"podium-sim exited:\n{self.sim.stderr()[-3000:]}")
            time.sleep(0.05)
        self.fail(f"podium-sim printed no report within {timeout}s:\n{self.sim.stderr()[-3000:]}")

    def ctl(self, *args, address=True, env=None, expect=0, timeout=20, token=True):
        argv = [PODIUMCTL] + (["--address", self.address] if address else []) + list(args)
        full_env = dict(os.environ)
        full_env.pop("PODIUM_ADDRESS", None)
        full_env.pop("PODIUM_TOKEN_FILE", None)
        if token and getattr(self, "token_file", None):
            full_env["PODIUM_TOKEN_FILE"] = self.token_file
        full_env.update(env or {})
        p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=full_env)
        if expect is not None:
            self.assertEqual(p.returncode, expect,
                             f"{' '.join(argv)} exited {p.returncode}, want {expect}\n"
                             f"stdout:\n{p.stdout}\nstderr:\n{p.stderr}")
        return p

    def ctl_json(self, *args):
        out = self.ctl(*args, "-o", "json").stdout
        try:
            return json.loads(out)
        except ValueError as e:
            self.fail(f"podiumctl {' '.join(args)} -o json printed no JSON ({e}):\n{out}")

    def wait_until(self, what, fn, timeout=20):
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            last = fn()
            if last:
                return last
            time.sleep(0.1)
        self.fail(f"timed out after {timeout}s waiting for {what}")

    def queued(self):
        return {f"{p['namespace']}/{p['name']}": p for p in self.ctl_json("queue")["pods"]}

    def bound_pods(self):
        nodes = self.ctl_json("nodes")["nodes"]
        return {pod: n["name"] for n in nodes for pod in n["pods"] + n["assumed_pods"]}

    # -- tests -----------------------------------------------------------------

    def test_queue_explain_and_json_match(self):
        self.start_sim(cluster_path())
        report = self.wait_report()
        self.assertEqual(report.unschedulable(), ["default/giant"], report.raw)
        failed_scheduling = report.message_of("giant")

        # queue: giant under unschedulable with the plugins that rejected it
        # (a cluster event, web-2 bound after giant's first attempt, may have
        # sent it through backoff once).
        self.wait_until("default/giant in the unschedulable pool",
                        lambda: self.queued().get("default/giant", {}).get("queue") == "unschedulable")
        table = self.ctl("queue")
        rows = table_rows(table.stdout)
        self.assertEqual([(r["NAMESPACE"], r["NAME"], r["QUEUE"]) for r in rows],
                         [("default", "giant", "unschedulable")], table.stdout)
        self.assertEqual(set(rows[0]["REJECTED BY"].split(",")), GIANT_PLUGINS)
        self.assertGreaterEqual(int(rows[0]["ATTEMPTS"]), 1)
        self.assertIn("1 pod: 0 active, 0 backoff, 1 unschedulable, 0 gated, 0 in-flight, 0 waiting-on-permit\n", table.stdout)
        self.assertEqual(self.ctl("queue", "--queue", "unschedulable", "--plugin", "TaintToleration",
                                  "-o", "name").stdout, "default/giant\n")
        self.assertEqual(self.ctl("queue", "-n", "shop", "-o", "name").stdout, "")

        # -o json (and yaml) carry what the table shows.
        wide = table_rows(self.ctl("queue", "-o", "wide").stdout)
        doc = self.ctl_json("queue")
        self.assertEqual(len(doc["pods"]), len(wide))
        for row, pod in zip(wide, doc["pods"]):
            self.assertEqual(row["NAMESPACE"], pod["namespace"])
            self.assertEqual(row["NAME"], pod["name"])
            self.assertEqual(row["QUEUE"], pod["queue"])
            self.assertEqual(int(row["ATTEMPTS"]), pod["attempts"])
            self.assertEqual(row["REJECTED BY"], ",".join(pod["unschedulable_plugins"]))
            self.assertEqual(row["UID"], pod["uid"])
            self.assertEqual(row["MESSAGE"], pod["message"])
        self.assertEqual(doc["counts"], {"active": 0, "backoff": 0, "unschedulable": 1, "gated": 0,
                                         "in-flight": 0, "waiting-on-permit": 0})
        self.assertEqual(doc["pods"][0]["message"], failed_scheduling)
        import yaml
        ydoc = yaml.safe_load(self.ctl("queue", "-o", "yaml").stdout)
        for d in (doc, ydoc):
            for p in d["pods"]:
                p.pop("age_seconds")
        self.assertEqual(ydoc, doc)

        # explain: the same reasons, with the same counts, as FailedScheduling.
        explain = self.ctl("explain", "default/giant")
        self.assertIn(f"Message:      {failed_scheduling}\n", explain.stdout)
        self.assertRegex(explain.stdout, r"Rejected by:  (NodeResourcesFit, TaintToleration|"
                                         r"TaintToleration, NodeResourcesFit)\n")
        reasons = table_rows(explain.stdout.split("\n\n", 1)[1])
        self.assertEqual({r["REASON"]: int(r["NODES"]) for r in reasons}, message_histogram(failed_scheduling))
        self.assertEqual({r["REASON"]: r["PLUGIN"] for r in reasons},
                         {"Insufficient cpu": "NodeResourcesFit",
                          "node(s) had untolerated taint {dedicated: infra}": "TaintToleration"})
        self.assertEqual({r["REASON"]: set(r["SAMPLE NODES"].split(", ")) for r in reasons},
                         {"Insufficient cpu": {"node-a", "node-b"},
                          "node(s) had untolerated taint {dedicated: infra}": {"node-c"}})
        edoc = self.ctl_json("explain", "default/giant")
        self.assertEqual(edoc["message"], failed_scheduling)
        self.assertEqual({r["reason"]: r["count"] for r in edoc["reasons"]}, message_histogram(failed_scheduling))
        self.assertEqual(sorted(n["node"] for n in edoc["nodes"]), ["node-a", "node-b", "node-c"])

        # explain of a pod with no failed attempt: exit 3.
        missing = self.ctl("explain", "default/web-1", expect=3)
        self.assertIn("default/web-1", missing.stderr)

        # nodes: the bound pods where the report says, requested vs allocatable.
        placements = report.scheduled()
        self.assertEqual(self.bound_pods(), placements)
        nodes = {r["NAME"]: r for r in table_rows(self.ctl("nodes").stdout)}
        self.assertEqual(sorted(nodes), ["node-a", "node-b", "node-c"])
        ndoc = {n["name"]: n for n in self.ctl_json("nodes")["nodes"]}
        for name, row in nodes.items():
            n = ndoc[name]
            self.assertEqual(row["PODS"], f"{len(n['pods']) + len(n['assumed_pods'])}/{n['allocatable']['pods']}")
        web1 = ndoc[placements["default/web-1"]]
        self.assertEqual(web1["requested"]["milli_cpu"], 500 + (250 if placements["shop/web-2"] == web1["name"] else 0))
        self.assertEqual(nodes["node-c"]["CPU"], "0/8")

        # plugins: the spawned plugin host, ready, with its filter plugins.
        endpoints = table_rows(self.ctl("plugins").stdout)
        self.assertEqual([(e["ENDPOINT"], e["STATE"], e["POLICY"]) for e in endpoints], [("host", "Ready", "Fail")])
        self.assertGreaterEqual(int(endpoints[0]["REQUESTS"]), 1)
        pdoc = self.ctl_json("plugins")["endpoints"][0]
        self.assertEqual(int(endpoints[0]["REQUESTS"]), pdoc["requests"])
        fit = [p for p in pdoc["plugins"] if p["name"] == "NodeResourcesFit"]
        self.assertEqual(len(fit), 1)
        self.assertIn("Filter", fit[0]["extension_points"])

    def test_a_pod_held_at_permit_is_listed_waiting_on_its_plugin(self):
        # The Python plugin's HoldAtPermit answers Wait (60 s) for pods carrying
        # podium.dev/hold-at-permit and never allows them: "held" waits at
        # Permit on node-a for the whole test, "free" binds.
        plugin = self.start_plugin()
        config = lib.config_path("hold-at-permit.yaml")
        cluster = self.write("cluster.yaml", lib.cluster_yaml(
            lib.node_yaml("node-a"),
            lib.pod_yaml("held", annotations={"podium.dev/hold-at-permit": "60"}),
            lib.pod_yaml("free")))
        self.start_sim(cluster, extra=["--config", config, "--plugin-endpoint", f"python={plugin}"])
        held = self.wait_until("default/held waiting at Permit",
                               lambda: self.queued().get("default/held", {}).get("queue") == "waiting-on-permit"
                               and self.queued()["default/held"])
        wait = held["permit_wait"]
        self.assertEqual(wait["node"], "node-a")
        self.assertEqual([p["name"] for p in wait["plugins"]], ["HoldAtPermit"])
        self.assertGreater(wait["plugins"][0]["remaining_seconds"], 0)
        self.assertLessEqual(wait["plugins"][0]["remaining_seconds"], 60)
        self.assertIsNotNone(wait["waiting_since"])
        self.assertGreaterEqual(held["attempts"], 1)
        self.assertEqual(self.wait_until("default/free bound", lambda: self.bound_pods().get("default/free")),
                         "node-a")

        # The table: under waiting-on-permit with the plugin it waits on; the
        # summary counts it; --queue and --plugin find it.
        table = self.ctl("queue")
        rows = {f"{r['NAMESPACE']}/{r['NAME']}": r for r in table_rows(table.stdout)}
        self.assertEqual(rows["default/held"]["QUEUE"], "waiting-on-permit", table.stdout)
        self.assertEqual(rows["default/held"]["WAITING ON"], "HoldAtPermit")
        self.assertRegex(table.stdout, r"pods?: .*, 1 waiting-on-permit\n")
        wide = {f"{r['NAMESPACE']}/{r['NAME']}": r for r in table_rows(self.ctl("queue", "-o", "wide").stdout)}
        self.assertEqual(wide["default/held"]["NODE"], "node-a")
        self.assertRegex(wide["default/held"]["PERMIT DEADLINE"], r"^in \d+s$")
        self.assertEqual(self.ctl("queue", "--queue", "waiting-on-permit", "-o", "name").stdout, "default/held\n")
        self.assertEqual(self.ctl("queue", "--plugin", "HoldAtPermit", "-o", "name").stdout, "default/held\n")
        self.assertEqual(self.ctl("queue", "--queue", "in-flight", "-o", "name").stdout, "")
        doc = self.ctl_json("queue", "--queue", "waiting-on-permit")
        self.assertEqual(doc["counts"]["waiting-on-permit"], 1)
        self.assertEqual(doc["pods"][0]["permit_wait"]["plugins"][0]["name"], "HoldAtPermit")

        # explain: the Permit line, and no claim that an attempt failed.
        explain = self.ctl("explain", "default/held")
        self.assertIn("Queue:        waiting-on-permit", explain.stdout)
        self.assertRegex(explain.stdout, r"Permit:       waiting on HoldAtPermit \(deadline \S+Z, in \d+s\), "
                                         r"on node-a, since \S+Z \(\d+s ago\)\n")
        self.assertNotIn("rejected before Filter", explain.stdout)
        self.assertIn("No failed attempt", explain.stdout)
        edoc = self.ctl_json("explain", "default/held")
        self.assertEqual(edoc["queued"]["permit_wait"]["node"], "node-a")
        self.assertEqual(edoc["reasons"], [])

        # The plugin process dies: its decision will never come, so the pod
        # does not wait out its 60 s. The endpoint's failurePolicy (Fail)
        # rejects it as soon as the stream is dialed again: it leaves Permit
        # and node-a and is tried again (failing while the endpoint is down).
        self.plugin_process.stop()
        requeued = self.wait_until(
            "default/held out of Permit",
            lambda: (self.queued().get("default/held", {}).get("queue") not in (None, "waiting-on-permit", "in-flight")
                     and self.queued()["default/held"]), timeout=15)
        self.assertGreater(requeued["attempts"], held["attempts"], requeued)
        self.assertIsNone(requeued.get("permit_wait"), requeued)

    def test_activate_moves_the_pod_and_watch_sees_the_attempt(self):
        self.start_sim(cluster_path())
        self.wait_report()
        before = self.queued()["default/giant"]["attempts"]

        watch = lib.Process([PODIUMCTL, "--address", self.address, "watch", "--count", "1", "-o", "json"],
                            self.dir, "podiumctl-watch")
        self.processes.append(watch)
        out = self.ctl("activate", "default/giant")
        self.assertEqual(out.stdout, "1 pod moved to the active queue\n")
        after = self.wait_until("another attempt of default/giant",
                                lambda: (self.queued().get("default/giant", {}).get("attempts", 0) > before
                                         and self.queued()["default/giant"]))
        self.assertEqual(after["queue"], "unschedulable")
        self.assertEqual(set(after["unschedulable_plugins"]), GIANT_PLUGINS)
        # The watch may have subscribed after that attempt: activate again
        # (at most 10 times) until it printed one decision.
        for _ in range(10):
            try:
                rc = watch.wait(1.5)
                break
            except subprocess.TimeoutExpired:
                self.ctl("activate", "default/giant")
        else:
            self.fail(f"podiumctl watch --count 1 printed no decision:\n{watch.stderr()}")
        self.assertEqual(rc, 0, watch.stderr())
        decision = json.loads(watch.stdout().strip())
        self.assertEqual((decision["namespace"], decision["name"], decision["result"]),
                         ("default", "giant", "unschedulable"))
        self.assertEqual(message_histogram(decision["message"]), message_histogram(after["message"]))

        # --all-unschedulable: the pool is one pod.
        self.wait_until("default/giant back in the pool",
                        lambda: self.queued().get("default/giant", {}).get("queue") == "unschedulable")
        doc = self.ctl_json("queue", "--queue", "unschedulable")
        self.assertEqual([p["name"] for p in doc["pods"]], ["giant"])
        attempts = self.queued()["default/giant"]["attempts"]
        doc = self.ctl_json("activate", "--all-unschedulable")
        self.assertEqual(doc, {"requested": ["default/giant"], "moved": 1})
        self.wait_until("the attempt after --all-unschedulable",
                        lambda: self.queued().get("default/giant", {}).get("attempts", 0) > attempts)
        # watch without --count runs until interrupted; Ctrl-C is a clean end.
        follow = lib.Process([PODIUMCTL, "--address", self.address, "watch"], self.dir, "podiumctl-follow")
        self.processes.append(follow)
        self.wait_until("the watch header", lambda: follow.stdout().startswith("TIME"), timeout=10)
        follow.proc.send_signal(signal.SIGINT)
        try:
            self.assertEqual(follow.wait(10), 0, follow.stderr())
        except subprocess.TimeoutExpired:
            self.fail("podiumctl watch did not end on SIGINT")
        # Completion offers the queued pods the scheduler holds.
        self.assertEqual(self.complete(["--address", self.address, "explain", "default/g"]), ["default/giant"])
        # A pod that is not queued: exit 3, nothing moved.
        missing = self.ctl("activate", "default/ghost", expect=3)
        self.assertIn("default/ghost is not in the scheduling queue", missing.stderr)

    def test_pause_stops_bindings_and_resume_restarts_them(self):
        # Three pods created after the others settled, one every 5 s: pause
        # after the first is bound; the next two must wait until resume.
        with open(cluster_path()) as f:
            base = f.read()
        later = [lib.pod_yaml(f"later-{i}", cpu="100m", annotations={"sim.podium.dev/create-later": "true"})
                 for i in (1, 2, 3)]
        cluster = self.write("cluster-later.yaml", lib.cluster_yaml(base, *later))
        self.start_sim(cluster, extra=["--create-rate", "0.2"])
        self.wait_until("default/later-1 bound", lambda: "default/later-1" in self.bound_pods(), timeout=30)
        # Without the token the scheduler refuses the change (exit 4) and keeps going.
        refused = self.ctl("pause", token=False, expect=4)
        self.assertIn("needs a bearer token or a client certificate", refused.stderr)
        status = self.ctl("status").stdout
        self.assertIn("Scheduling:       yes\n", status)
        self.assertIn("Adapter:          podium-sim\n", status)
        self.assertEqual(self.ctl("pause").stdout, "scheduling paused: no new scheduling cycles start\n")
        self.assertIn("Scheduling:       no: paused by an operator\n", self.ctl("status").stdout)
        held = self.ctl_json("status")
        self.assertEqual((held["scheduling"], held["held_because"], held["paused"], held["adapter_connected"]),
                         (False, "paused by an operator", True, True), held)
        # Every pod scheduled so far went through batching's accounting once.
        b = held["batching"]
        self.assertGreater(b["hits"] + b["misses"] + b["unsignable"], 0, b)
        self.assertEqual(sum(b["pods_by_result"].values()), b["hits"] + b["misses"] + b["unsignable"], b)

        # later-3 is created 10 s after later-1: it waits in activeQ, and
        # neither it nor later-2 (created 5 s before it) gets a node.
        pending = self.wait_until("default/later-3 queued while paused",
                                  lambda: self.queued().get("default/later-3"), timeout=30)
        self.assertEqual(pending["queue"], "active")
        self.assertEqual(pending["attempts"], 0)
        bound = self.bound_pods()
        self.assertNotIn("default/later-2", bound)
        self.assertNotIn("default/later-3", bound)
        self.assertEqual(self.sim.stdout().strip(), "", "the run cannot settle while paused")

        self.assertEqual(self.ctl_json("resume"), {"paused": False})
        self.assertTrue(self.ctl_json("status")["scheduling"])
        self.wait_until("later-2 and later-3 bound after resume",
                        lambda: {"default/later-2", "default/later-3"} <= set(self.bound_pods()))
        report = self.wait_report()
        for name in ("later-1", "later-2", "later-3"):
            self.assertTrue(report.node_of(name), report.raw)

    def test_nodes_lists_a_preemptor_nominated_while_its_victim_terminates(self):
        # node-a is full with a priority-10 pod; the priority-100 preemptor,
        # created later, evicts it. The victim holds node-a for 3 s
        # (--termination-grace): meanwhile the preemptor is nominated there,
        # and `nodes` says so; once the victim is gone it binds and the
        # nomination is gone.
        def pod(name, priority, node=None, later=False):
            doc = {"apiVersion": "v1", "kind": "Pod",
                   "metadata": {"name": name, "namespace": "default"},
                   "spec": {"priority": priority,
                            "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.9",
                                            "resources": {"requests": {"cpu": "2", "memory": "128Mi"}}}]}}
            if node:
                doc["spec"]["nodeName"] = node
                doc["status"] = {"phase": "Running"}
            if later:
                doc["metadata"]["annotations"] = {"sim.podium.dev/create-later": "true"}
            return json.dumps(doc) + "\n"
        # The later pods come one every 2 s (--create-rate 0.5): first a gated
        # one (no attempt, no decision), then the preemptor, so the watch
        # below is subscribed before the preemptor's first attempt.
        gated = json.loads(pod("gated", 10, later=True))
        gated["spec"]["schedulingGates"] = [{"name": "example.com/later"}]
        cluster = self.write("cluster-preempt.yaml", lib.cluster_yaml(
            lib.node_yaml("node-a", cpu="2"), pod("victim", 10, node="node-a"), json.dumps(gated) + "\n",
            pod("preemptor", 100, later=True)))
        self.start_sim(cluster, extra=["--termination-grace", "3s", "--create-rate", "0.5"])
        env = dict(os.environ)
        env.pop("PODIUM_ADDRESS", None)
        watch = subprocess.Popen([PODIUMCTL, "--address", self.address, "watch", "--count", "2", "-o", "json"],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)

        def nominated():
            node = next(n for n in self.ctl_json("nodes")["nodes"] if n["name"] == "node-a")
            return node if node["nominated_pods"] else None
        node = self.wait_until("default/preemptor nominated to node-a", nominated, timeout=30)
        self.assertEqual(node["nominated_pods"], ["default/preemptor"], node)
        self.assertEqual(node["pods"], ["default/victim"], node)  # Still terminating.
        rows = table_rows(self.ctl("nodes").stdout)
        self.assertEqual(rows[0]["NOMINATED"], "1", rows)
        # The preemptor itself: its preemption's API calls returned, so it is
        # no longer held by DefaultPreemption (kube-scheduler's PreEnqueue of
        # KEP-4832 holds it only while they are out); it waits unschedulable,
        # nominated to node-a, for an event (its victim's deletion).
        def queued():
            rows = table_rows(self.ctl("queue").stdout)
            return rows if any(r["NAME"] == "preemptor" and r["QUEUE"] == "unschedulable" for r in rows) else None
        rows = self.wait_until("default/preemptor unschedulable", queued, timeout=10)
        self.assertEqual(sorted((r["NAME"], r["QUEUE"]) for r in rows),
                         [("gated", "gated"), ("preemptor", "unschedulable")], rows)
        explain = self.ctl("explain", "default/preemptor").stdout
        self.assertIn("Nominated:    node-a\n", explain)
        self.assertNotIn("Gated:", explain)

        self.wait_until("default/preemptor bound", lambda: self.bound_pods().get("default/preemptor") == "node-a")
        node = next(n for n in self.ctl_json("nodes")["nodes"] if n["name"] == "node-a")
        self.assertEqual(node["nominated_pods"], [], node)
        # The watch saw the attempt that preempted (nominated to node-a), then the bind.
        out, err = watch.communicate(timeout=20)
        self.assertEqual(watch.returncode, 0, err)
        decisions = [json.loads(line) for line in out.splitlines()]
        self.assertEqual([(d["name"], d["result"], d["node"], d["nominated_node"]) for d in decisions],
                         [("preemptor", "unschedulable", None, "node-a"), ("preemptor", "scheduled", "node-a", None)],
                         decisions)

    def test_explain_a_deferred_resize_that_preemption_cannot_help(self):
        # KEP-5836: "stuck" runs with 1 CPU on node-a and its kubelet deferred
        # its resize to 2 CPU (the PodResizePending condition); the only other
        # pod there outranks it, so preemption finds no victim. Until now
        # explain had nothing to say about a bound pod.
        def doc(name, priority, cpu, status):
            return json.dumps({"apiVersion": "v1", "kind": "Pod",
                               "metadata": {"name": name, "namespace": "default"},
                               "spec": {"priority": priority, "nodeName": "node-a",
                                        "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.9",
                                                        "resources": {"requests": {"cpu": cpu,
                                                                                   "memory": "128Mi"}}}]},
                               "status": status}) + "\n"
        stuck = doc("stuck", 50, "2", {
            "phase": "Running",
            "conditions": [{"type": "PodResizePending", "status": "True", "reason": "Deferred"}],
            "containerStatuses": [{"name": "main", "allocatedResources": {"cpu": "1", "memory": "128Mi"}}]})
        cluster = self.write("cluster-resize.yaml", lib.cluster_yaml(
            lib.node_yaml("node-a", cpu="2"), stuck, doc("high", 1000, "1", {"phase": "Running"})))
        self.start_sim(cluster)
        self.wait_report()
        # Until its first preemption attempt the resize is only queued (explain
        # says so); wait for the attempt that found no victim.
        def attempted():
            p = self.ctl("explain", "default/stuck", expect=None)
            return p.stdout if p.returncode == 0 and "\nPreemption:   preemption:" in p.stdout else None
        out = self.wait_until("explain to report the failed preemption for the resize", attempted)
        self.assertIn("Resize:       Deferred on node-a: wants cpu 2, memory 128Mi; admitted cpu 1, memory 128Mi\n", out)
        self.assertIn("Preemption:   preemption: 0/1 nodes are available: 1 No preemption victims found for incoming "
                      "pod. (tried again when a pod leaves node-a)\n", out)
        resize = self.ctl_json("explain", "default/stuck")["resize"]
        self.assertEqual((resize["node"], resize["state"], resize["waiting_for_room"]), ("node-a", "Deferred", True))
        # A pod that is not resizing is still not found.
        self.ctl("explain", "default/high", expect=3)

    def test_queue_reads_every_page(self):
        # 1 100 pods that fit nowhere, besides giant: more than two of the
        # scheduler's default pages (500), so a podiumctl that stops after the
        # first page shows 500.
        with open(cluster_path()) as f:
            base = f.read()
        stuck = [lib.pod_yaml(f"stuck-{i:04d}", cpu="3", namespace="bulk") for i in range(1100)]
        self.start_sim(self.write("cluster-bulk.yaml", lib.cluster_yaml(base, *stuck)))
        report = self.wait_report(timeout=90)
        self.assertEqual(len(report.unschedulable()), 1101)
        want = {"default/giant"} | {f"bulk/stuck-{i:04d}" for i in range(1100)}

        doc = self.ctl_json("queue")
        self.assertEqual(doc["total"], 1101)
        self.assertEqual(doc["continue"], "")
        self.assertEqual({f"{p['namespace']}/{p['name']}" for p in doc["pods"]}, want)
        self.assertEqual(len(doc["pods"]), 1101)
        table = self.ctl("queue", "-n", "bulk", "--chunk-size", "300")
        self.assertEqual(len(table_rows(table.stdout)), 1100)
        self.assertIn("1100 pods: 0 active, 0 backoff, 1100 unschedulable, 0 gated, 0 in-flight, 0 waiting-on-permit\n", table.stdout)

        # A script walks the queue in pieces with --limit and --continue.
        seen = []
        token = None
        for _ in range(10):
            args = ["queue", "--limit", "400", "--chunk-size", "150", "-o", "name"]
            if token:
                args += ["--continue", token]
            p = self.ctl(*args)
            names = p.stdout.split()
            seen += names
            m = re.search(r"--continue (\S+)\n", p.stderr)
            if not m:
                self.assertEqual(len(names), 1101 - 800)
                break
            self.assertEqual(len(names), 400)
            token = m.group(1)
        else:
            self.fail("--continue never reached the end")
        self.assertEqual(len(seen), 1101)
        self.assertEqual(set(seen), want)

    # -- access control and TLS: a podium-scheduler of its own ---------------------

    def start_scheduler(self, listen, *flags):
        """A plugin host and a podium-scheduler with `flags`; returns the address it bound."""
        host_addr = f"unix://{self.path(f'host-{len(self.processes)}.sock')}"
        host = lib.Process([lib.Flags.plugin_host, "--listen", host_addr], self.dir, "podium-plugin-host")
        self.processes.append(host)
        host.wait_for_stderr(r"listening on")
        sched = lib.Process([lib.Flags.scheduler, "--listen", listen, "--metrics-address", "",
                             "--plugin-endpoint", f"host={host_addr}"] + list(flags), self.dir, "podium-scheduler")
        self.processes.append(sched)
        return sched.wait_for_stderr(r"podium-scheduler listening on (\S+)", timeout=40).group(1)

    def openssl(self, *args):
        p = subprocess.run(["openssl"] + list(args), cwd=self.dir, capture_output=True, text=True, timeout=30)
        self.assertEqual(p.returncode, 0, f"openssl {' '.join(args)} (a test dependency):\n{p.stderr}")

    def make_cert(self, name, subject, ca, san=None):
        self.openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-subj", subject,
                     "-keyout", f"{name}.key", "-out", f"{name}.csr")
        ext = []
        if san:
            self.write(f"{name}.ext", f"subjectAltName={san}\n")
            ext = ["-extfile", f"{name}.ext"]
        self.openssl("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.crt", "-CAkey", f"{ca}.key",
                     "-CAcreateserial", "-days", "2", "-out", f"{name}.crt", *ext)

    def test_mutating_calls_need_a_token_on_the_unix_socket(self):
        tokens = self.write("tokens.csv", "admin-tok,alice,1,podium:admins\nview-tok,bob,2\n")
        admin = self.write("admin.token", "admin-tok\n")
        viewer = self.write("viewer.token", "view-tok\n")
        self.address = self.start_scheduler(f"unix://{self.path('sched.sock')}", "--token-auth-file", tokens)

        # Reads need nothing on the (owner-only) unix socket.
        self.ctl("queue")
        self.ctl("plugins")
        # A mutating call without credentials, or with a token outside the
        # admin group, is refused (exit 4) and changes nothing.
        p = self.ctl("pause", expect=4)
        self.assertIn("podium.v1.Admin/SetSchedulingPaused changes the scheduler: it needs a bearer token",
                      p.stderr)
        self.assertIn("give --token-file", p.stderr)
        p = self.ctl("--token-file", viewer, "resume", expect=4)
        self.assertIn('user "bob" may not call podium.v1.Admin/SetSchedulingPaused', p.stderr)
        bad = self.write("bad.token", "guessed\n")
        self.assertIn("invalid bearer token", self.ctl("--token-file", bad, "pause", expect=4).stderr)
        # The admin's token, from the flag or from $PODIUM_TOKEN_FILE.
        self.assertEqual(json.loads(self.ctl("--token-file", admin, "pause", "-o", "json").stdout), {"paused": True})
        self.assertEqual(json.loads(self.ctl("resume", "-o", "json", env={"PODIUM_TOKEN_FILE": admin}).stdout),
                         {"paused": False})

    def test_mutual_tls_on_loopback(self):
        self.openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                     "-days", "2", "-subj", "/CN=podium-test-ca", "-keyout", "ca.key", "-out", "ca.crt")
        self.openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                     "-days", "2", "-subj", "/CN=other-ca", "-keyout", "other.key", "-out", "other.crt")
        self.make_cert("server", "/CN=podium-scheduler", "ca", san="DNS:localhost,IP:127.0.0.1")
        self.make_cert("alice", "/O=podium:admins/CN=alice", "ca")
        self.make_cert("bob", "/CN=bob", "ca")
        self.make_cert("mallory", "/O=podium:admins/CN=mallory", "other")
        p = self.path
        self.address = self.start_scheduler("127.0.0.1:0", "--tls-cert-file", p("server.crt"),
                                            "--tls-private-key-file", p("server.key"), "--client-ca-file", p("ca.crt"))
        tls = ["--tls-ca-file", p("ca.crt")]

        def cert(name):
            return tls + ["--tls-cert-file", p(f"{name}.crt"), "--tls-key-file", p(f"{name}.key")]

        self.assertEqual(json.loads(self.ctl(*cert("alice"), "pause", "-o", "json").stdout), {"paused": True})
        self.ctl(*cert("bob"), "queue")
        self.assertIn('user "bob" may not call', self.ctl(*cert("bob"), "resume", expect=4).stderr)
        # Over TCP even reads need an identity.
        self.ctl(*tls, "queue", expect=4)
        # A certificate from another CA, or no TLS at all: no connection.
        self.assertIn("cannot reach the scheduler", self.ctl(*cert("mallory"), "queue", expect=2).stderr)
        self.ctl("queue", expect=2)
        # A client that does not trust the server's CA refuses it.
        self.ctl("--tls-ca-file", p("other.crt"), "--tls-cert-file", p("alice.crt"), "--tls-key-file",
                 p("alice.key"), "queue", expect=2)

    def test_unreachable_scheduler_exit_2(self):
        sock = f"unix://{self.path('nobody.sock')}"
        p = self.ctl("queue", address=False, env={"PODIUM_ADDRESS": sock}, expect=2)
        self.assertEqual(p.stdout, "")
        self.assertIn(f"podiumctl: cannot reach the scheduler at {sock}: ", p.stderr)
        for args in (["--address", sock, "explain", "default/giant"], ["--address", sock, "pause"],
                     ["--address", sock, "watch", "--timeout", "2s"], ["--address", "127.0.0.1:1", "nodes"]):
            p = self.ctl(*args, address=False, expect=2)
            self.assertIn("cannot reach the scheduler at ", p.stderr)
        # Usage errors are 1, and --help documents the exit codes.
        p = self.ctl("queue", "--queue", "somewhere", address=False, expect=1)
        self.assertIn('--queue: unknown queue "somewhere"', p.stderr)
        help_text = self.ctl("--help", address=False).stdout
        for code in ("0  success", "1  usage error", "2  the scheduler is unreachable", "3  not found"):
            self.assertIn(code, help_text)
        completion = self.ctl("completion", "bash", address=False).stdout
        self.assertIn("complete -F _podiumctl podiumctl", completion)
        bash = subprocess.run(["bash", "-n"], input=completion, capture_output=True, text=True, timeout=10)
        self.assertEqual(bash.returncode, 0, f"the completion script is not valid bash: {bash.stderr}")
        self.assertEqual(self.complete(["qu"]), ["queue"])
        self.assertEqual(self.complete(["queue", "-o", "y"]), ["yaml"])
        self.assertEqual(self.complete(["queue", "--queue", "un"]), ["unschedulable"])
        self.assertEqual(self.complete(["queue", "--queue", "w"]), ["waiting-on-permit"])
        self.assertEqual(self.complete(["queue", "--queue", "i"]), ["in-flight"])
        self.assertEqual(self.complete(["activate", "--all"]), ["--all-unschedulable"])

    def complete(self, words):
        """What bash completion offers for `podiumctl WORDS...` (the last word
        is the one being completed), with podiumctl on PATH."""
        script = ('source <(podiumctl completion bash)\n'
                  'COMP_WORDS=(podiumctl "$@"); COMP_CWORD=$#; _podiumctl; printf "%s\\n" "${COMPREPLY[@]}"\n')
        env = dict(os.environ, PATH=f"{os.path.dirname(PODIUMCTL)}:{os.environ.get('PATH', '')}")
        p = subprocess.run(["bash", "-c", script, "complete"] + words, capture_output=True, text=True,
                           timeout=15, env=env)
        self.assertEqual(p.returncode, 0, p.stderr)
        return sorted(w for w in p.stdout.split("\n") if w)


def main():
    global PODIUMCTL
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("--podiumctl", default=None)
    ours, rest = p.parse_known_args(sys.argv[1:])
    PODIUMCTL = ours.podiumctl
    sys.argv = [sys.argv[0]] + rest
    lib.main()


if __name__ == "__main__":
    main()
