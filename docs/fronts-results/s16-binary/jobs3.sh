#!/bin/bash
# Real-LLM job list 3, session 16 (issue 35): the second budget point of seed 0 (25k).
. /work/main/.venv/bin/activate
cd /work/wt-llm
export PYTHONPATH=/work/wt-llm
arm() { # name policy budget seed
  nice -n 10 memcurator bench --policies "$2" --max-bytes "$3" --tasks 300 --seeds 1 --seed-start "$4" \
    --vector-dtype binary --threads 1 --out /work/runs/s16/$1-s$4 --overwrite > /work/runs/s16/$1-s$4.log 2>&1
  echo "$(date -u +%H:%M) $1-s$4 rc=$?" >> /work/runs/s16/progress
}
arm cur25 curator/align 25k 0
arm lru25 lru 25k 0
echo done > /work/runs/s16/jobs3.done
