"""Paired comparisons of the session-15 binary-vector front (real LLM, 100 tasks, seeds 0-1).
Seed 0: curator/align from cov-s0 (coverage Keep), lru from binfront-s0, jitmem/extractive
from binary-s0; seed 1: all from cov-s1 (same settings: binary vectors, 100 tasks)."""
import csv
from memcurator.bench.compare import paired_differences

def rows(path, keep):
    return [r for r in csv.DictReader(open(path)) if keep(r["policy"])]

s0 = (rows("/work/runs/s15/cov-s0/records.csv", lambda p: p.startswith("curator/align"))
      + rows("/work/runs/s15/binfront-s0/records.csv", lambda p: p.startswith("lru"))
      + rows("/work/runs/s15/binary-s0/records.csv", lambda p: p == "jitmem/extractive"))
s1 = rows("/work/runs/s15/cov-s1/records.csv", lambda p: True)
old0 = rows("/work/runs/s15/binfront-s0/records.csv", lambda p: p.startswith("curator/align"))
allr = s0 + s1
def show(title, recs, base):
    print(f"\n{title} (baseline {base})")
    for d in paired_differences(recs, base, n_boot=4000):
        print(f"  {d['policy']:<22} n={d['n']:>3} {d['rate']:.3f} vs {d['baseline_rate']:.3f}  "
              f"diff {d['diff']:+.3f} [{d['lo']:+.3f}, {d['hi']:+.3f}] p={d['p']:.3g}")
for b in ("15k", "30k", "50k"):
    recs = [r for r in allr if r["policy"] in (f"curator/align@{b}", f"lru@{b}")]
    show(f"curator/align vs lru at {b}, seeds 0-1", recs, f"lru@{b}")
show("curator/align at each budget vs jitmem/extractive unbounded, seeds 0-1",
     [r for r in allr if r["policy"].startswith("curator/align") or r["policy"] == "jitmem/extractive"],
     "jitmem/extractive")
new0 = [r for r in s0 if r["policy"].startswith("curator/align")]
for b in ("15k", "30k", "50k"):
    recs = [dict(r, policy="after") for r in new0 if r["policy"] == f"curator/align@{b}"] + \
           [dict(r, policy="before") for r in old0 if r["policy"] == f"curator/align@{b}"]
    show(f"coverage Keep after vs before at {b}, seed 0", recs, "before")
