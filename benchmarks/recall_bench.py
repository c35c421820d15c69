"""Offline recall benchmark: does keep-all's recall find the task's family? No LLM needed.

Replays a bench stream's writes and queries under keep-all (everything resident). Every task
writes the entry the bench writes when the expert's reference SQL solves it (``render_raw`` of the
reference-SQL trajectory, solver "expert"); the poison event writes its attacker entries; an
identical text is reinforced, not duplicated, as ``Memory.write`` does. Before each task's write
its instruction is the recall query, as in ``memcurator.bench.agent.run_task``.

For every configuration it reports, over the queries for which a same-family entry is resident:
recall@1/3/5 of *any* same-family entry, and of a *current* one (for a drifted family after its
migration, an entry written after the drift; else any same-family entry), plus the share of all
tasks whose top-1 is same-family (the bench's "same-family injected", 0.818 for keep-all over
1,000 tasks × 3 seeds) and the seconds the configuration took. ``baseline`` reproduces
``Memory.recall`` as of d0d84e3: BM25 (bm25s) top K_c = 12 over the entry text + dense cosine
top 12 of the hashing embedding, reciprocal-rank fusion, final order by cosine. ``memory``
reproduces ``Memory.recall`` now (issue 9): both legs over the entry's task line, final
``blend_scores``, and between versions of one request (entry cosine >= 0.99) the newer first.

Usage::

    python benchmarks/recall_bench.py --tasks 1000 --seeds 0,1,2
    python benchmarks/recall_bench.py --tasks 1000 --seeds 0,1,2 --stream heldout
    python benchmarks/recall_bench.py --tasks 1000 --seeds 0,1,2 --stream dml
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from memcurator.bench.stream import Stream, StreamConfig, build_stream
from memcurator.distill import render_raw
from memcurator.embed import HashingEmbedder
from memcurator.errors import MissingExtra
from memcurator.lifecycle.versions import prefer_newer
from memcurator.lifecycle.write import dedup_key
from memcurator.retrieve import BM25Index, dense_topk, rrf_fuse
from memcurator.retrieve.hybrid import blend_scores, recall_text, recency_bonus
from memcurator.retrieve.literals import mask_literals
from memcurator.store.vectors import stored_vector
from memcurator.types import Entry, Step, Trajectory

KS = (1, 3, 5)

# an entry with no outcomes (uses, successes, failures all 0), for the same-request rule
_NO_OUTCOMES = Entry("", "", "raw", "-", 1, 1, np.zeros(1, dtype=np.float32), "self", "")


@dataclass
class Written:
    """One resident entry of the replay."""

    text: str
    task_text: str
    family: str
    step: int
    poison: bool


@dataclass
class Query:
    """One recall of the replay: the resident entries are ``entries[:n_resident]``."""

    step: int
    text: str
    schema: str
    family: str
    n_resident: int
    post_drift: bool


@dataclass
class Replay:
    """A stream's writes (in order) and queries under keep-all."""

    entries: list[Written]
    queries: list[Query]
    drift_step: int


def replay(stream: Stream) -> Replay:
    """The writes and queries of ``stream`` under keep-all, every task solved by the expert."""
    from memcurator.envs.sql import schema_text

    entries: list[Written] = []
    seen: set[str] = set()
    queries: list[Query] = []

    def add(w: Written) -> None:
        key = dedup_key(w.text)
        if key not in seen:  # Memory.write reinforces an identical (case, whitespace) text
            seen.add(key)
            entries.append(w)

    for step, task in enumerate(stream.tasks):
        if stream.poison is not None and step == stream.poison.step:
            for text, fam in zip(stream.poison.texts, stream.poison.targets, strict=True):
                add(Written(text, recall_text(text), fam, step, True))
        spec = task.payload["spec"]
        schema = schema_text(spec)
        queries.append(
            Query(
                step,
                task.instruction,
                schema,
                task.family,
                len(entries),
                task.family in stream.drifted and step >= stream.drift_step,
            )
        )
        traj = Trajectory(task.id, [Step(schema, spec.sql)], reward=1.0, solver="expert")
        raw = render_raw(task, traj)
        add(Written(raw, recall_text(raw), task.family, step, False))
    return Replay(entries, queries, stream.drift_step)


