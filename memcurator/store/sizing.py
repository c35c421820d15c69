"""Byte accounting of an entry: ``sizeof(entry)`` is computed once, on admission."""

from __future__ import annotations

import json
from typing import Any

import numpy as np


def default_sizeof(text: str, meta: dict[str, Any], embedding: np.ndarray) -> int:
    """Stored footprint ``b(m)`` in bytes.

    UTF-8 bytes of the text, plus the bytes of the JSON-encoded metadata, plus the embedding's
    ``nbytes`` (float32: 4 bytes a dimension).

    Examples
    --------
    >>> default_sizeof("héllo", {}, np.zeros(4, dtype=np.float32))
    24
    """
    return (
        len(text.encode("utf-8"))
        + len(json.dumps(meta, sort_keys=True))
        + int(np.asarray(embedding, dtype=np.float32).nbytes)
    )
