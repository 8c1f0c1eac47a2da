#!/usr/bin/python3
"""PodTopologySpread and InterPodAffinity end to end: podium-sim places small
clusters written as Kubernetes YAML with the default configuration, and the
report shows kube-scheduler's rules held (and its FailedScheduling messages)."""

import collections
import textwrap

import podium_testlib as lib
from podium_testlib import node_yaml, pod_yaml

SPREAD_MSG = "node(s) didn't match pod topology spread constraints"
ANTI_MSG = "node(s) didn't match pod anti-affinity rules"
EXISTING_ANTI_MSG = "node(s) didn't satisfy existing pods anti-affinity rules"
AFFINITY_MSG = "node(s) didn't match pod affinity rules"
SPREAD_LABEL_MSG = "node(s) didn't match pod topology spread constraints (missing required label)"


def namespace_yaml(name, labels=None):
    label_lines = "".join(f"    {k}: {v}\n" for k, v in (labels or {}).items())
    return ("apiVersion: v1\nkind: Namespace\nmetadata:\n"
            f"  name: {name}\n" + (f"  labels:\n{label_lines}" if label_lines else ""))


def pod(name, labels, spec_extra="", cpu="100m", node_name=None, namespace="default"):
    """A pod with labels and extra spec lines (YAML, indented under spec)."""
    base = pod_yaml(name, cpu=cpu, namespace=namespace, node_name=node_name)
    label_lines = "  labels:\n" + "".join(f"    {k}: {v}\n" for k, v in labels.items())
    base = base.replace(f"  namespace: {namespace}\n", f"  namespace: {namespace}\n{label_lines}", 1)
    extra = textwrap.indent(textwrap.dedent(spec_extra).strip("\n"), "  ") + "\n" if spec_extra else ""
    return base.replace("spec:\n", "spec:\n" + extra, 1)


def zone_spread(max_skew=1, extra=""):
    return f"""
    topologySpreadConstraints:
    - maxSkew: {max_skew}
      topologyKey: topology.kubernetes.io/zone
      whenUnsatisfiable: DoNotSchedule
      labelSelector:
        matchLabels:
          app: s
""" + textwrap.indent(textwrap.dedent(extra).strip("\n"), "      ") + ("\n" if extra else "")


ANTI_SELF = """
affinity:
  podAntiAffinity:
    requiredDuringSchedulingIgnoredDuringExecution:
    - labelSelector:
        matchLabels:
          app: cache
      topologyKey: kubernetes.io/hostname
"""


