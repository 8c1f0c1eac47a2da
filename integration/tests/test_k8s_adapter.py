"""podium-k8s-adapter end to end: the fake kube-apiserver
(integration/fake_apiserver) + podium-k8s-adapter + podium-scheduler +
podium-plugin-host, on loopback and unix sockets.

Run by ctest as
  /usr/bin/python3 test_k8s_adapter.py --k8s-adapter BIN --repo SRC --stubs BUILD/python
                   --scheduler BIN --plugin-host BIN -- [Class.test_method]
"""

import json
import os
import re
import subprocess
import sys
import threading
import time
import unittest
import urllib.error
import urllib.request

import podium_testlib as lib

ADAPTER = None
FAKE_APISERVER = os.path.join(os.path.dirname(lib.HERE), "fake_apiserver", "fake_apiserver.py")


def node(name, cpu="8", memory="32Gi", pods=110):
    res = {"cpu": cpu, "memory": memory, "pods": str(pods)}
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "status": {"capacity": res, "allocatable": res}}


def pod(name, cpu="100m", memory="64Mi", namespace="default"):
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"containers": [{"name": "main", "image": "registry.k8s.io/pause:3.9",
                                     "resources": {"requests": {"cpu": cpu, "memory": memory}}}]},
            "status": {"phase": "Pending"}}


def workload(name, group, min_count, namespace="default"):
    return {"apiVersion": "scheduling.k8s.io/v1alpha1", "kind": "Workload",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"podGroups": [{"name": group, "policy": {"gang": {"minCount": min_count}}}]}}


class FakeApiserver:
    def __init__(self, test, extra=(), tls_context=None):
        self.proc = lib.Process([lib.PYTHON, FAKE_APISERVER, "--port", "0"] + list(extra), test.dir,
                                "fake-apiserver")
        test.processes.append(self.proc)
        m = self.proc.wait_for_stderr(r"fake-apiserver listening on ([\d.]+):(\d+)")
        self.tls = tls_context
        self.url = f"{'https' if tls_context else 'http'}://{m.group(1)}:{m.group(2)}"

    def call(self, method, path, body=None):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.url + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=10, context=self.tls) as r:
                return r.status, json.loads(r.read() or b"{}")
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"{}")

    def create(self, objects):
        code, out = self.call("POST", "/control/objects", {"objects": objects})
        assert code == 200 and all(r == 201 for r in out["results"]), out
        return out

    def faults(self, **faults):
        code, _ = self.call("POST", "/control/faults", faults)
        assert code == 200

    def stats(self):
        code, out = self.call("GET", "/control/stats")
        assert code == 200
        return out


class AdapterTestBase(lib.IntegrationTest):
    """Starts the processes and asserts on the fake apiserver's counters."""

    def start(self, nodes, pods, faults=None, qps=None, scheduler_addr=None, adapter_flags=()):
        """The fake apiserver with nodes and pods, the scheduler and plugin host
        (or the scheduler at scheduler_addr), then the adapter (after `faults`
        are armed)."""
        if not ADAPTER or not os.path.exists(ADAPTER):
            self.fail("--k8s-adapter binary not given or not built")
        self.api = FakeApiserver(self)
        self.api.create(nodes + pods)
        if faults:
            self.api.faults(**faults)
        self.scheduler_addr = scheduler_addr or self.start_scheduler(lib.config_path("default-plugins.yaml"))
        kubeconfig = self.write("kubeconfig", (
            "apiVersion: v1\nkind: Config\ncurrent-context: fake\n"
            f"clusters:\n- name: fake\n  cluster: {{server: \"{self.api.url}\"}}\n"
            "contexts:\n- name: fake\n  context: {cluster: fake, user: robot}\n"
            "users:\n- name: robot\n  user: {token: test-token}\n"))
        # Metrics on a port of its own (0: the adapter picks one and logs it).
        argv = [ADAPTER, "--kubeconfig", kubeconfig, "--scheduler", self.scheduler_addr, "--page-size", "50",
                "--metrics-address", "127.0.0.1:0"]
        if qps is not None:
            argv += ["--kube-api-qps", str(qps)]
        argv += list(adapter_flags)
        self.adapter = lib.Process(argv, self.dir, "podium-k8s-adapter")
        self.processes.append(self.adapter)

    def start_own_scheduler(self, tag):
        """A scheduler and plugin host of their own (one per adapter replica,
        as in the deployed pod); returns (address, scheduler process)."""
        lib.require_binaries(self, "scheduler", "plugin_host")
        host_addr = f"unix://{self.path(f'host-{tag}.sock')}"
        host = lib.Process([lib.Flags.plugin_host, "--listen", host_addr], self.dir, f"podium-plugin-host-{tag}")
        self.processes.append(host)
        host.wait_for_stderr(r"listening on")
        addr = f"unix://{self.path(f'scheduler-{tag}.sock')}"
        proc = lib.Process([lib.Flags.scheduler, "--config", lib.config_path("default-plugins.yaml"), "--listen", addr,
                            "--metrics-address=", "--plugin-endpoint", f"host={host_addr}"],
                           self.dir, f"podium-scheduler-{tag}")
        self.processes.append(proc)
        proc.wait_for_stderr(r"podium-scheduler listening on", timeout=40)
        return addr, proc

    def wait_for(self, what, predicate, timeout=60):
        deadline = time.monotonic() + timeout
        stats = None
        while time.monotonic() < deadline:
            stats = self.api.stats()
            if predicate(stats):
                return stats
            self.assertTrue(self.adapter.alive(), f"the adapter exited:\n{self.adapter.stderr()[-3000:]}")
            time.sleep(0.2)
        self.fail(f"timed out waiting for {what}; binds={len(stats['binds'])}, "
                  f"unbound={[k for k, v in stats['pods'].items() if not v['node']][:20]}, "
                  f"faults_pending={stats['faults_pending']}")

    def all_bound(self, stats):
        return all(p["node"] for p in stats["pods"].values())

    def assert_bound_exactly_once(self, stats):
        unbound = sorted(k for k, p in stats["pods"].items() if not p["node"])
        self.assertEqual(unbound, [])
        twice = {k: n for k, n in stats["binds"].items() if n != 1}
        self.assertEqual(twice, {}, "pods bound more than once")
        for key in stats["pods"]:
            self.assertEqual(stats["binds"].get(key), 1, key)

    def metrics(self):
        """{(name, frozenset of (label, value)): value} scraped from the adapter's /metrics."""
        port = self.adapter.wait_for_stderr(r"metrics on port (\d+)").group(1)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
            text = r.read().decode()
        out = {}
        for line in text.splitlines():
            m = re.match(r'^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? (\S+)$', line)
            if not m:
                continue
            labels = frozenset(re.findall(r'(\w+)="([^"]*)"', m.group(2) or ""))
            out[(m.group(1), labels)] = float(m.group(3))
        return out

    def metric_sum(self, metrics, name, **labels):
        """The sum of `name`'s series whose labels include `labels`."""
        want = set(labels.items())
        return sum(v for (n, ls), v in metrics.items() if n == name and want <= ls)

    def assert_bound_exactly_once_ignoring(self, stats, preassigned):
        """Every pod bound, each pending one by exactly one binding."""
        self.assertEqual(sorted(k for k, p in stats["pods"].items() if not p["node"]), [])
        for key in stats["pods"]:
            self.assertEqual(stats["binds"].get(key, 0), 0 if key in preassigned else 1, key)

    def scheduler_cache(self, address=None):
        """{pod key: node} from the scheduler's Admin.DumpCache; fails on a pod
        cached twice, and returns the count of assumed pods too."""
        import grpc
        from podium.v1 import admin_pb2, admin_pb2_grpc
        with grpc.insecure_channel(address or self.scheduler_addr) as channel:
            resp = admin_pb2_grpc.AdminStub(channel).DumpCache(
                admin_pb2.DumpCacheRequest(include_pods=True), timeout=5)
        cached = {}
        for n in resp.nodes:
            for p in n.pods:
                key = f"{p.namespace}/{p.name}"
                self.assertNotIn(key, cached, f"{key} is cached twice")
                cached[key] = n.name
        return cached, resp.assumed_pods

    def assert_scheduler_matches_api(self):
        """The scheduler's cache holds exactly the API's bound pods, on their
        nodes (nothing lost, nothing duplicated, nothing stale)."""
        deadline = time.monotonic() + 10
        while True:
            stats = self.api.stats()
            want = {k: p["node"] for k, p in stats["pods"].items() if p["node"]}
            cached, assumed = self.scheduler_cache()
            if (cached == want and assumed == 0) or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        self.assertEqual(assumed, 0)
        self.assertEqual(sorted(set(cached) - set(want)), [], "pods the scheduler has but the API does not")
        self.assertEqual(sorted(set(want) - set(cached)), [], "pods the API has but the scheduler does not")
        self.assertEqual(cached, want)



