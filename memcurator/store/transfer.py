"""Copy whole namespaces between stores of any backend (SQLite <-> PostgreSQL), exactly.

Unlike :mod:`memcurator.portable` (an export a person reads and an import that passes every
entry through admission again), this moves the store's own rows through the store protocol:
entries with their ids, counts, steps, metadata and vectors (in the namespace's precision),
the decision log (actions, scores, reasons, timestamps) and the policy's learned state and
step. ``memcurator copy SRC DST`` runs it; the stream is JSON Lines:

- ``{"type": "memcurator-store", "version": 1}``
- per namespace: ``{"type": "namespace", ...}``, ``{"type": "state", ...}`` if one is saved,
  one ``{"type": "entry", ...}`` per entry (``embedding``: base64 of its float32 values as the
  store gives them back; ``trust``: its trust state as an object of internal keys,
  :meth:`memcurator.types.TrustState.legacy`), one ``{"type": "decision", ...}`` per log row,
  oldest first.

Not carried: decision sequence numbers (the target numbers its own rows, in the same order),
a namespace's creation time (the target's clock), the running totals behind a compacted log's
summary row (the summary row itself is copied), and the list of entries shared with peers.

A stream written before the trust state had its own field (schema v6) kept it in underscore
keys of ``meta``; loading it moves them into the state, as the store migration does.
"""

from __future__ import annotations

import base64
import json
import math
from collections.abc import Iterable
from typing import IO, Any

import numpy as np

from memcurator.errors import InvalidInput
from memcurator.store.base import Store
from memcurator.types import Entry, TrustState, split_meta

FORMAT = "memcurator-store"
VERSION = 1


def dump_store(store: Store, fh: IO[str], namespaces: list[str] | None = None) -> dict[str, int]:
    """Write ``namespaces`` (default all) of ``store`` to ``fh``; counts of what was written.

    Raises
    ------
    NamespaceNotFound
        A named namespace does not exist.
    """
    names = store.namespaces() if namespaces is None else list(namespaces)
    n = {"namespaces": 0, "entries": 0, "decisions": 0}

    def put(obj: dict[str, Any]) -> None:
        fh.write(json.dumps(obj, ensure_ascii=False, allow_nan=False) + "\n")

    put({"type": FORMAT, "version": VERSION})
    for ns in names:
        info = store.namespace(ns)
        put(
            {
                "type": "namespace",
                "name": info.name,
                "embedder": info.embedder,
                "dim": info.dim,
                "max_bytes": info.max_bytes,
                "vector_dtype": info.vector_dtype,
            }
        )
        n["namespaces"] += 1
        saved = store.load_state(ns)
        if saved is not None:
            put(
                {
                    "type": "state",
                    "namespace": ns,
                    "policy": saved[0],
                    "step": saved[1],
                    "state": saved[2],
                }
            )
        for e in store.entries(ns):
            vec = np.asarray(e.embedding, dtype="<f4").tobytes()
            put(
                {
                    "type": "entry",
                    "namespace": ns,
                    "id": e.id,
                    "kind": e.kind,
                    "text": e.text,
                    "bytes": e.bytes,
                    "raw_bytes": e.raw_bytes,
                    "embedding": base64.b64encode(vec).decode("ascii"),
                    "origin": e.origin,
                    "origin_detail": e.origin_detail,
                    "reinforcement": e.reinforcement,
                    "uses": e.uses,
                    "successes": e.successes,
                    "failures": e.failures,
                    "created_step": e.created_step,
                    "last_used_step": e.last_used_step,
                    "meta": e.meta,
                    "stats": e.stats,
                    "trust": e.trust.legacy(),
                }
            )
            n["entries"] += 1
        for d in store.decisions(ns):
            put(
                {
                    "type": "decision",
                    "namespace": ns,
                    "step": d.step,
                    "action": d.action,
                    "entry_id": d.entry_id,
                    "score": None if math.isnan(d.score) else d.score,
                    "reason": d.reason,
                    "policy": d.policy,
                    "bytes": d.bytes,
                    "at": d.at,
                }
            )
            n["decisions"] += 1
    return n