@dataclass
class Config:
    """One recall pipeline.

    Parameters
    ----------
    name : str
    embed : callable (str) -> ndarray of shape (d,)
    embed_field : {"entry", "task"}
        What of an entry is embedded: its whole text or its task line.
    bm25_field : {"entry", "task"} or None
        What BM25 indexes; None disables the lexical leg.
    final : {"cosine", "rrf", "blend"}
        Final order: cosine (the policy rerank of keep-all), the RRF score, or
        :func:`memcurator.retrieve.hybrid.blend_scores`.
    mask : bool
        Mask literals (:func:`mask_literals`) in entries and queries before embedding and BM25.
    query_schema : bool
        Append the task's table schema to the query (an agent-side change, not a memory one).
    quant : {None, "float16", "int8"}
        Store the entry embeddings quantised (queries stay float32): float16 (2 bytes a
        dimension), or int8 with one float32 scale per vector (d + 4 bytes). Issue 11 item 3.
    """

    name: str
    embed: Callable[[str], np.ndarray]
    embed_field: str = "entry"
    bm25_field: str | None = "entry"
    final: str = "cosine"
    mask: bool = False
    query_schema: bool = False
    candidates: int = 12
    lexical_weight: float = 0.5
    recency: float = 0.0
    same_request: float | None = None
    note: str = ""
    quant: str | None = None


@dataclass
class Scores:
    """Recall of one configuration on one replay."""

    hits_any: dict[int, int] = field(default_factory=lambda: dict.fromkeys(KS, 0))
    hits_cur: dict[int, int] = field(default_factory=lambda: dict.fromkeys(KS, 0))
    n_any: int = 0
    n_cur: int = 0
    n_tasks: int = 0
    top1_same: int = 0
    seconds: float = 0.0

    def add(self, o: Scores) -> None:
        for k in KS:
            self.hits_any[k] += o.hits_any[k]
            self.hits_cur[k] += o.hits_cur[k]
        self.n_any += o.n_any
        self.n_cur += o.n_cur
        self.n_tasks += o.n_tasks
        self.top1_same += o.top1_same
        self.seconds += o.seconds


def quantize(E: np.ndarray, kind: str) -> np.ndarray:
    """``E`` (n, d) stored as ``kind`` and read back as float32 (what recall would see), through
    the store's own codec (:func:`memcurator.store.vectors.stored_vector`).

    Examples
    --------
    >>> E = np.array([[0.6, -0.8]], dtype=np.float32)
    >>> [round(float(x), 3) for x in quantize(E, "int8")[0]]
    [0.598, -0.8]
    """
    if kind not in ("float16", "int8"):
        raise SystemExit(f"unknown quantisation {kind!r}; known: ['float16', 'int8']")
    if not len(E):
        return E
    return np.vstack([stored_vector(e, kind) for e in E]).astype(np.float32)


def _prep(text: str, mask: bool) -> str:
    return mask_literals(text) if mask else text


# BM25 results per (replay, field, mask, query form, k, step): configurations that differ only
# after the lexical leg share it; its measured seconds are charged to each of them.
_BM25_CACHE: dict[tuple[Any, ...], tuple[np.ndarray, np.ndarray, float]] = {}