class K8sAdapterTest(AdapterTestBase):

    def test_every_pod_bound_once_through_faults(self):
        # 2 000 pods on 200 nodes take about 10 s on two cores.
        nodes = [node(f"node-{i:03d}") for i in range(200)]
        pods = [pod(f"web-{i:04d}") for i in range(2000)]
        self.start(nodes, pods, qps=0, faults={
            "fail": [{"verb": "list", "status": 500, "count": 1},
                     {"verb": "bind", "status": 500, "count": 10},
                     {"verb": "bind", "status": 429, "retry_after": 1, "count": 5},
                     {"verb": "event", "status": 503, "count": 3}],
            # The binding is stored, then the answer is lost: the retry's 409 is
            # recognised as our own earlier success.
            "commit_then_fail": [{"verb": "bind", "count": 3}]})
        self.wait_for("20 binds", lambda s: len(s["binds"]) >= 20)
        self.api.faults(drop_watches=True)
        # Pods created after the drop come through the re-established watch.
        self.api.create([pod(f"late-{i:03d}") for i in range(20)])
        stats = self.wait_for("every pod bound", self.all_bound)
        self.assert_bound_exactly_once(stats)
        self.assertEqual(len(stats["pods"]), 2020)
        self.assertEqual(stats["faults_pending"], 0, stats["faults_served"])
        self.assertEqual(stats["faults_served"].get("bind:500:commit"), 3)
        # Only the three commit-then-fail retries met an existing binding.
        self.assertEqual(stats["bind_conflicts"], 3)
        self.assertGreaterEqual(stats["watches_dropped"], 1)
        for key, p in stats["pods"].items():
            self.assertIn({"type": "PodScheduled", "status": "True"},
                          [{k: c[k] for k in ("type", "status")} for c in p["conditions"]], key)
        self.assert_scheduler_matches_api()
        # The adapter's metrics say what happened, in client-go's names.
        m = self.metrics()
        binding = dict(name="rest_client_requests_total", method="POST", resource="pods/binding")
        self.assertEqual(self.metric_sum(m, **binding, code="201") + self.metric_sum(m, **binding, code="409"), 2020)
        self.assertEqual(self.metric_sum(m, **binding, code="409"), 3)
        self.assertEqual(self.metric_sum(m, **binding, code="500"), 13)
        self.assertEqual(self.metric_sum(m, **binding, code="429"), 5)
        self.assertEqual(self.metric_sum(m, "rest_client_requests_total", method="GET", code="500"), 1)  # The list.
        self.assertEqual(self.metric_sum(m, "rest_client_request_retries_total", resource="pods/binding"), 18)
        self.assertEqual(self.metric_sum(m, "podium_adapter_actions_total", action="bind", result="OK"), 2020)
        self.assertEqual(self.metric_sum(m, "rest_client_request_duration_seconds_count", verb="POST",
                                         resource="pods/binding"), 2038)
        self.assertGreaterEqual(self.metric_sum(m, "podium_adapter_watch_restarts_total", reason="error"), 1)
        self.assertGreater(self.metric_sum(m, "rest_client_rate_limiter_duration_seconds_count"), 2000)
        self.assertIn(("podium_adapter_action_queue_depth", frozenset({("lane", "actions")})), m)
        # Scheduled events ride their own lane: posted (three met a 503 and were
        # retried) or, when the lane is behind, dropped; never twice for a pod.
        self.adapter.stop()
        self.assertGreater(stats["events"].get("Scheduled", 0), 0)
        scheduled = [e[0] for e in self.api.stats()["event_log"] if e[2] == "Scheduled"]
        self.assertEqual(len(scheduled), len(set(scheduled)), "a Scheduled event posted twice")
        # Every event is accounted for: posted, dropped, or failed (the calls cut
        # short by the shutdown).
        m = re.search(r"events posted (\d+), aggregated (\d+), dropped (\d+), failed (\d+)", self.adapter.stderr())
        self.assertIsNotNone(m, self.adapter.stderr()[-2000:])
        self.assertEqual(int(m.group(1)) + int(m.group(3)) + int(m.group(4)), 2020)

    def test_binds_start_before_the_pod_list_finished(self):
        # A slow paged list (400 ms a page): pages are streamed to the
        # scheduler, assigned pods first, and it places the first pending pods
        # while later pages are still being listed.
        nodes = [node(f"node-{i}") for i in range(10)] + [node("busy", cpu="2")]
        hog = pod("hog", cpu="2")
        hog["spec"]["nodeName"] = "busy"
        hog["status"]["phase"] = "Running"
        pending = [pod(f"web-{i:03d}", cpu="100m") for i in range(400)]
        self.start(nodes, [hog] + pending, faults={"list_delay_ms": 400})
        stats = self.wait_for("every pod bound", self.all_bound)
        self.assert_bound_exactly_once_ignoring(stats, {"default/hog"})
        pages = stats["list_pages"]["pods"]
        # One page of assigned pods, then 400 pending pods in pages of 50.
        self.assertGreaterEqual(len(pages), 9, pages)
        self.assertIsNotNone(stats["first_bind_at"])
        self.assertLess(stats["first_bind_at"], pages[-1], "the first bind waited for the whole pod list")
        # The assigned pod was known before any pod was placed: nothing went
        # to its full node.
        on_busy = sorted(k for k, p in stats["pods"].items() if p["node"] == "busy")
        self.assertEqual(on_busy, ["default/hog"])
        self.assert_scheduler_matches_api()

    def test_relist_after_410_sends_only_the_differences(self):
        nodes = [node(f"node-{i:02d}") for i in range(10)]
        self.start(nodes, [pod(f"old-{i:03d}") for i in range(50)])
        self.wait_for("the first pods bound", self.all_bound)
        # The watch goes away; meanwhile pods come and go, and the history the
        # adapter would resume from is compacted: it must relist.
        self.api.faults(watch_outage=True)
        for i in range(0, 10):
            code, _ = self.api.call("DELETE", f"/api/v1/namespaces/default/pods/old-{i:03d}")
            self.assertEqual(code, 200)
        self.api.create([pod(f"new-{i:03d}") for i in range(30)])
        self.api.faults(compact=True)
        self.api.faults(watch_outage=False)
        stats = self.wait_for("the new pods bound", self.all_bound)
        self.assertGreaterEqual(stats["gone_served"], 1, "the adapter never resumed from a compacted version")
        self.assertEqual(len(stats["pods"]), 70)
        self.assert_bound_exactly_once(stats)
        self.assertEqual(stats["bind_conflicts"], 0)
        self.assert_scheduler_matches_api()
        self.assertRegex(self.adapter.stderr(), r"410 Gone\); relisting")
        m = self.metrics()
        self.assertGreaterEqual(self.metric_sum(m, "podium_adapter_relists_total", kind="Pod"), 1)
        self.assertGreaterEqual(self.metric_sum(m, "podium_adapter_watch_restarts_total", kind="Pod", reason="gone"), 1)

    def test_pod_created_during_watch_outage_is_scheduled_after_it(self):
        self.start([node("node-a"), node("node-b")], [pod("before")])
        self.wait_for("the first pod bound", self.all_bound)
        self.api.faults(watch_outage=True)
        self.api.create([pod("during")])
        # The outage lasts a few of the adapter's watch retries.
        self.wait_for("watch retries refused", lambda s: s["faults_served"].get("watch:outage", 0) >= 2, timeout=30)
        self.assertEqual(self.api.stats()["pods"]["default/during"]["node"], "")
        self.api.faults(watch_outage=False)
        stats = self.wait_for("the pod created during the outage bound", self.all_bound)
        self.assert_bound_exactly_once(stats)
        self.assert_scheduler_matches_api()

    def test_restarted_scheduler_gets_a_full_list(self):
        self.start([node("node-a"), node("node-b")], [pod(f"first-{i}") for i in range(10)])
        self.wait_for("the first pods bound", self.all_bound)
        # The scheduler goes away and comes back on the same socket: the adapter
        # opens a new stream with everything it knows.
        old = self.scheduler_process
        old.stop()
        self.processes.remove(old)
        self.api.create([pod(f"second-{i}") for i in range(10)])
        argv = list(old.argv)
        self.scheduler_process = lib.Process(argv, self.dir, "podium-scheduler-2")
        self.processes.append(self.scheduler_process)
        self.scheduler_process.wait_for_stderr(r"podium-scheduler listening on", timeout=40)
        stats = self.wait_for("the pods created while it was away bound", self.all_bound)
        self.assert_bound_exactly_once(stats)
        self.assert_scheduler_matches_api()
        self.assertRegex(self.adapter.stderr(), r"opening Cluster.Sync with \d+ objects \(stream 2\)")

    def test_untranslatable_pod_is_reported_and_skipped(self):
        bad = pod("bad-quantity", cpu="lots")
        self.start([node("node-a")], [pod("good-1"), bad, pod("good-2")])
        stats = self.wait_for("the good pods bound",
                              lambda s: s["pods"]["default/good-1"]["node"] and s["pods"]["default/good-2"]["node"])
        stats = self.wait_for("the event on the bad pod",
                              lambda s: any(e[0] == "default/bad-quantity" for e in s["event_log"]), timeout=10)
        events = [e for e in stats["event_log"] if e[0] == "default/bad-quantity"]
        self.assertEqual(events[0][1:3], ["Warning", "FailedScheduling"])
        self.assertIn("spec.containers[0].resources.requests.cpu", events[0][3])
        self.assertEqual(stats["pods"]["default/bad-quantity"]["node"], "")
        self.assertRegex(self.adapter.stderr(), r"Pod default/bad-quantity: cannot translate: .*requests\.cpu")
        self.assertEqual(self.metric_sum(self.metrics(), "podium_adapter_objects_skipped_total", kind="Pod"), 1)
        # A later pod still flows: the stream did not stop.
        self.api.create([pod("good-3")])
        self.wait_for("a later pod bound", lambda s: s["pods"].get("default/good-3", {}).get("node"))

    def test_workload_gang_is_placed_whole(self):
        # A 1.35 alpha Workload (scheduling.k8s.io/v1alpha1) listed at start and
        # one created while watching: each podGroups[] entry is a gang.
        def member(name, workload, group):
            p = pod(name, cpu="1")
            p["spec"]["workloadRef"] = {"name": workload, "podGroup": group}
            return p
        nodes = [node("node-a", cpu="4"), node("node-b", cpu="4")]
        self.start(nodes + [workload("train", "workers", 3)],
                   [member("train-0", "train", "workers"), member("train-1", "train", "workers"), pod("solo")])
        self.wait_for("the pod outside any gang bound", lambda s: s["pods"]["default/solo"]["node"])
        time.sleep(1.0)  # Time enough to place the two members, if the gang were not held.
        stats = self.api.stats()
        self.assertEqual([k for k in ("default/train-0", "default/train-1") if stats["pods"][k]["node"]], [],
                         "members of an incomplete gang were bound")
        self.api.create([member("train-2", "train", "workers")])
        self.wait_for("the whole gang bound", lambda s: all(s["pods"][f"default/train-{i}"]["node"] for i in range(3)))
        # A Workload created while the adapter watches.
        self.api.create([workload("eval", "shards", 2)])
        self.api.create([member("eval-0", "eval", "shards"), member("eval-1", "eval", "shards")])
        stats = self.wait_for("every pod bound", self.all_bound)
        self.assert_bound_exactly_once(stats)
        self.assertNotRegex(self.adapter.stderr(), r"Workload.*(cannot translate|API group absent)")

    def test_forbidden_pod_list_is_retried_until_rbac_allows_it(self):
        # RBAC not yet propagated: the first lists of pods are refused. Pods are
        # required: the adapter lists them again (with backoff) instead of
        # giving up on them, and the scheduler starts only once they are listed.
        self.start([node("node-a")], [pod("web-0"), pod("web-1")],
                   faults={"fail": [{"verb": "list", "resource": "pods", "status": 403, "count": 2}]})
        stats = self.wait_for("every pod bound", self.all_bound, timeout=60)
        self.assert_bound_exactly_once(stats)
        self.assertEqual(stats["faults_served"].get("list:403"), 2)
        self.assertRegex(self.adapter.stderr(), r"Pod: list /api/v1/pods: HTTP 403: .*; listing again in")
        self.api.create([pod("web-2")])  # And it watches them.
        self.wait_for("a later pod bound", self.all_bound)

    def test_absent_gang_api_groups_are_logged_once_and_skipped(self):
        self.start([node("node-a")], [pod("web-0"), pod("web-1")],
                   faults={"absent_groups": ["scheduling.k8s.io", "scheduling.x-k8s.io"]})
        stats = self.wait_for("every pod bound", self.all_bound)
        self.assert_bound_exactly_once(stats)
        self.api.create([pod("web-2")])
        self.wait_for("a later pod bound", self.all_bound)
        log = self.adapter.stderr()
        for path in ("/apis/scheduling.k8s.io/v1alpha1/workloads", "/apis/scheduling.k8s.io/v1alpha2/podgroups",
                     "/apis/scheduling.x-k8s.io/v1alpha1/podgroups"):
            self.assertEqual(len(re.findall(re.escape(path) + r" \(API group absent\)", log)), 1, path)
        # One list each and no watch: the three, and PriorityClasses (which the
        # fake never serves).
        self.assertEqual(self.api.stats()["requests"].get("GET other", 0), 4)

    def test_unschedulable_pod_gets_condition_and_event(self):
        self.start([node("small", cpu="1")], [pod("fits", cpu="500m"), pod("too-big", cpu="4")])
        stats = self.wait_for("PodScheduled=False on too-big", lambda s: any(
            c["type"] == "PodScheduled" and c["status"] == "False"
            for c in s["pods"]["default/too-big"]["conditions"]))
        cond = [c for c in stats["pods"]["default/too-big"]["conditions"] if c["type"] == "PodScheduled"]
        self.assertEqual(len(cond), 1, "conditions are merged by type")
        self.assertEqual(cond[0]["reason"], "Unschedulable")
        self.assertIn("Insufficient cpu", cond[0]["message"])
        self.assertGreaterEqual(stats["requests"].get("PATCH patch", 0), 1)
        stats = self.wait_for("FailedScheduling event", lambda s: any(
            e[0] == "default/too-big" and e[2] == "FailedScheduling" for e in s["event_log"]), timeout=10)
        self.assertEqual(stats["pods"]["default/fits"]["node"], "small")
        self.assertEqual(stats["pods"]["default/too-big"]["node"], "")


