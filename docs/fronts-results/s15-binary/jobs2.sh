#!/bin/bash
# Real-LLM job list 2, session 15 (issue 35: binary-vector budget front below 100 KB; partial: 100 tasks, seeds 0-1)
. /work/main/.venv/bin/activate
cd /work/main
while [ ! -f /work/runs/s15/jobs.done ]; do sleep 30; done
for s in 0 1; do
  nice -n 10 memcurator bench --policies curator/align,lru --tasks 100 --seeds 1 --seed-start $s \
    --max-bytes 15k,30k,50k --vector-dtype binary --threads 1 \
    --out /work/runs/s15/binfront-s$s --overwrite > /work/runs/s15/binfront-s$s.log 2>&1
  echo "$(date -u +%H:%M) binfront-s$s rc=$?" >> /work/runs/s15/progress
done
echo done > /work/runs/s15/jobs2.done
