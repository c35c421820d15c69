#!/usr/bin/env bash
# Drain a queue of `memcurator bench` runs with N single-threaded workers (one per core).
#
#   benchmarks/bench_queue.sh JOBS OUTDIR [WORKERS] [-- extra bench options]
#
# JOBS is a text file, one run per line: "SEED POLICIES" (POLICIES as for --policies, e.g.
# "2 curator" or "1 curator,keep-all"). Put the slowest runs first. Each run writes
# OUTDIR/k-s<SEED>-<policies> (and a .log beside it); merge them afterwards with
#   memcurator report OUTDIR/k-s*/ --out results/merged
# Peer-group runs work the same way: pass --peers M --uplink L1,L2,... after --; each job's
# folder holds every L of its policy, and `memcurator report OUTDIR/k-s*/` merges them.
# Workers pop lines under flock, so a second invocation on the same JOBS file joins the queue.
# The runs share the completion cache, so later policies of a seed replay prompts earlier ones
# already sent. Progress: OUTDIR/queue.log.
set -euo pipefail
jobs=$1; outdir=$2; workers=${3:-2}
shift $(( $# >= 3 ? 3 : $# )); [[ ${1:-} == -- ]] && shift
mkdir -p "$outdir"
worker() {
  while true; do
    line=$(flock "$jobs.lock" bash -c 'l=$(head -n1 "$1"); [ -n "$l" ] && sed -i 1d "$1"; echo "$l"' _ "$jobs")
    [[ -z $line ]] && break
    seed=${line%% *}; policies=${line#* }
    name=$(echo "$policies" | sed 's#/#-#g; s#+#-plus-#g; s#,#_#g')
    out=$outdir/k-s$seed-$name
    echo "$(date +%T) worker $1 start seed $seed $policies" >> "$outdir/queue.log"
    rc=0
    memcurator bench --seeds 1 --seed-start "$seed" --threads 1 --policies "$policies" \
      --out "$out" "${@:2}" > "$out.log" 2>&1 || rc=$?
    echo "$(date +%T) worker $1 done seed $seed $policies rc=$rc" >> "$outdir/queue.log"
  done
}
for i in $(seq "$workers"); do worker "$i" "$@" & done
wait