class K8sAdapterPreemptionTest(AdapterTestBase):
    """Preemption on a cluster behind the Kubernetes API: the fake apiserver
    deletes a bound pod gracefully (deletionTimestamp first, gone when the
    grace ends, as its kubelet would confirm), so the victims hold their room
    while they terminate."""

    def low(self, name, node_name, priority=100):
        p = pod(name, cpu="500m")
        p["spec"]["nodeName"] = node_name
        p["spec"]["priority"] = priority
        p["spec"]["priorityClassName"] = "low"
        p["status"] = {"phase": "Running"}
        return p

    def start_full_node(self, grace_ms):
        """node-a (2 CPU) full of four priority-100 pods of 500m; the fake
        deletes a bound pod over grace_ms."""
        self.start([node("node-a", cpu="2")], [self.low(f"low-{i}", "node-a") for i in range(4)],
                   faults={"termination_grace_ms": grace_ms})

    def create_pending(self, name, cpu, priority, **spec):
        p = pod(name, cpu=cpu)
        p["spec"].update(priority=priority, **spec)
        self.api.create([p])

    def test_preemptor_evicts_through_the_api_waits_for_termination_and_binds_once(self):
        self.start_full_node(grace_ms=1500)
        self.create_pending("urgent", "1", 1000, priorityClassName="high")

        # Two victims (the fewest that make room) are terminating; the
        # preemptor is nominated to their node and not bound yet.
        stats = self.wait_for("two victims terminating and the preemptor nominated", lambda s: sum(
            p["deleting"] for p in s["pods"].values()) == 2 and s["pods"]["default/urgent"]["nominatedNodeName"])
        victims = sorted(k for k, p in stats["pods"].items() if p["deleting"])
        self.assertEqual(stats["pods"]["default/urgent"]["nominatedNodeName"], "node-a")
        self.assertEqual(stats["pods"]["default/urgent"]["node"], "")
        for v in victims:
            self.assertTrue(any(c["type"] == "DisruptionTarget" and c["status"] == "True"
                                and c["reason"] == "PreemptionByScheduler"
                                for c in stats["pods"][v]["conditions"]), stats["pods"][v])
            self.assertEqual(stats["deletes_with_uid"].get(v), 1, f"{v}'s delete carries its uid")

        # A lower-priority pod that arrives meanwhile cannot take the room
        # the preemptor is nominated to (nor preempt: it outranks no one).
        self.create_pending("late", "1", 50)
        stats = self.wait_for("FailedScheduling for the late pod", lambda s: any(
            e[0] == "default/late" and e[2] == "FailedScheduling" for e in s["event_log"]), timeout=10)
        self.assertEqual(stats["pods"]["default/urgent"]["node"], "", "bound before its victims were gone")

        # Once the victims are gone the preemptor binds to their node, once;
        # no pod is deleted twice and no other pod is evicted.
        stats = self.wait_for("the preemptor bound", lambda s: s["pods"]["default/urgent"]["node"], timeout=20)
        self.assertEqual(stats["pods"]["default/urgent"]["node"], "node-a")
        self.assertEqual(stats["binds"].get("default/urgent"), 1)
        self.assertEqual(stats["terminating"], 0)
        time.sleep(1.0)  # Anything late (a second preemption, a second bind) would show now.
        stats = self.api.stats()
        self.assertEqual(sorted(stats["deletes"]), victims)
        self.assertEqual(set(stats["deletes"].values()), {1}, stats["deletes"])
        self.assertEqual(sorted(k for k in stats["pods"] if k.startswith("default/low-")),
                         sorted(f"default/low-{i}" for i in range(4) if f"default/low-{i}" not in victims))
        self.assertEqual(stats["pods"]["default/late"]["node"], "")
        self.assertEqual(stats["binds"].get("default/urgent"), 1)
        self.assertEqual(stats["requests"].get("DELETE delete", 0), 2)
        preempted = sorted(e[0] for e in stats["event_log"] if e[2] == "Preempted")
        self.assertEqual(preempted, victims)
        uid = stats["pods"]["default/urgent"]["uid"]
        for e in stats["event_log"]:
            if e[2] == "Preempted":  # kube-scheduler names the preemptor by uid.
                self.assertEqual(e[3], f"Preempted by pod {uid} on node node-a")
        self.assertTrue(any(e[0] == "default/urgent" and e[2] == "Scheduled" for e in stats["event_log"]))
        self.assert_scheduler_matches_api()


    def test_pdb_read_from_the_api_steers_the_victims_to_the_node_it_does_not_cover(self):
        # Both nodes full of equal pods; node-a's are covered by a PDB whose
        # status (the disruption controller's) allows no disruption.
        fillers = [self.low(f"a-{i}", "node-a") for i in range(4)] + [self.low(f"b-{i}", "node-b") for i in range(4)]
        for f in fillers[:4]:
            f["metadata"]["labels"] = {"app": "guarded"}
        pdb = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
               "metadata": {"name": "guarded", "namespace": "default"},
               "spec": {"minAvailable": 4, "selector": {"matchLabels": {"app": "guarded"}}},
               "status": {"disruptionsAllowed": 0, "currentHealthy": 4, "desiredHealthy": 4, "expectedPods": 4}}
        self.start([node("node-a", cpu="2"), node("node-b", cpu="2")], fillers + [pdb])
        self.create_pending("urgent", "1", 1000)
        stats = self.wait_for("the preemptor bound", lambda s: s["pods"]["default/urgent"]["node"], timeout=20)
        self.assertEqual(stats["pods"]["default/urgent"]["node"], "node-b")
        self.assertEqual(len(stats["deletes"]), 2, stats["deletes"])
        self.assertTrue(all(k.startswith("default/b-") for k in stats["deletes"]), stats["deletes"])
        self.assertEqual(sorted(k for k in stats["pods"] if k.startswith("default/a-")),
                         [f"default/a-{i}" for i in range(4)])

    def test_restarted_scheduler_waits_for_the_victims_its_predecessor_evicted(self):
        # The scheduler that preempted goes away while its victims terminate.
        # The new one learns the nomination from the preemptor's
        # status.nominatedNodeName and the victims' deletionTimestamp from the
        # relist: it waits for them instead of evicting two more pods.
        self.start_full_node(grace_ms=6000)
        self.create_pending("urgent", "1", 1000)
        self.wait_for("two victims terminating and the preemptor nominated", lambda s: sum(
            p["deleting"] for p in s["pods"].values()) == 2 and s["pods"]["default/urgent"]["nominatedNodeName"])
        old = self.scheduler_process
        old.stop()
        self.processes.remove(old)
        self.scheduler_process = lib.Process(list(old.argv), self.dir, "podium-scheduler-2")
        self.processes.append(self.scheduler_process)
        self.scheduler_process.wait_for_stderr(r"Cluster synced", timeout=40)
        self.assertGreater(self.api.stats()["terminating"], 0, "the victims went before the test could look")
        stats = self.wait_for("the preemptor bound", lambda s: s["pods"]["default/urgent"]["node"], timeout=30)
        self.assertEqual(stats["pods"]["default/urgent"]["node"], "node-a")
        time.sleep(1.0)
        stats = self.api.stats()
        self.assertEqual(len(stats["deletes"]), 2, stats["deletes"])
        self.assertEqual(set(stats["deletes"].values()), {1}, stats["deletes"])
        self.assertEqual(stats["binds"].get("default/urgent"), 1)
        self.assertEqual(len([k for k in stats["pods"] if k.startswith("default/low-")]), 2)
        self.assert_scheduler_matches_api()

    def test_pdb_with_an_invalid_selector_is_refused_and_preemption_goes_on(self):
        # The API accepts what kube-scheduler would skip; Podium refuses the
        # PDB where it enters, names it and the field, and keeps scheduling.
        fillers = [self.low(f"db-{i}", "node-a") for i in range(4)]
        for f in fillers:
            f["metadata"]["labels"] = {"app": "db"}
        bad = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
               "metadata": {"name": "db", "namespace": "default"},
               "spec": {"minAvailable": 4, "selector": {"matchExpressions": [
                   {"key": "app", "operator": "In", "values": []}]}},
               "status": {"disruptionsAllowed": 0}}
        self.start([node("node-a", cpu="2")], fillers + [bad])
        self.create_pending("urgent", "1", 1000)
        stats = self.wait_for("the preemptor bound", lambda s: s["pods"]["default/urgent"]["node"], timeout=20)
        self.assertEqual(len(stats["deletes"]), 2, stats["deletes"])
        log = self.scheduler_process.stderr() + self.adapter.stderr()
        self.assertIn("PodDisruptionBudget default/db", log)
        self.assertIn("spec.selector.matchExpressions[0].values: must be non-empty for operator In and NotIn", log)
        self.assertEqual(self.metric_sum(self.metrics(), "podium_adapter_objects_skipped_total",
                                         kind="PodDisruptionBudget"), 1)
        self.assertTrue(self.adapter.alive())
        self.assertTrue(self.scheduler_process.alive())

    def test_higher_priority_preemptor_takes_the_room_and_the_first_nomination_is_cleared(self):
        self.start_full_node(grace_ms=3000)
        self.create_pending("first", "1", 500)
        self.wait_for("first nominated", lambda s: s["pods"]["default/first"]["nominatedNodeName"] == "node-a")
        # A pod that needs the whole node and outranks the first: the first's
        # nomination does not count against it; it evicts the other two.
        self.create_pending("second", "2", 1000)
        stats = self.wait_for("second nominated and first's nomination cleared", lambda s: (
            s["pods"]["default/second"]["nominatedNodeName"] == "node-a"
            and not s["pods"]["default/first"]["nominatedNodeName"]), timeout=20)
        stats = self.wait_for("second bound", lambda s: s["pods"]["default/second"]["node"], timeout=20)
        self.assertEqual(stats["pods"]["default/second"]["node"], "node-a")
        time.sleep(1.0)
        stats = self.api.stats()
        self.assertEqual(sorted(stats["deletes"]), [f"default/low-{i}" for i in range(4)])
        self.assertEqual(set(stats["deletes"].values()), {1})
        self.assertEqual(stats["pods"]["default/first"]["node"], "")
        self.assertFalse(stats["pods"]["default/first"]["nominatedNodeName"])
        self.assertEqual(stats["binds"].get("default/second"), 1)
        self.assertNotIn("default/first", stats["binds"])

    def resizing(self, name, node_name, want_cpu, allocated_cpu, priority):
        """A bound pod whose in-place resize its kubelet deferred, as
        Kubernetes 1.33+ reports it (the PodResizePending condition)."""
        p = pod(name, cpu=want_cpu)
        p["spec"]["nodeName"] = node_name
        p["spec"]["priority"] = priority
        p["status"] = {"phase": "Running",
                       "conditions": [{"type": "PodResizePending", "status": "True", "reason": "Deferred",
                                       "message": "Node didn't have enough capacity: cpu"}],
                       "containerStatuses": [{"name": "main",
                                              "allocatedResources": {"cpu": allocated_cpu, "memory": "64Mi"}}]}
        return p

    def test_deferred_resize_reported_by_condition_evicts_a_lower_priority_pod_on_its_own_node(self):
        # node-a (2 CPU): db runs with 1 CPU and asks for 1500m; low-0 and
        # low-1 (500m each) fill the rest. One of them must go; node-b's
        # lower-priority pod is on another node and stays.
        pods = [self.resizing("db", "node-a", "1500m", "1", 500),
                self.low("low-0", "node-a"), self.low("low-1", "node-a"), self.low("lowest", "node-b", priority=1)]
        self.start([node("node-a", cpu="2"), node("node-b", cpu="2")], pods)
        stats = self.wait_for("a victim deleted", lambda s: s["deletes"], timeout=20)
        time.sleep(1.0)  # A second eviction, if any, would show now.
        stats = self.api.stats()
        self.assertEqual(len(stats["deletes"]), 1, stats["deletes"])
        victim = next(iter(stats["deletes"]))
        self.assertIn(victim, ("default/low-0", "default/low-1"))
        self.assertEqual(stats["deletes_with_uid"].get(victim), 1)
        self.assertEqual(stats["pods"]["default/db"]["node"], "node-a")
        self.assertEqual(stats["pods"]["default/lowest"]["node"], "node-b")
        self.assertEqual(stats["binds"], {}, "nothing is bound: the resized pod stays where it is")
        self.assertEqual([e[0] for e in stats["event_log"] if e[2] == "Preempted"], [victim])

    def test_deferred_resize_without_victims_gets_a_condition_and_an_event_saying_why(self):
        pods = [self.resizing("stuck", "node-a", "2", "1", 50), self.low("high", "node-a", priority=1000),
                self.low("low-elsewhere", "node-b", priority=1)]
        self.start([node("node-a", cpu="2"), node("node-b", cpu="2")], pods)
        stats = self.wait_for("PodResizePreemption=False on the resized pod", lambda s: any(
            c["type"] == "PodResizePreemption" and c["status"] == "False"
            for c in s["pods"]["default/stuck"]["conditions"]), timeout=20)
        cond = next(c for c in stats["pods"]["default/stuck"]["conditions"] if c["type"] == "PodResizePreemption")
        self.assertEqual(cond["reason"], "PreemptionNotHelpful")
        self.assertIn("No preemption victims found for incoming pod", cond["message"])
        stats = self.wait_for("FailedResizePreemption event", lambda s: any(
            e[0] == "default/stuck" and e[2] == "FailedResizePreemption" for e in s["event_log"]), timeout=10)
        self.assertEqual(stats["deletes"], {})
        # The kubelet's own condition is kept (conditions are merged by type).
        self.assertTrue(any(c["type"] == "PodResizePending" and c["reason"] == "Deferred"
                            for c in stats["pods"]["default/stuck"]["conditions"]))


