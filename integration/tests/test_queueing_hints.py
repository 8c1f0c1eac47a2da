#!/usr/bin/python3
"""Queueing hints end to end: podium-scheduler and podium-plugin-host started by
the test, the cluster given by podium-sim YAML in three runs of podium-sim
against that one scheduler. Each run relists the cluster, so what changed
between two files reaches the scheduler as the events a watch would bring
(a node update, a pod deletion).

1. n1 (4 CPU) runs hog (3 CPU); big (2 CPU) fits nowhere: Insufficient cpu.
2. n1 gets a new label and more ephemeral storage (and probe, 100m, is created
   and bound): no event that can give big CPU, so big stays in the
   unschedulable pool, one attempt.
3. hog is gone: its deletion frees 3 CPU, big is requeued and bound to n1.

A second test updates big itself: an annotation leaves it in the pool, a
smaller CPU request requeues it. A third tries giant among 300 small pods
whose binds come back during its attempt: it waits in the pool after one
attempt.

Run by ctest with the usual flags. A missing binary FAILS the test."""

import podium_testlib as lib


def node(labels, storage=None):
    label_lines = "".join(f"    {k}: {v}\n" for k, v in sorted(labels.items()))
    return (
        "apiVersion: v1\n"
        "kind: Node\n"
        "metadata:\n"
        "  name: n1\n"
        "  uid: uid-n1\n"
        "  creationTimestamp: \"2026-01-01T00:00:00Z\"\n"
        "  labels:\n"
        "    kubernetes.io/hostname: n1\n"
        f"{label_lines}"
        "status:\n"
        "  allocatable: {cpu: \"4\", memory: 8Gi, pods: \"110\""
        + (f", ephemeral-storage: {storage}" if storage else "") + "}\n")


def big_node(name, cpu, pods):
    return (
        "apiVersion: v1\n"
        "kind: Node\n"
        "metadata:\n"
        f"  name: {name}\n"
        f"  uid: uid-{name}\n"
        "  creationTimestamp: \"2026-01-01T00:00:00Z\"\n"
        "  labels:\n"
        f"    kubernetes.io/hostname: {name}\n"
        "status:\n"
        f"  allocatable: {{cpu: \"{cpu}\", memory: 64Gi, pods: \"{pods}\"}}\n")


def pod(name, cpu, node_name=None, unschedulable=False, annotations=None):
    """A pod with a fixed uid, so that every run names the same pod."""
    spec_node = f"  nodeName: {node_name}\n" if node_name else ""
    status = "  phase: Running\n" if node_name else "  phase: Pending\n"
    if unschedulable:
        # What the scheduler patched in the first run: the sim counts the pod
        # as settled (reported unschedulable) instead of waiting for a new attempt.
        status += ("  conditions:\n"
                   "  - type: PodScheduled\n"
                   "    status: \"False\"\n"
                   "    reason: Unschedulable\n"
                   "    message: \"0/1 nodes are available: 1 Insufficient cpu.\"\n")
    return (
        "apiVersion: v1\n"
        "kind: Pod\n"
        "metadata:\n"
        f"  name: {name}\n"
        "  namespace: default\n"
        f"  uid: uid-{name}\n"
        # Fixed too: a change between two runs is an update of the pod.
        "  creationTimestamp: \"2026-01-01T00:00:00Z\"\n"
        + ("".join(["  annotations:\n"] + [f"    {k}: \"{v}\"\n" for k, v in sorted(annotations.items())])
           if annotations else "") +
        "spec:\n"
        f"{spec_node}"
        "  containers:\n"
        "  - name: main\n"
        "    image: registry.k8s.io/pause:3.9\n"
        "    resources:\n"
        f"      requests: {{cpu: \"{cpu}\", memory: 64Mi}}\n"
        "status:\n"
        f"{status}")


