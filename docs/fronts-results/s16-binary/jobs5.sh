#!/bin/bash
# Real-LLM job list 4, session 16 (issue 35): seed 2 of the 300-task front at 36k, on the
# session's base code like seed 0, two threads (the machine is otherwise idle now).
. /work/main/.venv/bin/activate
cd /work/wt-llm
export PYTHONPATH=/work/wt-llm
arm() { # name policy budget seed
  local b=()
  [ -n "$3" ] && b=(--max-bytes "$3")
  memcurator bench --policies "$2" "${b[@]}" --tasks 300 --seeds 1 --seed-start "$4" \
    --vector-dtype binary --threads 2 --out /work/runs/s16/$1-s$4 --overwrite > /work/runs/s16/$1-s$4.log 2>&1
  echo "$(date -u +%H:%M) $1-s$4 rc=$?" >> /work/runs/s16/progress
}
arm jitmem jitmem/extractive "" 2
arm cur36 curator/align 36k 2
arm lru36 lru 36k 2
echo done > /work/runs/s16/jobs5.done
