"""Exact vectors of a derived precision, rebuilt from the entries' texts on every load.

A namespace stored in a derived precision (:data:`memcurator.store.vectors.DERIVED_DTYPES`:
``binary``, the sign bits) keeps no exact vector. The resident set needs exact ones: Keep,
admission, the same-request graph and recall all read cosines of the resident matrix, and their
thresholds were set on exact vectors. So :class:`VectorDeriver` embeds each entry's recall text
again when the set loads, with the handle's own embedder, and checks the result against the
stored signs (:func:`memcurator.store.vectors.derive_checked`). A handle that keeps running and
one that reopens the store then see the same vectors, bit for bit, as with float32.

Only a deterministic embedder (``deterministic = True``: the hashing embedder) may do this;
:func:`check_derivable` refuses the others with the reason. The cost is one embedding per
resident entry at load (measured in docs/storage.md); vectors of texts already resident are
reused across reloads (a reload after another process's commit re-embeds only new texts).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from memcurator.errors import InvalidInput
from memcurator.lifecycle.checks import embed_checked
from memcurator.store.base import REEMBED_PENDING, Store
from memcurator.store.vectors import DERIVED_DTYPES, derive_checked
from memcurator.types import Entry


def check_derivable(embedder: Any, vector_dtype: str) -> None:
    """Refuse a derived ``vector_dtype`` for an embedder that is not deterministic.

    Raises
    ------
    InvalidInput
        ``vector_dtype`` is derived and ``embedder.deterministic`` is not true.

    Examples
    --------
    >>> from memcurator.embed import HashingEmbedder
    >>> check_derivable(HashingEmbedder(), "binary")
    >>> check_derivable(object(), "int8")
    """
    if vector_dtype in DERIVED_DTYPES and not getattr(embedder, "deterministic", False):
        raise InvalidInput(
            f"vector_dtype {vector_dtype!r} keeps no exact vector and derives it again from the "
            f"text, which needs a deterministic embedder (the hashing one); "
            f"{getattr(embedder, 'name', type(embedder).__name__)!r} is not: use int8"
        )


class VectorDeriver:
    """Replaces the decoded codes of a derived namespace's entries by their exact vectors.

    Parameters
    ----------
    store : Store
    namespace : str
    embedder : Embedder
        The handle's embedder (its ``embed`` is applied to each entry's recall text).
    identity : str
        The handle's embedder identity: a namespace recording another (or a re-embedding in
        progress) is left as decoded, since the handle refuses to use it anyway.
    """

    def __init__(self, store: Store, namespace: str, embedder: Any, identity: str):
        self.store = store
        self.namespace = namespace
        self.embedder = embedder
        self.identity = identity
        self._cache: dict[str, np.ndarray] = {}

    def __call__(self, entries: list[Entry], *, whole: bool = True) -> list[Entry]:
        """``entries`` with exact embeddings when the namespace is derived (in place).

        ``whole``: ``entries`` are the whole namespace (a reload), so the text cache becomes
        theirs; False (a change-feed catch-up of a few ids) adds them to the cache, so the
        next reload does not re-embed every entry.

        Raises
        ------
        InvalidInput
            The embedder is not deterministic, or a derived vector's signs differ from the
            stored code's.
        """
        info = self.store.namespace(self.namespace)
        if (
            info.vector_dtype not in DERIVED_DTYPES
            or info.embedder.startswith(REEMBED_PENDING)
            or info.embedder != self.identity
        ):
            self._cache = {}
            return entries
        check_derivable(self.embedder, info.vector_dtype)
        fresh: dict[str, np.ndarray] = {}
        for m in entries:
            v = self._cache.get(m.text)
            if v is None:
                v = embed_checked(self.embedder.embed, m.text)
            m.embedding = derive_checked(m.embedding, v, m.id)
            fresh[m.text] = m.embedding
        if whole:
            self._cache = fresh
        else:
            self._cache.update(fresh)
        return entries


__all__ = ["VectorDeriver", "check_derivable"]
