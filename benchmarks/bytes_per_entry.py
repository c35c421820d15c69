"""Bytes per entry by part, and what compact vector codes cost in recall (issue 35, item 1).

Entries are the SQL stream's (``recall_bench.replay``: every task solved by the expert, the
bench's ``render_raw`` text, one entry per distinct text), pooled over seeds until there are
``--n`` of them. Their meta is what ``lifecycle.record`` and ``Memory.write`` store on the
bench for an expert solution: task id (``t<step>-<family>``), family, solver ``expert``, the
trajectory metrics of ``bench.agent`` for it (pei 1.0, frr 1.0, ti 5.0 or 4.0, drawn: the
traceability score of a verified one-statement solution), and the de-duplication key
``text_sha1`` (SHA-1 hex of the normalised text). The origin detail is ``expert``.

Parts, as :func:`memcurator.store.sizing.default_sizeof` counts them: vector (per precision),
text (UTF-8; zstd alone; zstd with a dictionary trained on the namespace's first
``--train`` entries, the dictionary counted once for the namespace and also shown per entry),
meta (JSON), detail. Recall@10 against float32 exact search (the in-process path): int8 and
float16 scanned as stored; binary by a Hamming short list of ``L`` = c·k rows rescored exactly
(the recall texts of the short list embedded again). Queries are the stream's task
instructions (the bench's recall query), ``--queries`` of them. Recall counts ties: many
entries share a task line (same cosine), so a returned entry counts when its exact cosine is
at least the exact 10th best (``hit``); by ids alone an order among equals would count as loss.

Real stores (``--stores sqlite,postgres``): the same entries inserted into a SQLite file and
a PostgreSQL database (a local server, :class:`memcurator.store.pglocal.LocalPostgres`), once per
configuration (float32, int8, binary, each with text as is; binary and int8 with text
zstd-compressed, ``compress_text=True``). Each entry's ``b(m)`` is what a Memory would count
(:func:`~memcurator.store.sizing.default_sizeof` with the namespace's codec); the parts are read
back from the database (vector column, text column(s), meta, origin detail), the dictionary from
the store, the namespace's bytes from ``used_bytes``; "not in b(m)" shows what the database
holds besides (SQLite: the whole file over its entries; PostgreSQL: the partition with its
indexes, the full-text column ``rtsv`` and its GIN index, ``metab``). Recall@10 is then measured
on what each store gives back: binary codes and the texts read from the store (decompressed),
exact vectors derived from those texts (as a Memory handle does), Hamming short list of
``L`` = 10k rescored exactly, against float32 exact search over the original vectors.

Usage::

    python benchmarks/bytes_per_entry.py --n 1000,10000 --queries 500
    python benchmarks/bytes_per_entry.py --n 10000 --stores sqlite,postgres --cache /tmp/s.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))

from recall_bench import build, replay  # noqa: E402

from memcurator.bench.runner import load_families  # noqa: E402
from memcurator.embed import HashingEmbedder  # noqa: E402
from memcurator.retrieve.dense import dense_topk, hamming_topk, rescore_shortlist  # noqa: E402
from memcurator.store.textcodec import TextCodec  # noqa: E402
from memcurator.store.vectors import sign_code, stored_vector, vector_nbytes  # noqa: E402

# Recall rows: "scan" ranks every stored vector; "Hamming" short-lists by Hamming distance of
# the sign codes; "q·code" by the exact query's inner product with the code's ±1 (binary) or
# -1/0/+1 (ternary, 2 bits a dimension: 128 B at d = 512) values; each short list of L rows is
# then rescored with the exact vectors.


def entries(n: int, tasks: int) -> tuple[list[str], list[str], list[str], list[str]]:
    """(texts, recall texts, queries, task ids): ``n`` distinct SQL-stream entries, pooled
    over seeds."""
    fams = load_families()
    seen: set[str] = set()
    texts, rtexts, queries, tids = [], [], [], []
    seed = 0
    while len(texts) < n:
        rp = replay(build("default" if seed % 2 == 0 else "dml", tasks, seed, fams))
        for w in rp.entries:
            if w.text not in seen and not w.poison:
                seen.add(w.text)
                texts.append(w.text)
                rtexts.append(w.task_text)
                tids.append(f"t{w.step:05d}-{w.family}")
        queries += [q.text for q in rp.queries]
        seed += 1
    return texts[:n], rtexts[:n], queries, tids[:n]


def metas(texts: list[str], tids: list[str]) -> list[str]:
    """The meta JSON of each entry as the bench stores it (module notes)."""
    from memcurator.lifecycle.checks import dedup_key

    rng = np.random.default_rng(0)
    out = []
    for t, tid in zip(texts, tids, strict=True):
        ti = float(rng.choice([4.0, 5.0]))
        m = {"task_id": tid, "family": tid.split("-", 1)[1], "solver": "expert", "pei": 1.0,
             "frr": 1.0, "ti": ti, "text_sha1": dedup_key(t)}  # fmt: skip
        out.append(json.dumps(m, sort_keys=True))
    return out


def parts(texts: list[str], meta: list[str], train: int) -> list[dict]:
    n = len(texts)
    raw = sum(len(t.encode()) for t in texts)
    plain = TextCodec()
    import zstandard

    solo = sum(1 + len(zstandard.ZstdCompressor(level=3).compress(t.encode())) for t in texts)
    t0 = time.perf_counter()
    codec = TextCodec.train(texts[:train])
    t_train = time.perf_counter() - t0
    t0 = time.perf_counter()
    blobs = [codec.encode(t) for t in texts]
    t_enc = (time.perf_counter() - t0) / n
    t0 = time.perf_counter()
    back = [codec.decode(b) for b in blobs]
    t_dec = (time.perf_counter() - t0) / n
    assert back == texts
    meta_raw = sum(len(m) for m in meta)
    # meta and text in one frame (schema v8), the dictionary trained on both
    both = TextCodec.train([m + "\0" + t for m, t in zip(meta[:train], texts[:train], strict=True)])
    one = [both.encode_with_meta(t, m) for t, m in zip(texts, meta, strict=True)]
    one_b = sum(len(b) if b is not None else len(t.encode()) + len(m)
                for b, t, m in zip(one, texts, meta, strict=True))  # fmt: skip
    zd = sum(len(b) for b in blobs)
    dict_b = len(codec.dictionary or b"")
    detail = len(b"expert")
    rows = []
    for vec in ("float32", "int8", "binary"):
        vb = vector_nbytes(512, vec)
        for label, tb, mb, extra in (
            ("text as is", raw, meta_raw, 0),
            ("text zstd alone", solo, meta_raw, 0),
            ("text zstd+dict", zd, meta_raw, dict_b),
            ("text+meta one zstd+dict frame", one_b, 0, len(both.dictionary or b"")),
        ):
            if vec == "int8" and label in ("text zstd alone",):
                continue
            total = vb * n + tb + mb + detail * n + extra
            rows.append({"vectors": vec, "text": label, "vec": vb, "text_b": tb / n,
                         "meta_b": mb / n, "detail": detail, "dict_once": extra,
                         "per_entry": total / n})  # fmt: skip
    print(f"n={n}: zstd dictionary trained on {train} entries in {t_train:.2f} s; "
          f"encode {t_enc * 1e6:.1f} µs, decode {t_dec * 1e6:.1f} µs per entry; raw text "
          f"{raw / n:.0f} B, plain tag {len(plain.encode('x')) - 1} B")  # fmt: skip
    return rows


def recall(rtexts: list[str], queries: list[str], n_q: int, factors: list[int]) -> dict:
    emb = HashingEmbedder()
    t0 = time.perf_counter()
    M = emb.embed_many(rtexts)
    t_embed = (time.perf_counter() - t0) / len(rtexts)
    codes = sign_code(M)
    S = np.where(M > 0, 1.0, -1.0).astype(np.float32)  # what a binary code decodes to (×√d)
    T = np.sign(M).astype(np.float32)  # a 2-bit code keeping zeros: measured, not stored
    rng = np.random.default_rng(1)
    qs = [queries[i] for i in rng.choice(len(queries), min(n_q, len(queries)), replace=False)]
    Q = emb.embed_many(qs)
    k = 10
    out: dict[str, list[float]] = {}
    times: dict[str, list[float]] = {}
    M16 = np.stack([stored_vector(m, "float16") for m in M])
    M8 = np.stack([stored_vector(m, "int8") for m in M])
    for q in Q:
        t0 = time.perf_counter()
        ref, ref_sc = dense_topk(M, q, k)
        times.setdefault("float32 scan", []).append(time.perf_counter() - t0)
        exact = M @ q
        floor = float(ref_sc[-1]) - 1e-6

        def hit(ids: np.ndarray, exact: np.ndarray = exact, floor: float = floor) -> float:
            return min(k, int(np.count_nonzero(exact[ids] >= floor))) / k

        for name, X in (("float16 scan", M16), ("int8 scan", M8)):
            t0 = time.perf_counter()
            ids, _ = dense_topk(X, q, k)
            times.setdefault(name, []).append(time.perf_counter() - t0)
            out.setdefault(name, []).append(hit(ids))
        qc = sign_code(q)
        out.setdefault("binary Hamming only", []).append(hit(hamming_topk(codes, qc, k)))
        signs = {"binary": S, "ternary (not stored)": T}
        for c in factors:
            t0 = time.perf_counter()
            short = hamming_topk(codes, qc, c * k)
            # the exact vectors of the short list: derived from the texts, which is bit for bit
            # M[short] (tests/test_binary_codes.py); taken from M here, the embedding cost is
            # reported per text above
            ids, _ = rescore_shortlist(short, M[short], q, k)
            name = f"binary Hamming L={c}k + rescore"
            times.setdefault(name, []).append(time.perf_counter() - t0)
            out.setdefault(name, []).append(hit(ids))
            for label, X in signs.items():  # asymmetric: the exact query against the codes
                t0 = time.perf_counter()
                short, _ = dense_topk(X, q, c * k)
                ids, _ = rescore_shortlist(short, M[short], q, k)
                name = f"{label} q·code L={c}k + rescore"
                times.setdefault(name, []).append(time.perf_counter() - t0)
                out.setdefault(name, []).append(hit(ids))
    res = {name: (float(np.mean(v)), float(np.median(times.get(name, [np.nan])) * 1e3))
           for name, v in out.items()}  # fmt: skip
    res["float32 scan"] = (1.0, float(np.median(times["float32 scan"]) * 1e3))
    print(f"  hashing embed {t_embed * 1e6:.0f} µs per recall text (the derivation cost per "
          f"entry at load); {len(qs)} queries")  # fmt: skip
    return res


#: (vector precision, compress text) of each real-store configuration.
STORE_CONFIGS = (
    ("float32", False),
    ("int8", False),
    ("binary", False),
    ("int8", True),
    ("binary", True),
)


def _db_parts(store: object, backend: str) -> dict[str, float]:
    """Sums over the namespace's rows, read from the database: vector, text, meta, detail."""
    if backend == "sqlite":
        q = (
            "SELECT SUM(length(embedding)), SUM(length(CAST(text AS BLOB))), SUM(length(meta)), "
            "SUM(length(origin_detail)) FROM entries WHERE namespace='a'"
        )
        row = store._conn.execute(q).fetchone()  # type: ignore[attr-defined]
    else:
        q = (
            "SELECT SUM(CASE vec_dtype WHEN 'float32' THEN 4 * vector_dims(vec) "
            "ELSE octet_length(qvec) END), SUM(octet_length(text) + "
            "COALESCE(octet_length(ztext), 0)), SUM(octet_length(meta)), "
            "SUM(octet_length(origin_detail)) FROM entries WHERE namespace='a'"
        )
        row = store._one(q)  # type: ignore[attr-defined]
    return dict(zip(("vector", "text", "meta", "detail"), map(float, row), strict=True))


