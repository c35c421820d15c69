"""Does read-time literal/schema alignment help or corrupt, per task shape? (no LLM)

For pairs (remembered exemplar from one task, query = another task of a shape) the exemplar is
stored as the agent stores it (``render_raw``: task, schema observation, action, outcome), the
``align`` operator of :mod:`memcurator.curate.extractive` is run for the query's instruction and
schema, and the SQL the payload presents is executed on the query's own fresh table (the
environment's checker, ``against="reference"``). The unaligned exemplar (``closest``: the past
task and its own SQL) is judged the same way.

Per pair:

* ``correct``: the presented SQL produces the query's reference result / table effect;
* ``corrupt``: the payload pairs the *query's* task with SQL that does not (a small executor
  copies such a pair; an honest exemplar of another task it has to adapt);
* ``error``: the presented SQL fails to execute on the query's table (parse / bind errors);
* ``fallback``: the aligner declined and the payload is the unaligned exemplar.

``better / same / worse`` compares aligned with unaligned per pair on a three-level outcome:
+1 correct, 0 honest (an exemplar of another task, or correct-looking nothing), -1 corrupt.
The unaligned exemplar is never corrupt (it names its own task), so "worse" counts the pairs
where alignment injected a wrong answer labelled as the query's.

Shapes: the developers' stream (``variant``: same family, fresh literals; ``variant-multi``: the
same with >= 3 literals in the query; ``drift-column`` / ``drift-table``: the query's schema
renamed) and held-out shapes made by transformation (``wiki-variant``: Wikipedia-table style
names: table ``1-<digits>-<n>``, columns with spaces, punctuation, digits and mixed case, every
column TEXT holding the numbers as text; ``quoted-value``: the query's string value carries an
apostrophe and a comma; ``same-table-other``: another task on the same table;
``other-same-kind``: the nearest other task of the same statement type (INSERT/UPDATE/DELETE
queries only: the INSERT/UPDATE-heavy mix); ``kind-mismatch``: the nearest other task of a
different statement type; ``wiki-other-dml``: ``other-same-kind`` on wikified tables).

Run::

    python benchmarks/align_safety.py --pairs 80 --seed 0 [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
import zlib
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import replace

import numpy as np
from sqlglot import exp

from memcurator.curate.extractive import extract, literals, parse_raw
from memcurator.distill import render_raw
from memcurator.domains.sql.db import quote_ident
from memcurator.domains.sql.spec import SQLTaskSpec
from memcurator.envs.sql.checker import check
from memcurator.envs.sql.data import load_specs
from memcurator.envs.sql.drift import apply_rename, rename_map
from memcurator.envs.sql.prompt import schema_text
from memcurator.envs.sql.sqledit import span, splice, sql_string
from memcurator.envs.sql.translate import parse
from memcurator.envs.sql.variants import family_rng, make_variant
from memcurator.errors import MemcuratorError
from memcurator.retrieve.literals import mask_literals
from memcurator.types import Step, Task, Trajectory

Pair = tuple[SQLTaskSpec, SQLTaskSpec]

# --------------------------------------------------------------------------- transformations

_SUFFIXES = ("", " (2010)", " #", "/Notes", " No.", " [a]")


def wiki_names(spec: SQLTaskSpec) -> tuple[str, dict[str, str]]:
    """Wikipedia-table style names for a spec's table and columns (deterministic)."""
    h = zlib.crc32(spec.table.encode())
    table = f"1-{h % 10_000_000}-{len(spec.columns)}"
    cols = {}
    for i, (name, _) in enumerate(spec.columns):
        words = name.replace("_", " ").strip().split()
        pretty = " ".join(w[:1].upper() + w[1:] for w in words) or name
        cols[name] = pretty + _SUFFIXES[i % len(_SUFFIXES)]
    return table, cols


