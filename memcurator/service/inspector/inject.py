"""What the read-time curator would inject for a query (the recall playground's last part).

A policy with a read-time curator (:attr:`memcurator.policy.base.Policy.curator`: JitMem,
MemPilot, ``curator/align``) turns what it retrieves into a task-conditioned payload; one
without injects the top-k texts recall returns, as they are. Either way the inspector changes
nothing: recall runs with ``observe=False``, the curator is a deep copy (its learning state,
pending group and task counter stay as they were), no learning probe is given, and no language
model is run (an ``llm-*`` operator's call fails and the curator falls back, with a note).

References
----------
JitMem, Sec. 3 ("the curated payload p_t is ephemeral"); MemPilot, Sec. 3.1.
"""

from __future__ import annotations

import copy
from typing import Any

from memcurator.errors import LLMError
from memcurator.memory import Memory
from memcurator.service.inspector.queries import RecallProbe, Where
from memcurator.trust.provenance import spotlight
from memcurator.types import Entry, RecallResult

#: what the page says when the policy has no read-time curator
AS_THEY_ARE = "this policy injects the top-k texts as they are"


class NoModel:
    """An executor that answers no call: the inspector runs no language model."""

    def complete(self, prompt: str, **kw: Any) -> Any:
        """Refuse the call.

        Raises
        ------
        LLMError
            Always.
        """
        raise LLMError("the inspector runs no language model")


def top_k_payload(memory: Memory, hit: RecallResult) -> dict[str, Any]:
    """The top-k texts recall returned, joined by a blank line; where the policy runs the trust
    gate's probation, outside content (origin not ``self``) is spotlighted as data
    (:func:`memcurator.trust.provenance.spotlight`)."""
    outside = [bool(memory.policy.probation) and m.origin != "self" for m in hit.entries]
    parts = [
        spotlight(m.text, f"{m.origin} {m.origin_detail}".strip()) if o else m.text
        for m, o in zip(hit.entries, outside, strict=True)
    ]
    return {
        "curator": None,
        "note": AS_THEY_ARE + ("; outside content is spotlighted as data" if any(outside) else ""),
        "operator": "top-k",
        "payload": "\n\n".join(parts),
        "source_ids": list(hit.ids),
        "notes": [],
        "raw_chars": sum(len(m.text) for m in hit.entries),
    }


def curated_payload(memory: Memory, probe: RecallProbe, where: Where = None) -> dict[str, Any]:
    """Run a deep copy of the policy's read-time curator on ``probe.query`` as the task.

    Its recall is the memory's (``observe=False``, ``where`` and ``probe.user`` applied), its
    bank the entries a recall may return (:meth:`memcurator.Memory.visible`), ``probe.domain``
    names the aligner (``"sql"``, ``"bash"``). The curator retrieves its own ``k``.

    Raises
    ------
    UnknownName
        An unknown ``probe.domain`` (the curator's aligner registry).
    """
    from memcurator.curate.aligners import create_aligner
    from memcurator.curate.base import CurateContext

    query, user, domain = probe.query, probe.user, probe.domain
    create_aligner(domain)  # an unknown domain is refused before anything runs
    cur = copy.deepcopy(memory.policy.curator)

    def recall(q: str, k: int, where: Where = where) -> list[Entry]:
        return memory.recall(q, k=k, where=where, user=user, observe=False).entries

    ctx = CurateContext(
        task=query,
        recall=recall,
        bank=lambda: memory.visible(user=user),
        executor=NoModel(),
        pool=None,
        probe=None,
        step=memory.step,
        domain=domain,
    )
    r = cur.curate(ctx)
    return {
        "curator": type(cur).__name__,
        "note": f"what {type(cur).__name__} would inject (header: {r.header!r}); "
        "no model is run here",
        "operator": r.operator,
        "payload": r.payload,
        "source_ids": list(r.source_ids),
        "notes": list(r.notes),
        "raw_chars": int(r.raw_chars),
    }


def would_inject(
    memory: Memory, probe: RecallProbe, hit: RecallResult, where: Where = None
) -> dict[str, Any]:
    """What the model would be given for ``probe``: the curator's payload, or the top-k texts
    (``hit``, the playground's own recall) under a policy without a read-time curator."""
    if memory.policy.curator is None:
        return top_k_payload(memory, hit)
    return curated_payload(memory, probe, where)


__all__ = ["AS_THEY_ARE", "NoModel", "curated_payload", "top_k_payload", "would_inject"]
