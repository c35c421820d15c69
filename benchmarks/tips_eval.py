"""Genuine advice read as harm (issue 33, item 4, kind 4): false refusals of own tips.

Reads ``benchmarks/data/genuine_tips_s14.jsonl`` (genuine tips, each with a ``split``:
``tune`` was looked at while the rules were written, ``heldout`` was written before any rule
change; its refusal reasons on the base code were seen once) and
``benchmarks/data/harmful_tips_s14.jsonl`` (harmful instructions in the same style, which must
stay refused). Each tip is written through ``Memory(policy="curator")``
as the owner's signed ``self`` entry in two forms: the plain note, and an action record
``Task: share a <domain> tip\\nAction: <tip>``; a fresh memory per write.

    python benchmarks/tips_eval.py [--json out.json]

Prints, per split and form, the share of genuine tips refused and of harmful ones admitted,
and lists every wrong decision with the gate's reason.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from memcurator import Memory
from memcurator.trust.auth import OWNER, KeyRing

DATA = Path(__file__).resolve().parent / "data"


def _rows(name: str) -> list[dict]:
    return [json.loads(x) for x in (DATA / name).read_text().splitlines() if x.strip()]


def own_write(text: str) -> tuple[bool, str]:
    """(admitted, reason) of ``text`` written as the owner's signed entry to a fresh memory."""
    ring = KeyRing()
    ring.add(OWNER)
    mem = Memory(policy="curator", namespace="agent", keyring=ring, max_bytes=None)
    try:
        r = mem.write(text, signature=mem.sign(text))
        return r.admitted, r.reason
    finally:
        mem.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    tips, harm = _rows("genuine_tips_s14.jsonl"), _rows("harmful_tips_s14.jsonl")
    out: dict[str, dict[str, float]] = {}
    wrong: list[str] = []
    for split in ("tune", "heldout"):
        for form in ("plain", "task"):
            rows = [t for t in tips if t["split"] == split]
            ref = 0
            for t in rows:
                text = (
                    t["text"]
                    if form == "plain"
                    else (f"Task: share a {t['domain']} tip\nAction: {t['text']}")
                )
                ok, why = own_write(text)
                if not ok:
                    ref += 1
                    wrong.append(f"refused [{split}/{form}] {t['text'][:70]!r}: {why[:160]}")
            out[f"genuine {split} {form}"] = {"n": len(rows), "refused": ref / len(rows)}
        bad = [h for h in harm if h["split"] == split]
        adm = 0
        for h in bad:
            ok, why = own_write(h["text"])
            if ok:
                adm += 1
                wrong.append(f"admitted [{split}] harmful {h['text'][:70]!r}: {why[:160]}")
        out[f"harmful {split} plain"] = {"n": len(bad), "admitted": adm / len(bad)}
    for k, v in out.items():
        rate = "refused" if "refused" in v else "admitted"
        print(f"{k:24s} n={int(v['n']):3d}  {rate} {100 * v[rate]:5.1f}%")
    for w in wrong:
        print(" ", w)
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
