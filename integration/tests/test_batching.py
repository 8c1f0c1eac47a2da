#!/usr/bin/python3
"""Opportunistic batching end to end (issue 9): a small mixed workload, pods of
five signatures created interleaved (so a batch hit's request carries the
lookaheads of the pods after it, later lookaheads included), placed by
podium-sim --spawn with the default plugins: with the later lookaheads (the
default), with the one lookahead only (--later-lookaheads=0), and with
batching off (every pod a full cycle). Scores are whole numbers, so ties
between nodes of slightly different loads make the exact placements differ
from run to run even with full cycles, and so does how even the nodes end.
Measured (2026-11-28): full cycles left a CPU spread (most loaded node minus
least) of 300m in 29 runs of 30 and 350m once, a memory spread of at most
896 MiB; the later lookaheads 250-300m and at most 896 MiB in 24 runs; with
the chain nodes sent without the pods expected there (a broken chain), 350m
once and 400-500m in the seven other runs of eight. So each mode runs three
times and the median run must leave at most 350m and 896 MiB: batched runs
end as even as full cycles, every pod bound, and a broken chain fails."""

import os
import stat

import podium_testlib as lib
from podium_testlib import node_yaml, pod_yaml

SIZES = [("100m", 128), ("150m", 256), ("200m", 384), ("250m", 512), ("300m", 640)]  # cpu, MiB
ROUNDS = 24
NODES = 30


def millicpu(q):
    return int(q[:-1])


class BatchingTest(lib.ScenarioTest):
    def cluster(self):
        docs = [node_yaml(f"node-{i}") for i in range(NODES)]
        for r in range(ROUNDS):
            for k, (cpu, mib) in enumerate(SIZES):
                docs.append(pod_yaml(f"d{k}-{r}", cpu=cpu, memory=f"{mib}Mi"))
        return self.write("cluster.yaml", lib.cluster_yaml(*docs))

    def loads(self, cluster, config, extra=()):
        rc, out, err = self.run_sim(cluster, config=config, extra=extra)
        self.assertEqual(rc, 0, f"podium-sim failed:\n{err[-4000:]}")
        report = lib.parse_report(out)
        self.assertEqual(report.outcome, "completed", out[-4000:])
        per_node = {f"node-{i}": (0, 0) for i in range(NODES)}
        for r in range(ROUNDS):
            for k, (cpu, mib) in enumerate(SIZES):
                node = report.node_of(f"d{k}-{r}")
                self.assertIsNotNone(node, f"d{k}-{r} not bound")
                c, m = per_node[node]
                per_node[node] = (c + millicpu(cpu), m + mib)
        return sorted(per_node.values())

    def test_chained_lookaheads_place_as_full_cycles_do(self):
        cluster = self.cluster()
        default = lib.config_path("default-plugins.yaml")
        with open(default) as f:
            no_batching = self.write("no-batching.yaml", f.read().rstrip("\n") + (
                "\nprofiles:\n- schedulerName: default-scheduler\n  opportunisticBatching: false\n"))
        one_lookahead = os.path.join(self.dir, "one-lookahead.sh")
        with open(one_lookahead, "w") as f:
            f.write(f'#!/bin/sh\nexec "{lib.Flags.scheduler}" --later-lookaheads=0 "$@"\n')
        os.chmod(one_lookahead, os.stat(one_lookahead).st_mode | stat.S_IXUSR)

        for name, config, extra in (("later lookaheads", default, ()),
                                    ("one lookahead", default, ("--scheduler-bin", one_lookahead)),
                                    ("full cycles", no_batching, ())):
            runs = [self.loads(cluster, config, extra) for _ in range(3)]
            cpu_spreads = sorted(max(c for c, _ in loads) - min(c for c, _ in loads) for loads in runs)
            mem_spreads = sorted(max(m for _, m in loads) - min(m for _, m in loads) for loads in runs)
            self.assertLessEqual(cpu_spreads[1], 350, f"{name}: CPU spreads {cpu_spreads}, runs {runs}")
            self.assertLessEqual(mem_spreads[1], 896, f"{name}: memory spreads {mem_spreads}, runs {runs}")

if __name__ == "__main__":
    lib.main()
