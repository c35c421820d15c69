"""What a key's session observed is shared by every replica of the service (issue 33, item 5,
on a scaled-out service): observed through one replica, a copying write through another is
tainted; ending a session through one ends it in all; the byte and session caps count every
replica's observations; a restarted server keeps them; the shared state holds hashes, never
the text read. On the SQLite key file (several processes on one file) and on PostgreSQL.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi")

from _service_util import make_keys  # noqa: E402
from fastapi.testclient import TestClient  # noqa: E402
from test_provenance_transport import MAIL, PAGE  # noqa: E402  (the same observed reads)

from memcurator.errors import BudgetExceeded  # noqa: E402
from memcurator.service.keys import KeyTable  # noqa: E402
from memcurator.service.observations import SharedSessionReads  # noqa: E402
from memcurator.service.state import open_state  # noqa: E402

TICKET = (
    "Ticket 88: the VPN gateway in Lyon restarts nightly at 02:00 for patching; expect ten "
    "minutes of downtime, and tell users to reconnect through the Paris gateway meanwhile."
)
READS = {"mail": MAIL, "ticket": TICKET, "page": PAGE}


def _copy(text: str) -> str:
    """Own words around 14 consecutive words from the middle of ``text``."""
    w = text.split()
    mid = len(w) // 2 - 7
    return "My note for later: " + " ".join(w[mid : mid + 14]) + " -- keep this in mind."


@pytest.fixture(params=["sqlite", "postgres"])
def two_states(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[[], Any]]:
    """``open()`` -> a new state handle on one shared place (a new process's view)."""
    opened: list[Any] = []
    where = (
        str(tmp_path / "store.db")
        if request.param == "sqlite"
        else str(request.getfixturevalue("pg_url"))
    )
    keys = str(tmp_path / "store.db.keys") if request.param == "sqlite" else None

    def new() -> Any:
        st = open_state(where, keys)
        opened.append(st)
        return st

    yield new
    for st in opened:
        st.close()


@pytest.mark.parametrize("label", sorted(READS))
def test_observed_through_one_replica_matched_through_another(two_states, label) -> None:
    a, b = SharedSessionReads(two_states()), SharedSessionReads(two_states())
    with a.scope("k1", "s"):
        assert a.add(READS[label], f"tool_output:{label}") > 0
    with b.scope("k1", "s"):
        m = b.match(_copy(READS[label]))
        assert m is not None and m.sources == (f"tool_output:{label}",)
        assert b.match("An unrelated note about the lunch menu for Friday.") is None
    with b.scope("k1", "other"):  # another session of the key
        assert b.match(_copy(READS[label])) is None
    with b.scope("k2", "s"):  # another key
        assert b.match(_copy(READS[label])) is None
    # a restarted server (a new handle on the same state) still holds it
    c = SharedSessionReads(two_states())
    with c.scope("k1", "s"):
        assert c.match(_copy(READS[label])) is not None


def test_the_window_a_replica_replays_is_the_one_process_would_hold(two_states) -> None:
    """Observations through three replicas in turn: each replica's window equals a single
    in-process window fed the same reads in the same order, shingle for shingle."""
    from memcurator.service.observations import SessionReads

    reps = [SharedSessionReads(two_states(), max_shingles=60) for _ in range(3)]
    one = SessionReads(max_shingles=60)
    for i, (label, text) in enumerate(sorted(READS.items()) * 2):
        r = reps[i % 3]
        with r.scope("k", "s"):
            r.add(text, label)
        with one.scope("k", "s"):
            one.add(text, label)
    for r in reps:
        with r.scope("k", "s"), one.scope("k", "s"):
            assert len(r) == len(one) == 60
            for text in READS.values():
                assert r.match(_copy(text)) == one.match(_copy(text))


def test_ending_a_session_through_one_replica_ends_it_in_all(two_states) -> None:
    a, b = SharedSessionReads(two_states()), SharedSessionReads(two_states())
    with a.scope("k", "s"):
        a.add(MAIL, "tool_output:mail")
    with b.scope("k", "s"):
        assert b.match(_copy(MAIL)) is not None  # b has replayed it
    assert a.end("k", "s") is True
    with b.scope("k", "s"):
        assert b.match(_copy(MAIL)) is None
    assert b.end("k", "s") is False
    # a new session of the same id starts empty everywhere, then holds only what it observes
    with a.scope("k", "s"):
        a.add(PAGE, "tool_output:page")
    with b.scope("k", "s"):
        assert b.match(_copy(MAIL)) is None and b.match(_copy(PAGE)) is not None
    assert b.status("k", "s")["reads"] == 1


def test_a_session_expires_on_the_shared_clock(two_states) -> None:
    now = [5000.0]
    a = SharedSessionReads(two_states(), ttl_s=60, clock=lambda: now[0])
    b = SharedSessionReads(two_states(), ttl_s=60, clock=lambda: now[0])
    with a.scope("k", "s"):
        a.add(TICKET, "tool_output:ticket")
    now[0] += 59
    with b.scope("k", "s"):
        assert b.match(_copy(TICKET)) is not None
    assert b.status("k", "s")["expires_in_s"] == pytest.approx(1.0)
    now[0] += 2
    with b.scope("k", "s"), a.scope("k", "s"):
        assert b.match(_copy(TICKET)) is None and a.match(_copy(TICKET)) is None
    assert a.status("k", "s") == {
        "session": "s",
        "reads": 0,
        "bytes": 0,
        "key_bytes": 0,
        "max_key_bytes": a.max_key_bytes,
        "expires_in_s": 0.0,
    }


def test_the_caps_count_every_replicas_observations_and_a_refusal_changes_nothing(
    two_states,
) -> None:
    cap = len(MAIL.encode()) + max(len(PAGE.encode()), len(TICKET.encode()))
    a = SharedSessionReads(two_states(), max_key_bytes=cap, max_sessions=2)
    b = SharedSessionReads(two_states(), max_key_bytes=cap, max_sessions=2)
    with a.scope("k", "s1"):
        a.add(MAIL, "mail")
    with b.scope("k", "s2"):
        b.add(PAGE, "page")

    def counts(r: SharedSessionReads) -> list[tuple[Any, ...]]:
        return [
            tuple(v for k, v in r.status("k", s).items() if k != "expires_in_s")
            for s in ("s1", "s2")
        ]

    before = counts(a)
    with b.scope("k", "s1"), pytest.raises(BudgetExceeded, match="max_key_bytes"):
        b.add("one more observed line of five words or more", "x")
    with a.scope("k", "s3"), pytest.raises(BudgetExceeded):
        a.add("x", "x")
    assert counts(b) == before
    # another key has its own cap; ending a session frees its bytes for the key
    with b.scope("k2", "s1"):
        b.add(TICKET, "ticket")
    assert b.end("k", "s2")
    with a.scope("k", "s3"):
        a.add(TICKET, "ticket")
    assert a.status("k", "s3")["key_bytes"] == len(MAIL.encode()) + len(TICKET.encode())


def test_the_shared_state_holds_hashes_not_the_text_read(two_states) -> None:
    st = two_states()
    a = SharedSessionReads(st)
    with a.scope("k", "s"):
        a.add(MAIL, "tool_output:mail")
    with st.tx(write=False) as tx:
        rows = tx.q("SELECT shingles, source, nbytes FROM svc_observations")
    [(sh, source, nbytes)] = rows
    assert source == "tool_output:mail" and nbytes == len(MAIL.encode())
    for word in ("invoice", "4471", "finance", "Chris", "approved"):
        assert word.lower() not in sh.lower()


def test_rest_observed_through_one_replica_taints_a_write_through_another(
    tmp_path: Path,
) -> None:
    """Two servers on one store and one key file (two processes behind a balancer)."""
    from memcurator.service.app import create_app

    kpath = tmp_path / "store.db.keys"
    keys = make_keys(kpath)
    keys.table.close()
    apps = [create_app(str(tmp_path / "store.db"), keys=KeyTable(str(kpath))) for _ in "ab"]
    h = keys.h("a") | {"X-Memcurator-Session": "run-1"}
    try:
        with TestClient(apps[0]) as c1, TestClient(apps[1]) as c2:
            r = c1.post(
                "/v1/observations",
                json={"text": MAIL, "kind": "tool_output", "label": "mail"},
                headers=h,
            )
            assert r.status_code == 200, r.text
            st = c2.get("/v1/observations", headers=h).json()
            assert st["reads"] == 1 and st["bytes"] == len(MAIL.encode())
            w = c2.post("/v1/write", json={"text": _copy(MAIL)}, headers=h).json()
            mem = apps[1].state.pool.tenant("a").memory
            [row] = [d for d in mem.decisions(action="downgrade") if d.entry_id == w["id"]]
            assert "observed from tool_output:mail" in row.reason
            # ended through the first: the second's next copying write is the key's own
            assert c1.delete("/v1/observations", headers=h).json()["ended"] is True
            again = "Again, " + _copy(MAIL)
            w2 = c2.post("/v1/write", json={"text": again}, headers=h).json()
            assert w2["admitted"], w2
            assert not [d for d in mem.decisions(action="downgrade") if d.entry_id == w2["id"]]
    finally:
        for app in apps:
            app.state.pool.close()
