"""JitMem's retriever: BM25 over task descriptions only, top-k.

References
----------
JitMem, Sec. 3 ("Retrieval"): "BM25 over task descriptions only (not trajectory content),
keeping retrieval lightweight and decoupled from trajectory length". Robertson & Zaragoza
(2009) for BM25 (k1 = 1.5, b = 0.75).
"""

from __future__ import annotations

import math
from collections import Counter
from typing import TYPE_CHECKING

import numpy as np

from memcurator.curate.extractive import parse_raw
from memcurator.retrieve.bm25 import tokenize
from memcurator.types import Entry

if TYPE_CHECKING:
    from memcurator.curate.base import CurateContext


def task_line(text: str) -> str:
    """The task description of an entry: its first ``Task:`` line (else the first line).

    Examples
    --------
    >>> task_line("Task: count rows\\nAction: SELECT 1;")
    'count rows'
    """
    for line in text.splitlines():
        if line.startswith("Task: "):
            return line[6:].strip()
    return text.splitlines()[0] if text else ""


def bm25_scores(query: str, docs: list[list[str]], k1: float = 1.5, b: float = 0.75) -> np.ndarray:
    """Okapi BM25 of ``query`` against tokenised ``docs``, shape (n_docs,).

    Examples
    --------
    >>> s = bm25_scores("count orders", [["count", "orders"], ["delete", "users"]])
    >>> bool(s[0] > 0), float(s[1])
    (True, 0.0)
    """
    n = len(docs)
    if n == 0:
        return np.zeros(0)
    q = set(tokenize(query))
    lens = np.array([len(d) for d in docs], dtype=np.float64)
    avg = float(lens.mean()) or 1.0
    df: Counter[str] = Counter()
    for d in docs:
        df.update(set(d) & q)
    out = np.zeros(n)
    for i, d in enumerate(docs):
        tf = Counter(w for w in d if w in q)
        for w, f in tf.items():
            idf = math.log(1.0 + (n - df[w] + 0.5) / (df[w] + 0.5))
            out[i] += idf * f * (k1 + 1) / (f + k1 * (1 - b + b * lens[i] / avg))
    return out


class TaskIndex:
    """BM25 over the task descriptions of entries only, tokens cached by entry id.

    Entries sharing no word with the query are never returned.

    Parameters
    ----------
    k1, b : float, default 1.5, 0.75

    Examples
    --------
    >>> import numpy as np
    >>> e = [Entry(str(i), "n", "raw", t, 1, 1, np.zeros(2, dtype=np.float32)) for i, t in
    ...      enumerate(["Task: count orders\\nAction: x", "Task: delete users\\nAction: count"])]
    >>> [m.id for m in TaskIndex().top_k("count the orders", e, 5)]
    ['0']
    """

    def __init__(self, k1: float = 1.5, b: float = 0.75):
        self.k1 = k1
        self.b = b
        self._tok: dict[str, list[str]] = {}

    def scores(self, query: str, entries: list[Entry]) -> np.ndarray:
        """BM25 of ``query`` over the entries' task lines, shape (n,)."""
        docs = []
        for m in entries:
            if m.id not in self._tok:
                self._tok[m.id] = tokenize(task_line(m.text))
            docs.append(self._tok[m.id])
        return bm25_scores(query, docs, self.k1, self.b)

    def top_k(self, query: str, entries: list[Entry], k: int) -> list[Entry]:
        """The ``k`` best entries with a positive score, best first (ties: older first)."""
        s = self.scores(query, entries)
        order = [i for i in np.argsort(-s, kind="stable") if s[i] > 0][:k]
        return [entries[i] for i in order]


def is_raw(m: Entry) -> bool:
    """Whether ``m`` is a raw trajectory a read-time curator can parse (a ``Task:`` line)."""
    return parse_raw(m.text) is not None


def raw_top_k(ctx: CurateContext, index: TaskIndex, query: str, k: int) -> list[Entry]:
    """The ``k`` best raw trajectories for ``query``: BM25 over the task lines of the bank's
    raw trajectories (:func:`is_raw`), or, without a bank, the memory's recall filtered to
    them **before** its pool is cut (``where=``), so other entries never take a place."""
    if ctx.bank is None:
        return ctx.recall(query, k, where=is_raw)
    return index.top_k(query, [m for m in ctx.bank() if is_raw(m)], k)


__all__ = ["TaskIndex", "bm25_scores", "is_raw", "raw_top_k", "task_line"]
