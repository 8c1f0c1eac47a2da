#!/usr/bin/python3
"""Preemption end to end: podium-sim + podium-scheduler + podium-plugin-host on
small clusters, each case asserting the exact victims and the preemptor's node.

Victims are bound at load (spec.nodeName); the preemptor is created after they
settled (sim.podium.dev/create-later), so every case starts from a full cluster.
"""

import json
import os

import podium_testlib as lib
from podium_testlib import cluster_yaml, node_yaml, sp_group

LATER = {"sim.podium.dev/create-later": "true"}


def pod(name, cpu, priority, node=None, labels=None, later=False, never=False, nominated=None, replaces=None):
    meta = {"name": name, "namespace": "default"}
    if labels:
        meta["labels"] = labels
    if later:
        meta["annotations"] = dict(LATER)
    if replaces:
        meta.setdefault("annotations", {})["sim.podium.dev/replaces"] = replaces
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


def pod_on_node_b(name, cpu, priority):
    """A pending pod (created later) that only node-b takes (nodeSelector)."""
    doc = json.loads(pod(name, cpu, priority, later=True))
    doc["spec"]["nodeSelector"] = {"kubernetes.io/hostname": "node-b"}
    return json.dumps(doc) + "\n"


def resizing_pod(name, cpu, admitted_cpu, priority, node):
    """A bound pod whose in-place resize to `cpu` the kubelet deferred: it runs
    with `admitted_cpu` (status.containerStatuses[].allocatedResources)."""
    doc = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": name, "namespace": "default"},
           "spec": {"priority": priority, "nodeName": node,
                    "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.9",
                                    "resources": {"requests": {"cpu": cpu, "memory": "128Mi"}}}]},
           "status": {"phase": "Running", "resize": "Deferred",
                      "containerStatuses": [{"name": "main", "allocatedResources":
                                             {"cpu": admitted_cpu, "memory": "128Mi"}}]}}
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
        return sorted(d.split(": ", 1)[0] for d in report.raw.get("deleted_pods") or [])

    @staticmethod
    def delete_reasons(report):
        """{"ns/name": why it was deleted} ("Preempted by ns/preemptor on node N");
        fails when two deleted pods (incarnations) share a name."""
        pairs = [d.split(": ", 1) for d in report.raw.get("deleted_pods") or []]
        reasons = dict(pairs)
        assert len(reasons) == len(pairs), f"a name deleted twice: {pairs}"
        return reasons

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
        # kube-scheduler's FitError appends the PostFilter message as " %v.",
        # so a message that ends in a period ends in two, as its events do.
        self.assertEqual(report.message_of("polite"),
                         "0/1 nodes are available: 1 Insufficient cpu. "
                         "preemption: not eligible due to preemptionPolicy=Never..")

    def test_no_lower_priority_pod_no_preemption(self):
        report = self.run_cluster(
            node_yaml("node-a", cpu="2"),
            pod("high", "2", 1000, node="node-a"),
            pod("preemptor", "2", 100, later=True))
        self.assertIsNone(report.node_of("preemptor"))
        self.assertEqual(self.deleted(report), [])
        self.assertEqual(report.message_of("preemptor"),
                         "0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes are "
                         "available: 1 No preemption victims found for incoming pod..")

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

    def test_higher_priority_pod_takes_a_nominated_pods_room_and_the_first_nomination_is_cleared(self):
        # node-a (4 CPU) holds four priority-10 pods. "first" (1 CPU, priority
        # 500) evicts one of them and is nominated to node-a while its victim
        # terminates (2 s). Half a second later "second" (4 CPU, priority
        # 1000) arrives: the first's nomination does not count against a pod
        # that outranks it, so "second" evicts the other three (the first's
        # victim, terminating already, is not deleted again) and takes the
        # node. The first's nomination is cleared, and it fits nowhere. (Here
        # the outcome, end to end; that the second's preemption clears it at
        # once, before the first is tried again, is
        # DefaultPreemptionTest.AHigherPriorityPodTakesTheRoomOfALowerNominatedOne.)
        report = self.run_cluster(
            node_yaml("node-a", cpu="4"),
            *[pod(f"low-{i}", "1", 10, node="node-a") for i in range(4)],
            pod("first", "1", 500, later=True),
            pod("second", "4", 1000, later=True),
            extra=["--termination-grace", "2s", "--create-rate", "2"])
        self.assertEqual(report.node_of("second"), "node-a")
        self.assertIsNone(report.node_of("first"))
        self.assertNotIn("default/first", report.nominations, report.raw)
        reasons = self.delete_reasons(report)
        self.assertEqual(sorted(reasons), [f"default/low-{i}" for i in range(4)])
        by = sorted(r.split(" on node ")[0] for r in reasons.values())
        self.assertEqual(by, ["Preempted by default/first"] + ["Preempted by default/second"] * 3, reasons)
        self.assertTrue(all(r.endswith(" on node node-a") for r in reasons.values()), reasons)
        self.assertEqual(report.raw["actions"]["delete_pod"], 4, report.raw["actions"])  # Each once.
        self.assertEqual(report.raw["actions"]["bind"], 1, report.raw["actions"])

    def test_room_freed_elsewhere_while_victims_terminate_is_used(self):
        # kube-scheduler holds a preemptor only while its preemption's API
        # calls are out; while its victims terminate, events may schedule it
        # elsewhere. "r-high" (priority 200, node-b only) evicts w-mid from
        # node-b; a second later "p-mid" (priority 100) finds no room (w-mid
        # still terminating) and evicts v-low from node-a. When w-mid is gone
        # (2 s), node-b has 2 CPU beyond r-high's nomination: p-mid binds
        # there, before its own victim is gone (v-low is still evicted, as
        # kube-scheduler's would be).
        report = self.run_cluster(
            node_yaml("node-a", cpu="2"), node_yaml("node-b", cpu="4"),
            pod("v-low", "2", 10, node="node-a"),
            pod("w-mid", "4", 150, node="node-b"),
            pod_on_node_b("r-high", "2", 200),
            pod("p-mid", "2", 100, later=True),
            extra=["--termination-grace", "2s", "--create-rate", "1"])
        self.assertEqual(report.node_of("r-high"), "node-b")
        self.assertEqual(report.node_of("p-mid"), "node-b", report.raw)
        self.assertEqual(self.deleted(report), ["default/v-low", "default/w-mid"])

    def test_the_victim_that_started_last_is_chosen_not_the_one_created_last(self):
        # kube-scheduler's last pick criterion and victim order read
        # status.startTime (GetPodStartTime), not the creation time: "va" was
        # created first but started last (a slow image pull, a restart), so
        # node-a, whose victim started latest, is chosen. Podium read the
        # creation time and evicted vb.
        def running(name, node, created, started):
            doc = json.loads(pod(name, "2", 10, node=node))
            doc["metadata"]["creationTimestamp"] = created
            doc["status"]["startTime"] = started
            return json.dumps(doc) + "\n"
        report = self.run_cluster(
            node_yaml("node-a", cpu="2"), node_yaml("node-b", cpu="2"),
            running("va", "node-a", "2024-01-01T00:00:00Z", "2024-01-03T00:00:00Z"),
            running("vb", "node-b", "2024-01-02T00:00:00Z", "2024-01-02T00:00:00Z"),
            pod("preemptor", "2", 100, later=True))
        self.assertEqual(report.node_of("preemptor"), "node-a")
        self.assertEqual(self.deleted(report), ["default/va"])

    def test_a_victim_whose_uid_changed_is_not_deleted(self):
        # The scheduler chooses "victim" on node-a (its only lower-priority
        # pod). Just before the delete arrives, a controller replaces it
        # (sim.podium.dev/replaces): the old incarnation is gone, and a new
        # one with the same name and its own uid runs on node-b. The delete
        # carries the old uid, so the API refuses it (Conflict) and the new
        # incarnation lives. The preemptor is tried again and takes node-a,
        # which the old incarnation left; nothing else is evicted.
        report = self.run_cluster(
            node_yaml("node-a", cpu="4"), node_yaml("node-b", cpu="4"),
            pod("victim", "2", 10, node="node-a"),
            pod("keep-a", "2", 1000, node="node-a"),
            pod("keep-b", "3", 1000, node="node-b"),
            pod("victim-next", "1", 10, node="node-b", replaces="victim"),
            pod("preemptor", "2", 100, later=True))
        self.assertEqual(report.node_of("preemptor"), "node-a")
        self.assertEqual(report.node_of("victim"), "node-b")  # The new incarnation, not deleted.
        reasons = self.delete_reasons(report)
        self.assertEqual(sorted(reasons), ["default/victim"], reasons)  # The old incarnation only,
        self.assertTrue(reasons["default/victim"].startswith("replaced by a new incarnation"), reasons)  # by its controller.
        actions = report.raw["actions"]
        self.assertEqual(actions["delete_pod"], 0, actions)  # No delete went through,
        self.assertEqual(actions["failed"], 1, actions)      # the stale one was refused,
        self.assertEqual(actions["bind"], 1, actions)        # and the preemptor was bound once.
        self.assertEqual(report.node_of("keep-a"), "node-a")
        self.assertEqual(report.node_of("keep-b"), "node-b")

    def test_a_burst_of_preemptors_each_takes_a_node_of_its_own(self):
        # Twelve full nodes, twelve preemptors created at once, each needing
        # both low pods of one node. They come back in a run once their
        # victims are gone, and their second cycles are checked in one
        # another's requests (plugin protocol version 6, nominated-node
        # checks): each must still end on a node of its own, every low pod
        # evicted exactly once, none bound elsewhere. (A build that logged
        # them: 10 of the 12 second cycles decided by a check, in each of
        # two runs.)
        n = 12
        docs = []
        for i in range(n):
            docs.append(node_yaml(f"node-{i}", cpu="4"))
            docs.append(pod(f"low-{i}-a", "2", 10, node=f"node-{i}"))
            docs.append(pod(f"low-{i}-b", "2", 10, node=f"node-{i}"))
        for i in range(n):
            docs.append(pod(f"high-{i}", "3", 100, later=True))
        report = self.run_cluster(*docs)
        nodes = [report.node_of(f"high-{i}") for i in range(n)]
        self.assertNotIn(None, nodes, report.raw)
        self.assertEqual(sorted(nodes), sorted(f"node-{i}" for i in range(n)))
        self.assertEqual(self.deleted(report),
                         sorted(f"default/low-{i}-{s}" for i in range(n) for s in "ab"))

    @staticmethod
    def resize_of(report, name):
        for r in report.raw.get("resizes") or []:
            if r["namespace"] == "default" and r["name"] == name:
                return r
        raise AssertionError(f"pod default/{name} has no resize in the report: {report.raw}")

    def test_deferred_resize_evicts_only_lower_priority_pods_on_its_own_node(self):
        # node-a (5 CPU): "big" (priority 100) runs with 1 CPU and asks for 3;
        # 4 of 5 CPU are held. One lower-priority pod must go: low-20 is
        # reprieved first (higher priority), so low-10 is the victim; high-1000
        # is never one. node-b's low-5 has the lowest priority of all but is on
        # another node: a resize preempts on its own node only.
        report = self.run_cluster(
            node_yaml("node-a", cpu="5"), node_yaml("node-b", cpu="2"),
            resizing_pod("big", "3", "1", 100, "node-a"),
            pod("low-10", "1", 10, node="node-a"),
            pod("low-20", "1", 20, node="node-a"),
            pod("high-1000", "1", 1000, node="node-a"),
            pod("low-5", "2", 5, node="node-b"))
        self.assertEqual(self.deleted(report), ["default/low-10"])
        big = self.resize_of(report, "big")
        self.assertEqual(big["node"], "node-a")  # Resized in place, not moved.
        self.assertTrue(big["applied"], big)
        self.assertEqual(big["resize_status"], "")
        for name, node in (("low-20", "node-a"), ("high-1000", "node-a"), ("low-5", "node-b")):
            self.assertEqual(report.node_of(name), node)

    def test_deferred_resize_without_victims_says_why(self):
        # Only a higher-priority pod shares the node: nothing is evicted, the
        # resize stays deferred, and the pod's status says why.
        report = self.run_cluster(
            node_yaml("node-a", cpu="2"), node_yaml("node-b", cpu="2"),
            resizing_pod("stuck", "2", "1", 50, "node-a"),
            pod("high", "1", 1000, node="node-a"),
            pod("low-elsewhere", "1", 1, node="node-b"))
        self.assertEqual(self.deleted(report), [])
        stuck = self.resize_of(report, "stuck")
        self.assertFalse(stuck["applied"])
        self.assertEqual(stuck["resize_status"], "Deferred")
        self.assertEqual(stuck["message"], "preemption: 0/1 nodes are available: "
                                           "1 No preemption victims found for incoming pod.")

    def test_adapter_reconnecting_while_victims_are_deleted_deletes_each_once_and_binds_once(self):
        # The preemptor needs both victims gone. podium-sim drops its Sync
        # stream right after the first victim's delete (the scheduler fails the
        # actions still in flight) and reconnects with a full list: victims
        # terminate for 1 s, so the relist shows them on their way out.
        cluster = self.write("cluster.yaml", cluster_yaml(
            node_yaml("node-a", cpu="4"), node_yaml("node-b", cpu="1"),
            pod("victim-10", "2", 10, node="node-a"),
            pod("victim-20", "2", 20, node="node-a"),
            pod("keep", "1", 1000, node="node-b"),
            pod("preemptor", "4", 100, later=True)))
        rc, out, err = self.run_sim(cluster, config=lib.config_path("default-plugins.yaml"),
                                    extra=["--termination-grace", "1s", "--reconnect-after-deletes", "1",
                                           "--api-latency", "20ms", "--api-concurrency", "1"])
        self.assertEqual(rc, 0, f"podium-sim failed:\n{err[-4000:]}")
        self.assertIn("podium-sim: dropping the Sync stream after 1 deletes", err)  # The fault happened.
        report = lib.parse_report(out)
        self.assertEqual(report.outcome, "completed")
        self.assertEqual(report.node_of("preemptor"), "node-a")
        self.assertEqual(self.deleted(report), ["default/victim-10", "default/victim-20"])
        self.assertEqual(report.node_of("keep"), "node-b")
        actions = report.raw["actions"]
        self.assertEqual(actions["delete_pod"], 2, actions)  # No pod deleted twice.
        self.assertEqual(actions["bind"], 1, actions)        # Scheduled exactly once.

    def test_preemptor_is_held_while_its_api_calls_are_out_and_preempts_once(self):
        # The API answers one call at a time, 20 ms each; the victims then
        # take 1 s to go. While the preemption's calls are out the preemptor
        # is held out of the cycles (kube-scheduler's async preemption); once
        # they returned, the first victim's deletion may retry it while the
        # second is still there: that attempt is not eligible to preempt
        # again ("a terminating pod on the nominated node"). So each victim
        # gets exactly its 2 calls, and the preemptor one status patch (and
        # one FailedScheduling event) per failed attempt, then its bind.
        cluster = self.write("cluster.yaml", cluster_yaml(
            node_yaml("node-a", cpu="4"),
            pod("victim-10", "2", 10, node="node-a"),
            pod("victim-20", "2", 20, node="node-a"),
            pod("preemptor", "4", 100, later=True)))
        rc, out, err = self.run_sim(cluster, config=lib.config_path("default-plugins.yaml"),
                                    extra=["--termination-grace", "1s", "--api-latency", "20ms",
                                           "--api-concurrency", "1"])
        self.assertEqual(rc, 0, f"podium-sim failed:\n{err[-4000:]}")
        report = lib.parse_report(out)
        self.assertEqual(report.outcome, "completed")
        self.assertEqual(report.node_of("preemptor"), "node-a")
        self.assertEqual(self.deleted(report), ["default/victim-10", "default/victim-20"])
        actions = report.raw["actions"]
        failed_attempts = report.raw["attempts"] - 1
        self.assertIn(failed_attempts, (1, 2), report.raw)
        self.assertEqual(actions["delete_pod"], 2, actions)
        self.assertEqual(actions["patch_pod_status"], 2 + failed_attempts, actions)  # DisruptionTarget x2.
        self.assertEqual(actions["record_event"], 2 + failed_attempts + 1, actions)  # Preempted x2, Scheduled.
        self.assertEqual(actions["bind"], 1, actions)

    def test_pdb_with_an_invalid_selector_is_refused_naming_the_object_and_field(self):
        # All of the cluster or none of it: podium-sim refuses the file with
        # the PDB's name and the field, and exits by choice (no crash).
        bad = json.dumps({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                          "metadata": {"name": "db", "namespace": "default"},
                          "spec": {"minAvailable": 1, "selector": {"matchExpressions": [
                              {"key": "app", "operator": "In", "values": []}]}}}) + "\n"
        cluster = self.write("cluster.yaml", cluster_yaml(
            node_yaml("node-a", cpu="2"), pod("db-1", "1", 10, node="node-a", labels={"app": "db"}), bad))
        rc, out, err = self.run_sim(cluster, config=lib.config_path("default-plugins.yaml"), timeout=30)
        self.assertGreater(rc, 0, err[-4000:])
        self.assertIn("(PodDisruptionBudget default/db): spec.selector.matchExpressions[0].values: "
                      "must be non-empty for operator In and NotIn", err)

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

    @staticmethod
    def gang_member(name, cpu, priority, group, later=True):
        """A pending member of scheduler-plugins' PodGroup `group`, created
        later (by default) or listed with the rest of the cluster."""
        return pod(name, cpu, priority, labels={"scheduling.x-k8s.io/pod-group": group}, later=later)

    def test_a_gang_preempts_as_a_whole(self):
        # Four full nodes, each with low (priority 10) and mid (20), 1 CPU
        # each. The gang's four members (priority 100, 1 CPU) fit nowhere:
        # each preempts on its own node, beside the members nominated before
        # it, and evicts only low (mid is reprieved, as for a lone pod). The
        # gang binds whole once the victims are gone.
        n = 4
        docs = [sp_group("train", n)]
        for i in range(n):
            docs.append(node_yaml(f"node-{i}", cpu="2"))
            docs.append(pod(f"low-{i}", "1", 10, node=f"node-{i}"))
            docs.append(pod(f"mid-{i}", "1", 20, node=f"node-{i}"))
        docs += [self.gang_member(f"train-{i}", "1", 100, "train") for i in range(n)]
        report = self.run_cluster(*docs)
        self.assertEqual(self.deleted(report), sorted(f"default/low-{i}" for i in range(n)))
        nodes = [report.node_of(f"train-{i}") for i in range(n)]
        self.assertEqual(sorted(nodes), sorted(f"node-{i}" for i in range(n)), report.raw)
        for i in range(n):
            self.assertEqual(report.node_of(f"mid-{i}"), f"node-{i}")
        g = report.gangs()["train"]
        self.assertEqual((g["outcome"], g["bound"]), ("bound", n), g)
        self.assertEqual(report.raw["gangs_partially_bound"], 0)

    def test_a_gangs_placed_members_wait_at_permit_for_those_preempting(self):
        # Two free nodes and two full ones: the pass places two members and
        # the other two preempt. The victims take a second to go (their
        # grace period); the placed members wait at Coscheduling's Permit
        # meanwhile, and the gang binds whole, each member once.
        docs = [sp_group("train", 4)]
        for i in range(4):
            docs.append(node_yaml(f"node-{i}", cpu="2"))
        docs.append(pod("low-2", "2", 10, node="node-2"))
        docs.append(pod("low-3", "2", 10, node="node-3"))
        docs += [self.gang_member(f"train-{i}", "2", 100, "train") for i in range(4)]
        report = self.run_cluster(*docs, extra=["--termination-grace", "1s"])
        self.assertEqual(self.deleted(report), ["default/low-2", "default/low-3"])
        nodes = sorted(report.node_of(f"train-{i}") for i in range(4))
        self.assertEqual(nodes, [f"node-{i}" for i in range(4)], report.raw)
        self.assertEqual(report.raw["actions"]["bind"], 4, report.raw["actions"])
        g = report.gangs()["train"]
        self.assertEqual((g["outcome"], g["bound"]), ("bound", 4), g)

    def test_a_gang_member_whose_victim_goes_last_does_not_break_up_the_gang(self):
        # As above, but the victims take different times to go: low-2 1 s,
        # low-3 4 s (a second is ample for every preemption's API calls to
        # return, so train-3 is no longer held). Once low-2 is gone, train-2
        # is tried with train-3 along (a gang is popped together) while low-3
        # still terminates. train-3's
        # room is on its way, so it counts towards the minimum: train-2 is
        # placed and waits at Permit with train-0 and train-1, and the gang
        # binds once low-3 is gone. (Before, train-3 counted as a misfit: the
        # pass was undone, Coscheduling rejected the members waiting at
        # Permit, and all four were told "only 3 of 4 members can be placed".)
        docs = [sp_group("train", 4)]
        for i in range(4):
            docs.append(node_yaml(f"node-{i}", cpu="2"))
        for i, grace in ((2, "1s"), (3, "4s")):
            doc = json.loads(pod(f"low-{i}", "2", 10, node=f"node-{i}"))
            doc["metadata"]["annotations"] = {"sim.podium.dev/termination-grace": grace}
            docs.append(json.dumps(doc) + "\n")
        # Listed with the cluster: created later, one by one, the first
        # members may be held at PreEnqueue before the last exists (and told
        # so if it takes longer than --gated-status-delay-ms), a status patch
        # more or less by timing.
        docs += [self.gang_member(f"train-{i}", "2", 100, "train", later=False) for i in range(4)]
        report = self.run_cluster(*docs)
        self.assertEqual(self.deleted(report), ["default/low-2", "default/low-3"])
        nodes = sorted(report.node_of(f"train-{i}") for i in range(4))
        self.assertEqual(nodes, [f"node-{i}" for i in range(4)], report.raw)
        actions = report.raw["actions"]
        self.assertEqual(actions["bind"], 4, actions)
        # Events: FailedScheduling for train-2 and train-3 (preempting), two
        # Preempted, FailedScheduling for train-3 waiting on low-3, four
        # Scheduled. Status patches: the two preemptors' (with their
        # nomination), the victims' DisruptionTarget, train-3's new message.
        self.assertEqual((actions["record_event"], actions["patch_pod_status"]), (9, 5), actions)
        g = report.gangs()["train"]
        self.assertEqual((g["outcome"], g["bound"]), ("bound", 4), g)

    def test_a_gang_that_preemption_cannot_place_whole_evicts_nothing(self):
        # Three nodes, each with one pod the gang may preempt (low, 10) and
        # one it may not (high, 1000). Preemption would make room for three
        # of the four members the gang needs: kube-scheduler's pod-by-pod
        # preemption would evict three pods for a gang that still cannot
        # run. Podium evicts none for it, binds none, and says why. The
        # members' tentative nominations are undone too: "solo" (priority
        # 50, 1 CPU), created with them, still finds a low pod to preempt,
        # which it could not if three members of priority 100 stayed
        # nominated on the three nodes.
        docs = [sp_group("train", 4)]
        for i in range(3):
            docs.append(node_yaml(f"node-{i}", cpu="2"))
            docs.append(pod(f"low-{i}", "1", 10, node=f"node-{i}"))
            docs.append(pod(f"high-{i}", "1", 1000, node=f"node-{i}"))
        docs += [self.gang_member(f"train-{i}", "1", 100, "train") for i in range(4)]
        docs.append(pod("solo", "1", 50, later=True))
        report = self.run_cluster(*docs)
        deleted = self.delete_reasons(report)
        self.assertEqual(len(deleted), 1, deleted)
        victim, reason = next(iter(deleted.items()))
        self.assertRegex(victim, r"^default/low-[012]$")
        self.assertIn("default/solo", reason)
        self.assertEqual(report.node_of("solo"), "node-" + victim[-1], report.raw)
        for i in range(4):
            self.assertIsNone(report.node_of(f"train-{i}"), report.raw)
            msg = report.message_of(f"train-{i}")
            self.assertIn("pod group default/train (minMember 4): only 3 of 4 members can be placed together, "
                          "so none is bound", msg)
        g = report.gangs()["train"]
        self.assertEqual((g["outcome"], g["bound"]), ("unschedulable", 0), g)

    def test_a_pre_filter_unschedulable_is_resolved_by_preemption(self):
        # ClusterHeadroom (an SDK example plugin, its own process) rejects at
        # PreFilter with a plain Unschedulable while no node has the pod's CPU
        # free. As kube-scheduler, that leaves preemption every node: the
        # preemptor evicts the lowest-priority victim and binds. `polite`
        # (preemptionPolicy Never) is refused with the PreFilter's message.
        self.assertTrue(HEADROOM and os.path.exists(HEADROOM), "--cluster-headroom binary is missing")
        sock = self.path("headroom.sock")
        plugin = lib.Process([HEADROOM, "--listen", f"unix://{sock}"], self.dir, "cluster-headroom")
        self.processes.append(plugin)
        plugin.wait_for_stderr(r"listening on ")
        cluster = self.write("cluster.yaml", cluster_yaml(
            node_yaml("node-a", cpu="2"), node_yaml("node-b", cpu="2"),
            pod("low", "2", 10, node="node-a"),
            pod("mid", "2", 50, node="node-b"),
            pod("preemptor", "2", 100, later=True),
            pod("polite", "2", 5, later=True, never=True)))
        rc, out, err = self.run_sim(cluster, config=lib.config_path("with-cluster-headroom.yaml"),
                                    endpoints=[("headroom", f"unix://{sock}")])
        self.assertEqual(rc, 0, f"podium-sim failed:\n{err[-4000:]}")
        report = lib.parse_report(out)
        self.assertEqual(report.node_of("preemptor"), "node-a")
        self.assertEqual(self.deleted(report), ["default/low"])
        self.assertEqual(report.node_of("mid"), "node-b")
        self.assertIsNone(report.node_of("polite"))
        self.assertEqual(report.message_of("polite"),
                         "0/2 nodes are available: no node has 2000m CPU free. "
                         "preemption: not eligible due to preemptionPolicy=Never..")


HEADROOM = None

if __name__ == "__main__":
    HEADROOM = lib.take_flag("--cluster-headroom")
    lib.main()
