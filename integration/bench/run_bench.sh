#!/usr/bin/env bash
# make bench: kube-scheduler scheduler_perf's basic shapes through podium-sim,
# with podium-scheduler and podium-plugin-host spawned on unix sockets.
# Usage: integration/bench/run_bench.sh BUILD_DIR [WORKLOAD...]
# Writes BUILD_DIR/bench/results.json (one object per workload) and prints a table.
set -euo pipefail
build=${1:?usage: run_bench.sh BUILD_DIR [WORKLOAD...]}
shift
workloads=("${@:-basic-500}")
[ $# -eq 0 ] && workloads=(basic-500 basic-5000 adapter-basic-500 adapter-basic-5000 gang-1000)
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
  "$sim" --spawn "${config[@]}" --workload "$w" --output json --timeout "${PODIUM_BENCH_TIMEOUT:-600s}" \
    > "$out/$w.json"
done
/usr/bin/python3 - "$out" "${workloads[@]}" <<'PY'
import json, sys
out, workloads = sys.argv[1], sys.argv[2:]
keys = ["workload", "nodes", "pods", "seconds", "pods_per_second", "attempt_p50_ms", "attempt_p99_ms",
        "e2e_p50_ms", "e2e_p99_ms", "scheduler_peak_rss_mb", "plugin_host_peak_rss_mb", "api_requests_per_pod"]
rows = []
pkeys = ["preemption_p50_ms", "preemption_p99_ms", "victims_per_preemption", "api_calls_per_preemption",
         "events_per_preemption", "actions_failed"]
for w in workloads:
    with open(f"{out}/{w}.json") as f:
        r = json.load(f)
    r["pods"] = r["measured_pods"]
    row = {k: r.get(k) for k in keys}
    if w.startswith("preempt-"):
        # Preemptor creation -> bound is e2e; API calls are actions other than events.
        a = r.get("actions") or {}
        n = max(1, r.get("measured_pods") or 0)
        row.update(preemption_p50_ms=r.get("e2e_p50_ms"), preemption_p99_ms=r.get("e2e_p99_ms"),
                   victims_per_preemption=r.get("deleted", 0) / n,
                   api_calls_per_preemption=(a.get("bind", 0) + a.get("delete_pod", 0) + a.get("patch_pod_status", 0)) / n,
                   events_per_preemption=a.get("record_event", 0) / n, actions_failed=a.get("failed", 0))
    if r.get("gangs"):
        # Gangs bound whole, never partially; time per gang = measured seconds / gangs bound.
        row.update(gangs=len(r["gangs"]), gangs_bound=r.get("gangs_bound"),
                   gangs_partially_bound=r.get("gangs_partially_bound"),
                   ms_per_gang=None if r.get("seconds_per_gang") is None else r["seconds_per_gang"] * 1000)
    rows.append(row)
with open(f"{out}/results.json", "w") as f:
    json.dump(rows, f, indent=2)
    f.write("\n")
fmt = lambda v: "-" if v is None else (f"{v:.2f}" if isinstance(v, float) else str(v))
head = ["workload", "nodes", "pods", "seconds", "pods/s", "attempt p50", "attempt p99", "e2e p50", "e2e p99",
        "sched RSS MB", "host RSS MB", "API req/pod"]
table = [head] + [[fmt(r[k]) for k in keys] for r in rows]
widths = [max(len(row[i]) for row in table) for i in range(len(head))]
for row in table:
    print("  ".join(c.rjust(w) for c, w in zip(row, widths)))
prows = [r for r in rows if "preemption_p50_ms" in r]
if prows:
    phead = ["workload", "preemption p50", "preemption p99", "victims/preemption", "api calls/preemption",
             "events/preemption", "failed actions"]
    ptable = [phead] + [[fmt(r[k]) for k in ["workload"] + pkeys] for r in prows]
    pw = [max(len(row[i]) for row in ptable) for i in range(len(phead))]
    print()
    for row in ptable:
        print("  ".join(c.rjust(w) for c, w in zip(row, pw)))
grows = [r for r in rows if "gangs" in r]
if grows:
    ghead = ["workload", "gangs", "bound whole", "partially bound", "ms per gang"]
    gtable = [ghead] + [[fmt(r[k]) for k in ["workload", "gangs", "gangs_bound", "gangs_partially_bound", "ms_per_gang"]]
                        for r in grows]
    gw = [max(len(row[i]) for row in gtable) for i in range(len(ghead))]
    print()
    for row in gtable:
        print("  ".join(c.rjust(w) for c, w in zip(row, gw)))
print(f"\nresults: {out}/results.json (times in ms)")
PY
