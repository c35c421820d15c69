"""BM25 candidate recall over the resident texts, via ``bm25s``."""

from __future__ import annotations

import numpy as np

from memcurator.embed.text import word_tokens


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


class BM25Index:
    """A BM25 index over a list of texts, rebuilt lazily when the texts change.

    Parameters
    ----------
    k1, b : float
        BM25 parameters (Robertson & Zaragoza defaults 1.5 and 0.75).

    Examples
    --------
    >>> idx = BM25Index()
    >>> idx.fit(["insert a payment", "count employees by region", "delete old orders"])
    >>> ids, scores = idx.search("how many employees per region", k=2)
    >>> int(ids[0])
    1
    """

    def __init__(self, k1: float = 1.5, b: float = 0.75):
        self.k1 = k1
        self.b = b
        self._retriever = None
        self._n = 0

    def fit(self, texts: list[str]) -> None:
        """(Re)build the index; ``texts[i]`` gets document id ``i``."""
        import bm25s

        self._n = len(texts)
        if self._n == 0:
            self._retriever = None
            return
        corpus = [tokenize(t) or ["_empty_"] for t in texts]
        vocab: dict[str, int] = {}
        ids = [[vocab.setdefault(w, len(vocab)) for w in doc] for doc in corpus]
        r = bm25s.BM25(k1=self.k1, b=self.b)
        r.index(bm25s.tokenization.Tokenized(ids=ids, vocab=vocab), show_progress=False)
        self._retriever = r
        self._vocab = vocab

    def search(self, query: str, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Top-``k`` documents with a positive BM25 score.

        Returns
        -------
        ids : ndarray of shape (k',), int
        scores : ndarray of shape (k',), float, descending; ``k' <= min(k, n_docs)``
        """
        if self._retriever is None or k <= 0:
            return np.zeros(0, dtype=int), np.zeros(0)
        q = [self._vocab[w] for w in tokenize(query) if w in self._vocab]
        if not q:
            return np.zeros(0, dtype=int), np.zeros(0)
        scores = np.asarray(self._retriever.get_scores(q), dtype=np.float64)
        k = min(k, self._n)
        top = np.argpartition(-scores, k - 1)[:k]
        top = top[np.argsort(-scores[top], kind="stable")]
        keep = scores[top] > 0
        return top[keep], scores[top][keep]