def _physical(store: object, backend: str) -> dict[str, float]:
    """What the database holds besides ``b(m)``'s parts, bytes (whole namespace)."""
    if backend == "sqlite":
        c = store._conn  # type: ignore[attr-defined]
        c.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        pages = (
            c.execute("PRAGMA page_count").fetchone()[0]
            - c.execute("PRAGMA freelist_count").fetchone()[0]
        )
        return {"file": float(pages * c.execute("PRAGMA page_size").fetchone()[0])}
    from memcurator.store.pgschema import partition_name

    part = partition_name("a")
    one = store._one  # type: ignore[attr-defined]
    rel = one("SELECT pg_total_relation_size(%s::regclass)", (part,))[0]
    rtsv = one(f"SELECT SUM(pg_column_size(rtsv)), SUM(pg_column_size(metab)) FROM {part}")
    gin = one(
        "SELECT COALESCE(SUM(pg_relation_size(i.indexrelid)), 0) FROM pg_index i JOIN pg_class c "
        "ON c.oid = i.indexrelid WHERE i.indrelid = %s::regclass AND c.relam = "
        "(SELECT oid FROM pg_am WHERE amname = 'gin')",
        (part,),
    )[0]
    return {"partition": float(rel), "rtsv": float(rtsv[0]), "metab": float(rtsv[1]),
            "gin": float(gin)}  # fmt: skip