def openssl(*args, cwd):
    import subprocess
    r = subprocess.run(["openssl"] + list(args), cwd=cwd, capture_output=True, text=True)
    assert r.returncode == 0, f"openssl {' '.join(args)}: {r.stderr}"


class K8sAdapterCpuPolicyTest(AdapterTestBase):
    """--cpu-policy: every adapter thread (reflectors, action workers, gRPC's)
    runs under SCHED_BATCH by default and SCHED_OTHER with `normal`, read from
    /proc once the adapter has bound the pods; an unknown value is refused."""

    def bind_and_read_policies(self, flags):
        self.start([node("n1"), node("n2")], [pod(f"p{i}") for i in range(3)], adapter_flags=flags)
        self.wait_for("every pod bound", self.all_bound)
        policies = lib.thread_policies(self.adapter.proc.pid)
        self.assertGreater(len(policies), 3, policies)  # Not just main: the threads that do the work.
        return policies

    def test_every_thread_runs_batch_by_default(self):
        policies = self.bind_and_read_policies([])
        self.assertEqual(set(policies.values()), {lib.SCHED_BATCH}, f"threads (tid: policy): {policies}")

    def test_normal_keeps_sched_other(self):
        policies = self.bind_and_read_policies(["--cpu-policy=normal"])
        self.assertEqual(set(policies.values()), {lib.SCHED_OTHER}, f"threads (tid: policy): {policies}")

    def test_unknown_policy_is_refused_naming_the_flag(self):
        if not ADAPTER or not os.path.exists(ADAPTER):
            self.fail("--k8s-adapter binary not given or not built")
        p = subprocess.run([ADAPTER, "--cpu-policy", "fifo"], capture_output=True, text=True, timeout=30,
                           stdin=subprocess.DEVNULL)
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn('--cpu-policy: "fifo" is neither batch nor normal', p.stderr)