def wikify(spec: SQLTaskSpec) -> SQLTaskSpec | None:
    """The spec on a Wikipedia-style table (quoted names, TEXT columns holding numbers).

    None when the reference SQL cannot be rewritten or no longer runs.
    """
    table, cols = wiki_names(spec)
    low = {k.lower(): v for k, v in cols.items()}
    try:
        tree = parse(spec.sql)
    except MemcuratorError:
        return None
    edits = []
    aliases = {a.alias.lower() for a in tree.find_all(exp.Alias)}
    for ident in tree.find_all(exp.Identifier):
        sp = span(ident)
        if sp is None:
            continue
        name = ident.name.lower()
        parent = ident.parent
        if isinstance(parent, exp.Table) and name == spec.table.lower():
            edits.append((*sp, quote_ident(table)))
        elif name in low and not (isinstance(parent, exp.Alias) or name in aliases):
            edits.append((*sp, quote_ident(low[name])))
    try:
        sql = splice(spec.sql, edits)
    except MemcuratorError:
        return None
    instruction = spec.instruction
    for old, new in cols.items():
        if "_" in old:
            instruction = re.sub(rf"\b{re.escape(old)}\b", new, instruction)
    rows = tuple(tuple(None if v is None else str(v) for v in r) for r in spec.rows)
    out = replace(
        spec,
        instruction=instruction,
        table=table,
        columns=tuple((cols[n], "TEXT") for n, _ in spec.columns),
        rows=rows,
        sql=sql,
        answer_rows=None,
        answer_md5=None,
        origin="variant",
    )
    return out if runs(out) else None


def quote_value(spec: SQLTaskSpec) -> SQLTaskSpec | None:
    """The spec with one string value (in instruction, SQL and rows) given an apostrophe and a
    comma, written in double quotes in the instruction (``"O'Brien, Jr."`` style)."""
    for m in re.finditer(r"'((?:[^'\\]|'')+)'", spec.sql):
        value = m.group(1).replace("''", "'")
        if not value or f"'{value}'" not in spec.instruction:
            continue
        new = f"{value}'s, Jr."
        rows = tuple(tuple(new if v == value else v for v in r) for r in spec.rows)
        out = replace(
            spec,
            instruction=spec.instruction.replace(f"'{value}'", f'"{new}"'),
            sql=spec.sql[: m.start()] + sql_string(new) + spec.sql[m.end() :],
            rows=rows,
            answer_rows=None,
            answer_md5=None,
            origin="variant",
        )
        return out if runs(out) else None
    return None


def runs(spec: SQLTaskSpec) -> bool:
    """The spec's reference SQL runs and passes its own check."""
    try:
        return check(spec, spec.sql, against="reference").ok
    except MemcuratorError:
        return False


# --------------------------------------------------------------------------- pairs per shape


def _words(s: SQLTaskSpec) -> set[str]:
    return set(re.findall(r"[a-z]+", mask_literals(s.instruction).lower()))


def nearest(q: SQLTaskSpec, pool: list[SQLTaskSpec], keep: Callable[[SQLTaskSpec], bool]):
    """The pool spec (another family) most similar to ``q`` by word Jaccard, among ``keep``."""
    wq = _words(q)
    best, score = None, -1.0
    for s in pool:
        if s.family == q.family or not keep(s):
            continue
        ws = _words(s)
        j = len(wq & ws) / max(1, len(wq | ws))
        if j > score:
            best, score = s, j
    return best