def load_store(store: Store, lines: Iterable[str]) -> dict[str, int]:
    """Read a :func:`dump_store` stream into ``store``, one transaction per namespace.

    Raises
    ------
    InvalidInput
        Not a store dump, a newer format, a bad line, or a namespace that already exists in
        ``store`` with entries or a log (nothing of that namespace is written: copy into a
        new store or delete the namespace first).
    """
    it = iter(lines)
    try:
        head = json.loads(next(it))
    except (StopIteration, json.JSONDecodeError) as e:
        raise InvalidInput("not a memcurator store dump (no header line)") from e
    if not isinstance(head, dict) or head.get("type") != FORMAT:
        raise InvalidInput(f"not a memcurator store dump (header {str(head)[:80]!r})")
    if int(head.get("version", 0)) > VERSION:
        raise InvalidInput(f"store dump version {head['version']} is newer than {VERSION}")
    n = {"namespaces": 0, "entries": 0, "decisions": 0}
    group: list[dict[str, Any]] = []
    for lineno, line in enumerate(it, start=2):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            raise InvalidInput(f"line {lineno}: not JSON ({e})") from e
        if obj.get("type") == "namespace" and group:
            _load_namespace(store, group, n)
            group = []
        group.append(obj)
    if group:
        _load_namespace(store, group, n)
    return n


def _load_namespace(store: Store, group: list[dict[str, Any]], n: dict[str, int]) -> None:
    info = group[0]
    if info.get("type") != "namespace":
        raise InvalidInput(f"expected a namespace line, got {str(info)[:80]!r}")
    ns = str(info["name"])
    if ns in store.namespaces() and (store.count(ns) or store.decision_count(ns)):
        raise InvalidInput(
            f"namespace {ns!r} already exists in the target with entries or a log; copy into a "
            "new store or delete the namespace there first"
        )
    with store.transaction(namespace=ns):
        store.create_namespace(
            ns,
            embedder=info["embedder"],
            dim=int(info["dim"]),
            max_bytes=info["max_bytes"],
            vector_dtype=info["vector_dtype"],
        )
        for obj in group[1:]:
            kind = obj.get("type")
            if kind == "entry":
                emb = np.frombuffer(base64.b64decode(obj["embedding"]), dtype="<f4").copy()
                store.insert(
                    Entry(
                        obj["id"],
                        ns,
                        obj["kind"],
                        obj["text"],
                        int(obj["bytes"]),
                        int(obj["raw_bytes"]),
                        emb,
                        obj["origin"],
                        obj["origin_detail"],
                        reinforcement=int(obj["reinforcement"]),
                        uses=int(obj["uses"]),
                        successes=int(obj["successes"]),
                        failures=int(obj["failures"]),
                        created_step=int(obj["created_step"]),
                        last_used_step=int(obj["last_used_step"]),
                        **_meta_and_trust(obj),
                        stats=obj["stats"],
                    )
                )
                n["entries"] += 1
            elif kind == "decision":
                store.log(
                    ns,
                    step=int(obj["step"]),
                    action=obj["action"],
                    entry_id=obj["entry_id"],
                    score=float("nan") if obj["score"] is None else float(obj["score"]),
                    reason=obj["reason"],
                    policy=obj["policy"],
                    nbytes=int(obj["bytes"]),
                    at=float(obj["at"]),
                )
                n["decisions"] += 1
            elif kind == "state":
                store.save_state(ns, obj["policy"], int(obj["step"]), obj["state"])
            else:
                raise InvalidInput(f"unknown line type {kind!r} in namespace {ns!r}")
    n["namespaces"] += 1


def _meta_and_trust(obj: dict[str, Any]) -> dict[str, Any]:
    """``meta`` and ``trust`` of an entry line: its ``trust`` object, and any internal key an
    older stream kept in ``meta`` (the ``trust`` object wins where both name one).

    Raises
    ------
    InvalidInput
        ``meta`` or ``trust`` is not an object.
    """
    meta, trust = obj.get("meta") or {}, obj.get("trust") or {}
    if not isinstance(meta, dict) or not isinstance(trust, dict):
        raise InvalidInput(f"entry {obj.get('id')!r}: meta and trust must be JSON objects")
    meta, state = split_meta(meta)
    for k, v in TrustState.from_legacy(trust).legacy().items():
        state[k] = v
    return {"meta": meta, "trust": state}


def copy_store(src: Store, dst: Store, namespaces: list[str] | None = None) -> dict[str, int]:
    """:func:`dump_store` from ``src`` into :func:`load_store` of ``dst`` (in memory)."""
    import io

    buf = io.StringIO()
    dump_store(src, buf, namespaces)
    buf.seek(0)
    return load_store(dst, buf)


__all__ = ["FORMAT", "VERSION", "copy_store", "dump_store", "load_store"]
