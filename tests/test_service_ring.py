"""One signing key ring for all replicas (:mod:`memcurator.service.ring`): an envelope signed
through one replica verifies through another, each principal gets one key however many
replicas ask at once, a revocation reaches every replica, and an old ring file is imported."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

pytest.importorskip("fastapi")

from memcurator.service.keys import KeyTable  # noqa: E402
from memcurator.service.ring import SharedRing  # noqa: E402
from memcurator.service.state.sqlite import SqliteState  # noqa: E402
from memcurator.service.tenants import TenantPool  # noqa: E402
from memcurator.trust.auth import OWNER, Claim, KeyRing  # noqa: E402


def _rows(state: SqliteState) -> list[tuple[str, str]]:
    with state.tx(write=False) as tx:
        return [(str(k), str(p)) for k, p in tx.q("SELECT key_id, principal FROM svc_ring_keys")]


def test_a_write_signed_through_one_replica_is_verified_through_another(tmp_path: Path) -> None:
    store = str(tmp_path / "s.db")
    tables = [KeyTable.for_store(store) for _ in range(2)]  # two replicas: two processes' views
    a, b = (TenantPool(store, t) for t in tables)
    info, _ = tables[0].create("team", name="p1", scopes=("write",), origin="peer")
    owner, _ = tables[0].create("team", name="me", scopes=("write",))
    for key, origin in ((info, "peer"), (owner, "self")):
        text = f"Task: signed by {key.name}\nAction: checked elsewhere"
        got_origin, detail, sig = a.signature(key, None, "raw", text)
        assert got_origin == origin and sig is not None
        claim = Claim("team", origin, detail, "raw", text)
        assert b.ring.verify(claim, sig).ok  # b never signed for p1: it reads the state
        assert not KeyRing().verify(claim, sig).ok  # a ring of b's own would not
        w = b.tenant("team").memory.write(
            text, origin=origin, kind="raw", origin_detail=detail, signature=sig
        )
        assert w.admitted
        e = b.tenant("team").memory.get(w.id)
        assert e.origin == origin and e.trust.claimed_origin is None  # not downgraded
        # a tampered text does not verify through either
        bad = Claim("team", origin, detail, "raw", text + "!")
        assert not a.ring.verify(bad, sig).ok and not b.ring.verify(bad, sig).ok
    assert sorted(p for _, p in _rows(tables[0].state)) == sorted([OWNER, "p1"])
    for pool in (a, b):
        pool.close()
    for t in tables:
        t.close()


def test_replicas_asking_at_once_share_one_key_per_principal(tmp_path: Path) -> None:
    path = str(tmp_path / "state.keys")
    states = [SqliteState(path) for _ in range(4)]
    rings = [SharedRing(s) for s in states]
    gate = threading.Barrier(len(rings))
    errors: list[BaseException] = []

    def go(r: SharedRing) -> None:
        gate.wait()
        try:
            for p in ("x", "y", "z"):
                r.ensure(p)
        except BaseException as e:  # noqa: BLE001 -- asserted below
            errors.append(e)

    ts = [threading.Thread(target=go, args=(r,)) for r in rings]
    for t in ts:
        t.start()
    for t in ts:
        t.join(60)
    assert errors == []
    assert sorted(p for _, p in _rows(states[0])) == sorted([OWNER, "x", "y", "z"])
    for p in ("x", "y", "z", OWNER):  # every replica signs with the one key
        assert len({r.signing_key(p) for r in rings}) == 1
        c = Claim("ns", "peer" if p != OWNER else "self", p, "raw", "t")
        sig = rings[0].sign(c, p)
        assert all(r.verify(c, sig).ok for r in rings)
    for s in states:
        s.close()


def test_revocation_and_an_old_ring_file_reach_every_replica(tmp_path: Path) -> None:
    old = KeyRing()
    old.add(OWNER)
    kid = old.add("legacy-peer")
    ring_file = tmp_path / "keys.ring"
    old.save(ring_file)
    before = ring_file.read_bytes()
    path = str(tmp_path / "state.keys")
    a = SharedRing(SqliteState(path), ring_file)
    b = SharedRing(SqliteState(path), ring_file)  # imported twice: once
    c = Claim("ns", "peer", "legacy-peer", "raw", "old text")
    sig = old.sign(c)
    assert a.verify(c, sig).ok and b.verify(c, sig).ok
    assert a.signing_key(OWNER) == old.signing_key(OWNER)  # the file's owner key is kept
    assert ring_file.read_bytes() == before
    with a.state.tx() as tx:  # revoked in the state (as an operator would)
        tx.x("UPDATE svc_ring_keys SET revoked='leaked' WHERE key_id=?", (kid,))
    b.refresh()
    assert b.verify(c, sig).status == "revoked_key"
    assert len(_rows(a.state)) == 2  # type: ignore[arg-type]
    a.state.close()
    b.state.close()