def shape_pairs(name: str, specs: list[SQLTaskSpec], seed: int) -> Iterator[Pair]:
    """Every candidate (exemplar, query) pair of one shape, in spec order."""
    if name in ("variant", "variant-multi", "drift-column", "drift-table", "wiki-variant",
                "quoted-value"):  # fmt: skip
        for f in specs:
            e = make_variant(f, family_rng(seed, f.family, 11))
            q = make_variant(f, family_rng(seed, f.family, 12))
            if e is None or q is None or e.sql == q.sql:
                continue
            if name == "variant-multi" and len(literals(q.instruction)) < 3:
                continue
            if name.startswith("drift-"):
                try:
                    q = apply_rename(q, rename_map(f, seed, name.split("-")[1]))  # type: ignore[arg-type]
                except MemcuratorError:
                    continue
            if name == "wiki-variant":
                e, q = wikify(e), wikify(q)  # type: ignore[assignment]
            if name == "quoted-value":
                q = quote_value(q)  # type: ignore[assignment]
            if e is not None and q is not None:
                yield e, q
    elif name == "same-table-other":
        by_table: dict[str, list[SQLTaskSpec]] = {}
        for s in specs:
            by_table.setdefault(s.table, []).append(s)
        for q in specs:
            e = nearest(q, by_table[q.table], lambda s: True)
            if e is not None:
                yield e, q
    elif name in ("other-same-kind", "wiki-other-dml"):
        for q in specs:
            if q.kind == "select":
                continue
            e = nearest(q, specs, lambda s, q=q: s.kind == q.kind and s.table != q.table)
            if e is None:
                continue
            if name == "wiki-other-dml":
                e, q = wikify(e), wikify(q)  # type: ignore[assignment]
            if e is not None and q is not None:
                yield e, q
    elif name == "kind-mismatch":
        for q in specs:
            same_t = [s for s in specs if s.table == q.table and s.kind != q.kind]
            e = nearest(q, same_t or specs, lambda s, q=q: s.kind != q.kind)
            if e is not None:
                yield e, q
    else:
        raise SystemExit(f"unknown shape {name!r}")


SHAPES = (
    "variant", "variant-multi", "drift-column", "drift-table",  # the developers' stream
    "wiki-variant", "quoted-value", "same-table-other", "other-same-kind", "kind-mismatch",
    "wiki-other-dml",
)  # fmt: skip
STREAM = SHAPES[:4]

# --------------------------------------------------------------------------- judging


def exemplar_text(e: SQLTaskSpec) -> str:
    """The exemplar as the agent stores a solved task."""
    t = Task("past", e.instruction, e.family)
    return render_raw(t, Trajectory("past", [Step(schema_text(e), e.sql)], reward=1.0))


def presented(payload: str) -> tuple[str, str]:
    """``(task, sql)`` of a ``Task:/Action:`` payload."""
    task = sql = ""
    for line in payload.splitlines():
        if line.startswith("Task: ") and not task:
            task = line[6:]
        elif line.startswith("Action: "):
            sql = line[8:]
    return task, sql


try:  # the aligner before issue 23 had no notes: this diagnostic also measures that code
    from memcurator.curate.extractive import extract_noted
except ImportError:  # pragma: no cover - only on the old code
    extract_noted = None  # type: ignore[assignment]

_REASONS = (
    ("statement type", ("the task asks for",)),
    ("other request", ("another request",)),
    ("other table", ("not a renaming", "one-to-one")),
    ("literal map", ("literals differ", "no counterpart", "would become both", "ambiguous",
                     "is not in the task", "cannot become")),
    ("parse/bind", ("parse", "is not a column", "is not the task's table", "position")),
)  # fmt: skip


def reason_kind(note: str) -> str:
    """The class of a fallback note (first match in :data:`_REASONS`)."""
    for kind, keys in _REASONS:
        if any(k in note for k in keys):
            return kind
    return "other"


def judge(e: SQLTaskSpec, q: SQLTaskSpec) -> dict[str, object]:
    """Aligned and unaligned payloads of one pair, judged on the query's table."""
    parsed = [parse_raw(exemplar_text(e))]
    obs = schema_text(q)
    out: dict[str, object] = {}
    notes: list[str] = []
    for op in ("align", "closest"):
        if op == "align" and extract_noted is not None:
            payload, _, notes = extract_noted(op, q.instruction, obs, parsed)  # type: ignore[arg-type]
        else:
            payload, _ = extract(op, q.instruction, obs, parsed)  # type: ignore[arg-type]
        task, sql = presented(payload)
        res = check(q, sql, against="reference")
        claims = task == q.instruction
        out[op] = {
            "sql": sql,
            "correct": res.ok,
            "error": res.error is not None,
            "claims_query": claims,
            "corrupt": claims and not res.ok,
        }
    a, c = out["align"], out["closest"]
    out["fallback"] = not a["claims_query"]  # type: ignore[index]
    out["reason"] = reason_kind(notes[0]) if notes else ""

    def level(r: dict) -> int:
        return 1 if r["correct"] else (-1 if r["corrupt"] else 0)

    d = level(a) - level(c)  # type: ignore[arg-type]
    out["verdict"] = "better" if d > 0 else ("worse" if d < 0 else "same")
    return out