class PlacementRulesTest(lib.ScenarioTest):
    def zone_counts(self, report, names, zone_of):
        counts = collections.Counter({z: 0 for z in set(zone_of.values())})
        for n in names:
            node = report.node_of(n)
            if node:
                counts[zone_of[node]] += 1
        return counts

    def test_spread_skew_never_exceeds_max_skew(self):
        # Zone c has room for one pod: after a=2, b=2, c=1 a sixth pod would
        # make the skew 2, so it stays pending with the spread message.
        zone_of = {"a1": "a", "b1": "b", "c1": "c"}
        nodes = [node_yaml("a1", zone="a", cpu="8"), node_yaml("b1", zone="b", cpu="8"),
                 node_yaml("c1", zone="c", cpu="1")]
        names = [f"s{i}" for i in range(6)]
        report = self.place(*nodes, *[pod(n, {"app": "s"}, zone_spread(), cpu="900m") for n in names])
        counts = self.zone_counts(report, names, zone_of)
        self.assertLessEqual(max(counts.values()) - min(counts.values()), 1, counts)
        self.assertEqual(sum(counts.values()), 5, counts)
        stuck = [n for n in names if not report.node_of(n)]
        self.assertEqual(len(stuck), 1)
        self.assertIn(SPREAD_MSG, report.message_of(stuck[0]))

    def test_spread_min_domains(self):
        # Two zones but minDomains 3: the global minimum counts as 0, so each
        # zone takes one matching pod at most.
        zone_of = {"a1": "a", "a2": "a", "b1": "b", "b2": "b"}
        nodes = [node_yaml(n, zone=z) for n, z in zone_of.items()]
        names = [f"s{i}" for i in range(4)]
        report = self.place(*nodes, *[pod(n, {"app": "s"}, zone_spread(extra="minDomains: 3"))
                                      for n in names])
        counts = self.zone_counts(report, names, zone_of)
        self.assertEqual(counts, collections.Counter({"a": 1, "b": 1}))
        for n in names:
            if not report.node_of(n):
                self.assertIn(SPREAD_MSG, report.message_of(n))

    def spread_with_node_affinity_policy(self, policy):
        zone_of = {"a1": "a", "b1": "b", "c1": "c"}
        nodes = [node_yaml("a1", zone="a", labels={"disk": "ssd"}),
                 node_yaml("b1", zone="b", labels={"disk": "ssd"}),
                 node_yaml("c1", zone="c")]
        extra = "nodeSelector:\n  disk: ssd\n" + textwrap.dedent(zone_spread(
            extra=f"nodeAffinityPolicy: {policy}" if policy else ""))
        names = [f"s{i}" for i in range(4)]
        report = self.place(*nodes, *[pod(n, {"app": "s"}, extra) for n in names])
        return self.zone_counts(report, names, zone_of)

    def test_spread_node_affinity_policy(self):
        # Honor (the default): zone c, which the pods cannot use, is not a domain.
        self.assertEqual(self.spread_with_node_affinity_policy(None),
                         collections.Counter({"a": 2, "b": 2, "c": 0}))
        # Ignore: the empty zone c holds the minimum at 0.
        self.assertEqual(self.spread_with_node_affinity_policy("Ignore"),
                         collections.Counter({"a": 1, "b": 1, "c": 0}))

    def test_anti_affinity_pods_land_on_distinct_nodes(self):
        nodes = [node_yaml(f"n{i}") for i in range(3)]
        names = [f"cache-{i}" for i in range(4)]
        report = self.place(*nodes, *[pod(n, {"app": "cache"}, ANTI_SELF) for n in names])
        placed = [report.node_of(n) for n in names if report.node_of(n)]
        self.assertEqual(len(placed), 3)
        self.assertEqual(len(set(placed)), 3, placed)
        stuck = [n for n in names if not report.node_of(n)]
        self.assertEqual(len(stuck), 1)
        self.assertIn(f"3 {ANTI_MSG}", report.message_of(stuck[0]))

    def test_symmetry_existing_pods_anti_affinity_keeps_pods_away(self):
        # "big" is the emptier node that the resource scores prefer, but the
        # pod already there repels app=web from its host.
        repel_web = ANTI_SELF.replace("app: cache", "app: web")
        nodes = [node_yaml("big", cpu="16", memory="32Gi"), node_yaml("small", cpu="2")]
        names = ["web-0", "web-1", "web-2"]
        report = self.place(
            *nodes,
            pod("loner", {"app": "db"}, repel_web, node_name="big"),
            *[pod(n, {"app": "web"}, cpu="900m") for n in names])
        placed = [report.node_of(n) for n in names]
        self.assertNotIn("big", placed)
        self.assertEqual(placed.count("small"), 2, placed)
        stuck = [n for n in names if not report.node_of(n)]
        self.assertEqual(len(stuck), 1)
        self.assertIn(EXISTING_ANTI_MSG, report.message_of(stuck[0]))


    def test_namespace_selector_matches_only_labelled_namespaces(self):
        # db pods run in prod (team=data) on zone a and in dev (unlabelled) on
        # zone b; web pods want a db of a team=data namespace in their zone,
        # cache pods want none of them in theirs.
        zone_of = {"a1": "a", "b1": "b", "c1": "c"}
        nodes = [node_yaml(n, zone=z) for n, z in zone_of.items()]
        to_data_db = """
        affinity:
          {kind}:
            requiredDuringSchedulingIgnoredDuringExecution:
            - labelSelector:
                matchLabels:
                  app: db
              namespaceSelector:
                matchLabels:
                  team: data
              topologyKey: topology.kubernetes.io/zone
        """
        webs = [f"web-{i}" for i in range(3)]
        caches = [f"cache-{i}" for i in range(3)]
        report = self.place(
            namespace_yaml("prod", {"team": "data"}), namespace_yaml("dev"),
            *nodes,
            pod("db-prod", {"app": "db"}, node_name="a1", namespace="prod"),
            pod("db-dev", {"app": "db"}, node_name="b1", namespace="dev"),
            *[pod(n, {"app": "web"}, to_data_db.format(kind="podAffinity")) for n in webs],
            *[pod(n, {"app": "cache"}, to_data_db.format(kind="podAntiAffinity")) for n in caches])
        self.assertEqual([report.node_of(n) for n in webs], ["a1"] * 3)
        for n in caches:
            self.assertIn(report.node_of(n), ("b1", "c1"), n)

    def test_invalid_label_selector_names_pod_and_field(self):
        # "In" without values: the API server would refuse the pod, and so does
        # podium-sim's loader, naming the pod and the field, as it refuses a
        # PDB with such a selector: all of the file or none of it. (A pod like
        # it from another adapter is kept by the scheduler and reported
        # unschedulable naming the field: the plugins' unit tests.)
        bad = """
        affinity:
          podAntiAffinity:
            requiredDuringSchedulingIgnoredDuringExecution:
            - labelSelector:
                matchExpressions:
                - key: app
                  operator: In
              topologyKey: kubernetes.io/hostname
        """
        cluster = self.write("cluster.yaml", lib.cluster_yaml(
            node_yaml("n1"), node_yaml("n2"), pod("bad", {"app": "x"}, bad),
            *[pod(f"ok-{i}", {"app": "x"}) for i in range(3)]))
        rc, out, err = self.run_sim(cluster, config=lib.config_path("default-plugins.yaml"), timeout=30)
        self.assertGreater(rc, 0, err[-4000:])
        self.assertIn("(Pod default/bad): spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0]"
                      ".labelSelector.matchExpressions[0].values: must be non-empty for operator In and NotIn", err)

    def test_topology_key_missing_from_every_node(self):
        # No node has example.com/rack: required affinity and a DoNotSchedule
        # spread on it fit nowhere, with kube-scheduler's messages; anti-affinity
        # on it constrains nothing; the other pods place.
        rack = "example.com/rack"
        affinity = f"""
        affinity:
          podAffinity:
            requiredDuringSchedulingIgnoredDuringExecution:
            - labelSelector:
                matchLabels:
                  app: s
              topologyKey: {rack}
        """
        anti = affinity.replace("podAffinity", "podAntiAffinity")
        spread = zone_spread().replace("topology.kubernetes.io/zone", rack)
        report = self.place(node_yaml("n1", zone="a"), node_yaml("n2", zone="b"),
                            pod("affine", {"app": "s"}, affinity),
                            pod("spread", {"app": "s"}, spread),
                            pod("anti", {"app": "s"}, anti),
                            pod("plain", {"app": "s"}))
        self.assertIsNone(report.node_of("affine"))
        self.assertIn(f"0/2 nodes are available: 2 {AFFINITY_MSG}", report.message_of("affine"))
        self.assertIsNone(report.node_of("spread"))
        self.assertIn(f"0/2 nodes are available: 2 {SPREAD_LABEL_MSG}", report.message_of("spread"))
        self.assertIsNotNone(report.node_of("anti"))
        self.assertIsNotNone(report.node_of("plain"))

if __name__ == "__main__":
    lib.main()
