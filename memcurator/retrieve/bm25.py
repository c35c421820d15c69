"""BM25 candidate recall over the resident texts, maintained incrementally.

The index scores exactly as ``bm25s`` (method ``"lucene"``, float32 scores) does on the same
texts, but a write, an eviction or an edit changes it in time proportional to that document's
tokens instead of refitting the whole corpus (issue 9, section 5). ``bm25s`` has no incremental
update; it stays a dependency and is the reference the tests compare against, score for score.

References
----------
Kamphuis et al., "Which BM25 do you mean? A large-scale reproducibility study of scoring
variants", ECIR 2020 (the Lucene variant: idf = ln(1 + (N - df + 0.5) / (df + 0.5)),
tf-component tf / (tf + k1 (1 - b + b |d| / avgdl))).
"""

from __future__ import annotations

import math
from collections import Counter

import numpy as np

from memcurator.embed.text import word_tokens

_EMPTY = "_empty_"  # the token of a document without tokens (as bm25s is fed here)


def tokenize(text: str) -> list[str]:
    """Word tokens of every script, the same for queries and entries.

    Pure-ASCII text gives its lower-cased ``[a-z0-9_]+`` runs (as before); other text is
    NFKC-normalised and case-folded, and scripts without spaces (CJK, Thai, ...) give character
    unigrams and bigrams (:func:`memcurator.embed.text.word_tokens`).

    Examples
    --------
    >>> tokenize("Count orders")
    ['count', 'orders']
    >>> tokenize("绿茶")
    ['绿', '茶', '绿茶']
    """
    return word_tokens(text)


class _Postings:
    """One term's postings: document slots and term frequencies in growable arrays."""

    __slots__ = ("slots", "tfs", "n")

    def __init__(self) -> None:
        self.slots = np.empty(4, dtype=np.int64)
        self.tfs = np.empty(4, dtype=np.float64)
        self.n = 0

    def append(self, slot: int, tf: int) -> None:
        if self.n == len(self.slots):
            self.slots = np.resize(self.slots, 2 * self.n)
            self.tfs = np.resize(self.tfs, 2 * self.n)
        self.slots[self.n] = slot
        self.tfs[self.n] = tf
        self.n += 1


