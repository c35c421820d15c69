#!/bin/bash
# Real-LLM job list 3, session 15 (issue 35: binary-vector budget front with the coverage Keep
# merged (main after 'Merge s15-coverage'); partial: 100 tasks, seeds 0-1)
. /work/main/.venv/bin/activate
cd /work/main
git log --oneline -1 > /work/runs/s15/jobs3.commit
nice -n 15 memcurator bench --policies curator/align --tasks 100 --seeds 1 --seed-start 0 \
  --max-bytes 15k,30k,50k --vector-dtype binary --threads 1 \
  --out /work/runs/s15/cov-s0 --overwrite > /work/runs/s15/cov-s0.log 2>&1
echo "$(date -u +%H:%M) cov-s0 rc=$?" >> /work/runs/s15/progress
nice -n 15 memcurator bench --policies curator/align,lru,jitmem/extractive --tasks 100 --seeds 1 --seed-start 1 \
  --max-bytes 15k,30k,50k --vector-dtype binary --threads 1 --baseline jitmem/extractive \
  --out /work/runs/s15/cov-s1 --overwrite > /work/runs/s15/cov-s1.log 2>&1
echo "$(date -u +%H:%M) cov-s1 rc=$?" >> /work/runs/s15/progress
echo done > /work/runs/s15/jobs3.done
