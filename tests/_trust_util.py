"""Shared set-up of the trust kind tests: one write to a fresh curator memory, a key ring."""

from __future__ import annotations

from memcurator import Memory
from memcurator.trust.auth import KeyRing
from memcurator.trust.provenance import injectable


def write_fresh(text: str, origin: str) -> tuple[bool, bool, str]:
    """(admitted, injectable, reason) of ``text`` written on ``origin`` to a fresh memory."""
    mem = Memory(policy="curator", max_bytes=None)
    try:
        r = mem.write(text, origin=origin)
        e = next((x for x in mem.entries() if x.id == r.id), None) if r.admitted else None
        return r.admitted, bool(e is not None and injectable(e)), r.reason
    finally:
        mem.close()


def ring_of(*principals: str) -> KeyRing:
    """A key ring holding a fresh random secret for each of ``principals``."""
    ring = KeyRing()
    for p in principals:
        ring.add(p)
    return ring
