"""Shared set-up of the service tests: a key table, an app over a temporary store, keys."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memcurator.service.keys import KeyTable

SQL_A = "Task: count rows in orders\nAction: SELECT COUNT(*) FROM orders;"
SQL_B = (
    "Task: list the names of customers in Paris\n"
    "Action: SELECT name FROM customers WHERE city='Paris';"
)


@dataclass
class Keys:
    table: KeyTable
    tokens: dict[str, str]

    def h(self, who: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.tokens[who]}"}


def make_keys(path: str | Path = ":memory:", max_bytes: int | None = None) -> Keys:
    """Keys of two tenants, a and b, with every scope mix the tests need."""
    t = KeyTable(str(path))
    tok: dict[str, str] = {}
    spec: list[tuple[str, str, str, tuple[str, ...], str, float | None]] = [
        ("a", "a", "alice", ("read", "write", "admin", "peer"), "self", None),
        ("a_read", "a", "reader", ("read",), "self", None),
        ("a_peer", "a", "p1", ("read", "write"), "peer", None),
        ("a_ext", "a", "crawler", ("read", "write"), "external", None),
        ("a_slow", "a", "slow", ("read",), "self", 2.0),
        ("b", "b", "bob", ("read", "write", "admin", "peer"), "self", None),
    ]
    for who, ns, name, scopes, origin, rate in spec:
        _, tok[who] = t.create(ns, name=name, scopes=scopes, origin=origin, rate_per_min=rate)
    if max_bytes is not None:
        t.configure("a", max_bytes=max_bytes)
        t.configure("b", max_bytes=max_bytes)
    return Keys(t, tok)


def app_for(tmp_path: Path, keys: Keys, **kw: Any) -> Any:
    from memcurator.service.app import create_app

    return create_app(str(tmp_path / "store.db"), keys=keys.table, **kw)