class QueueingHintsTest(lib.IntegrationTest):

    def queued(self, scheduler):
        """Admin.ListQueuedPods: {name: QueuedPod}."""
        import grpc
        from podium.v1 import admin_pb2, admin_pb2_grpc
        with grpc.insecure_channel(scheduler) as channel:
            stub = admin_pb2_grpc.AdminStub(channel)
            resp = stub.ListQueuedPods(admin_pb2.ListQueuedPodsRequest(), timeout=5)
        return {p.pod.name: p for p in resp.pods}

    def run_cluster(self, scheduler, name, docs, sim_timeout="20s"):
        cluster = self.write(name, lib.cluster_yaml(*docs))
        rc, out, err = self.run_sim(cluster, scheduler=scheduler, sim_timeout=sim_timeout,
                                    timeout=40, extra=["--settle", "1s"])
        return rc, lib.parse_report(out), err

    def start_with_big_rejected(self):
        """A scheduler on the default plugins, and run 1: big (2 CPU) does
        not fit n1 beside hog (3 of 4 CPU). Returns the scheduler's address."""
        lib.require_binaries(self, "sim", "scheduler", "plugin_host")
        scheduler = self.start_scheduler(lib.config_path("default-plugins.yaml"))
        rc, report, err = self.run_cluster(scheduler, "1-initial.yaml",
                                   [node({}), pod("hog", "3", node_name="n1"), pod("big", "2")])
        self.assertEqual(rc, 0, err[-3000:])
        self.assertIsNone(report.node_of("big"))
        self.assertIn("Insufficient cpu", report.message_of("big"))
        return scheduler

    def test_rejected_for_cpu_requeued_by_a_pod_deletion_not_by_a_node_label(self):
        from podium.v1 import admin_pb2
        scheduler = self.start_with_big_rejected()  # 1.
        big = self.queued(scheduler)["big"]
        self.assertEqual(big.queue, admin_pb2.UNSCHEDULABLE)
        self.assertEqual(big.attempts, 1)
        self.assertEqual(list(big.unschedulable_plugins), ["NodeResourcesFit"])

        # 2. A node label change (NodeResourcesFit is not registered for it)
        # and an allocatable change of a resource big does not request (its
        # hint says skip). probe is scheduled meanwhile (so the scheduler did
        # run), big is not tried again.
        rc, report, err = self.run_cluster(scheduler, "2-relabelled.yaml",
                                   [node({"team": "blue"}, storage="100Gi"),
                                    pod("hog", "3", node_name="n1"),
                                    pod("big", "2", unschedulable=True), pod("probe", "100m")])
        self.assertEqual(rc, 0, err[-3000:])
        self.assertEqual(report.node_of("probe"), "n1")
        big = self.queued(scheduler)["big"]
        self.assertEqual(big.queue, admin_pb2.UNSCHEDULABLE, big)
        self.assertEqual(big.attempts, 1, big)

        # 3. hog deleted: NodeResourcesFit's hint requeues big, which now fits.
        rc, report, err = self.run_cluster(scheduler, "3-hog-deleted.yaml",
                                   [node({"team": "blue"}, storage="100Gi"),
                                    pod("probe", "100m", node_name="n1"),
                                    pod("big", "2")])
        self.assertEqual(rc, 0, err[-3000:])
        self.assertEqual(report.node_of("big"), "n1")
        self.assertNotIn("big", self.queued(scheduler))

    def test_a_pending_pods_own_update_requeues_it_only_when_it_can_help(self):
        """kube-scheduler's UnscheduledPodUpdate with queueing hints: an
        annotation on big does not requeue it (NodeResourcesFit registered
        only for the pod asking for less); big asking for less does."""
        from podium.v1 import admin_pb2
        scheduler = self.start_with_big_rejected()  # 1.
        self.assertEqual(self.queued(scheduler)["big"].attempts, 1)

        # 2. big annotated (and probe scheduled meanwhile): not tried again.
        rc, report, err = self.run_cluster(scheduler, "2-annotated.yaml",
                                   [node({}), pod("hog", "3", node_name="n1"),
                                    pod("big", "2", unschedulable=True, annotations={"owner": "team-blue"}),
                                    pod("probe", "100m")])
        self.assertEqual(rc, 0, err[-3000:])
        self.assertEqual(report.node_of("probe"), "n1")
        big = self.queued(scheduler)["big"]
        self.assertEqual(big.queue, admin_pb2.UNSCHEDULABLE, big)
        self.assertEqual(big.attempts, 1, big)

        # 3. big asks for 800m, which fits the 900m left beside hog and
        # probe: requeued on its own update and bound.
        rc, report, err = self.run_cluster(scheduler, "3-smaller.yaml",
                                   [node({}), pod("hog", "3", node_name="n1"),
                                    pod("probe", "100m", node_name="n1"),
                                    pod("big", "800m", annotations={"owner": "team-blue"})])
        self.assertEqual(rc, 0, err[-3000:])
        self.assertEqual(report.node_of("big"), "n1")
        self.assertNotIn("big", self.queued(scheduler))

    def test_binds_during_an_attempt_do_not_send_a_pod_round_again(self):
        """kube-scheduler's in-flight events: giant (100 CPU) is tried among
        300 small pods whose binds come back while it is being scheduled.
        Those pod additions cannot help NodeResourcesFit, so giant waits in
        the pool after its one attempt. (Before, any event during the
        attempt sent it to backoffQ, and it was tried again as soon as
        activeQ emptied.)"""
        lib.require_binaries(self, "sim", "scheduler", "plugin_host")
        from podium.v1 import admin_pb2
        scheduler = self.start_scheduler(lib.config_path("default-plugins.yaml"))
        docs = [big_node("n1", 64, 500)]
        docs += [pod(f"small-{i:03d}", "10m") for i in range(150)]
        docs.append(pod("giant", "100"))
        docs += [pod(f"small-{i:03d}", "10m") for i in range(150, 300)]
        rc, report, err = self.run_cluster(scheduler, "1-busy.yaml", docs)
        self.assertEqual(rc, 0, err[-3000:])
        self.assertEqual(sum(1 for i in range(300) if report.node_of(f"small-{i:03d}") == "n1"), 300)
        self.assertIsNone(report.node_of("giant"))
        giant = self.queued(scheduler)["giant"]
        self.assertEqual(giant.queue, admin_pb2.UNSCHEDULABLE, giant)
        self.assertEqual(list(giant.unschedulable_plugins), ["NodeResourcesFit"], giant)
        self.assertEqual(giant.attempts, 1, giant)


if __name__ == "__main__":
    lib.main()
