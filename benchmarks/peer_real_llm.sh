#!/usr/bin/env bash
# Peer group with the real LLM (the bundled model), issue 33: two workloads where sharing can
# pay, each with its isolated and pooled references, curator sharing under L and lru
# broadcasting, signed outcomes and the compromised peer. Sized small: 4 agents x 60 tasks x
# 1 seed per workload (cold-start: 70 tasks, the newcomer joins after 20 and runs 50).
# NOT run by the session that wrote it; for the lead's job queue.
#
#   benchmarks/peer_real_llm.sh [OUTDIR]        (default results/peers-real-llm)
#
# Each workload writes OUTDIR/<workload>/ (records.csv, peers.md with "Share of the pooled
# gain", "Cold start" and "Signed outcomes" sections, summary.json); a run interrupted part
# way keeps its finished runs (summary.json: complete false). Re-render with
#   memcurator report OUTDIR/<workload> --out OUTDIR/<workload>
# One single-threaded process per workload, the two side by side (two cores).
#
# Demand-driven sharing (session 16), the smallest honest run: give "demand" as the second
# argument,
#   nice benchmarks/peer_real_llm.sh results/peers-real-llm demand
# 4 agents x 1 seed, rotating (50 tasks) and cold-start (70 tasks, the newcomer joins after 20
# and runs 50), each with the arms isolated, pooled, pull (demand-driven), broadcast (lru) and
# push (CURATOR's Share), one single-threaded process per workload side by side. Writes
# OUTDIR/demand/<workload>-s0.json after every arm and OUTDIR/demand/report.md at the end
# (benchmarks/peer_demand.py report). Not run by the session that wrote it.
set -euo pipefail
outdir=${1:-results/peers-real-llm}
mkdir -p "$outdir"
if [ "${2:-}" = demand ]; then
  run_demand() {  # workload tasks [extra options]
    local wl=$1 n=$2; shift 2
    echo "$(date +%T) start demand $wl" >> "$outdir/queue.log"
    rc=0
    nice python benchmarks/peer_demand.py run --executor gguf --threads 1 --seed 0 \
      --workload "$wl" --tasks "$n" "$@" --out "$outdir/demand" \
      > "$outdir/demand-$wl.log" 2>&1 || rc=$?
    echo "$(date +%T) done demand $wl rc=$rc" >> "$outdir/queue.log"
  }
  run_demand rotating 50 &
  run_demand cold-start 70 --join-after 20 &
  wait
  python benchmarks/peer_demand.py report "$outdir/demand" > "$outdir/demand/report.md"
  exit 0
fi
common=(--peers 4 --seeds 1 --seed-start 0 --threads 1 --policies curator,lru
        --uplink 5000 --families 30 --share-every 10)
run() {  # workload tasks [extra options]
  local wl=$1 n=$2; shift 2
  echo "$(date +%T) start $wl" >> "$outdir/queue.log"
  rc=0
  memcurator bench "${common[@]}" --tasks "$n" --workload "$wl" "$@" \
    --out "$outdir/$wl" > "$outdir/$wl.log" 2>&1 || rc=$?
  echo "$(date +%T) done $wl rc=$rc" >> "$outdir/queue.log"
}
run rotating 60 &
run cold-start 70 --join-after 20 &
wait
