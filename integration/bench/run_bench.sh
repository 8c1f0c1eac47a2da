#!/usr/bin/env bash
# make bench: kube-scheduler scheduler_perf's basic shapes through podium-sim,
# with podium-scheduler and podium-plugin-host spawned on unix sockets.
# Usage: integration/bench/run_bench.sh BUILD_DIR [WORKLOAD...]
# Writes BUILD_DIR/bench/results.json (one object per workload) and prints a table.
set -euo pipefail
build=${1:?usage: run_bench.sh BUILD_DIR [WORKLOAD...]}
shift
workloads=("${@:-basic-500}")
[ $# -eq 0 ] && workloads=(basic-500 basic-5000 basic-5000-nobatch basic-5000-mixed basic-5000-extra
                           basic-5000-cpu1 basic-5000-cpu2 spread-1000
                           antiaffinity-500 gang-1000 adapter-basic-500 adapter-basic-5000 adapter-startup-5000
                           preempt-edge-10 preempt-edge-10-api5ms preempt-500)
repo=$(cd "$(dirname "$0")/../.." && pwd)
sim="$build/adapters/simulator/podium-sim"
[ -x "$sim" ] || { echo "run_bench.sh: $sim not built" >&2; exit 1; }
config=()
[ -f "$repo/deploy/config/scheduler.yaml" ] && config=(--config "$repo/deploy/config/scheduler.yaml")
out="$build/bench"
mkdir -p "$out"
for w in "${workloads[@]}"; do
  echo "== $w" >&2
  if [[ $w == adapter-* ]]; then  # Through podium-k8s-adapter and the fake kube-apiserver.
    /usr/bin/python3 "$repo/integration/fake_apiserver/bench_adapter.py" --build "$build" \
      --workload "${w#adapter-}" > "$out/$w.json"
    continue
  fi
  if [[ $w == *-extra ]]; then
    # One more Filter + Score plugin, served by a second plugin process: the
    # scheduler fans each cycle out to both processes at once.
    extra_bin="$build/plugin-sdk/podium-example-node-label-preference"
    [ -x "$extra_bin" ] || { echo "run_bench.sh: $extra_bin not built" >&2; exit 1; }
    extra_dir=$(mktemp -d)
    "$extra_bin" --listen "unix://$extra_dir/extra.sock" 2>"$extra_dir/extra.log" &
    extra_pid=$!
    trap 'kill $extra_pid 2>/dev/null; rm -rf "$extra_dir"' EXIT
    "$sim" --spawn --config "$repo/integration/bench/extra-process.yaml" \
      --plugin-endpoint "extra=unix://$extra_dir/extra.sock" --workload "${w%-extra}" --output json \
      --timeout "${PODIUM_BENCH_TIMEOUT:-600s}" > "$out/$w.json"
    kill $extra_pid; wait $extra_pid 2>/dev/null || true
    rm -rf "$extra_dir"
    trap - EXIT
    continue
  fi
  # NAME-api5ms: each action 5 ms late, as an API server under load (issue 6's goal).
  # NAME-nobatch: the same shape with opportunistic batching turned off.
  # NAME-cpu1 / NAME-cpu2: every process (podium-sim and what it spawns) pinned
  # with taskset to one core / to two cores, to show how throughput scales.
  wconfig=("${config[@]}")
  latency=()
  pin=()
  shape=$w
  if [[ $w == *-cpu1 ]]; then
    pin=(taskset -c 0)
    shape=${w%-cpu1}
  elif [[ $w == *-cpu2 ]]; then
    pin=(taskset -c 0,1)
    shape=${w%-cpu2}
  elif [[ $w == *-api5ms ]]; then
    latency=(--api-latency 5ms)
    shape=${w%-api5ms}
  elif [[ $w == *-nobatch ]]; then
    wconfig=(--config "$repo/integration/bench/no-batching.yaml")
    shape=${w%-nobatch}
  fi
  "${pin[@]}" "$sim" --spawn "${wconfig[@]}" --workload "$shape" "${latency[@]}" --output json \
    --timeout "${PODIUM_BENCH_TIMEOUT:-600s}" > "$out/$w.json"
done
/usr/bin/python3 - "$out" "${workloads[@]}" <<'PY'
import json, sys
out, workloads = sys.argv[1], sys.argv[2:]
keys = ["workload", "nodes", "pods", "seconds", "pods_per_second", "attempt_p50_ms", "attempt_p99_ms",
        "e2e_p50_ms", "e2e_p99_ms", "scheduler_peak_rss_mb", "plugin_host_peak_rss_mb", "api_requests_per_pod",
        "pods_per_node", "cpu_ms_per_pod"]
rows = []


def check_placement(w, r):
    """The rules the workload's pods carry hold for every bound pod: 'ok' or why not."""
    bound = [p for p in r.get("placements", []) if p["namespace"] == "sched-test"]
    missing = r["measured_pods"] - len(bound)
    if missing:
        return f"{missing} measured pods not bound"
    per_node = {}
    for p in bound:
        per_node[p["node"]] = per_node.get(p["node"], 0) + 1
    if w.startswith("antiaffinity-"):
        worst = max(per_node.values(), default=0)
        return "ok" if worst <= 1 else f"a node holds {worst} anti-affine pods"
    # spread: node scheduler-perf-node-i is in zone i mod 3; zone maxSkew 1.
    zones = [0, 0, 0]
    for node, n in per_node.items():
        zones[int(node.rsplit("-", 1)[1]) % 3] += n
    skew = max(zones) - min(zones)
    return "ok" if skew <= 1 else f"zone skew {skew} ({zones})"


