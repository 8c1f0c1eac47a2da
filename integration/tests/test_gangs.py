#!/usr/bin/python3
"""Gang scheduling end to end (issue 7): podium-sim places PodGroups written as
Kubernetes YAML (scheduler-plugins' API, Kubernetes' PodGroup and its 1.35 alpha
Workload) with the default configuration. A gang binds whole or not at all, the
scheduler finds out in one pass, and every member says why."""

import textwrap

import podium_testlib as lib
from podium_testlib import node_yaml, pod_yaml, sp_group


def k8s_group(name, min_count):
    return textwrap.dedent(f"""\
        apiVersion: scheduling.k8s.io/v1alpha2
        kind: PodGroup
        metadata: {{name: {name}}}
        spec:
          schedulingPolicy:
            gang: {{minCount: {min_count}}}
        """)


def workload(name, group, min_count):
    return textwrap.dedent(f"""\
        apiVersion: scheduling.k8s.io/v1alpha1
        kind: Workload
        metadata: {{name: {name}}}
        spec:
          podGroups:
          - name: {group}
            policy: {{gang: {{minCount: {min_count}}}}}
        """)


def member(name, cpu="1", label_group=None, scheduling_group=None, workload_ref=None, later=False):
    """A pod joining a gang the way its API says: the scheduler-plugins label,
    spec.schedulingGroup, or spec.workloadRef (name, podGroup); created after
    the cluster settled with `later`."""
    doc = pod_yaml(name, cpu=cpu, annotations={"sim.podium.dev/create-later": "true"} if later else None)
    if label_group:
        doc = doc.replace("  namespace: default\n",
                          f"  namespace: default\n  labels:\n    scheduling.x-k8s.io/pod-group: {label_group}\n", 1)
    if scheduling_group:
        doc = doc.replace("spec:\n", f"spec:\n  schedulingGroup:\n    podGroupName: {scheduling_group}\n", 1)
    if workload_ref:
        wl, group = workload_ref
        doc = doc.replace("spec:\n", f"spec:\n  workloadRef:\n    name: {wl}\n    podGroup: {group}\n", 1)
    return doc