class K8sAdapterTlsTest(AdapterTestBase):
    """HTTPS with a private CA, a client certificate and a rotated bearer token
    read from a file, all from a kubeconfig."""

    def test_https_client_certificate_and_rotated_token(self):
        import base64
        import ssl
        d = self.dir
        openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.crt",
                "-subj", "/CN=podium-test-ca", "-days", "1", cwd=d)
        self.write("san.ext", "subjectAltName=IP:127.0.0.1\n")
        for name, cn in (("server", "127.0.0.1"), ("client", "podium-k8s-adapter")):
            openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.csr",
                    "-subj", f"/CN={cn}", cwd=d)
            openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
                    "-out", f"{name}.crt", "-days", "1", *(["-extfile", "san.ext"] if name == "server" else []),
                    cwd=d)
        token = self.write("token", "first-token\n")
        ctx = ssl.create_default_context(cafile=self.path("ca.crt"))
        ctx.load_cert_chain(self.path("client.crt"), self.path("client.key"))
        self.api = FakeApiserver(self, ["--tls-cert", self.path("server.crt"), "--tls-key", self.path("server.key"),
                                        "--client-ca", self.path("ca.crt"), "--token-file", token],
                                 tls_context=ctx)
        self.api.create([node("node-a"), node("node-b")] + [pod(f"first-{i}") for i in range(5)])
        self.scheduler_addr = self.start_scheduler(lib.config_path("default-plugins.yaml"))
        def b64(name):
            with open(self.path(name), "rb") as f:
                return base64.b64encode(f.read()).decode()
        # Relative file paths resolve against the kubeconfig's directory.
        kubeconfig = self.write("kubeconfig", (
            "apiVersion: v1\nkind: Config\ncurrent-context: tls\n"
            f"clusters:\n- name: c\n  cluster:\n    server: {self.api.url}\n"
            f"    certificate-authority-data: {b64('ca.crt')}\n"
            "contexts:\n- name: tls\n  context: {cluster: c, user: u}\n"
            "users:\n- name: u\n  user:\n    client-certificate: client.crt\n"
            f"    client-key-data: {b64('client.key')}\n    tokenFile: token\n"))
        self.adapter = lib.Process([ADAPTER, "--kubeconfig", kubeconfig, "--scheduler", self.scheduler_addr],
                                   self.dir, "podium-k8s-adapter")
        self.processes.append(self.adapter)
        self.wait_for("the first pods bound over HTTPS", self.all_bound)
        # The token rotates (written aside, renamed in place as the kubelet
        # does); once the adapter had time to notice, the old one is revoked.
        self.write("token.new", "second-token\n")
        os.rename(self.path("token.new"), token)
        time.sleep(2.5)
        self.api.faults(revoke_old_tokens=True)
        self.api.create([pod(f"second-{i}") for i in range(5)])
        stats = self.wait_for("the later pods bound with the new token", self.all_bound)
        self.assert_bound_exactly_once(stats)
        self.assertEqual(stats["unauthorized"], 0)
        self.assertRegex(self.adapter.stderr(), r"API server https://127\.0\.0\.1:\d+ \(kubeconfig ")


