#!/usr/bin/env bash
# Issue 35, item 4 (prepared for the lead, NOT run by its author): real-LLM budget fronts of
# curator/align (Keep with coverage, issue 35) against lru, with jitmem/extractive (the same
# reader over the unbounded bank) as the reference, so "share of unbounded accuracy at 1/5 of
# its bytes" is read off one run. Sized small: 100 tasks x 1 seed, --threads 1 per worker.
#
#   benchmarks/fronts_real_llm.sh [OUTDIR] [WORKERS]
#
# Environment: SEED (default 0), TASKS (100), VEC (vector dtype, default int8: the issue asks
# for the fronts at int8, where a budget holds twice the entries), BUDGETS (25k..400k).
# Cost: each (policy, budget) run is one pass of TASKS tasks through the bundled model (~5 s a
# task on one core when uncached): 2 policies x 5 budgets + 1 reference = 11 runs.
# Afterwards:
#   memcurator report OUTDIR/k-s*/ --out OUTDIR/merged        # fronts: budget_fronts.md
#   for b in 25k 50k 100k 200k 400k; do
#     memcurator compare OUTDIR/k-s*/ --baseline lru@$b       # read the curator/align@$b row
#   done
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
outdir=${1:-results/fronts-real-i35}
workers=${2:-2}
seed=${SEED:-0}
tasks=${TASKS:-100}
vec=${VEC:-int8}
budgets=${BUDGETS:-25k,50k,100k,200k,400k}
mkdir -p "$outdir"
jobs=$outdir/jobs.txt
# slowest first: the read-time curator over the unbounded bank, then the two budgeted policies
printf '%s\n' "$seed jitmem/extractive" "$seed curator/align" "$seed lru" > "$jobs"
exec "$here/bench_queue.sh" "$jobs" "$outdir" "$workers" -- \
  --tasks "$tasks" --max-bytes "$budgets" --vector-dtype "$vec" --executor gguf
