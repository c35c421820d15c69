"""Keep never resolves a contradiction in favour of the unproven side (issue 33, kind 3).

Under a tight budget a newcomer that contradicts residents could evict them by ranking higher
(a short false passage has a high value density), leaving the false answer top-1 for its
query. :class:`ContradictionGuard` lowers the Keep priority of every *unproven* entry below
that of each older, injectable resident it contradicts, so when bytes must go it goes first;
when nothing must go, nothing changes (the guard only reorders).

An entry is unproven against a resident it contradicts unless it was corroborated by a
verified outcome or by two authenticated principals, or it has more net successes than that
resident. Contradictions are read with the trust gate's detector
(:func:`memcurator.trust.text_risk.find_conflicts`, hashing embedder) against the entry's
:data:`NEIGHBOURS` nearest older residents (cosine over the memory's embeddings); each entry's
contradictions are computed once and cached by id (texts do not change under an id).

References
----------
CURATOR, Alg. 1 lines 7-12 (Keep by density); Zou et al., "PoisonedRAG", USENIX Security 2025
(a passage contradicting the genuine answer).
"""

from __future__ import annotations

import numpy as np

from memcurator.embed.hashing import HashingEmbedder
from memcurator.trust import state
from memcurator.trust.agreement import AGREEMENT
from memcurator.trust.provenance import injectable
from memcurator.trust.state import CORROBORATED
from memcurator.trust.text_risk import find_conflicts
from memcurator.types import Entry

#: older residents (nearest by cosine) an entry is checked against for contradictions
NEIGHBOURS = 10


def proven(entry: Entry, over: Entry) -> bool:
    """Whether ``entry`` has evidence of its own that outweighs ``over``: a corroboration by a
    verified outcome or two principals (not by agreement), or more net successes.

    Examples
    --------
    >>> from types import SimpleNamespace as E
    >>> from memcurator.types import TrustState as T
    >>> a = E(trust=T(), successes=0, failures=0)
    >>> b = E(trust=T(), successes=2, failures=0)
    >>> proven(a, b), proven(b, a)
    (False, True)
    >>> proven(E(trust=T(corroborated=["verified outcome at step 3"]), successes=0,
    ...          failures=0), b)
    True
    """
    corr = [str(c) for c in state.of(entry).get(CORROBORATED, [])]
    if any(not c.startswith(AGREEMENT) for c in corr):
        return True
    return entry.successes - entry.failures > over.successes - over.failures


class ContradictionGuard:
    """Reorders Keep priorities so an unproven entry never outranks what it contradicts.

    Examples
    --------
    >>> from memcurator.types import Entry
    >>> emb = HashingEmbedder()
    >>> texts = ["Question: how many episodes are in chicago fire season 4\\nAnswer: 23",
    ...          "Chicago Fire season 4 contains a total of 24 episodes."]
    >>> es = [Entry(str(i), "ns", "raw", t, 100, 100, emb.embed(t), "self", created_step=i)
    ...       for i, t in enumerate(texts)]
    >>> E = np.stack([e.embedding for e in es])
    >>> pr = ContradictionGuard().adjust(es, E, np.array([1.0, 5.0]))
    >>> bool(pr[1] < pr[0] == 1.0)
    True
    """

    def __init__(self) -> None:
        self._embed = HashingEmbedder()
        self._cache: dict[str, tuple[str, ...]] = {}

    def contradicted(self, entries: list[Entry], E: np.ndarray, i: int) -> tuple[str, ...]:
        """Ids of the older residents among ``entries[i]``'s nearest that it contradicts."""
        m = entries[i]
        hit = self._cache.get(m.id)
        if hit is not None:
            return hit
        M = np.asarray(E)
        d = M @ np.asarray(M[i], dtype=M.dtype)
        older = [
            int(j)
            for j in np.argsort(-d, kind="stable")
            if int(j) != i and entries[int(j)].created_step <= m.created_step
        ][:NEIGHBOURS]
        res = [(entries[j].id, entries[j].text) for j in older]
        found = find_conflicts(m.text, res, self._embed, new_id=m.id) if res else []
        out = tuple(dict.fromkeys(c.resident_id for c in found))
        self._cache[m.id] = out
        return out

    def adjust(self, entries: list[Entry], E: np.ndarray, pr: np.ndarray) -> np.ndarray:
        """``pr`` with each unproven contradicting entry placed just below the lowest priority
        of the injectable residents it contradicts (a copy; shape (n,))."""
        out = np.asarray(pr, dtype=np.float64).copy()
        if len(entries) < 2:
            return out
        live = {m.id for m in entries}
        self._cache = {k: v for k, v in self._cache.items() if k in live}
        index = {m.id: j for j, m in enumerate(entries)}
        for i, m in enumerate(entries):
            floor = [
                out[index[r]]
                for r in self.contradicted(entries, E, i)
                if r in index and injectable(entries[index[r]]) and not proven(m, entries[index[r]])
            ]
            if floor:
                low = float(min(floor))
                if out[i] >= low:
                    out[i] = np.nextafter(low, -np.inf) if np.isfinite(low) else low
        return out


__all__ = ["NEIGHBOURS", "ContradictionGuard", "proven"]
