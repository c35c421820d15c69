"""Embedders: turn text into fixed-dimension unit vectors.

The default, :class:`HashingEmbedder`, needs no model. Others register in :data:`EMBEDDERS`
and are built by :func:`create_embedder` (one registry, lazy imports; STYLE.md rule 8).
"""

from __future__ import annotations

import inspect
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
        "openai": "memcurator.embed.openai_compat:OpenAICompatEmbedder",
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


def _value(v: str) -> Any:
    for cast in (int, float):
        try:
            return cast(v)
        except ValueError:
            pass
    return {"true": True, "false": False}.get(v.lower(), v)


def embedder_from_spec(spec: str) -> Embedder:
    """Build an embedder from a one-line spec: ``NAME`` or ``NAME:key=value,key=value``.

    The form the CLI takes (``memcurator serve --embedder``, ``memcurator reembed``). Values
    that read as integers or floats are passed as numbers, ``true``/``false`` as booleans.
    Secrets do not belong in a spec (it shows in the process list): the OpenAI-compatible
    embedder reads its key from ``$MEMCURATOR_EMBED_API_KEY`` or ``$OPENAI_API_KEY``.

    Parameters
    ----------
    spec : str
        E.g. ``"hashing"``, ``"hashing:dim=256"``,
        ``"openai:base_url=http://127.0.0.1:8080/v1,model=nomic-embed-text,dim=768"``.

    Returns
    -------
    Embedder

    Raises
    ------
    UnknownName
        ``NAME`` is not registered; the message lists the known names.
    InvalidInput
        A part after ``:`` is not ``key=value``, a key is repeated, or the embedder takes no
        such argument.

    Examples
    --------
    >>> embedder_from_spec("hashing:dim=64").dim
    64
    >>> embedder_from_spec("openai:base_url=http://127.0.0.1:9/v1,model=m,dim=8").name
    'openai-m-8'
    """
    from memcurator.errors import InvalidInput

    name, _, rest = spec.strip().partition(":")
    kwargs: dict[str, Any] = {}
    for part in filter(None, (p.strip() for p in rest.split(","))):
        key, eq, val = part.partition("=")
        key = key.strip()
        if not eq or not key.isidentifier():
            raise InvalidInput(
                f"embedder spec {spec!r}: {part!r} is not key=value "
                "(write NAME or NAME:key=value,key=value)"
            )
        if key in kwargs:
            raise InvalidInput(f"embedder spec {spec!r}: {key!r} given twice")
        kwargs[key] = _value(val.strip())
    factory = EMBEDDERS.factory(name.strip())
    try:
        inspect.signature(factory).bind(**kwargs)
    except TypeError as e:
        raise InvalidInput(f"embedder spec {spec!r}: {e}") from None
    return factory(**kwargs)


__all__ = [
    "EMBEDDERS",
    "Embedder",
    "HashingEmbedder",
    "create_embedder",
    "embedder_from_spec",
    "has_content",
]