class K8sAdapterSchedulerCredentialsTest(AdapterTestBase):
    """The adapter's own credentials toward a scheduler with access control
    (--scheduler-tls-*, --scheduler-token-file; test_authn.py covers the
    refusals with podium-sim, which shares the dial code)."""

    def test_mutual_tls_to_the_scheduler(self):
        d = self.dir
        ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
        openssl("req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.crt", "-subj", "/CN=ca", "-days", "1", cwd=d)
        self.write("san.ext", "subjectAltName=DNS:localhost,IP:127.0.0.1\n")
        for name, cn in (("server", "podium-scheduler"), ("adapter", "podium-adapter")):
            openssl("req", *ec, "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", f"/CN={cn}", cwd=d)
            openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
                    "-out", f"{name}.crt", "-days", "1", *(["-extfile", "san.ext"] if name == "server" else []),
                    cwd=d)
        host_addr = f"unix://{self.path('host.sock')}"
        host = lib.Process([lib.Flags.plugin_host, "--listen", host_addr], d, "podium-plugin-host")
        self.processes.append(host)
        host.wait_for_stderr(r"listening on")
        p = self.path
        tokens = self.write("tokens.csv", "adapter-tok,podium-adapter,1\n")
        sched = lib.Process([lib.Flags.scheduler, "--config", lib.config_path("default-plugins.yaml"), "--listen",
                             "127.0.0.1:0", "--metrics-address=", "--plugin-endpoint", f"host={host_addr}",
                             "--tls-cert-file", p("server.crt"), "--tls-private-key-file", p("server.key"),
                             "--client-ca-file", p("ca.crt"), "--token-auth-file", tokens,
                             "--adapter-identity", "podium-adapter"], d, "podium-scheduler")
        self.processes.append(sched)
        addr = sched.wait_for_stderr(r"podium-scheduler listening on (\S+)", timeout=40).group(1)
        self.start([node("node-a"), node("node-b")], [pod(f"p-{i}") for i in range(6)], scheduler_addr=addr,
                   adapter_flags=["--scheduler-tls-ca-file", p("ca.crt"), "--scheduler-tls-cert-file",
                                  p("adapter.crt"), "--scheduler-tls-key-file", p("adapter.key"),
                                  "--scheduler-tls-server-name", "localhost"])
        self.assert_bound_exactly_once(self.wait_for("pods bound over mutual TLS", self.all_bound))
        self.assertNotIn("PERMISSION_DENIED", self.adapter.stderr())


class K8sAdapterLeaderElectionTest(AdapterTestBase):
    """Two replicas (each an adapter with its own scheduler, as in the deployed
    pod) elect one leader on a Lease. The standby lists and watches and keeps
    its scheduler's cache warm, but its scheduler gets no ListEnd: nothing is
    scheduled or issued. The leader is killed; the standby takes over and
    nothing is bound twice."""

    def replica(self, kubeconfig, identity, scheduler_addr, lease_duration="3s"):
        p = lib.Process([ADAPTER, "--kubeconfig", kubeconfig, "--scheduler", scheduler_addr,
                         "--leader-elect", "--leader-elect-identity", identity,
                         "--leader-elect-resource-namespace", "podium-system",
                         "--leader-elect-lease-duration", lease_duration, "--leader-elect-renew-deadline", "2s",
                         "--leader-elect-retry-period", "500ms"], self.dir, identity)
        self.processes.append(p)
        return p

    def kubeconfig(self):
        return self.write("kubeconfig", (
            "apiVersion: v1\nkind: Config\ncurrent-context: fake\n"
            f"clusters:\n- name: fake\n  cluster: {{server: \"{self.api.url}\"}}\n"
            "contexts:\n- name: fake\n  context: {cluster: fake}\n"))

    def test_standby_takes_over_when_the_leader_dies(self):
        if not ADAPTER or not os.path.exists(ADAPTER):
            self.fail("--k8s-adapter binary not given or not built")
        self.api = FakeApiserver(self)
        self.api.create([node(f"node-{i}") for i in range(5)] + [pod(f"first-{i:03d}") for i in range(100)])
        addr_a, _ = self.start_own_scheduler("a")
        addr_b, sched_b = self.start_own_scheduler("b")
        kubeconfig = self.kubeconfig()
        a = self.adapter = self.replica(kubeconfig, "replica-a", addr_a)
        holder = lambda s: s["leases"].get("podium-system/podium", {}).get("holderIdentity")
        self.wait_for("replica-a to lead", lambda s: holder(s) == "replica-a", timeout=15)
        b = self.replica(kubeconfig, "replica-b", addr_b)
        stats = self.wait_for("the first pods bound", self.all_bound)
        # The standby streams what it lists to its scheduler: that cache is warm
        # (every bound pod on its node), yet it was never told it may schedule.
        self.scheduler_addr = addr_b
        self.assert_scheduler_matches_api()
        time.sleep(1.5)  # Several of b's campaign rounds against a live leader.
        self.assertEqual(holder(self.api.stats()), "replica-a")
        self.assertRegex(b.stderr(), r"opening Cluster.Sync with \d+ objects")
        self.assertNotIn("the scheduler may schedule", b.stderr(), "the standby sent ListEnd")
        self.assertNotIn("leading", b.stderr())
        self.assertNotIn("cluster synced", sched_b.stderr(), "the standby's scheduler started scheduling")

        a.proc.kill()  # No goodbye: the lease must expire.
        a.proc.wait(timeout=5)
        self.adapter = b
        self.api.create([pod(f"second-{i:03d}") for i in range(100)])
        stats = self.wait_for("replica-b to lead", lambda s: holder(s) == "replica-b", timeout=15)
        self.assertEqual(stats["leases"]["podium-system/podium"]["leaseTransitions"], 1)
        stats = self.wait_for("every pod bound", self.all_bound, timeout=30)
        self.assert_bound_exactly_once(stats)
        self.assertEqual(stats["bind_conflicts"], 0)
        agents = stats["binds_by_agent"]
        self.assertEqual(agents.get("podium-k8s-adapter (replica-a)"), 100, agents)
        self.assertEqual(agents.get("podium-k8s-adapter (replica-b)"), 100, agents)
        self.assertRegex(b.stderr(), r"leading \(lease podium-system/podium, identity replica-b\)")
        # b's scheduler was not sent a second list: ListEnd went on the stream it had.
        self.assertEqual(len(re.findall(r"opening Cluster.Sync", b.stderr())), 1)
        self.assert_scheduler_matches_api()

    def test_leader_that_cannot_renew_stops_acting_before_its_lease_expires(self):
        if not ADAPTER or not os.path.exists(ADAPTER):
            self.fail("--k8s-adapter binary not given or not built")
        self.api = FakeApiserver(self)
        self.api.create([node(f"node-{i}") for i in range(4)] + [pod(f"first-{i:02d}") for i in range(20)])
        self.scheduler_addr, _ = self.start_own_scheduler("a")
        # Lease 4 s, renew deadline 2 s: a bind already in flight when the
        # deadline passes has 2 s to finish on a loaded machine.
        a = self.adapter = self.replica(self.kubeconfig(), "replica-a", self.scheduler_addr, lease_duration="4s")
        self.wait_for("the first pods bound", self.all_bound)
        # The API refuses every Lease request from now on (GET and PUT: 500).
        self.api.faults(fail=[{"verb": "lease", "status": 500, "count": 1000000}])
        fault_at = self.api.stats()["now"]
        # Pods keep coming while the leader fails to renew, until it gives up.
        deadline = time.monotonic() + 15
        i = 0
        while a.alive() and time.monotonic() < deadline:
            self.api.create([pod(f"more-{i:03d}")])
            i += 1
            time.sleep(0.1)
        self.assertEqual(a.proc.wait(timeout=10), 1, "a leader that lost its lease exits 1")
        stats = self.api.stats()
        renewed = stats["lease_written_at"]["podium-system/podium"]
        last_bind = stats["last_bind_at_by_agent"]["podium-k8s-adapter (replica-a)"]
        self.assertLess(renewed, fault_at + 0.1, "a lease write got through the fault")
        self.assertGreater(last_bind, fault_at, "no bind while the renewals failed: the test proves nothing")
        # Actions stop before the lease can expire for the others (lease
        # duration 4 s after the last renewal; the renew deadline is 2 s).
        self.assertLess(last_bind, renewed + 4.0)
        self.assertRegex(a.stderr(), r"lost the lease podium-system/podium")