def store_run(
    backend: str,
    target: str,
    texts: list[str],
    rtexts: list[str],
    queries: list[str],
    n_q: int,
    configs: tuple[tuple[str, bool], ...] = (),
    tids: list[str] | None = None,
) -> list[dict]:
    """Insert the entries into a real store per configuration; parts, bytes, recall@10."""
    from memcurator.embed import HashingEmbedder
    from memcurator.memory import embedder_identity
    from memcurator.store.sizing import default_sizeof
    from memcurator.types import Entry

    emb = HashingEmbedder()
    M = emb.embed_many(rtexts)
    tids = tids or [f"t{i:05d}-unknown" for i in range(len(texts))]
    metas_ = [json.loads(m) for m in metas(texts, tids)]
    rng = np.random.default_rng(1)
    qs = [queries[i] for i in rng.choice(len(queries), min(n_q, len(queries)), replace=False)]
    Q = emb.embed_many(qs)
    out = []
    for dtype, z in configs or STORE_CONFIGS:
        with tempfile.TemporaryDirectory() as tmp:
            if backend == "sqlite":
                from memcurator.store.sqlite import SQLiteStore

                store: object = SQLiteStore(os.path.join(tmp, "b.sqlite"), compress_text=z)
            else:
                import psycopg

                from memcurator.store.postgres import PostgresStore

                db = f"bpe_{dtype}_{int(z)}"
                with psycopg.connect(target, autocommit=True) as c:
                    c.execute(f"DROP DATABASE IF EXISTS {db}")
                    c.execute(f"CREATE DATABASE {db}")
                store = PostgresStore(target.rsplit("/", 1)[0] + "/" + db, compress_text=z)
            st: Any = store
            st.create_namespace("a", embedder=embedder_identity(emb), dim=emb.dim,
                                vector_dtype=dtype)  # fmt: skip
            t0 = time.perf_counter()
            for lo in range(0, len(texts), 500):
                with st.transaction("a"):
                    for i in range(lo, min(lo + 500, len(texts))):
                        meta = metas_[i]
                        codec = st.text_codec("a")
                        b = default_sizeof(texts[i], meta, M[i], dtype, text_codec=codec)
                        st.insert(Entry(f"e{i:06d}", "a", "raw", texts[i], b + 6, b + 6, M[i],
                                        origin_detail="expert", meta=meta))  # fmt: skip
            t_ins = (time.perf_counter() - t0) / len(texts)
            n = st.count("a")
            parts = {k: v / n for k, v in _db_parts(st, backend).items()}
            ent = st.entries("a")
            assert [e.text for e in ent] == texts  # every text back whole
            row = {"backend": backend, "vectors": dtype, "codec": "zstd+dict" if z else "as is",
                   "n": n, **parts, "dict": st.fixed_bytes("a") / n,
                   "b_m": st.used_bytes("a") / n, "insert_ms": t_ins * 1e3,
                   **{k: v / n for k, v in _physical(st, backend).items()}}  # fmt: skip
            sum_parts = sum(parts.values()) + row["dict"]
            assert abs(sum_parts - row["b_m"]) < 1e-6 * n, (sum_parts, row["b_m"])
            if dtype == "binary":
                row.update(_store_recall(st, backend, ent, M, Q))
                if backend == "postgres":
                    row.update(_recall_path(st, M, qs))
            st.close()
            out.append(row)
            print(f"  {backend} {dtype} text {row['codec']}: {row['b_m']:.0f} B/entry")
    return out


