"""A recall's query and arguments, validated (shared by in-memory and in-database recall)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from memcurator import limits
from memcurator.embed import Embedder
from memcurator.embed.text import has_content
from memcurator.errors import InvalidInput
from memcurator.retrieve.hybrid import recall_text


def query_vector(embedder: Embedder, query: str) -> tuple[str, np.ndarray]:
    """A task query's task line (:func:`~memcurator.retrieve.hybrid.recall_text`) and its
    embedding, float32 of shape (d,), after validation.

    Raises
    ------
    InvalidInput
        Empty query, one without a letter or digit of any script, or one the embedder maps to
        NaN or infinite values.
    """
    if not isinstance(query, str) or not query.strip():
        raise InvalidInput("query must be a non-empty string")
    if not has_content(query):
        raise InvalidInput(
            f"query {query[:40]!r} has no letter or digit of any script; nothing to match"
        )
    line = recall_text(query)  # a query written as an entry is compared by its task line
    e_q = np.asarray(embedder.embed(line), dtype=np.float32)
    if not np.all(np.isfinite(e_q)):
        raise InvalidInput("the embedder returned NaN or infinite values for this query")
    return line, e_q


def check_recall_args(k: Any, min_score: Any, meta: Any = None) -> None:
    """Validate :func:`recall_for`'s ``k`` (at most :data:`memcurator.limits.MAX_RECALL_K`),
    ``min_score`` and ``meta`` (values: finite numbers, 64-bit integers).

    Raises
    ------
    InvalidInput
    """
    limits.check_recall_k(k)
    if min_score is not None and (
        not isinstance(min_score, int | float) or not math.isfinite(min_score)
    ):
        raise InvalidInput(f"min_score must be a finite number or None, got {min_score!r}")
    if meta is not None:
        if not isinstance(meta, dict):
            raise InvalidInput(f"meta must be a dict of key: value pairs, got {meta!r}")
        for key, v in meta.items():
            if not isinstance(key, str) or not (v is None or isinstance(v, str | int | float)):
                raise InvalidInput(
                    f"meta filter {key!r}: {v!r}; keys must be str and values str, number, "
                    "bool or None"
                )
            limits.check_meta_value(v, f"meta filter {key!r}")


#: What of an entry is embedded and indexed for recall (its ``Task:`` line: ``recall_text``).
#: Part of the namespace's embedder identity, so a store embedded otherwise is detected.
RECALL_FIELD = "task-line"


def embedder_identity(embedder: Embedder) -> str:
    """The embedder identity a namespace stores: the embedder's name and what it embeds.

    Examples
    --------
    >>> from memcurator.embed import HashingEmbedder
    >>> embedder_identity(HashingEmbedder())
    'hashing-512-3-5-1+task-line'
    """
    return f"{embedder.name}+{RECALL_FIELD}"


def best_finite(scores: np.ndarray, k: int) -> list[int]:
    """Positions of the ``k`` best finite ``scores``, best first, ties in order (NaN and
    ``-inf`` are never ranked).

    Examples
    --------
    >>> best_finite(np.array([0.2, np.nan, 0.9, 0.2, -np.inf]), 3)
    [2, 0, 3]
    """
    ok = np.isfinite(scores)
    return [int(j) for j in np.argsort(-np.where(ok, scores, -np.inf), kind="stable") if ok[j]][:k]


__all__ = [
    "RECALL_FIELD",
    "best_finite",
    "check_recall_args",
    "embedder_identity",
    "query_vector",
]
