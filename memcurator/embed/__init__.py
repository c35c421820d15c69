"""Embedders: turn text into fixed-dimension unit vectors.

The default, :class:`HashingEmbedder`, needs no model. Others register in :data:`EMBEDDERS`
and are built by :func:`create_embedder` (one registry, lazy imports; STYLE.md rule 8).
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np

from memcurator.embed.hashing import HashingEmbedder
from memcurator.embed.text import has_content
from memcurator.registry import Registry


class Embedder(Protocol):
    """What the store and the policies need from an embedder."""

    dim: int

    @property
    def name(self) -> str: ...

    def embed(self, text: str) -> np.ndarray: ...


def _sentence_transformers(**kw: Any) -> Embedder:
    from memcurator.embed.sbert import SentenceTransformerEmbedder  # optional dependency

    return SentenceTransformerEmbedder(**kw)


def _minilm(**kw: Any) -> Embedder:
    from memcurator.embed.minilm import MiniLMEmbedder  # optional extra "embed"

    return MiniLMEmbedder(**kw)


EMBEDDERS: Registry[Embedder] = Registry(
    "embedder",
    {
        "hashing": HashingEmbedder,
        "minilm": _minilm,
        "sentence-transformers": _sentence_transformers,
    },
)


def create_embedder(name: str = "hashing", **kwargs: Any) -> Embedder:
    """Build a registered embedder by name.

    Raises
    ------
    UnknownName
        If ``name`` is not registered; the message lists the known names.
    """
    return EMBEDDERS.create(name, **kwargs)


__all__ = ["Embedder", "HashingEmbedder", "create_embedder", "has_content", "EMBEDDERS"]