def _store_recall(st: Any, backend: str, ent: list, M: np.ndarray, Q: np.ndarray) -> dict:
    """recall@10 of a binary store against float32 exact search, short lists L = 10k, 30k.

    SQLite: codes and texts read back from the store, Hamming short list and exact rescore in
    process (the vectors derived from the store's texts). PostgreSQL: the short list comes from
    the database (``hamming_shortlist``: ``bit`` and ``<~>``, sequential scan: exact) and is
    rescored with vectors derived from the texts it returns (``search_codes``)."""
    from memcurator.embed import HashingEmbedder
    from memcurator.retrieve.hybrid import recall_text

    emb = HashingEmbedder()
    ids_of = {e.id: i for i, e in enumerate(ent)}
    codes = sign_code(np.stack([e.embedding for e in ent]))
    X = emb.embed_many([recall_text(e.text) for e in ent])  # derived, from the store's texts
    out: dict[str, float] = {}
    for c in (10, 30):
        hits, t = [], []
        for q in Q:
            _, ref_sc = dense_topk(M, q, 10)
            exact = M @ q
            t0 = time.perf_counter()
            if backend == "sqlite":
                short = hamming_topk(codes, sign_code(q), c * 10)
                ids, _ = rescore_shortlist(short, X[short], q, 10)
            else:
                got = st.search_codes("a", q, 10, emb.embed_many, shortlist=c * 10, index=False)
                ids = np.array([ids_of[g.id] for g in got])
            t.append(time.perf_counter() - t0)
            floor = float(ref_sc[-1]) - 1e-6
            hits.append(min(10, int(np.count_nonzero(exact[ids] >= floor))) / 10)
        out[f"recall@10 L={c}k"] = float(np.mean(hits))
        out[f"ms L={c}k"] = float(np.median(t) * 1e3)
    return out


