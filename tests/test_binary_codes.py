"""The binary precision: sign codes stored, exact vectors derived again from the text."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from memcurator import Memory
from memcurator.cli import app
from memcurator.embed import HashingEmbedder
from memcurator.errors import InvalidInput
from memcurator.memory import embedder_identity
from memcurator.retrieve.dense import dense_topk, hamming_topk, rescore_shortlist
from memcurator.retrieve.hybrid import recall_text
from memcurator.store import schema
from memcurator.store.reembed import reembed
from memcurator.store.sqlite import SQLiteStore
from memcurator.store.vectors import decode, derive_checked, encode, sign_code

TABLES = ["orders", "payments", "members", "loans", "books", "rooms"]


def _text(i: int) -> str:
    t = TABLES[i % len(TABLES)]
    return (
        f"Task: List the {t} of customer {i} created after day {i % 17}\n"
        f"Observation: {t}(id, customer, day)\n"
        f"Action: SELECT * FROM {t} WHERE customer = {i} AND day > {i % 17};"
    )


QUERIES = [
    "list the orders of customer 12",
    "which payments did customer 7 make after day 3",
    "rooms of customer 40",
    "books created after day 9",
]


class _Unsure(HashingEmbedder):
    """A hashing embedder that does not claim determinism (as a model embedder would not)."""

    deterministic = False


class _Noisy(HashingEmbedder):
    """Claims determinism but is not: each call flips the sign of a few non-zero coordinates,
    how many depending on how many calls this instance made before (from ``start``)."""

    def __init__(self, start: int = 0) -> None:
        super().__init__()
        self.calls = start

    def embed(self, text: str) -> np.ndarray:
        v = super().embed(text)
        self.calls += 1
        v[np.flatnonzero(v)[: self.calls % 5 + 1]] *= -1
        return v


def _fill(url: str, dtype: str, n: int = 60) -> Memory:
    mem = Memory(url, policy="keep-all", vector_dtype=dtype)
    for i in range(n):
        mem.write(_text(i), meta={"family": f"f{i % 6}"})
    return mem


def _recalls(mem: Memory) -> list[list[tuple[str, float]]]:
    out = []
    for q in QUERIES:
        r = mem.recall(q, k=10)
        pairs = zip(r.entries, r.scores, strict=True)
        out.append([(m.text, round(float(s), 12)) for m, s in pairs])
    return out


def _same_as_float32(tmp_path: Path, make_url) -> None:
    ref = _fill(make_url("f32"), "float32")
    want_matrix, want = ref.matrix, _recalls(ref)
    used32 = ref.used_bytes
    ref.close()
    mem = _fill(make_url("bin"), "binary")
    assert mem.used_bytes == used32 - 60 * (2048 - 64)  # the vector part only shrinks
    np.testing.assert_array_equal(mem.matrix, want_matrix)  # the writing handle
    assert _recalls(mem) == want
    mem.close()
    again = Memory(make_url("bin"), policy="keep-all")  # reopened: derived from the texts
    assert again.vector_dtype == "binary"
    np.testing.assert_array_equal(again.matrix, want_matrix)
    assert _recalls(again) == want
    again.close()


def test_binary_namespace_recalls_as_float32_sqlite(tmp_path: Path) -> None:
    _same_as_float32(tmp_path, lambda name: str(tmp_path / f"{name}.db"))


def test_binary_namespace_recalls_as_float32_postgres(pg_url: str) -> None:
    from memcurator.store.postgres import PostgresStore

    # one database, one namespace a precision
    ref = Memory(pg_url, namespace="f32", policy="keep-all", vector_dtype="float32")
    mem = Memory(pg_url, namespace="bin", policy="keep-all", vector_dtype="binary")
    for i in range(40):
        ref.write(_text(i))
        mem.write(_text(i))
    assert _recalls(mem) == _recalls(ref)
    want = ref.matrix
    ref.close()
    mem.close()
    st = PostgresStore(pg_url)
    assert st.namespace("bin").vector_dtype == "binary"
    assert {len(encode(m.embedding, "binary")) for m in st.entries("bin")} == {64}
    st.close()
    again = Memory(pg_url, namespace="bin", policy="keep-all")
    np.testing.assert_array_equal(again.matrix, want)
    again.close()


def test_non_deterministic_embedder_is_refused_and_nothing_created(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    with pytest.raises(InvalidInput, match="deterministic embedder"):
        Memory(str(path), policy="keep-all", vector_dtype="binary", embedder=_Unsure())
    st = SQLiteStore(path)
    assert [n.name for n in st.namespace_stats()] == []
    st.close()
    Memory(str(path), policy="keep-all", vector_dtype="int8", embedder=_Unsure()).close()


def test_embedder_that_lies_about_determinism_is_caught_on_load(tmp_path: Path) -> None:
    path = str(tmp_path / "s.db")
    emb = _Noisy()
    mem = Memory(path, policy="keep-all", vector_dtype="binary", embedder=emb)
    for i in range(5):
        mem.write(_text(i))
    mem.close()
    with pytest.raises(InvalidInput, match="differs from the stored binary code"):
        Memory(path, policy="keep-all", embedder=_Noisy(start=1))


def test_derive_checked_names_the_entry_and_the_count() -> None:
    e = HashingEmbedder().embed("count the rows")
    code = decode(encode(e, "binary"), "binary")
    np.testing.assert_array_equal(derive_checked(code, e), e)
    f = e.copy()
    f[np.flatnonzero(f)[:3]] *= -1
    with pytest.raises(InvalidInput, match=r"entry 'x1'.* 3 of 512"):
        derive_checked(code, f, "x1")


@pytest.mark.parametrize("d", [4, 12, 100])
def test_binary_needs_a_dimension_divisible_by_8(d: int) -> None:
    with pytest.raises(InvalidInput, match="divisible by 8"):
        encode(np.ones(d, dtype=np.float32), "binary")


def test_codes_round_trip_and_copy_exactly() -> None:
    rng = np.random.default_rng(3)
    for d in (8, 64, 384, 512):
        e = rng.normal(size=d).astype(np.float32)
        blob = encode(e, "binary")
        assert len(blob) == d // 8
        back = decode(blob, "binary", d)
        assert encode(back, "binary") == blob  # a copy of a decoded row keeps the code
        np.testing.assert_array_equal(sign_code(e), np.frombuffer(blob, dtype=np.uint8))


def test_v3_file_migrates_and_converts_to_binary_and_back(tmp_path: Path) -> None:
    path = tmp_path / "v3.db"
    con = sqlite3.connect(path, isolation_level=None)
    for v in (1, 2, 3):
        for stmt in str(schema.MIGRATIONS[v]).split(";\n"):
            if stmt.strip():
                con.execute(stmt)
    con.execute("PRAGMA user_version=3")
    con.close()
    mem = Memory(str(path), policy="keep-all")  # a v3 file, float32 by default
    for i in range(12):
        mem.write(_text(i))
    want, used = mem.matrix, mem.used_bytes
    want_recall = _recalls(mem)
    mem.close()
    assert SQLiteStore(path).schema_version() == schema.SCHEMA_VERSION
    emb = HashingEmbedder()
    st = SQLiteStore(path)
    r = reembed(st, "default", emb.embed, embedder_identity(emb), 512, vector_dtype="binary")
    assert r.finished and r.reembedded == 12
    st.close()
    mem = Memory(str(path), policy="keep-all")
    assert mem.vector_dtype == "binary" and mem.used_bytes == used - 12 * (2048 - 64)
    np.testing.assert_array_equal(mem.matrix, want)
    assert _recalls(mem) == want_recall
    mem.close()
    res = CliRunner().invoke(
        app, ["reembed", str(path), "--namespace", "default", "--vector-dtype", "float32"]
    )
    assert res.exit_code == 0, res.output
    mem = Memory(str(path), policy="keep-all")
    assert mem.vector_dtype == "float32" and mem.used_bytes == used
    np.testing.assert_array_equal(mem.matrix, want)  # exact again
    mem.close()


def test_sqlite_schema_still_refuses_unknown_precisions(tmp_path: Path) -> None:
    st = SQLiteStore(tmp_path / "s.db")
    with pytest.raises(sqlite3.IntegrityError):
        st._conn.execute(
            "INSERT INTO namespaces(name, embedder, dim, created_at, vector_dtype) "
            "VALUES ('x', 'e', 8, 0, 'int4')"
        )
    st.close()


def test_hamming_short_list_then_exact_rescore() -> None:
    emb = HashingEmbedder()
    texts = [recall_text(_text(i)) for i in range(300)]
    M = emb.embed_many(texts)
    codes = sign_code(M)
    rng = np.random.default_rng(0)
    for q in QUERIES + [texts[i] for i in rng.choice(300, 5, replace=False)]:
        e = emb.embed(q)
        short = hamming_topk(codes, sign_code(e), 300)
        assert sorted(short.tolist()) == list(range(300))  # L = n: every row
        ids, s = rescore_shortlist(short, M[short], e, 10)
        ref_ids, ref_s = dense_topk(M, e, 10)
        np.testing.assert_allclose(s, ref_s)  # a full short list is exact search
        assert set(ids.tolist()) == set(ref_ids.tolist()) or np.allclose(s, ref_s)
    # brute-force Hamming distances agree
    q = sign_code(emb.embed(QUERIES[0]))
    dist = np.array([bin(int.from_bytes((c ^ q).tobytes(), "little")).count("1") for c in codes])
    short = hamming_topk(codes, q, 20)
    assert sorted(dist[short].tolist()) == sorted(dist.tolist())[:20]
    assert list(dist[short]) == sorted(dist[short])


def test_copy_keeps_the_codes_and_the_derived_vectors(tmp_path: Path) -> None:
    src, dst = str(tmp_path / "a.db"), str(tmp_path / "b.db")
    mem = _fill(src, "binary", n=20)
    want = mem.matrix
    mem.close()
    res = CliRunner().invoke(app, ["copy", src, dst])
    assert res.exit_code == 0, res.output
    a, b = SQLiteStore(src), SQLiteStore(dst)
    blobs = [
        [bytes(r[0]) for r in s._conn.execute("SELECT embedding FROM entries ORDER BY id")]
        for s in (a, b)
    ]
    assert blobs[0] == blobs[1] and {len(x) for x in blobs[0]} == {64}
    a.close()
    b.close()
    again = Memory(dst, policy="keep-all")
    assert again.vector_dtype == "binary"
    np.testing.assert_array_equal(again.matrix, want)
    again.close()