def evaluate(rp: Replay, cfg: Config) -> Scores:
    """Recall@k of ``cfg`` over the queries of ``rp`` (see the module docstring)."""
    t0 = time.perf_counter()
    ents = rp.entries
    etexts = [_prep(w.text if cfg.embed_field == "entry" else w.task_text, cfg.mask) for w in ents]
    E = (
        np.vstack([cfg.embed(t) for t in etexts]).astype(np.float32)
        if ents
        else np.zeros((0, 1), dtype=np.float32)
    )
    if cfg.quant is not None:
        E = quantize(E, cfg.quant)
    btexts = (
        [_prep(w.text if cfg.bm25_field == "entry" else w.task_text, cfg.mask) for w in ents]
        if cfg.bm25_field
        else []
    )
    fam = np.array([w.family for w in ents], dtype=object)
    poison = np.array([w.poison for w in ents], dtype=bool)
    created = np.array([w.step for w in ents], dtype=int)
    s = Scores()
    bm25 = BM25Index()
    fitted = -1
    bm25_s = 0.0  # BM25 seconds, counted for every configuration even when served from the cache
    bm25_fresh = 0.0  # of which computed in this call (already inside the elapsed time)
    for q in rp.queries:
        s.n_tasks += 1
        n = q.n_resident
        if n == 0:
            continue
        same = (fam[:n] == q.family) & ~poison[:n]
        cur = same & (created[:n] >= rp.drift_step) if q.post_drift else same
        qtext = _prep(q.text + ("\n" + q.schema if cfg.query_schema else ""), cfg.mask)
        e_q = cfg.embed(qtext)
        kc = max(cfg.candidates, max(KS))
        d_ids, _ = dense_topk(E[:n], e_q, kc)
        if cfg.bm25_field:
            key = (id(rp), cfg.bm25_field, cfg.mask, cfg.query_schema, kc, q.step)
            if key not in _BM25_CACHE:
                tb = time.perf_counter()
                if fitted != n:
                    bm25.fit(btexts[:n])
                    fitted = n
                _BM25_CACHE[key] = (*bm25.search(qtext, kc), time.perf_counter() - tb)
                bm25_fresh += _BM25_CACHE[key][2]
            b_ids, b_sc, dt = _BM25_CACHE[key]
            bm25_s += dt
        else:
            b_ids, b_sc = np.zeros(0, dtype=int), np.zeros(0)
        pool, rrf = rrf_fuse([b_ids, d_ids], k=2 * kc)
        cos = (E[pool] @ e_q).astype(np.float64)
        if cfg.final == "cosine":
            final = cos
        elif cfg.final == "rrf":
            final = rrf
        else:
            lex = np.zeros(len(pool))
            where = {int(i): j for j, i in enumerate(pool)}
            for i, sc in zip(b_ids, b_sc, strict=True):
                lex[where[int(i)]] = sc
            final = blend_scores(cos, lex, lexical_weight=cfg.lexical_weight)
        if cfg.recency:
            final = recency_bonus(final, created[pool], q.step, weight=cfg.recency)
        if cfg.same_request is not None:
            # a keep-all replay has no feedback: an older version is never proven better
            final = prefer_newer(
                final, [_NO_OUTCOMES] * len(pool), pool, E[pool], cfg.same_request, kc
            )
        ranked = pool[np.argsort(-final, kind="stable")]
        if same[ranked[:1]].any():
            s.top1_same += 1
        if same.any():
            s.n_any += 1
            for k in KS:
                s.hits_any[k] += int(same[ranked[:k]].any())
        if cur.any():
            s.n_cur += 1
            for k in KS:
                s.hits_cur[k] += int(cur[ranked[:k]].any())
    s.seconds = time.perf_counter() - t0 - bm25_fresh + bm25_s
    return s


def configs(names: Sequence[str] | None = None) -> list[Config]:
    """The configurations compared; ``baseline`` first."""
    h = HashingEmbedder().embed
    out = [
        Config("baseline", h, note="Memory.recall as of d0d84e3: BM25(entry)+cos, RRF, cosine"),
        Config(
            "memory",
            h,
            embed_field="task",
            bm25_field="task",
            final="blend",
            same_request=0.99,
            note="Memory.recall now: task line, blend, newer version of one request first",
        ),
        Config("final=rrf", h, final="rrf"),
        Config("final=blend", h, final="blend"),
        Config("bm25=task", h, bm25_field="task"),
        Config("bm25=task,final=blend", h, bm25_field="task", final="blend"),
        Config("mask", h, mask=True),
        Config("mask,final=blend", h, mask=True, final="blend"),
        Config("embed=task", h, embed_field="task"),
        Config("embed=task,bm25=task", h, embed_field="task", bm25_field="task"),
        Config(
            "embed=task,bm25=task,blend", h, embed_field="task", bm25_field="task", final="blend"
        ),
        Config("embed=task,mask", h, embed_field="task", mask=True),
        Config(
            "embed=task,bm25=task,mask,blend",
            h,
            embed_field="task",
            bm25_field="task",
            mask=True,
            final="blend",
        ),
        Config(
            "embed=task,bm25=task,recency=0.02",
            h,
            embed_field="task",
            bm25_field="task",
            recency=0.02,
        ),
        Config(
            "embed=task,bm25=task,recency=0.05",
            h,
            embed_field="task",
            bm25_field="task",
            recency=0.05,
        ),
        Config(
            "embed=task,bm25=task,blend,recency=0.05",
            h,
            embed_field="task",
            bm25_field="task",
            final="blend",
            recency=0.05,
        ),
        Config(
            "embed=task,bm25=task,recency=0.1",
            h,
            embed_field="task",
            bm25_field="task",
            recency=0.1,
        ),
        Config("dense only", h, bm25_field=None),
        Config("embed=task,dense only", h, embed_field="task", bm25_field=None),
        Config("baseline,q=float16", h, quant="float16"),
        Config("baseline,q=int8", h, quant="int8"),
        Config(
            "embed=task,bm25=task,q=float16",
            h,
            embed_field="task",
            bm25_field="task",
            quant="float16",
        ),
        Config(
            "embed=task,bm25=task,q=int8", h, embed_field="task", bm25_field="task", quant="int8"
        ),
        Config(
            "query+schema (agent)",
            h,
            query_schema=True,
            note="needs the agent to put the table schema in the query",
        ),
        Config("query+schema,blend (agent)", h, query_schema=True, final="blend"),
    ]
    try:
        from memcurator.embed import create_embedder

        m = create_embedder("minilm").embed
        out += [
            Config("minilm,embed=task,bm25=task", m, embed_field="task", bm25_field="task"),
            Config(
                "minilm,embed=task,bm25=task,recency=0.05",
                m,
                embed_field="task",
                bm25_field="task",
                recency=0.05,
            ),
        ]
    except MissingExtra:
        pass  # the optional extra "embed" is not installed: hashing configurations only
    if names:
        known = {c.name: c for c in out}
        missing = [n for n in names if n not in known]
        if missing:
            raise SystemExit(f"unknown configs {missing}; known: {sorted(known)}")
        out = [known[n] for n in names]
    return out


