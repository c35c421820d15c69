"""Deterministic hashing embedder: no model, no download, same vector on every machine.

References
----------
TokenWorth, Section 4.2 / Appendix B.1: queries and memories are represented by a 512-d signed
feature hashing of word tokens and character 3-5-grams. CURATOR's sketch and harm terms reuse the
same vectors here.
"""

from __future__ import annotations

import hashlib

import numpy as np

from memcurator.embed.text import check_text, run_tokens, runs
from memcurator.errors import InvalidInput


def _h64(s: str) -> int:
    # blake2b is stable across processes and platforms (unlike hash()), and fast enough here.
    return int.from_bytes(hashlib.blake2b(s.encode("utf-8"), digest_size=8).digest(), "little")


class HashingEmbedder:
    """Signed feature hashing of word tokens and character n-grams, L2-normalized.

    Parameters
    ----------
    dim : int, default 512
        Output dimension ``d``.
    ngram_range : tuple of int, default (3, 5)
        Inclusive range of character n-gram lengths, taken over the lower-cased text with spaces
        collapsed (each word padded by one space on both sides).
    word_weight : float, default 1.0
        Weight of a word-token feature relative to one character n-gram.

    Notes
    -----
    Each feature ``f`` adds ``sign(f) * weight`` to bucket ``h(f) mod d`` where ``h`` is a 64-bit
    BLAKE2b hash and the sign is one of its high bits, so collisions cancel in expectation.

    Examples
    --------
    >>> emb = HashingEmbedder(dim=64)
    >>> v = emb.embed("Insert a payment for member 102")
    >>> v.shape, v.dtype
    ((64,), dtype('float32'))
    >>> round(float(np.linalg.norm(v)), 5)
    1.0
    >>> bool(np.allclose(v, emb.embed("Insert a payment for member 102")))
    True
    """

    #: The same text gives the same vector bit for bit in every process (pure Python hashing
    #: and float64 sums in a fixed order): a namespace may store only ``binary`` sign codes and
    #: derive the exact vectors again (:mod:`memcurator.lifecycle.derive`).
    deterministic = True

    def __init__(
        self, dim: int = 512, ngram_range: tuple[int, int] = (3, 5), word_weight: float = 1.0
    ):
        self.dim = dim
        self.ngram_range = ngram_range
        self.word_weight = word_weight
        if int(dim) <= 0:
            raise InvalidInput(f"dim must be a positive integer, got {dim!r}")
        lo, hi = ngram_range
        if not 1 <= lo <= hi:
            raise InvalidInput(f"ngram_range must satisfy 1 <= lo <= hi, got {ngram_range!r}")

    @property
    def name(self) -> str:
        """Identifier stored with a namespace so that a mismatch is caught at open."""
        lo, hi = self.ngram_range
        return f"hashing-{self.dim}-{lo}-{hi}-{self.word_weight:g}"

    def features(self, text: str) -> list[tuple[str, float]]:
        """The (feature, weight) pairs hashed for ``text``: words, then character n-grams.

        Words and n-grams come from :func:`memcurator.embed.text.runs`: for pure-ASCII text the
        lower-cased ``[a-z0-9_]+`` runs (the historical features, unchanged); otherwise the
        NFKC-normalised, case-folded word runs of every script, where a run of a script written
        without spaces (CJK, Thai, ...) contributes its character unigrams and bigrams as words
        and its character n-grams as one padded run.
        """
        rs = runs(text)
        feats: list[tuple[str, float]] = [
            ("w:" + w, self.word_weight) for r in rs for w in run_tokens(r)
        ]
        lo, hi = self.ngram_range
        for r in rs:
            padded = f" {r.text} "
            for n in range(lo, hi + 1):
                for i in range(len(padded) - n + 1):
                    feats.append(("c:" + padded[i : i + n], 1.0))
        return feats

    def embed(self, text: str) -> np.ndarray:
        """Embed one text.

        Parameters
        ----------
        text : str
            Any text, in any script.

        Returns
        -------
        ndarray of shape (dim,), float32
            Unit L2 norm; the zero vector if ``text`` has no word characters of any script
            (see :func:`memcurator.embed.text.has_content`).

        Raises
        ------
        InvalidInput
            If ``text`` is not a ``str``.
        """
        check_text(text)
        v = np.zeros(self.dim, dtype=np.float64)
        for f, w in self.features(text):
            h = _h64(f)
            sign = 1.0 if (h >> 63) & 1 else -1.0
            v[h % self.dim] += sign * w
        n = np.linalg.norm(v)
        if n > 0:
            v /= n
        return v.astype(np.float32)

    def embed_many(self, texts: list[str]) -> np.ndarray:
        """Embed a batch; returns an array of shape ``(len(texts), dim)``, float32."""
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, t in enumerate(texts):
            out[i] = self.embed(t)
        return out

    def __repr__(self) -> str:
        return (
            f"HashingEmbedder(dim={self.dim}, ngram_range={self.ngram_range}, "
            f"word_weight={self.word_weight})"
        )