class ScriptedScheduler:
    """The scheduler's side of Cluster.Sync, played by the test: records what
    the adapter sends and sends the actions it is given after ListEnd and,
    with `listed_pods`, once those pods have arrived too. ListEnd comes as
    soon as the assigned pods are listed (the pending ones follow as their
    pages arrive, so that the scheduler may start), so an action sent at
    ListEnd may delete a pod before the adapter lists it."""

    def __init__(self, address, actions, listed_pods=()):
        import concurrent.futures
        import queue
        import grpc
        from podium.v1 import cluster_pb2, cluster_pb2_grpc
        self.pb = cluster_pb2
        self.received = queue.Queue()
        self.actions = actions
        outer = self

        class Servicer(cluster_pb2_grpc.ClusterServicer):
            def Sync(self, requests, context):
                yield cluster_pb2.SchedulerMessage(hello=cluster_pb2.SchedulerHello(
                    protocol_version=1, scheduler_names=["default-scheduler"]))
                listed = threading.Event()

                def read():
                    list_ended, missing = False, set(listed_pods)
                    try:
                        for m in requests:
                            outer.received.put(m)
                            list_ended |= m.HasField("list_end")
                            if m.HasField("events"):
                                missing -= {e.pod.meta.name for e in m.events.events if e.HasField("pod")}
                            if list_ended and not missing:
                                listed.set()
                    except grpc.RpcError:
                        pass  # The stream ended with the test.
                    outer.received.put(None)
                threading.Thread(target=read, daemon=True).start()
                if listed.wait(20) and outer.actions:
                    yield cluster_pb2.SchedulerMessage(actions=cluster_pb2.Actions(actions=outer.actions))
                while context.is_active():
                    time.sleep(0.1)

        self.server = grpc.server(concurrent.futures.ThreadPoolExecutor(max_workers=4))
        cluster_pb2_grpc.add_ClusterServicer_to_server(Servicer(), self.server)
        self.server.add_insecure_port(address)
        self.server.start()

    def stop(self):
        self.server.stop(0)


