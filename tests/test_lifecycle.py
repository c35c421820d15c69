"""Lifecycle stages apart from the facade, and the defects found from outside (issue item 8):
unknown feedback ids, ``policy=None``, a damaged store file, the budget a policy sees, the one
forget path."""

from __future__ import annotations

import ast
import sqlite3
from pathlib import Path

import pytest
from typer.testing import CliRunner

import memcurator.lifecycle as lifecycle_pkg
from memcurator import Memory
from memcurator.embed import HashingEmbedder
from memcurator.errors import EntryNotFound, InvalidInput, StoreError
from memcurator.lifecycle.context import Scope
from memcurator.lifecycle.forget import forget
from memcurator.store.sqlite import SQLiteStore

EMB = HashingEmbedder(dim=64)


def _text(i: int) -> str:
    return f"Task: count the orders of customer {i}\nAction: SELECT COUNT(*) FROM o WHERE c={i};"


# --------------------------------------------------------------------------- feedback ids
def test_feedback_on_ids_never_seen_raises_and_changes_nothing() -> None:
    mem = Memory(policy="curator", max_bytes=None, embedder=EMB)
    eid = mem.write(_text(1)).id
    assert eid is not None
    before = (mem.get(eid).uses, len(mem.decisions()), mem.step)
    with pytest.raises(EntryNotFound, match="deadbeef"):
        mem.feedback(["deadbeef"], 1.0)
    with pytest.raises(EntryNotFound, match="never|ever"):
        mem.feedback([eid, "deadbeef"], 1.0)  # one unknown id: nothing is updated
    assert (mem.get(eid).uses, len(mem.decisions()), mem.step) == before


def test_feedback_skips_ids_evicted_or_forgotten_since() -> None:
    mem = Memory(policy="lru", max_bytes=None, embedder=EMB)
    ids = [mem.write(_text(i)).id for i in range(3)]
    assert all(ids)
    mem.forget(ids[0])
    mem.max_bytes = mem.get(ids[2]).bytes  # only the newest fits
    assert ids[1] in mem.govern().evicted
    mem.feedback(ids, 1.0)  # the forgotten and the evicted ids are skipped
    assert mem.get(ids[2]).uses == 1 and mem.get(ids[2]).successes == 1


def test_feedback_from_another_namespace_is_unknown(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "s.sqlite")
    a = Memory(store=store, namespace="a", policy="lru", embedder=EMB)
    b = Memory(store=store, namespace="b", policy="lru", embedder=EMB)
    rb = b.write(_text(9))
    a.write(_text(1))
    with pytest.raises(EntryNotFound):
        a.feedback(b.recall("orders of customer 9", k=1), 1.0)
    assert rb.id is not None and b.get(rb.id).uses == 0


# --------------------------------------------------------------------------- options
def test_policy_none_is_invalid_input_not_attribute_error() -> None:
    with pytest.raises(InvalidInput, match="policy is None"):
        Memory(policy=None)  # type: ignore[arg-type]


def test_library_hands_the_byte_budget_to_the_policy() -> None:
    budget = 200_000
    mem = Memory(policy="tokenworth/bytes-capacity", max_bytes=budget, embedder=EMB)
    r = mem.write(_text(1))
    assert r.admitted and r.id is not None
    worth = mem.policy.estimator("worth")  # type: ignore[attr-defined]
    assert worth.bank_capacity() == budget // mem.get(r.id).bytes  # not the default 64
    again = Memory(policy="tokenworth/bytes-capacity", max_bytes=None, embedder=EMB)
    again.write(_text(1))
    assert again.policy.estimator("worth").bank_capacity() == 64  # type: ignore[attr-defined]


# --------------------------------------------------------------------------- damaged file
def test_corrupt_pages_raise_store_error(tmp_path: Path) -> None:
    p = tmp_path / "damaged.sqlite"
    mem = Memory(str(p), policy="keep-all", embedder=EMB)
    for i in range(200):
        mem.write(_text(i) + " padding" * 20)
    mem.close()
    size = p.stat().st_size
    assert size > 16 * 4096
    with p.open("r+b") as fh:  # keep the header page, damage the middle of the file
        fh.seek(size // 2)
        fh.write(b"\xa5" * 8 * 4096)
    with pytest.raises(StoreError, match="damaged|malformed|not a database"):
        s = SQLiteStore(p)
        s.entries("default")
    with pytest.raises(StoreError):
        Memory(str(p), policy="keep-all", embedder=EMB).entries()
    with pytest.raises(StoreError):
        SQLiteStore(p, readonly=True).entries("default")
    assert not issubclass(StoreError, sqlite3.DatabaseError)


# --------------------------------------------------------------------------- forget path
def test_cli_forget_takes_the_library_path(tmp_path: Path) -> None:
    from memcurator.cli import app

    p = tmp_path / "f.sqlite"
    mem = Memory(str(p), namespace="n", policy="lru", embedder=EMB)
    eid = mem.write(_text(5)).id
    mem.write(_text(6))
    mem.close()
    res = CliRunner().invoke(app, ["forget", str(p), str(eid), "--namespace", "n"])
    assert res.exit_code == 0, res.output
    s = SQLiteStore(p)
    assert s.count("n") == 1
    tomb = s.decisions("n", action="forget")
    assert [(d.entry_id, d.policy) for d in tomb] == [(eid, "lru")]  # the namespace's policy
    assert b"customer 5" not in p.read_bytes()
    res = CliRunner().invoke(app, ["forget", str(p), "nope", "--namespace", "n"])
    assert res.exit_code != 0 and "Traceback" not in res.output


def test_forget_on_a_bare_scope(tmp_path: Path) -> None:
    p = tmp_path / "s.sqlite"
    mem = Memory(str(p), namespace="n", policy="lru", embedder=EMB)
    ids = [mem.write(_text(i)).id for i in range(3)]
    store = SQLiteStore(p)
    r = forget(Scope.open(store, "n"), [ids[0], ids[0]], reason="twice listed, once deleted")
    assert r.ids == [ids[0]] and r.erased
    assert [e.id for e in mem.entries()] == ids[1:]  # the other handle sees it


# --------------------------------------------------------------------------- stages via Memory
def test_observe_folds_a_query_into_the_sketch() -> None:
    mem = Memory(":memory:", policy="curator")
    mem.observe("Count the orders of customer 7")
    assert abs(mem.sketch).sum() > 0
    assert mem.energy_bytes == 0  # nothing read


def test_sign_proves_a_self_write() -> None:
    from memcurator.trust.auth import OWNER, KeyRing

    ring = KeyRing()
    ring.add(OWNER)
    mem = Memory(policy="lru", keyring=ring)
    t = "Task: count rows in t\nAction: SELECT COUNT(*) FROM t;"
    assert mem.write(t, signature=mem.sign(t)).admitted
    assert mem.entries()[0].origin == "self"
    with pytest.raises(InvalidInput):
        Memory(policy="lru").sign(t)


# --------------------------------------------------------------------------- layering
def test_no_lifecycle_module_imports_the_facade() -> None:
    folder = Path(lifecycle_pkg.__file__).parent
    for f in folder.glob("*.py"):
        tree = ast.parse(f.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                names = [node.module or ""] + [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            assert not any(n == "memcurator.memory" for n in names), f.name
            bad = (
                isinstance(node, ast.ImportFrom)
                and node.module == "memcurator"
                and any(a.name == "Memory" for a in node.names)
            )
            assert not bad, f.name
