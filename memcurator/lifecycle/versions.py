"""Versions of one request: which of two near-duplicate entries a user expects to see.

Two entries whose recall texts (their ``Task:`` lines) are near-duplicates answer the same
request; the newer one is the current version (a corrected answer, a migrated schema). The newer
wins, in recall and in Keep, unless the older is **proven better**: the newer has been used and
the older's net outcome (successes - failures) exceeds the newer's by at least ``margin``. An
older entry's praise from before its replacement existed is no proof: the newer had no chance.

**Supersession.** A note can also say in words that it replaces earlier ones on its topic
("latest, replaces all earlier ones", "supersedes", "as of 2026-11-02", "updated", "no longer",
"now uses", "from now on", "instead of": :func:`supersedes`), though its text is no
near-duplicate of theirs. Such a note is a newer version of every older entry on the same topic
(cosine >= :data:`SAME_TOPIC`) that a recall considers: it joins the candidate pool whenever
one of them does (:func:`superseders`), and those older entries rank just below it unless they
are proven better.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np

from memcurator.types import Entry

#: Cosine (over the recall embeddings) at or above which a superseding note and an older entry
#: are on one topic. Hashing embedder: notes on one subject 0.33-0.53 in the tests' examples,
#: unrelated notes sharing a few words ("uses tool alpha") about 0.22.
SAME_TOPIC = 0.3

_MONTH = r"(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*"
_DAY = r"(?:mon|tues|wednes|thurs|fri|satur|sun)day"
_WHEN = rf"(?:today|tomorrow|now|immediately|this|next|from|on|\d+|{_MONTH}|{_DAY})"
#: Words by which a note says it replaces what was said before: the language of corrections,
#: updates, revisions, deprecations and changes over time (prose, not SQL: ``REPLACE(``,
#: ``UPDATE t SET`` and ``updated_at`` do not match). Written as classes of English update
#: language, not as a list of seen notes: a correction ("Correction:", "erratum"), an update
#: ("Update:", "updated", "revised", "amended", a heading "New rate limit:"), a retraction of
#: the earlier note ("ignore / disregard the previous ..."), a change in time ("as of",
#: "effective immediately", "going forward", "starting next week", "from now on"), a
#: retirement ("deprecated", "obsolete", "no longer", "not ... anymore"), a before/after
#: ("(was 100)", "previously", "instead of", "moved to", "now approved by"), and
#: "latest/current version".
SUPERSESSION = re.compile(
    r"\b(?:replaces|replacing|replaced (?:by|with)|supersedes|superseding|superseded|"
    r"overrides|overridden|updated|"
    r"corrections?|corrected|erratum|errata|"
    r"update\s*[:\-\u2013\u2014]|"
    r"revised|revision|amended|amendment|"
    r"(?:ignore|disregard)s? (?:the |all |any |my |our )?"
    r"(?:previous|earlier|prior|older|old|above)|"
    r"no longer|from now on|instead of|instead\b|going forward|henceforth|"
    r"(?:any ?more)\b|"
    r"deprecated|obsolete|outdated|retired|"
    rf"as of (?:\d+|today|now|{_MONTH})|"
    rf"effective (?:{_WHEN})|"
    rf"(?:starting|beginning|from) (?:{_WHEN})\b(?! to\b)|"
    r"(?:previously|formerly|used to be)|"
    r"(?:is|are|has been|have been|was) now|"
    r"now (?:\w+ed|uses?|runs?|is|are|points?|lives?|goes|requires?|needs?|sits?|belongs?|"
    r"handles?|owns?|takes?)|"
    r"(?:changed|switched|moved|migrated) (?:to|over to|from)|"
    r"(?:latest|newest|current|most recent) (?:version|note|update|instructions?|value|policy)"
    r")\b|\((?:was|previously|formerly|old)\b|(?:^|[.!?;]\s+)new [^.:!?\n]{1,40}:",
    re.IGNORECASE,
)


def supersedes(text: str) -> bool:
    """Whether ``text`` says it replaces what was said before (:data:`SUPERSESSION`).

    Examples
    --------
    >>> supersedes("Deploy note (latest, replaces all earlier ones): now uses tool beta")
    True
    >>> supersedes("As of March the VPN needs a hardware key")
    True
    >>> supersedes("UPDATE t SET updated_at = REPLACE(name, 'a', 'b')")
    False
    """
    return SUPERSESSION.search(text) is not None


def superseders(
    pool: np.ndarray,
    emb: np.ndarray,
    marked: np.ndarray,
    standing: np.ndarray,
    eligible: Callable[[int], bool],
    topic: float = SAME_TOPIC,
) -> np.ndarray:
    """``pool`` (row positions) with every eligible superseding row newer than a pool row on
    its topic, and trusted at least as much, appended (a note that replaces a candidate is a
    candidate too).

    Parameters
    ----------
    pool : ndarray of int, shape (p,)
    emb : ndarray, shape (n, d)
        Unit embeddings of all rows (row position = insertion order).
    marked : ndarray of bool, shape (n,)
        Rows whose text :func:`supersedes`.
    standing : ndarray, shape (n,)
        How little each row is trusted (0: own; larger: less): a note replaces only what is
        trusted no more than it, so an outside note saying "previous instructions no longer
        apply" never outranks the owner's entries.
    eligible : callable row -> bool
        The recall's eligibility (visibility, filters).
    """
    rows = np.flatnonzero(marked)
    rows = rows[~np.isin(rows, pool)]
    if rows.size == 0 or pool.size == 0:
        return pool
    near = (
        (emb[rows] @ emb[pool].T >= topic)
        & (rows[:, None] > pool[None, :])
        & (standing[rows][:, None] <= standing[pool][None, :])
    )
    add = [
        int(r) for r, hit in zip(rows, near.any(axis=1), strict=True) if hit and eligible(int(r))
    ]
    return np.concatenate([pool, np.array(add, dtype=pool.dtype)]) if add else pool


#: Net-outcome lead (successes - failures) an older version needs over a used newer one.
OUTCOME_MARGIN = 2


def proven_better(old: Entry, new: Entry, margin: int = OUTCOME_MARGIN) -> bool:
    """Whether ``old`` has clearly better outcomes than its newer version ``new``.

    Parameters
    ----------
    old, new : Entry
        Two versions of one request; ``old`` was written first.
    margin : int, default 2
        Net outcomes (successes - failures) by which ``old`` must lead.

    Returns
    -------
    bool
        True only when ``new`` has been used (``uses > 0``) and ``old`` leads by ``margin``.

    Examples
    --------
    >>> from memcurator.types import Entry
    >>> def e(s, f, u):
    ...     return Entry("x", "ns", "insight", "t", 1, 1, np.zeros(2), "self", "",
    ...                  uses=u, successes=s, failures=f)
    >>> proven_better(e(6, 0, 6), e(0, 0, 0))   # the newer was never tried
    False
    >>> proven_better(e(6, 0, 6), e(0, 2, 2))   # the newer was tried and failed
    True
    """
    if new.uses <= 0:
        return False
    return (old.successes - old.failures) - (new.successes - new.failures) >= margin


def prefer_newer(
    scores: np.ndarray,
    cands: list[Entry],
    order: np.ndarray,
    emb: np.ndarray,
    same_request: float,
    top: int,
    marked: tuple[np.ndarray, np.ndarray] | None = None,
    topic: float = SAME_TOPIC,
) -> np.ndarray:
    """Scores where no older version of a request outranks a newer one not proven worse.

    Among the ``top`` best-scored candidates, visited newest first, an older candidate whose
    embedding has cosine >= ``same_request`` with a newer one, and is not
    :func:`proven_better`, gets a score just below the newer one's (never above its own).

    Parameters
    ----------
    scores : ndarray of shape (n,)
        Final recall scores (NaN and -inf are left alone).
    cands : list of Entry, length n
    order : ndarray of shape (n,), int
        Insertion position of each candidate (larger = newer).
    emb : ndarray of shape (n, d)
        Unit embeddings of the candidates.
    same_request : float
        Cosine at or above which two entries are versions of one request.
    top : int
        How many of the best candidates are compared (the rest cannot be raised by this);
        all of them when one of them supersedes.
    marked : (ndarray of bool, ndarray), each of shape (n,), optional
        Candidates whose text :func:`supersedes`, and how little each candidate is trusted
        (see :func:`superseders`): a superseding candidate is also a newer version of every
        older one with cosine >= ``topic`` trusted no more than it.
    topic : float
        See :data:`SAME_TOPIC`.

    Returns
    -------
    ndarray of shape (n,), float64
    """
    s = np.array(scores, dtype=np.float64)
    fin = np.flatnonzero(np.isfinite(s))
    if fin.size < 2:
        return s
    sup = np.zeros(len(s), dtype=bool) if marked is None else np.asarray(marked[0], dtype=bool)
    rank = np.zeros(len(s)) if marked is None else np.asarray(marked[1])
    # with a superseding candidate every candidate is compared: one it replaces may rank
    # anywhere in the pool, and lowering only the best would lift the next one above it
    best = fin[np.argsort(-s[fin], kind="stable")][: len(s) if sup[fin].any() else top]
    by_age = best[np.argsort(-order[best], kind="stable")]  # newest first
    sims = emb[by_age] @ emb[by_age].T
    for a in range(1, len(by_age)):
        i = by_age[a]
        for b in range(a):
            j = by_age[b]
            same = sims[a, b] >= same_request or (
                sup[j] and sims[a, b] >= topic and rank[j] <= rank[i]
            )
            if same and s[i] >= s[j] and not proven_better(cands[i], cands[j]):
                s[i] = np.nextafter(s[j], -np.inf)
    return s


__all__ = [
    "OUTCOME_MARGIN",
    "SAME_TOPIC",
    "SUPERSESSION",
    "prefer_newer",
    "proven_better",
    "superseders",
    "supersedes",
]