class K8sAdapterActionsTest(lib.IntegrationTest):
    """Every kind of action against the fake apiserver, with a scripted
    scheduler, and the Cluster.Sync stream's shape."""

    def test_actions_and_their_results(self):
        from podium.v1 import cluster_pb2, objects_pb2
        api_pods = [pod("victim"), pod("other"), pod("bound"), pod("waiting"), pod("evicted")]
        bound = api_pods[2]
        bound["spec"]["nodeName"] = "node-a"
        # The uids are the fake's: known once the pods exist; create first.
        self.api = None
        address = f"unix://{self.path('scripted.sock')}"
        pending = []

        def ref(name, uid=""):
            return objects_pb2.ObjectRef(kind="Pod", namespace="default", name=name, uid=uid)

        scheduler = ScriptedScheduler(address, pending, listed_pods=[p["metadata"]["name"] for p in api_pods])
        try:
            # Actions are filled in before the adapter connects (they need uids).
            pdb = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                   "metadata": {"name": "web-pdb", "namespace": "default"},
                   "spec": {"minAvailable": "50%", "selector": {"matchLabels": {"app": "web"}}},
                   "status": {"disruptionsAllowed": 1}}
            self.start_api_only([node("node-a"), pdb], api_pods)
            uids = {k.split("/")[1]: p["uid"] for k, p in self.api.stats()["pods"].items()}
            pending.extend([
                cluster_pb2.Action(id=1, delete_pod=cluster_pb2.DeletePod(pod=ref("victim", uids["victim"]),
                                                                         reason="preempted")),
                cluster_pb2.Action(id=2, delete_pod=cluster_pb2.DeletePod(pod=ref("other", "not-its-uid"))),
                cluster_pb2.Action(id=3, bind=cluster_pb2.BindPod(pod=ref("bound", uids["bound"]), node_name="node-a")),
                cluster_pb2.Action(id=4, bind=cluster_pb2.BindPod(pod=ref("ghost"), node_name="node-a")),
                cluster_pb2.Action(id=5, patch_pod_status=cluster_pb2.PatchPodStatus(
                    pod=ref("waiting"), nominated_node_name="node-a")),
                cluster_pb2.Action(id=6, record_event=cluster_pb2.RecordEvent(
                    regarding=ref("victim", uids["victim"]), type="Normal", reason="Preempted",
                    action="Preempting", note="Preempted by default/waiting on node node-a")),
                cluster_pb2.Action(id=7, bind=cluster_pb2.BindPod(pod=ref("waiting", uids["waiting"]),
                                                                  node_name="node-a")),
                # Protocol 2: the DisruptionTarget patched first, then the delete.
                cluster_pb2.Action(id=8, delete_pod=cluster_pb2.DeletePod(
                    pod=ref("evicted", uids["evicted"]), reason="preempted",
                    disruption_target=objects_pb2.PodCondition(type="DisruptionTarget", status="True",
                                                               reason="PreemptionByScheduler"))),
                cluster_pb2.Action(id=9, delete_pod=cluster_pb2.DeletePod(
                    pod=ref("ghost"), disruption_target=objects_pb2.PodCondition(type="DisruptionTarget",
                                                                                 status="True"))),
            ])
            self.start_adapter(address)
            results, events, shape = {}, [], []
            deadline = time.monotonic() + 30
            def deleted(name):
                return any(e.type == cluster_pb2.ObjectEvent.DELETE and e.pod.meta.name == name for e in events)
            while time.monotonic() < deadline and (len(results) < 9 or not deleted("victim") or
                                                   not deleted("evicted")):
                try:
                    m = scheduler.received.get(timeout=1)
                except Exception:
                    continue
                if m is None:
                    break
                kind = m.WhichOneof("kind")
                if not shape or shape[-1] != kind:
                    shape.append(kind)
                if kind == "events":
                    events.extend(m.events.events)
                if kind == "results":
                    for r in m.results.results:
                        results[r.action_id] = (cluster_pb2.ActionResult.Code.Name(r.code), r.message)
            self.assertEqual(shape[:4], ["hello", "list_begin", "events", "list_end"])
            # The initial list: nodes, PDBs (policy/v1), then pods.
            listed = [(e.WhichOneof("object"), getattr(e, e.WhichOneof("object")).meta.name) for e in events[:7]]
            self.assertEqual(listed, [("node", "node-a"), ("pdb", "web-pdb"), ("pod", "bound"), ("pod", "evicted"),
                                      ("pod", "other"), ("pod", "victim"), ("pod", "waiting")])
            self.assertEqual(events[1].pdb.min_available.percent, "50%")
            self.assertEqual(events[1].pdb.disruptions_allowed, 1)
            codes = {k: v[0] for k, v in results.items()}
            self.assertEqual(codes, {1: "OK", 2: "CONFLICT", 3: "CONFLICT", 4: "NOT_FOUND", 5: "OK", 6: "OK",
                                     7: "OK", 8: "OK", 9: "NOT_FOUND"}, results)
            self.assertIn("DisruptionTarget patch", results[9][1])
            # The evicted pod carried the condition before it went (the watch saw both).
            evicted = [e for e in events if e.WhichOneof("object") == "pod" and e.pod.meta.name == "evicted"]
            self.assertEqual(evicted[-1].type, cluster_pb2.ObjectEvent.DELETE)
            self.assertTrue(any(c.type == "DisruptionTarget" and c.reason == "PreemptionByScheduler"
                                for c in evicted[-1].pod.conditions), evicted[-1])
            self.assertNotIn("default/evicted", self.api.stats()["pods"])
            self.assertIn("Precondition failed", results[2][1])
            self.assertIn("already assigned", results[3][1])
            self.assertTrue(any(e.type == cluster_pb2.ObjectEvent.DELETE and e.pod.meta.name == "victim"
                                for e in events), "the victim's deletion came back through the watch")
            stats = self.api.stats()
            self.assertNotIn("default/victim", stats["pods"])
            self.assertIn("default/other", stats["pods"])
            self.assertEqual(stats["pods"]["default/waiting"]["nominatedNodeName"], "node-a")
            self.assertEqual(stats["pods"]["default/waiting"]["node"], "node-a")
            self.assertEqual([e[1:3] for e in stats["event_log"]], [["Normal", "Preempted"]])
        finally:
            scheduler.stop()

    def collect(self, scheduler, until, timeout=30):
        """ObjectEvents the adapter sends until `until(events, list_ended)`."""
        from podium.v1 import cluster_pb2
        events, list_ended = [], False
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and not until(events, list_ended):
            try:
                m = scheduler.received.get(timeout=0.5)
            except Exception:
                continue
            if m is None:
                break
            if m.HasField("list_end"):
                list_ended = True
            if m.HasField("events"):
                events.extend(m.events.events)
        return events, list_ended

    @staticmethod
    def describe(e):
        from podium.v1 import cluster_pb2
        kind = e.WhichOneof("object")
        meta = getattr(e, kind).meta
        return ("UPSERT" if e.type == cluster_pb2.ObjectEvent.UPSERT else "DELETE", kind,
                f"{meta.namespace}/{meta.name}" if meta.namespace else meta.name)

    def test_relist_after_410_deletes_what_vanished_of_every_kind(self):
        def ns(name):
            return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": {"team": name}}}

        def pdb(name):
            return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                    "metadata": {"name": name, "namespace": "default"},
                    "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": name}}}}

        def sp_group(name):
            return {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
                    "metadata": {"name": name, "namespace": "default"}, "spec": {"minMember": 2}}

        def k8s_group(name):
            return {"apiVersion": "scheduling.k8s.io/v1alpha2", "kind": "PodGroup",
                    "metadata": {"name": name, "namespace": "default"},
                    "spec": {"schedulingPolicy": {"gang": {"minCount": 2}}}}

        two_groups = workload("gone-wl", "a", 2)
        two_groups["spec"]["podGroups"].append({"name": "b", "policy": {"basic": {}}})
        objects = [node("node-a"), ns("keep-ns"), ns("gone-ns"), pdb("keep-pdb"), pdb("gone-pdb"),
                   sp_group("keep-sp"), sp_group("gone-sp"), k8s_group("keep-k8s"), k8s_group("gone-k8s"),
                   workload("keep-wl", "g", 2), two_groups]
        address = f"unix://{self.path('scripted.sock')}"
        scheduler = ScriptedScheduler(address, [])
        try:
            self.start_api_only(objects, [pod("web")])
            self.start_adapter(address)
            # Pending pods may follow ListEnd.
            events, ended = self.collect(scheduler, lambda ev, ended: ended and any(
                e.HasField("pod") for e in ev))
            self.assertTrue(ended, "no ListEnd")
            listed = {self.describe(e) for e in events}
            want = {("UPSERT", "namespace_object", "gone-ns"), ("UPSERT", "pdb", "default/gone-pdb"),
                    ("UPSERT", "pod_group", "default/gone-sp"), ("UPSERT", "pod_group", "default/gone-k8s"),
                    ("UPSERT", "pod_group", "default/gone-wl/a"), ("UPSERT", "pod_group", "default/gone-wl/b"),
                    ("UPSERT", "pod_group", "default/keep-wl/g"), ("UPSERT", "pod", "default/web")}
            self.assertLessEqual(want, listed)
            wl = [e.pod_group for e in events if e.HasField("pod_group") and e.pod_group.meta.name == "gone-wl/a"][0]
            self.assertEqual(wl.min_member, 2)
            from podium.v1 import objects_pb2
            self.assertEqual(wl.source, objects_pb2.PodGroup.KUBERNETES_WORKLOAD)

            # The watches go away; meanwhile one object of each kind is deleted and
            # the history compacted: the adapter must relist every kind.
            self.api.faults(watch_outage=True)
            gone = [{"kind": o["kind"], "apiVersion": o["apiVersion"], "namespace": "default",
                     "name": o["metadata"]["name"]} for o in objects if o["metadata"]["name"].startswith("gone-")]
            code, out = self.api.call("POST", "/control/delete", {"objects": gone})
            self.assertEqual((code, out["results"]), (200, [200] * 5))
            self.api.faults(compact=True)
            self.api.faults(watch_outage=False)
            expected = {("DELETE", "namespace_object", "gone-ns"), ("DELETE", "pdb", "default/gone-pdb"),
                        ("DELETE", "pod_group", "default/gone-sp"), ("DELETE", "pod_group", "default/gone-k8s"),
                        ("DELETE", "pod_group", "default/gone-wl/a"), ("DELETE", "pod_group", "default/gone-wl/b")}
            later, _ = self.collect(scheduler, lambda ev, ended: expected <= {self.describe(e) for e in ev})
            changes = [self.describe(e) for e in later]
            self.assertLessEqual(expected, set(changes), changes)
            # Only the differences: nothing that stayed is sent again, nothing twice.
            self.assertEqual(sorted(changes), sorted(expected), changes)
            # At least the five kinds that lost an object resumed from a compacted version.
            self.assertGreaterEqual(self.api.stats()["gone_served"], 5)
            log = self.adapter.stderr()
            for kind in ("Namespace", "PodDisruptionBudget", "PodGroup.scheduling.x-k8s.io",
                         "PodGroup.scheduling.k8s.io", "Workload.scheduling.k8s.io"):
                self.assertRegex(log, re.escape(kind) + r": resourceVersion \d+ is too old \(410 Gone\); relisting")
        finally:
            scheduler.stop()

    def test_repeated_events_become_one_event_with_a_series(self):
        from podium.v1 import cluster_pb2, objects_pb2 as opb

        def failed(i, name, note):
            return cluster_pb2.Action(id=i, record_event=cluster_pb2.RecordEvent(
                regarding=opb.ObjectRef(kind="Pod", namespace="default", name=name, uid=uids[name]),
                type="Warning", reason="FailedScheduling", action="Scheduling", note=note))
        address = f"unix://{self.path('scripted.sock')}"
        actions = []
        scheduler = ScriptedScheduler(address, actions)
        try:
            self.start_api_only([node("node-a")], [pod("waiting"), pod("other")])
            uids = {k.split("/")[1]: p["uid"] for k, p in self.api.stats()["pods"].items()}
            # kube-scheduler retrying a pod: the same reason for the same pod,
            # the note changing with the cluster.
            actions.extend([failed(1, "waiting", "0/1 nodes are available: 1 Insufficient cpu."),
                            failed(2, "waiting", "0/1 nodes are available: 1 Insufficient cpu."),
                            failed(3, "other", "0/1 nodes are available: 1 Insufficient memory."),
                            failed(4, "waiting", "0/2 nodes are available: 2 Insufficient cpu."),
                            failed(5, "waiting", "0/2 nodes are available: 2 Insufficient cpu.")])
            self.start_adapter(address, extra=["--metrics-address", "127.0.0.1:0"])
            metrics_port = int(self.adapter.wait_for_stderr(r"metrics on port (\d+)").group(1))

            def series(s):
                return {v[1]: v[3] for v in s["event_objects"].values()}

            def answered():
                # Event calls whose answers the adapter has read: the server
                # may have applied a PATCH whose answer is still on its way,
                # and stopping then would cancel it.
                with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=5) as r:
                    text = r.read().decode()
                m = re.search(r'podium_adapter_actions_total\{action="event",result="OK"\} (\S+)', text)
                return int(float(m.group(1))) if m else 0
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                stats = self.api.stats()
                sent = (stats["requests"].get("POST event") or 0) + (stats["requests"].get("PATCH event_patch") or 0)
                if (series(stats).get("default/waiting") == 4 and "default/other" in series(stats)
                        and answered() >= sent):
                    break
                time.sleep(0.2)
            stats = self.api.stats()
            waiting = [v for v in stats["event_objects"].values() if v[1] == "default/waiting"]
            self.assertEqual(len(waiting), 1, stats["event_objects"])  # One Event object, not four.
            reason, _, note, count = waiting[0]
            self.assertEqual((reason, count), ("FailedScheduling", 4))
            self.assertEqual(note, "0/1 nodes are available: 1 Insufficient cpu.")  # A series keeps its first note.
            self.assertEqual(series(stats)["default/other"], 1)
            self.assertEqual(stats["requests"].get("POST event"), 2)
            self.assertGreaterEqual(stats["event_patches"], 1)
            self.assertEqual(stats["requests"].get("PATCH event_patch"), stats["event_patches"])
        finally:
            scheduler.stop()
        self.adapter.stop()
        m = re.search(r"events posted (\d+), aggregated (\d+), dropped (\d+), failed (\d+), rate limited (\d+), "
                      r"series patches (\d+)", self.adapter.stderr())
        self.assertIsNotNone(m, self.adapter.stderr()[-2000:])
        self.assertEqual([int(m.group(i)) for i in range(1, 6)], [2, 3, 0, 0, 0])
        self.assertEqual(int(m.group(6)), stats["event_patches"])

    def start_api_only(self, nodes, pods):
        self.api = FakeApiserver(self)
        self.api.create(nodes + pods)

    def start_adapter(self, scheduler_addr, extra=()):
        kubeconfig = self.write("kubeconfig", (
            "apiVersion: v1\nkind: Config\ncurrent-context: fake\n"
            f"clusters:\n- name: fake\n  cluster: {{server: \"{self.api.url}\"}}\n"
            "contexts:\n- name: fake\n  context: {cluster: fake}\n"))
        self.adapter = lib.Process([ADAPTER, "--kubeconfig", kubeconfig, "--scheduler", scheduler_addr, *extra],
                                   self.dir, "podium-k8s-adapter")
        self.processes.append(self.adapter)


if __name__ == "__main__":
    ADAPTER = lib.take_flag("--k8s-adapter")  # Our own flag; the rest is podium_testlib's.
    lib.main()
