#!/usr/bin/env bash
# Side-by-side bench of two builds in one sitting, alternating, three rounds.
# Usage: integration/bench/compare_builds.sh BASE_BUILD BASE_CONFIG NEW_BUILD OUT_DIR
#   BASE_CONFIG: the scheduler config of the base build's commit
#   (e.g. `git show fbb204c:deploy/config/scheduler.yaml > base.yaml`).
# Writes OUT_DIR/{base,new}-WORKLOAD-ROUND.json (podium-sim's report) and .load
# (`uptime` just before the run); the new build also runs the workloads only it has.
set -u
base=${1:?BASE_BUILD} base_config=${2:?BASE_CONFIG} new=${3:?NEW_BUILD} out=${4:?OUT_DIR}
repo=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$out"
for r in 1 2 3; do
  for w in basic-500 basic-5000; do
    uptime > "$out/base-$w-$r.load"
    "$base/adapters/simulator/podium-sim" --spawn --config "$base_config" --workload $w --output json \
      --timeout 600s > "$out/base-$w-$r.json" 2> "$out/base-$w-$r.err"
    uptime > "$out/new-$w-$r.load"
    "$new/adapters/simulator/podium-sim" --spawn --config "$repo/deploy/config/scheduler.yaml" --workload $w \
      --output json --timeout 600s > "$out/new-$w-$r.json" 2> "$out/new-$w-$r.err"
  done
  for w in basic-5000-nobatch preempt-500 spread-1000 antiaffinity-500 gang-1000; do
    uptime > "$out/new-$w-$r.load"
    "$repo/integration/bench/run_bench.sh" "$new" $w > /dev/null 2> "$out/new-$w-$r.err"
    cp "$new/bench/$w.json" "$out/new-$w-$r.json"
  done
done