class GangTest(lib.ScenarioTest):
    def test_gang_of_8_with_room_for_7_binds_none_and_says_why(self):
        nodes = [node_yaml(f"n{i}", cpu="1") for i in range(7)]
        pods = [member(f"train-{i}", label_group="train") for i in range(8)]
        report = self.place(sp_group("train", 8), *nodes, *pods)
        self.assertEqual(report.scheduled(), {}, "a gang that does not fit must bind no member")
        for i in range(8):
            msg = report.message_of(f"train-{i}")
            self.assertIn("pod group default/train (minMember 8): only 7 of 8 members can be placed together, "
                          "so none is bound", msg)
            self.assertIn("Insufficient cpu", msg)
        g = report.gangs()["train"]
        self.assertEqual((g["outcome"], g["bound"], g["members"]), ("unschedulable", 0, 8), g)
        self.assertEqual(report.raw["gangs_partially_bound"], 0)

    def test_two_gangs_that_do_not_fit_together_one_binds_whole_the_other_waits_whole(self):
        nodes = [node_yaml(f"n{i}", cpu="1") for i in range(6)]
        pods = [member(f"a-{i}", label_group="a") for i in range(4)] + \
               [member(f"b-{i}", label_group="b") for i in range(4)]
        report = self.place(sp_group("a", 4), sp_group("b", 4), *nodes, *pods)
        gangs = report.gangs()
        outcomes = sorted((g["outcome"], g["bound"]) for g in gangs.values())
        self.assertEqual(outcomes, [("bound", 4), ("unschedulable", 0)], gangs)
        self.assertEqual(report.raw["gangs_partially_bound"], 0)
        loser = next(g for g in gangs.values() if g["bound"] == 0)
        self.assertIn(f"pod group default/{loser['name']} (minMember 4): only 2 of 4 members can be placed together",
                      loser["reason"])

    def test_kubernetes_pod_group_and_workload_forms_bind_whole(self):
        nodes = [node_yaml(f"n{i}", cpu="2") for i in range(3)]
        pods = [member(f"k-{i}", scheduling_group="kg") for i in range(3)] + \
               [member(f"w-{i}", workload_ref=("job", "workers")) for i in range(2)]
        report = self.place(k8s_group("kg", 3), workload("job", "workers", 2), *nodes, *pods)
        for name in [f"k-{i}" for i in range(3)] + ["w-0", "w-1"]:
            self.assertIsNotNone(report.node_of(name), report.raw)
        gangs = report.gangs()
        self.assertEqual(gangs["kg"]["outcome"], "bound", gangs)
        self.assertEqual(gangs["job/workers"]["outcome"], "bound", gangs)

    def test_kubernetes_form_that_does_not_fit_binds_none(self):
        nodes = [node_yaml("n0", cpu="2")]
        pods = [member(f"k-{i}", scheduling_group="kg") for i in range(3)]
        report = self.place(k8s_group("kg", 3), *nodes, *pods)
        self.assertEqual(report.scheduled(), {})
        self.assertIn("only 2 of 3 members can be placed together", report.message_of("k-0"))

    def test_incomplete_and_missing_groups_wait_with_the_reason(self):
        nodes = [node_yaml("n0", cpu="8")]
        pods = [member("big-0", label_group="big"), member("big-1", label_group="big"),
                member("lost-0", label_group="nowhere"), pod_yaml("plain")]
        report = self.place(sp_group("big", 3), *nodes, *pods)
        self.assertIsNotNone(report.node_of("plain"))
        held = {f"{p['namespace']}/{p['name']}": p["message"] for p in report.raw.get("held_pods") or []}
        self.assertEqual(held.get("default/big-0"),
                         "Coscheduling: waiting for pod group default/big: fewer than minMember 3 pods exist", held)
        self.assertEqual(held.get("default/lost-0"),
                         "Coscheduling: waiting for pod group default/nowhere: it does not exist", held)
        g = report.gangs()["big"]
        self.assertEqual((g["outcome"], g["bound"]), ("waiting", 0), g)

    def place_one_by_one(self, *docs):
        """Places the cluster with its later pods created 200 ms apart, as a
        job controller creates a gang's pods one after another."""
        cluster = self.write("cluster.yaml", lib.cluster_yaml(*docs))
        rc, out, err = self.run_sim(cluster, config=lib.config_path("default-plugins.yaml"),
                                    extra=("--create-rate", "5"))
        self.assertEqual(rc, 0, f"podium-sim failed:\n{err[-4000:]}")
        report = lib.parse_report(out)
        self.assertEqual(report.outcome, "completed", out[-4000:])
        return report

    def test_members_created_one_by_one_are_not_told_the_others_are_missing(self):
        # The first three wait at PreEnqueue for the fourth, which comes 600 ms
        # after the first: within --gated-status-delay-ms (1 s), so none is
        # patched SchedulingGated, and the gang binds whole.
        pods = [member(f"w-{i}", label_group="w", later=True) for i in range(4)]
        report = self.place_one_by_one(sp_group("w", 4), node_yaml("n0", cpu="8"), *pods)
        for i in range(4):
            self.assertEqual(report.node_of(f"w-{i}"), "n0", report.raw)
        self.assertEqual(report.raw["actions"]["patch_pod_status"], 0, report.raw["actions"])

    def test_members_still_few_after_the_delay_are_told_once(self):
        # Three of four ever come: each is told why, once, after the delay.
        pods = [member(f"w-{i}", label_group="w", later=True) for i in range(3)]
        report = self.place_one_by_one(sp_group("w", 4), node_yaml("n0", cpu="8"), *pods)
        held = {p["name"]: p["message"] for p in report.raw.get("held_pods") or []}
        self.assertEqual(held, {f"w-{i}": "Coscheduling: waiting for pod group default/w: fewer than minMember 4 "
                                          "pods exist" for i in range(3)}, report.raw)
        self.assertEqual(report.raw["actions"]["patch_pod_status"], 3, report.raw["actions"])


if __name__ == "__main__":
    lib.main()
