"""Byte accounting of an entry: ``sizeof(entry)`` is computed once, on admission."""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from memcurator.store.vectors import DEFAULT_DTYPE, vector_nbytes


def default_sizeof(
    text: str,
    meta: dict[str, Any],
    embedding: np.ndarray,
    vector_dtype: str = DEFAULT_DTYPE,
    text_codec: Any = None,
) -> int:
    """Stored footprint ``b(m)`` in bytes.

    Bytes of the text and the JSON-encoded metadata as stored (UTF-8 each; with a compressing
    namespace's ``text_codec``, a :class:`~memcurator.store.compression.NamespaceCodec` with
    a dictionary, the tag byte and the one zstd frame holding both, schema v8:
    :func:`~memcurator.store.compression.entry_nbytes`), plus the bytes of the embedding as
    stored in ``vector_dtype``
    (:func:`memcurator.store.vectors.vector_nbytes`: float32 4 bytes a dimension, float16 2,
    int8 1 plus a 4-byte scale).

    Raises
    ------
    InvalidInput
        Unknown ``vector_dtype``.

    Examples
    --------
    >>> default_sizeof("héllo", {}, np.zeros(4, dtype=np.float32))
    24
    >>> default_sizeof("héllo", {}, np.zeros(512), "float16"), default_sizeof("héllo", {},
    ...     np.zeros(512), "int8")
    (1032, 524)
    """
    from memcurator.store.compression import entry_nbytes

    return entry_nbytes(text_codec, text, json.dumps(meta, sort_keys=True)) + vector_nbytes(
        int(np.asarray(embedding).size), vector_dtype
    )


def stats_bytes(stats: dict[str, float]) -> int:
    """Bytes of an entry's per-method statistics as written: their JSON, 0 when empty.

    Counted in ``b(m)`` with the origin detail (``write(stats=...)``: every byte the caller
    stores counts against the budget).

    Examples
    --------
    >>> stats_bytes({}), stats_bytes({"q_adv": 0.5})
    (0, 14)
    """
    return len(json.dumps(stats, sort_keys=True)) if stats else 0
