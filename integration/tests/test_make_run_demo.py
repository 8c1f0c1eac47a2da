#!/usr/bin/python3
"""`make run`: podium-sim --spawn places deploy/examples/edge-cluster.yaml with
deploy/config/scheduler.yaml and prints its text report."""

import os
import re

import podium_testlib as lib


def load_cluster_names(path):
    """Node names and pending pod names of a Kubernetes YAML file (a List or a
    stream of documents)."""
    import yaml
    nodes, pods = [], []
    with open(path) as f:
        docs = [d for d in yaml.safe_load_all(f) if d]
    objects = []
    for d in docs:
        objects.extend(d.get("items", []) if d.get("kind") == "List" else [d])
    for o in objects:
        name = (o.get("metadata") or {}).get("name")
        if o.get("kind") == "Node":
            nodes.append(name)
        elif o.get("kind") == "Pod" and not (o.get("spec") or {}).get("nodeName"):
            pods.append(name)
    return nodes, pods


# README.md, `make run`: kube-scheduler's FailedScheduling message for the pod
# that fits nowhere.
GIANT_RENDER = (
    "batch/giant-render: 0/10 nodes are available: 1 Insufficient memory, "
    "1 node(s) had untolerated taint {node-role.kubernetes.io/control-plane: }, "
    "1 node(s) had untolerated taint {nvidia.com/gpu: present}, 3 Insufficient cpu, "
    "5 node(s) had untolerated taint {edge: true}.")
# The fourth cache replica: the cache pods carry required hostname
# anti-affinity, and only three nodes can take a cache pod.
CACHE_3 = (
    "0/10 nodes are available: 1 node(s) had untolerated taint "
    "{node-role.kubernetes.io/control-plane: }, 1 node(s) had untolerated taint "
    "{nvidia.com/gpu: present}, 3 node(s) didn't match pod anti-affinity rules, "
    "5 node(s) had untolerated taint {edge: true}.")


class MakeRunDemoTest(lib.IntegrationTest):
    def test_make_run_demo(self):
        lib.require_binaries(self, "sim", "scheduler", "plugin_host")
        cluster = os.path.join(lib.Flags.repo, "deploy", "examples", "edge-cluster.yaml")
        config = os.path.join(lib.Flags.repo, "deploy", "config", "scheduler.yaml")
        lib.require_files(self, cluster, config)
        nodes, pods = load_cluster_names(cluster)
        self.assertEqual(len(nodes), 10, "the demo is a 10-node edge cluster")

        rc, out, err = self.run_sim(cluster, config=config, output=None)
        self.assertEqual(rc, 0, f"podium-sim exited {rc}:\n{err[-4000:]}")

        # A placement table: rows that name a pending pod and the node it got.
        placed = [line for line in out.splitlines()
                  if any(re.search(rf"\b{re.escape(p)}\b", line) for p in pods)
                  and any(re.search(rf"\b{re.escape(n)}\b", line) for n in nodes)]
        self.assertGreater(len(placed), 0, f"no placement table in the report:\n{out[-4000:]}")
        # Unschedulable pods, with kube-scheduler's FailedScheduling wording.
        messages = re.findall(r"0/10 nodes are available:[^\n]*", out)
        self.assertGreater(len(messages), 0,
                           f"no unschedulable pod messages in the report:\n{out[-4000:]}")
        for m in messages:
            self.assertRegex(m, r"0/10 nodes are available: \d+ ")

        # The outcome the README promises for `make run`.
        self.assertIn(GIANT_RENDER, out, f"giant-render's FailedScheduling message:\n{out[-4000:]}")
        self.assertIn(CACHE_3, out, f"cache-3's FailedScheduling message:\n{out[-4000:]}")
        self.assertRegex(out, r"(?m)^10 nodes, 56 pods: 50 bound, 5 unschedulable, 1 gated$",
                         f"the demo's summary line:\n{out[-4000:]}")


if __name__ == "__main__":
    lib.main()
