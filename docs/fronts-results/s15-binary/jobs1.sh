#!/bin/bash
# Real-LLM job list, session 15 (issue 35: binary vectors at 100 KB seed 0; second seed for float32/int8/binary; partial: 100 tasks)
. /work/main/.venv/bin/activate
cd /work/main
run() { # name dtype seedstart
  nice -n 10 memcurator bench --policies curator/align,lru,jitmem/extractive --tasks 100 --seeds 1 --seed-start $3 \
    --max-bytes 100k --vector-dtype $2 --threads 1 --baseline jitmem/extractive \
    --out /work/runs/s15/$1 --overwrite > /work/runs/s15/$1.log 2>&1
  echo "$(date -u +%H:%M) $1 rc=$?" >> /work/runs/s15/progress
}
run binary-s0 binary 0
run float32-s1 float32 1
run int8-s1 int8 1
run binary-s1 binary 1
echo done > /work/runs/s15/jobs.done