class BM25Index:
    """A BM25 index over a list of texts whose positions (rows) shift as texts come and go.

    Documents are addressed by row, ``0 .. len(index) - 1``, in the order they were added;
    deleting rows shifts the later ones down, as deleting from a list does. Internally each
    document has a stable slot; postings of deleted slots are skipped at query time and
    dropped when they outnumber the live ones (amortised O(1) per change).

    Parameters
    ----------
    k1, b : float
        BM25 parameters (Robertson & Zaragoza defaults 1.5 and 0.75).

    Notes
    -----
    Scores equal ``bm25s.BM25(k1, b).get_scores`` (Lucene variant, float32) on the same texts:
    each term's contribution is computed in float64 and rounded to float32, and contributions
    are summed in float32 in query-token order (a repeated query token counts again).

    Examples
    --------
    >>> idx = BM25Index()
    >>> idx.fit(["insert a payment", "count employees by region", "delete old orders"])
    >>> ids, scores = idx.search("how many employees per region", k=2)
    >>> int(ids[0])
    1
    >>> idx.delete_rows([0])                 # "count employees ..." is now row 0
    >>> int(idx.search("employees", k=1)[0][0])
    0
    >>> idx.append("employees of the month")
    >>> len(idx)
    3
    """

    def __init__(self, k1: float = 1.5, b: float = 0.75):
        self.k1 = k1
        self.b = b
        self.fit([])

    # ------------------------------------------------------------------ building
    def fit(self, texts: list[str]) -> None:
        """(Re)build the index; ``texts[i]`` gets row ``i``."""
        self._vocab: dict[str, int] = {}
        self._post: list[_Postings] = []
        self._df: list[int] = []
        self._docs: list[Counter[int] | None] = []  # by slot; None once deleted
        self._dl = np.zeros(16, dtype=np.int64)  # by slot
        self._slot_row = np.full(16, -1, dtype=np.int64)  # by slot; -1 once deleted
        self._row_slot = np.zeros(16, dtype=np.int64)  # by row
        self._n = 0
        self._total_len = 0
        self._dead_postings = 0
        self._live_postings = 0
        for t in texts:
            self.append(t)

    def __len__(self) -> int:
        return self._n

    def append(self, text: str) -> None:
        """Add ``text`` as the last row. O(tokens of ``text``)."""
        toks = tokenize(text) or [_EMPTY]
        counts: Counter[int] = Counter()
        for w in toks:
            tid = self._vocab.get(w)
            if tid is None:
                tid = self._vocab[w] = len(self._post)
                self._post.append(_Postings())
                self._df.append(0)
            counts[tid] += 1
        slot = len(self._docs)
        self._docs.append(counts)
        if slot >= len(self._dl):
            self._dl = np.resize(self._dl, 2 * slot)
            self._slot_row = np.resize(self._slot_row, 2 * slot)
        if self._n >= len(self._row_slot):
            self._row_slot = np.resize(self._row_slot, 2 * self._n)
        self._dl[slot] = len(toks)
        self._slot_row[slot] = self._n
        self._row_slot[self._n] = slot
        for tid, tf in counts.items():
            self._post[tid].append(slot, tf)
            self._df[tid] += 1
        self._live_postings += len(counts)
        self._n += 1
        self._total_len += len(toks)

    def delete_rows(self, rows: list[int] | np.ndarray) -> None:
        """Delete the documents at ``rows``; later rows shift down to close the gaps.

        Raises
        ------
        IndexError
            A row outside ``0 .. len(self) - 1``.
        """
        rows = np.unique(np.asarray(rows, dtype=np.int64))
        if rows.size == 0:
            return
        if rows[0] < 0 or rows[-1] >= self._n:
            raise IndexError(f"rows out of range 0..{self._n - 1}")
        for r in rows:
            slot = int(self._row_slot[r])
            counts = self._docs[slot]
            assert counts is not None
            for tid in counts:
                self._df[tid] -= 1
            self._dead_postings += len(counts)
            self._live_postings -= len(counts)
            self._total_len -= int(self._dl[slot])
            self._docs[slot] = None
            self._slot_row[slot] = -1
        live = np.ones(self._n, dtype=bool)
        live[rows] = False
        kept = self._row_slot[: self._n][live]
        self._n = len(kept)
        self._row_slot[: self._n] = kept
        self._slot_row[kept] = np.arange(self._n)
        if self._dead_postings > max(1024, self._live_postings):
            self._compact()

    def replace_row(self, row: int, text: str) -> None:
        """Give the document at ``row`` a new text (its row does not move)."""
        if not 0 <= row < self._n:
            raise IndexError(f"row {row} out of range 0..{self._n - 1}")
        # delete + append, then move the new slot into the old row
        self.delete_rows([row])
        self.append(text)
        slot = int(self._row_slot[self._n - 1])
        order = np.concatenate(
            [self._row_slot[:row], [slot], self._row_slot[row : self._n - 1]]
        ).astype(np.int64)
        self._row_slot[: self._n] = order
        self._slot_row[order] = np.arange(self._n)

    def _compact(self) -> None:
        """Rebuild the postings from the live documents only (slots renumbered by row)."""
        docs = [self._docs[int(s)] for s in self._row_slot[: self._n]]
        dls = self._dl[self._row_slot[: self._n]].copy()
        self._post = [_Postings() for _ in self._post]
        self._docs = []
        for row, counts in enumerate(docs):
            assert counts is not None
            self._docs.append(counts)
            for tid, tf in counts.items():
                self._post[tid].append(row, tf)
        size = max(16, 2 * self._n)
        self._dl = np.zeros(size, dtype=np.int64)
        self._dl[: self._n] = dls
        self._slot_row = np.full(size, -1, dtype=np.int64)
        self._slot_row[: self._n] = np.arange(self._n)
        self._row_slot = np.zeros(size, dtype=np.int64)
        self._row_slot[: self._n] = np.arange(self._n)
        self._dead_postings = 0

    # ------------------------------------------------------------------ scoring
    def scores(self, query: str) -> np.ndarray | None:
        """BM25 score of every row for ``query``, shape (n,), float32; None if no query token
        occurs in the index."""
        if self._n == 0:
            return None
        tids = [self._vocab[w] for w in tokenize(query) if w in self._vocab]
        tids = [t for t in tids if self._df[t] > 0]
        if not tids:
            return None
        n_docs = self._n
        avgdl = np.float64(self._total_len / n_docs)
        out = np.zeros(n_docs, dtype=np.float32)
        for tid in tids:
            p = self._post[tid]
            slots, tfs = p.slots[: p.n], p.tfs[: p.n]
            rows = self._slot_row[slots]
            ok = rows >= 0
            rows, tfs, dl = rows[ok], tfs[ok], self._dl[slots[ok]]
            df = self._df[tid]
            idf = np.float32(math.log(1 + (n_docs - df + 0.5) / (df + 0.5)))
            tfc = tfs / (self.k1 * ((1 - self.b) + self.b * dl / avgdl) + tfs)
            out[rows] += (np.float64(idf) * tfc).astype(np.float32)
        return out

    def search(self, query: str, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Top-``k`` rows with a positive BM25 score.

        Returns
        -------
        ids : ndarray of shape (k',), int
        scores : ndarray of shape (k',), float, descending; ``k' <= min(k, n_docs)``
        """
        if k <= 0:
            return np.zeros(0, dtype=int), np.zeros(0)
        sc = self.scores(query)
        if sc is None:
            return np.zeros(0, dtype=int), np.zeros(0)
        scores = np.asarray(sc, dtype=np.float64)
        k = min(k, self._n)
        top = np.argpartition(-scores, k - 1)[:k]
        top = top[np.argsort(-scores[top], kind="stable")]
        keep = scores[top] > 0
        return top[keep], scores[top][keep]