def run(pairs_per_shape: int, seed: int, shapes: tuple[str, ...]) -> dict[str, dict]:
    """Per shape: pair counts, correct/corrupt/error rates, better/same/worse."""
    specs = list(load_specs().specs)
    table: dict[str, dict] = {}
    for name in shapes:
        rng = np.random.default_rng(seed)
        cands = list(shape_pairs(name, specs, seed))
        if len(cands) > pairs_per_shape:
            idx = sorted(rng.choice(len(cands), size=pairs_per_shape, replace=False).tolist())
            cands = [cands[i] for i in idx]
        rows = [judge(e, q) for e, q in cands]
        n = len(rows)

        def frac(op: str, key: str, rows: list = rows, n: int = n) -> float:
            return sum(bool(r[op][key]) for r in rows) / max(1, n)

        table[name] = {
            "n": n,
            "aligned_correct": frac("align", "correct"),
            "unaligned_correct": frac("closest", "correct"),
            "aligned_corrupt": frac("align", "corrupt"),
            "aligned_error": frac("align", "error"),
            "unaligned_error": frac("closest", "error"),
            "fallback": sum(bool(r["fallback"]) for r in rows) / max(1, n),
            "better": sum(r["verdict"] == "better" for r in rows),
            "same": sum(r["verdict"] == "same" for r in rows),
            "worse": sum(r["verdict"] == "worse" for r in rows),
            "reasons": dict(Counter(str(r["reason"]) for r in rows if r["reason"])),
            "worse_examples": [
                {"query": q.instruction, "reference": q.sql, "aligned": r["align"]["sql"]}
                for (e, q), r in zip(cands, rows, strict=True)
                if r["verdict"] == "worse"
            ][:3],
        }
    return table


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pairs", type=int, default=80, help="pairs per shape (sampled)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--shapes", default=",".join(SHAPES))
    ap.add_argument("--json", default="", help="write the table (and worse examples) here")
    ap.add_argument("--examples", action="store_true", help="print up to 3 worse pairs a shape")
    a = ap.parse_args(argv)
    t0 = time.perf_counter()
    table = run(a.pairs, a.seed, tuple(s for s in a.shapes.split(",") if s))
    hdr = ("shape", "n", "al.ok", "un.ok", "corrupt", "al.err", "un.err", "fallbk", "better",
           "same", "worse", "fallback reasons")  # fmt: skip
    print("| " + " | ".join(hdr) + " |")
    print("|" + "---|" * len(hdr))
    for name, r in table.items():
        tag = f"{name}{' (stream)' if name in STREAM else ''}"
        print(
            f"| {tag} | {r['n']} | {r['aligned_correct']:.2f} | {r['unaligned_correct']:.2f} | "
            f"{r['aligned_corrupt']:.2f} | {r['aligned_error']:.2f} | {r['unaligned_error']:.2f} "
            f"| {r['fallback']:.2f} | {r['better']} | {r['same']} | {r['worse']} | "
            + ", ".join(f"{k} {v}" for k, v in sorted(r["reasons"].items(), key=lambda x: -x[1]))
            + " |"
        )
        if a.examples:
            for ex in r["worse_examples"]:
                print("   worse:", json.dumps(ex)[:400])
    print(f"({time.perf_counter() - t0:.0f} s)", file=sys.stderr)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(table, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
