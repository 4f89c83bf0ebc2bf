#!/usr/bin/env bash
# The quick start's two figures, on an already-built tree with the node image in place (as root):
#  1. wall time of scripts/quickstart from nothing running to the training job's result
#     (target <= 60 s on 2 cores, package installation excluded), by phase;
#  2. sbatch submit-to-start latency on the idle quick start cluster (target <= 1 s): N jobs,
#     one at a time, each submitted 3-4 s after the previous one has left the queue; then
#     N/2 back to back (each as soon as the previous one has left the queue), for comparison.
# Then scripts/quickstart --down, also on failure or Ctrl-C: nothing is left running.
#   bench/quickstart_bench.sh [-n N] [--no-setup]
#     -n N         idle-cluster latency samples (default 20; N/2 back to back)
#     --no-setup   pass --no-setup to the quick start (skip scripts/setup altogether)
# Figures only: the exit status says whether the runs worked, never whether targets were met.
set -euo pipefail
cd "$(dirname "$0")/.."
samples=20 qs_args=()
while [ $# -gt 0 ]; do
  case "$1" in
    -n) samples=$2; shift ;;
    --no-setup) qs_args+=(--no-setup) ;;
    *) echo "usage: bench/quickstart_bench.sh [-n N] [--no-setup]" >&2; exit 2 ;;
  esac
  shift
done
[ "$(id -u)" = 0 ] || { echo "quickstart_bench: needs root (real nodes run Slurm)" >&2; exit 2; }

log=$(mktemp /tmp/quickstart-bench.XXXXXX)
trap 'echo "== scripts/quickstart --down"; scripts/quickstart --down; rm -f "$log"' EXIT

# From nothing running: the quick start starts its own server and creates its own cluster.
scripts/quickstart --down >/dev/null
echo "== scripts/quickstart ${qs_args[*]} (output in $log)"
t0=$EPOCHREALTIME
scripts/quickstart "${qs_args[@]}" >"$log" 2>&1 || { cat "$log"; echo "quickstart_bench: the quick start failed" >&2; exit 1; }
wall=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')
grep -E '^== (Timing|Result)|^  final loss' "$log" | sed 's/^/  /'
to_result=$(sed -n 's/^quickstart: job result after \([0-9.]*\) s$/\1/p' "$log")
[ -n "$to_result" ] || { cat "$log"; echo "quickstart_bench: no result line in the output" >&2; exit 1; }

# The session target and endpoint, as the quick start printed them in its next steps.
session=$(grep -m1 -- '--target sagemaker-cluster:' "$log" | sed 's/^ *//')
read -r bin _ _ _ endpoint _ target _ <<<"$session"
# One session on the controller runs all the jobs of a series: no session set-up in the
# figures. Each job writes its start time (all nodes share the host's clock) into
# /fsx/lat/<job id>; a job is submitted once the previous one has left the queue and, in the
# idle series, GAP more seconds have passed. Output: per job its id, submit and start times.
latency_series() {  # SAMPLES GAP_SECONDS -> "id submit start" lines
  "$bin" ssm start-session --endpoint-url "$endpoint" --target "$target" --command "bash -s $1 $2" <<'NODE'
set -euo pipefail
n=$1 gap=$2
rm -rf /fsx/lat && mkdir -p /fsx/lat
for _ in $(seq 1 "$n"); do
  t0=$(date +%s.%N)
  id=$(sbatch --parsable -N1 -o /dev/null \
    --wrap 'date +%s.%N > /fsx/lat/$SLURM_JOB_ID.tmp && mv /fsx/lat/$SLURM_JOB_ID.tmp /fsx/lat/$SLURM_JOB_ID')
  id=${id%%;*}
  deadline=$((SECONDS + 60))
  until [ -f "/fsx/lat/$id" ]; do
    [ "$SECONDS" -lt "$deadline" ] || { echo "job $id did not start in 60 s" >&2; squeue >&2; exit 1; }
    sleep 0.02
  done
  while case "$(squeue -h -j "$id" -o %T 2>/dev/null)" in PENDING|CONFIGURING|RUNNING|COMPLETING) true ;; *) false ;; esac; do
    [ "$SECONDS" -lt "$deadline" ] || { echo "job $id did not end in 60 s" >&2; exit 1; }
    sleep 0.02
  done
  echo "$id $t0 $(cat "/fsx/lat/$id")"
  # A random part, so that submissions do not keep one phase of slurmctld's 1 s cycle.
  [ "$gap" = 0 ] || sleep "$gap.$(printf %03d $((RANDOM % 1000)))"
done
NODE
}
echo "== sbatch submit-to-start latency, idle cluster: $samples jobs, each 3-4 s after the previous ended"
idle=$(latency_series "$samples" 3)
back_to_back=$(((samples + 1) / 2))
echo "== sbatch submit-to-start latency, back to back: $back_to_back jobs, each as soon as the previous ended"
busy=$(latency_series "$back_to_back" 0)

python3 - "$wall" "$to_result" "$(nproc)" "$idle" "$busy" <<'PY'
import math, sys
wall, to_result, cores = float(sys.argv[1]), float(sys.argv[2]), sys.argv[3]

def latencies(raw):  # "id submit start" lines -> sorted submit-to-start latencies in ms
    return sorted((float(start) - float(submit)) * 1000
                  for _, submit, start in (l.split() for l in raw.splitlines() if l.strip()))

def pct(lat, p):  # nearest-rank percentile
    return lat[max(0, math.ceil(p / 100 * len(lat)) - 1)]

def verdict(ok):
    return "PASS" if ok else "OVER"

print(f"== Figures ({cores} cores)")
print(f"  quick start to the job's result: {to_result:.1f} s (whole run {wall:.1f} s);"
      f" target <= 60 s: {verdict(to_result <= 60)}")
for name, raw, judged in (("idle cluster", sys.argv[4], True), ("back to back", sys.argv[5], False)):
    lat = latencies(raw)
    line = (f"  sbatch submit-to-start, {name}, {len(lat)} jobs: p50 {pct(lat, 50):.0f} ms,"
            f" p95 {pct(lat, 95):.0f} ms, max {lat[-1]:.0f} ms")
    if judged:
        line += f"; target <= 1000 ms (p95): {verdict(pct(lat, 95) <= 1000)}"
    print(line)
PY