pkeys = ["preemption_p50_ms", "preemption_p99_ms", "victims_per_preemption", "api_calls_per_preemption",
         "events_per_preemption", "actions_failed", "api_call_budget", "first_bind_ms"]
for w in workloads:
    with open(f"{out}/{w}.json") as f:
        r = json.load(f)
    r["pods"] = r["measured_pods"]
    r["workload"] = w  # basic-5000-extra reports the workload it ran (basic-5000).
    row = {k: r.get(k) for k in keys}
    row["workload"] = w  # NAME-nobatch runs the shape NAME.
    # Evenness: the fewest and most pods on a node (every node, empty ones count).
    per_node = {}
    for p in r.get("placements") or []:
        per_node[p["node"]] = per_node.get(p["node"], 0) + 1
    # CPU per bound pod in each process (scheduler / plugin host / podium-sim):
    # steadier than pods/s on a shared machine.
    cost = r.get("cost") or {}
    if cost:
        row["cpu_ms_per_pod"] = "/".join(
            "-" if p not in cost else f"{cost[p]['cpu_ms_per_pod']:.2f}" for p in ("scheduler", "plugin_host", "sim"))
    if per_node and r.get("nodes"):
        counts = list(per_node.values()) + [0] * max(0, r["nodes"] - len(per_node))
        row["pods_per_node"] = f"{min(counts)}-{max(counts)}"
    if w.startswith("preempt-"):
        # Preemptor creation -> bound is e2e; API calls are actions other than events.
        a = r.get("actions") or {}
        n = max(1, r.get("measured_pods") or 0)
        row.update(preemption_p50_ms=r.get("e2e_p50_ms"), preemption_p99_ms=r.get("e2e_p99_ms"),
                   victims_per_preemption=r.get("deleted", 0) / n,
                   api_calls_per_preemption=(a.get("bind", 0) + a.get("delete_pod", 0) + a.get("patch_pod_status", 0)) / n,
                   events_per_preemption=a.get("record_event", 0) / n, actions_failed=a.get("failed", 0),
                   # Creation -> the first bind: first attempts and evictions come before any second attempt.
                   first_bind_ms=r.get("first_bind_ms"))
        # Issue 6's goal: at most 2 x victims + 2 API calls per preemption.
        row["api_call_budget"] = ("ok" if row["api_calls_per_preemption"] <= 2 * row["victims_per_preemption"] + 2
                                  else "over 2 x victims + 2")
    if w.startswith("spread-") or w.startswith("antiaffinity-"):
        row["placement"] = check_placement(w, r)
    if r.get("gangs"):
        # Gangs bound whole, never partially; time per gang = measured seconds / gangs bound.
        row.update(gangs=len(r["gangs"]), gangs_bound=r.get("gangs_bound"),
                   gangs_partially_bound=r.get("gangs_partially_bound"),
                   ms_per_gang=None if r.get("seconds_per_gang") is None else r["seconds_per_gang"] * 1000)
    if r.get("seconds_to_first_bind") is not None:
        # Issue 8's start-up goal: the first bind within 5 s of starting the processes.
        row.update(first_bind_s=r["seconds_to_first_bind"], running_pods=r.get("running_pods"))
    rows.append(row)
with open(f"{out}/results.json", "w") as f:
    json.dump(rows, f, indent=2)
    f.write("\n")
fmt = lambda v: "-" if v is None else (f"{v:.2f}" if isinstance(v, float) else str(v))
head = ["workload", "nodes", "pods", "seconds", "pods/s", "attempt p50", "attempt p99", "e2e p50", "e2e p99",
        "sched RSS MB", "host RSS MB", "API req/pod", "pods/node", "CPU ms/pod sched/host/sim"]
table = [head] + [[fmt(r[k]) for k in keys] for r in rows]
widths = [max(len(row[i]) for row in table) for i in range(len(head))]
for row in table:
    print("  ".join(c.rjust(w) for c, w in zip(row, widths)))
prows = [r for r in rows if "preemption_p50_ms" in r]
if prows:
    phead = ["workload", "preemption p50", "preemption p99", "victims/preemption", "api calls/preemption",
             "events/preemption", "failed actions", "<= 2 x victims + 2", "first bind ms"]
    ptable = [phead] + [[fmt(r[k]) for k in ["workload"] + pkeys] for r in prows]
    pw = [max(len(row[i]) for row in ptable) for i in range(len(phead))]
    print()
    for row in ptable:
        print("  ".join(c.rjust(w) for c, w in zip(row, pw)))
checked = [r for r in rows if "placement" in r]
if checked:
    print()
    for r in checked:
        print(f"{r['workload']}: placement {r['placement']}")
grows = [r for r in rows if "gangs" in r]
if grows:
    ghead = ["workload", "gangs", "bound whole", "partially bound", "ms per gang"]
    gtable = [ghead] + [[fmt(r[k]) for k in ["workload", "gangs", "gangs_bound", "gangs_partially_bound", "ms_per_gang"]]
                        for r in grows]
    gw = [max(len(row[i]) for row in gtable) for i in range(len(ghead))]
    print()
    for row in gtable:
        print("  ".join(c.rjust(w) for c, w in zip(row, gw)))
for r in rows:
    if "first_bind_s" in r:
        print(f"\n{r['workload']}: {r['nodes']} nodes, {r['running_pods']} running and {r['pods']} pending pods "
              f"in the API before start; first bind {r['first_bind_s']:.2f} s after the processes were started "
              f"(goal: within 5 s), all pending bound in {r['seconds']} s after that")
print(f"\nresults: {out}/results.json (times in ms)")
PY