def build(kind: str, n_tasks: int, seed: int, families: list[Any]) -> Stream:
    """A stream of ``kind``: ``default`` (StreamConfig defaults), ``heldout`` (60 families none
    of which is among the default streams' 60 for seeds 0-2), ``dml`` (INSERT/UPDATE/DELETE
    families only, drift on 0.5 of them)."""
    if kind == "default":
        return build_stream(StreamConfig(n_tasks=n_tasks, seed=seed), families)
    if kind == "heldout":
        used: set[str] = set()
        for s in (0, 1, 2):
            used |= set(build_stream(StreamConfig(n_tasks=1, seed=s), families).families)
        rest = [f for f in families if f.family not in used]
        return build_stream(StreamConfig(n_tasks=n_tasks, seed=seed), rest)
    if kind == "dml":
        dml = [f for f in families if f.kind != "select"]
        return build_stream(StreamConfig(n_tasks=n_tasks, seed=seed, drift=0.5), dml)
    raise SystemExit(f"unknown stream {kind!r}; known: ['default', 'dml', 'heldout']")


def run(
    kind: str,
    n_tasks: int,
    seeds: Sequence[int],
    names: Sequence[str] | None = None,
    families: list[Any] | None = None,
) -> dict[str, Scores]:
    """Scores of every configuration summed over ``seeds``."""
    from memcurator.bench.runner import load_families

    fams = families if families is not None else load_families()
    cfgs = configs(names)
    total = {c.name: Scores() for c in cfgs}
    for seed in seeds:
        _BM25_CACHE.clear()  # keyed by id(replay): never reuse across replays
        rp = replay(build(kind, n_tasks, seed, fams))
        for c in cfgs:
            total[c.name].add(evaluate(rp, c))
    return total


def table(total: dict[str, Scores]) -> str:
    """A markdown table; ratios are against the first configuration (the baseline)."""
    base = next(iter(total.values()))
    head = (
        "| config | any@1 | any@3 | any@5 | cur@1 | cur@3 | cur@5 | top-1 same-fam / all tasks "
        "| any@1 ÷ base | s |\n|---|---|---|---|---|---|---|---|---|---|"
    )
    rows = [head]
    for name, s in total.items():
        a = [s.hits_any[k] / max(s.n_any, 1) for k in KS]
        c = [s.hits_cur[k] / max(s.n_cur, 1) for k in KS]
        ratio = a[0] / max(base.hits_any[1] / max(base.n_any, 1), 1e-12)
        rows.append(
            f"| {name} | "
            + " | ".join(f"{x:.3f}" for x in a + c)
            + f" | {s.top1_same / max(s.n_tasks, 1):.3f} | {ratio:.3f} | {s.seconds:.1f} |"
        )
    b = base
    rows.append(
        f"\nqueries: {b.n_tasks}; with a same-family entry resident: {b.n_any}; with a current "
        f"one: {b.n_cur} ({b.n_cur / max(b.n_tasks, 1):.3f} of all tasks, the oracle's ceiling)"
    )
    return "\n".join(rows)


def main(argv: Sequence[str] | None = None) -> dict[str, Scores]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--tasks", type=int, default=1000)
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--stream", default="default", help="default | heldout | dml")
    ap.add_argument("--configs", default="", help="names separated by ';' (default: all)")
    a = ap.parse_args(argv)
    seeds = [int(x) for x in a.seeds.split(",") if x.strip()]
    names = [x.strip() for x in a.configs.split(";") if x.strip()] or None
    t0 = time.perf_counter()
    total = run(a.stream, a.tasks, seeds, names)
    print(f"stream={a.stream} tasks={a.tasks} seeds={seeds}")
    print(table(total))
    print(f"\ntotal {time.perf_counter() - t0:.1f} s")
    return total


if __name__ == "__main__":
    main()
