#!/bin/bash
# Real-LLM job list, session 16 (issue 35: 300-task budget front, binary vectors, text as is).
# One arm per invocation, most needed first: jitmem/extractive unbounded (its peak bytes),
# curator/align and lru at 40k (<= 1/5 of the expected ~200-230 KB peak), then 25k; seed 0
# first, then seed 1, then seed 2. Partial by design: the session ends when it ends.
. /work/main/.venv/bin/activate
cd /work/wt-llm
export PYTHONPATH=/work/wt-llm
git log --oneline -1 > /work/runs/s16/jobs.commit
arm() { # name policy budget seed
  local b=()
  [ -n "$3" ] && b=(--max-bytes "$3")
  nice -n 10 memcurator bench --policies "$2" "${b[@]}" --tasks 300 --seeds 1 --seed-start "$4" \
    --vector-dtype binary --threads 1 --out /work/runs/s16/$1-s$4 --overwrite > /work/runs/s16/$1-s$4.log 2>&1
  echo "$(date -u +%H:%M) $1-s$4 rc=$?" >> /work/runs/s16/progress
}
for s in 0 1; do
  arm jitmem jitmem/extractive "" $s
  arm cur40 curator/align 40k $s
  arm lru40 lru 40k $s
done
arm cur25 curator/align 25k 0
arm lru25 lru 25k 0
arm jitmem jitmem/extractive "" 2
arm cur40 curator/align 40k 2
arm lru40 lru 40k 2
echo done > /work/runs/s16/jobs.done
