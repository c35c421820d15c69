"""Stored vector precision per namespace (float32 default, float16, int8 + scale): round trip,
bytes counted as stored, budget, schema v2 -> v3 migration, conversion, recall, bench."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from memcurator import Memory
from memcurator.bench.results import config_clash
from memcurator.bench.runner import BenchConfig
from memcurator.cli import app
from memcurator.embed import HashingEmbedder
from memcurator.errors import InvalidInput
from memcurator.memory import embedder_identity
from memcurator.retrieve.hybrid import recall_text
from memcurator.store import schema
from memcurator.store.reembed import reembed
from memcurator.store.rowlogic import TRUST_COLS, trust_from_row
from memcurator.store.sizing import default_sizeof, stats_bytes
from memcurator.store.sqlite import SQLiteStore
from memcurator.store.vectors import (
    VECTOR_DTYPES,
    decode,
    encode,
    stored_vector,
    vector_nbytes,
)

runner = CliRunner()
DTYPES = list(VECTOR_DTYPES)


def _text(i: int) -> str:
    tables = ["orders", "members", "payments", "books", "rooms", "flights", "staff", "items"]
    cols = ["amount", "name", "city", "price", "status", "year"]
    t, c = tables[i % len(tables)], cols[(i // len(tables)) % len(cols)]
    return f"Task: list the {c} of {t} where id is {i}\nAction: SELECT {c} FROM {t} WHERE id={i};"


def _rows(path: Path, ns: str) -> list[tuple]:
    con = sqlite3.connect(path)
    try:
        return con.execute(
            "SELECT length(embedding), length(CAST(text AS BLOB)), meta, origin_detail, bytes, "
            f"vec_dtype, stats, {TRUST_COLS} FROM entries WHERE namespace=?",
            (ns,),
        ).fetchall()
    finally:
        con.close()


def _assert_bytes_as_stored(path: Path, ns: str, dtype: str) -> None:
    """Every entry's accounted bytes = its BLOB + UTF-8 text + meta JSON (its trust state's
    columns counted as the keys they were in meta before schema v6) + origin detail + the
    statistics it was written with (a received entry's advertised q)."""
    rows = _rows(path, ns)
    assert rows
    for blob, text, meta, detail, nbytes, row_dtype, stats, *trust in rows:
        assert row_dtype == dtype
        assert blob == vector_nbytes(512, dtype)
        extra = stats_bytes(json.loads(stats))
        flat = {**json.loads(meta), **trust_from_row(trust).legacy()}
        mb = len(json.dumps(flat, sort_keys=True))
        assert nbytes == blob + text + mb + len(detail.encode("utf-8")) + extra


# ---------------------------------------------------------------------------- encoding
@pytest.mark.parametrize("dtype", DTYPES)
def test_round_trip_error_bounds(dtype: str) -> None:
    rng = np.random.default_rng(0)
    for _ in range(50):
        e = rng.normal(size=512).astype(np.float32)
        e /= np.linalg.norm(e)
        blob = encode(e, dtype)
        assert len(blob) == vector_nbytes(512, dtype)
        back = decode(blob, dtype, 512)
        assert back.dtype == np.float32 and back.shape == (512,)
        err = float(np.abs(back - e).max())
        if dtype == "float32":
            assert err == 0.0 and blob == e.tobytes()  # the pre-v3 layout, byte for byte
        elif dtype == "float16":
            assert err <= 1e-3
        elif dtype == "binary":  # the code keeps signs only; the handle derives the exact vector
            np.testing.assert_array_equal(back > 0, e > 0)
            np.testing.assert_allclose(np.abs(back), 512**-0.5, rtol=1e-6)
            assert stored_vector(e, dtype) is e
            continue
        else:
            s = float(np.abs(e).max()) / 127
            assert err <= s / 2 + 1e-7
            assert np.frombuffer(blob[:4], dtype="<f4")[0] == np.float32(s)
        np.testing.assert_array_equal(stored_vector(e, dtype), back)


def test_int8_zero_vector_has_scale_zero_and_no_division() -> None:
    with np.errstate(all="raise"):
        blob = encode(np.zeros(16, dtype=np.float32), "int8")
        assert blob[:4] == b"\0\0\0\0" and len(blob) == 20
        assert not np.any(decode(blob, "int8", 16))


def test_unknown_dtype_and_bad_blobs_are_refused() -> None:
    for call in (
        lambda: encode(np.ones(4), "bfloat16"),
        lambda: vector_nbytes(4, "float64"),
        lambda: Memory(vector_dtype="float64"),
        lambda: BenchConfig(policies=["lru"], vector_dtype="int4"),
    ):
        known = r"known: \['float32', 'float16', 'int8', 'binary'\]"
        with pytest.raises(InvalidInput, match=known):
            call()
    with pytest.raises(InvalidInput, match="does not fit float16 of dim 4"):
        decode(b"\0" * 6, "float16", 4)
    with pytest.raises(InvalidInput, match="float16's range"):
        encode(np.array([7e4, 1.0]), "float16")
    with pytest.raises(InvalidInput, match="rounds to the zero vector"):
        stored_vector(np.array([1e-9, 0.0]), "float16")


class _Fixed:
    """An embedder returning one given vector."""

    def __init__(self, v: np.ndarray):
        self.v, self.dim, self.name = v, len(v), f"fixed-{len(v)}"

    def embed(self, text: str) -> np.ndarray:
        return self.v


@pytest.mark.parametrize("dtype", ["float16", "int8"])
def test_nan_and_zero_vectors_are_still_refused(dtype: str) -> None:
    for v, msg in ((np.zeros(8), "zero vector"), (np.full(8, np.nan), "NaN")):
        mem = Memory(policy="keep-all", embedder=_Fixed(v.astype(np.float32)), vector_dtype=dtype)
        with pytest.raises(InvalidInput, match=msg):
            mem.write("Task: anything at all\nAction: SELECT 1;")
        assert len(mem) == 0


# ---------------------------------------------------------------------------- accounting
@pytest.mark.parametrize("dtype", DTYPES)
def test_bytes_counted_are_the_bytes_stored(tmp_path: Path, dtype: str) -> None:
    path = tmp_path / "s.db"
    mem = Memory(str(path), policy="keep-all", vector_dtype=dtype)
    ids = [mem.write(_text(i), meta={"family": f"f{i % 3}"}, origin_detail="expert").id
           for i in range(6)]  # fmt: skip
    mem.update(ids[0], _text(100) + " -- corrected")
    mem.write(_text(1))  # a reinforcement changes no bytes
    _assert_bytes_as_stored(path, "default", dtype)
    assert mem.used_bytes == sum(r[4] for r in _rows(path, "default"))
    for m in mem.entries():  # the resident vector is the stored one (binary: its signs)
        back = decode(encode(m.embedding, dtype), dtype)
        if dtype == "binary":
            np.testing.assert_array_equal(back > 0, m.embedding > 0)
        else:
            np.testing.assert_array_equal(m.embedding, back)
    mem.close()
    again = Memory(str(path), policy="keep-all")  # omitted: the namespace keeps its precision
    assert again.vector_dtype == dtype
    assert again.entry_bytes("abc", {}, np.ones(512)) == default_sizeof(
        "abc", {}, np.ones(512), dtype
    )
    again.close()


def test_default_sizeof_counts_512d_hashing_vector_as_stored() -> None:
    e = HashingEmbedder().embed("count rows")
    base = default_sizeof("t", {}, e) - 2048
    assert [default_sizeof("t", {}, e, d) - base for d in DTYPES] == [2048, 1024, 516, 64]


@pytest.mark.parametrize("dtype", ["float16", "int8"])
def test_import_and_receive_count_the_stored_bytes(tmp_path: Path, dtype: str) -> None:
    import io

    from memcurator.policy.share import SharedEntry
    from memcurator.portable import export_namespace, import_namespace

    src = Memory(policy="keep-all")
    for i in range(4):
        src.write(_text(i))
    buf = io.StringIO()
    export_namespace(src, buf)
    path = tmp_path / "d.db"
    dst = Memory(str(path), namespace="copy", policy="keep-all", vector_dtype=dtype)
    assert len(import_namespace(dst, io.StringIO(buf.getvalue())).admitted) == 4
    _assert_bytes_as_stored(path, "copy", dtype)
    peer = Memory(str(path), namespace="peer", policy="curator", vector_dtype=dtype)
    shared = SharedEntry(
        text=_text(9), kind="insight", bytes=900, q=0.5, a=1.0, rho_s=0.1, source_id="s1"
    )
    got = peer.receive([shared], peer="p1")
    assert got[0].admitted, got[0].reason
    _assert_bytes_as_stored(path, "peer", dtype)


def test_budget_holds_more_entries_and_the_log_is_complete() -> None:
    held = {}
    for dtype in DTYPES:
        mem = Memory(policy="lru", max_bytes=20_000, vector_dtype=dtype)
        admitted = []
        for i in range(60):
            r = mem.write(_text(i))
            assert r.admitted
            admitted.append(r.id)
        assert mem.used_bytes <= 20_000
        resident = {m.id for m in mem.entries()}
        evicted = {d.entry_id for d in mem.decisions(action="evict")}
        assert resident | evicted == set(admitted) and not resident & evicted
        log_bytes = {d.entry_id: d.bytes for d in mem.decisions(action="admit")}
        assert all(log_bytes[m.id] == m.bytes for m in mem.entries())
        held[dtype] = len(resident)
    assert held["float32"] < held["float16"] < held["int8"]
    assert held["int8"] >= 1.8 * held["float32"]


def test_asking_another_dtype_of_an_existing_namespace_names_the_conversion(
    tmp_path: Path,
) -> None:
    path = str(tmp_path / "s.db")
    Memory(path, vector_dtype="float16").close()
    with pytest.raises(InvalidInput, match="memcurator reembed .* --vector-dtype int8"):
        Memory(path, vector_dtype="int8")
    Memory(path, vector_dtype="float16").close()  # the same one is fine


# ---------------------------------------------------------------------------- migration
def _v2_store(path: Path) -> tuple[list[str], np.ndarray]:
    """A file as memcurator wrote it at schema v2: one namespace, float32 BLOBs."""
    emb = HashingEmbedder()
    con = sqlite3.connect(path, isolation_level=None)
    for v in (1, 2):
        for stmt in schema.MIGRATIONS[v].split(";\n"):
            if stmt.strip():
                con.execute(stmt)
    con.execute("PRAGMA user_version=2")
    con.execute(
        "INSERT INTO namespaces(name, embedder, dim, max_bytes, created_at) VALUES (?,?,?,?,?)",
        ("old", embedder_identity(emb), 512, 50_000, 0.0),
    )
    texts, vecs = [_text(i) for i in range(5)], []
    for i, t in enumerate(texts):
        e = emb.embed(recall_text(t)).astype(np.float32)
        vecs.append(e)
        meta = json.dumps({"text_sha1": f"k{i}"}, sort_keys=True)
        b = len(t.encode()) + len(meta) + e.nbytes
        con.execute(
            "INSERT INTO entries(id, namespace, kind, text, bytes, raw_bytes, embedding, origin, "
            "meta) VALUES (?,?,?,?,?,?,?,?,?)",
            (f"e{i}", "old", "insight", t, b, b, e.tobytes(), "self", meta),
        )
    con.close()
    return texts, np.stack(vecs)


def test_v2_file_opens_read_only_and_migrates_losing_nothing(tmp_path: Path) -> None:
    path = tmp_path / "v2.db"
    texts, vecs = _v2_store(path)
    ro = SQLiteStore(path, readonly=True)  # the CLI's reading commands: no migration
    assert ro.schema_version() == 2 and ro.namespace("old").vector_dtype == "float32"
    np.testing.assert_array_equal(np.stack([m.embedding for m in ro.entries("old")]), vecs)
    assert ro.namespace_stats()[0].vector_dtype == "float32"
    ro.close()
    before = _rows_v2(path)
    mem = Memory(str(path), namespace="old", policy="keep-all")
    assert mem.store.schema_version() == schema.SCHEMA_VERSION
    assert mem.vector_dtype == "float32"
    assert [m.text for m in mem.entries()] == texts
    np.testing.assert_array_equal(mem.matrix, vecs)
    assert mem.used_bytes == sum(b for _, b in before)
    mem.close()
    assert _rows_v2(path) == before  # BLOBs and bytes untouched
    assert {r[5] for r in _rows(path, "old")} == {"float32"}


def _rows_v2(path: Path) -> list[tuple[bytes, int]]:
    con = sqlite3.connect(path)
    try:
        return con.execute("SELECT embedding, bytes FROM entries ORDER BY rowid").fetchall()
    finally:
        con.close()


def test_reembed_converts_precision_resumably(tmp_path: Path) -> None:
    path = tmp_path / "v2.db"
    texts, vecs = _v2_store(path)
    store = SQLiteStore(path)
    emb = HashingEmbedder()
    ident = embedder_identity(emb)
    used = store.used_bytes("old")
    r = reembed(store, "old", emb.embed, ident, 512, batch=2, max_batches=1,
                vector_dtype="int8")  # fmt: skip
    assert (r.reembedded, r.finished) == (2, False)
    assert store.namespace("old").vector_dtype == "float32"  # not until every entry is done
    assert len(store.entries("old")) == 5  # mixed rows stay readable
    with pytest.raises(InvalidInput, match="being re-embedded"):
        reembed(store, "old", emb.embed, ident, 512, vector_dtype="float16")
    r = reembed(store, "old", emb.embed, ident, 512)  # resumes the conversion in progress
    assert r.finished and store.namespace("old").vector_dtype == "int8"
    assert store.used_bytes("old") == used - 5 * (2048 - 516)
    got = np.stack([m.embedding for m in store.entries("old")])
    assert np.abs(got - vecs).max() <= np.abs(vecs).max() / 127 / 2 + 1e-7
    assert "vectors float32 -> int8" in store.decisions("old", action="update")[-1].reason
    store.close()
    _assert_bytes_as_stored(path, "old", "int8")
    mem = Memory(str(path), namespace="old", policy="keep-all", vector_dtype="int8")
    assert mem.write(_text(42)).admitted
    mem.close()
    back = SQLiteStore(path)  # and back to float32: recomputed from the text, exact
    assert reembed(back, "old", emb.embed, ident, 512, vector_dtype="float32").finished
    np.testing.assert_array_equal(np.stack([m.embedding for m in back.entries("old")][:5]), vecs)
    back.close()
    _assert_bytes_as_stored(path, "old", "float32")


def test_cli_reembed_and_namespaces_show_the_precision(tmp_path: Path) -> None:
    path = tmp_path / "v2.db"
    _v2_store(path)
    res = runner.invoke(app, ["reembed", str(path), "--namespace", "old",
                              "--vector-dtype", "float16"])  # fmt: skip
    assert res.exit_code == 0, res.output
    assert "re-embedded 5 of 5" in res.output
    res = runner.invoke(app, ["namespaces", str(path), "--json"])
    assert json.loads(res.output.splitlines()[0])["vector_dtype"] == "float16"
    res = runner.invoke(app, ["namespaces", str(path)], env={"COLUMNS": "120"})
    assert "float16" in res.stdout
    res = runner.invoke(app, ["reembed", str(path), "--namespace", "old",
                              "--vector-dtype", "float64"])  # fmt: skip
    assert res.exit_code != 0 and "known" in res.output


# ---------------------------------------------------------------------------- recall
def test_recall_top1_unchanged_across_precisions() -> None:
    rng = np.random.default_rng(1)
    queries = []
    for _ in range(40):  # paraphrased requests with other literals
        i = int(rng.integers(0, 48))
        t, c = _text(i).split(" FROM ")[1].split()[0], _text(i).split("SELECT ")[1].split()[0]
        queries.append(
            (f"show me the {c} stored in {t} for record {int(rng.integers(200, 999))}", i)
        )
    top = {}
    for dtype in DTYPES:
        mem = Memory(policy="keep-all", vector_dtype=dtype)
        for i in range(48):
            mem.write(_text(i))
        top[dtype] = [mem.recall(q, k=1).entries[0].text for q, _ in queries]
    hits = sum(top["float32"][n] == _text(i) for n, (_, i) in enumerate(queries))
    assert hits >= 30  # the set is a real recall task, not a tie everywhere
    assert top["float16"] == top["float32"]
    assert top["int8"] == top["float32"]


# ---------------------------------------------------------------------------- bench
def test_fake_bench_at_float16_records_bytes_per_entry(tmp_path: Path) -> None:
    outs = {}
    for dtype in ("float32", "float16"):
        out = tmp_path / dtype
        res = runner.invoke(
            app,
            ["bench", "--executor", "fake", "--tasks", "14", "--families", "6",
             "--policies", "lru,keep-all", "--max-bytes", "12k", "--vector-dtype", dtype,
             "--out", str(out)],
        )  # fmt: skip
        assert res.exit_code == 0, res.output
        outs[dtype] = out
    doc = json.loads((outs["float16"] / "summary.json").read_text())
    assert doc["config"]["vector_dtype"] == "float16"
    for r in doc["runs"]:
        assert r["entry_vec_b"] == 1024.0
        parts = r["entry_text_b"] + r["entry_meta_b"] + r["entry_vec_b"] + r["entry_detail_b"]
        assert parts == pytest.approx(r["entry_total_b"])
        assert 0 < r["vec_share"] < 0.6
    f32 = json.loads((outs["float32"] / "summary.json").read_text())["runs"]
    f32 = {r["policy"]: r for r in f32}
    assert all(r["entry_total_b"] < f32[r["policy"]]["entry_total_b"] for r in doc["runs"])
    res = runner.invoke(app, ["report", str(outs["float32"]), str(outs["float16"])])
    assert res.exit_code != 0 and "vector_dtype" in res.output


def test_folders_without_vector_dtype_ran_at_float32() -> None:
    old, new16, new32 = {"tasks": 5}, {"tasks": 5, "vector_dtype": "float16"}, {
        "tasks": 5, "vector_dtype": "float32"}  # fmt: skip
    assert config_clash([(Path("a"), old), (Path("b"), new32)]) == ""
    assert "vector_dtype" in config_clash([(Path("a"), old), (Path("b"), new16)])


def test_peer_bench_config_checks_the_precision() -> None:
    from memcurator.bench.peers import PeerConfig

    assert PeerConfig(vector_dtype="int8").vector_dtype == "int8"
    with pytest.raises(InvalidInput, match="known"):
        PeerConfig(vector_dtype="half")
