#!/bin/bash
# Real-LLM job list 2, session 16 (issue 35): jitmem/extractive seed 0 peaked at 193.1 KB, so
# 1/5 of it is 38.6 KB: curator/align and lru at 36k (<= 1/5 with margin for other seeds'
# peaks), then 25k. Same settings as jobs.sh (300 tasks, binary vectors, text as is).
. /work/main/.venv/bin/activate
cd /work/wt-llm
export PYTHONPATH=/work/wt-llm
arm() { # name policy budget seed
  local b=()
  [ -n "$3" ] && b=(--max-bytes "$3")
  nice -n 10 memcurator bench --policies "$2" "${b[@]}" --tasks 300 --seeds 1 --seed-start "$4" \
    --vector-dtype binary --threads 1 --out /work/runs/s16/$1-s$4 --overwrite > /work/runs/s16/$1-s$4.log 2>&1
  echo "$(date -u +%H:%M) $1-s$4 rc=$?" >> /work/runs/s16/progress
}
arm cur36 curator/align 36k 0
arm lru36 lru 36k 0
arm jitmem jitmem/extractive "" 1
arm cur36 curator/align 36k 1
arm lru36 lru 36k 1
arm cur25 curator/align 25k 0
arm lru25 lru 25k 0
arm jitmem jitmem/extractive "" 2
arm cur36 curator/align 36k 2
arm lru36 lru 36k 2
echo done > /work/runs/s16/jobs2.done