def _recall_path(st: Any, M: np.ndarray, qs: list[str]) -> dict:
    """recall@10 of ``Memory.recall`` in the database on the binary namespace (the
    ``recall_in_store`` path: Hamming short list of 10·kc in PostgreSQL, rescored with vectors
    derived from the texts, pool fused with the full-text leg), cosine alone (lexical weight
    0, versions off), sequential scan (``exact``) and HNSW ``bit`` index; against float32
    exact search over the original vectors, ties counted."""
    from memcurator.lifecycle.query import query_vector
    from memcurator.lifecycle.store_recall import StoreRecall

    emb = HashingEmbedder()
    out: dict[str, float] = {}
    for label, exact in (("scan", True), ("hnsw", False)):
        reader = StoreRecall(st, "a", embedder=emb, lexical_weight=0.0, same_request=None,
                             exact=exact)  # fmt: skip
        reader.recall(qs[0], k=10)  # builds the index on first use (not timed)
        ids_of = {e.id: i for i, e in enumerate(st.entries("a"))}
        hits, t = [], []
        for text in qs:
            _, q = query_vector(emb, text)
            _, ref_sc = dense_topk(M, q, 10)
            exact_sc = M @ q
            t0 = time.perf_counter()
            got = reader.recall(text, k=10)
            t.append(time.perf_counter() - t0)
            ids = np.array([ids_of[i] for i in got.ids], dtype=int)
            floor = float(ref_sc[-1]) - 1e-6
            hits.append(min(10, int(np.count_nonzero(exact_sc[ids] >= floor))) / 10)
        out[f"recall@10 Memory path {label}"] = float(np.mean(hits))
        out[f"ms Memory path {label}"] = float(np.median(t) * 1e3)
    print(f"  Memory.recall in the database (binary): {out}")
    return out


def print_store_rows(rows: list[dict]) -> None:
    print("\n| store | vectors | text | vector B | text B | meta B | detail B | dict share B "
          "| **b(m) B/entry** | recall@10 L=10k / 30k (ms/query) | insert ms | not in b(m): "
          "file / partition, rtsv, metab, GIN (B/entry) |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        extra = (f"file {r['file']:.0f}" if "file" in r else
                 f"partition {r['partition']:.0f}, rtsv {r['rtsv']:.0f}, metab {r['metab']:.0f}, "
                 f"GIN {r['gin']:.0f}")  # fmt: skip
        rec = (f"{r['recall@10 L=10k']:.4f} ({r['ms L=10k']:.1f}) / {r['recall@10 L=30k']:.4f} "
               f"({r['ms L=30k']:.1f})" if "recall@10 L=10k" in r else "(exact)"
               if r["vectors"] == "float32" else "-")  # fmt: skip
        print(f"| {r['backend']} | {r['vectors']} | {r['codec']} | {r['vector']:.0f} | "
              f"{r['text']:.0f} | {r['meta']:.0f} | {r['detail']:.0f} | {r['dict']:.1f} | "
              f"**{r['b_m']:.0f}** | {rec} | {r['insert_ms']:.2f} | {extra} |")  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", default="1000,10000")
    ap.add_argument("--queries", type=int, default=500)
    ap.add_argument("--tasks", type=int, default=5000, help="tasks per seed's stream")
    ap.add_argument("--train", type=int, default=256, help="entries the dictionary trains on")
    ap.add_argument("--factors", default="4,10,30")
    ap.add_argument("--cache", help="JSON file keeping the pooled entries between runs")
    ap.add_argument("--stores", default="", help="real stores to measure: sqlite,postgres")
    ap.add_argument("--pg-url", help="a PostgreSQL server to use (default: start a local one)")
    ap.add_argument("--configs", default="", help="real-store configurations, e.g. "
                    "float32:off,binary:zstd (default: all of STORE_CONFIGS)")  # fmt: skip
    a = ap.parse_args()
    sizes = [int(x) for x in a.n.split(",")]
    t0 = time.perf_counter()
    cached = None
    if a.cache and os.path.exists(a.cache):
        with open(a.cache) as f:
            cached = json.load(f)
    if cached is not None and len(cached) == 4 and len(cached[0]) >= max(sizes):
        texts, rtexts, queries, tids = cached
    else:  # (a cache of an older version of this script holds no task ids: made again)
        texts, rtexts, queries, tids = entries(max(sizes), a.tasks)
        if a.cache:
            with open(a.cache, "w") as f:
                json.dump([texts, rtexts, queries, tids], f)
    print(f"{len(texts)} distinct entries from the SQL streams in {time.perf_counter() - t0:.0f} s")
    meta = metas(texts, tids)
    if a.stores:
        configs = tuple(
            (c.split(":")[0], c.split(":")[1] == "zstd") for c in a.configs.split(",") if c
        )
        rows: list[dict] = []
        for backend in a.stores.split(","):
            for n in sizes:
                if backend == "postgres" and not a.pg_url:
                    from memcurator.store.pglocal import LocalPostgres

                    with LocalPostgres() as pg:
                        rows += store_run(backend, pg.url, texts[:n], rtexts[:n], queries,
                                          a.queries, configs, tids[:n])  # fmt: skip
                else:
                    rows += store_run(backend, a.pg_url or "", texts[:n], rtexts[:n], queries,
                                      a.queries, configs, tids[:n])  # fmt: skip
        print_store_rows(rows)
        return
    for n in sizes:
        print(f"\n## n = {n}")
        print("| vectors | text / meta | vec B | text B | meta B | detail B | dict B (once) "
              "| B/entry |")  # fmt: skip
        print("|---|---|---|---|---|---|---|---|")
        for r in parts(texts[:n], meta[:n], min(a.train, n)):
            print(f"| {r['vectors']} | {r['text']} | {r['vec']} | {r['text_b']:.0f} | "
                  f"{r['meta_b']:.0f} | {r['detail']} | {r['dict_once']:,} | "
                  f"{r['per_entry']:.0f} |")  # fmt: skip
        res = recall(rtexts[:n], queries, a.queries, [int(x) for x in a.factors.split(",")])
        print("\n| search | recall@10 vs float32 exact | ms/query (median) |")
        print("|---|---|---|")
        for name, (r, ms) in res.items():
            print(f"| {name} | {r:.4f} | {ms:.2f} |")


if __name__ == "__main__":
    main()
