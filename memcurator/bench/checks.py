"""Sanity checks of bench settings that are valid numbers but make no sense for the data.

They return warnings (and the settings to use) instead of printing, so the CLI and the library
say the same thing.
"""

from __future__ import annotations

from memcurator.embed import HashingEmbedder
from memcurator.store.vectors import vector_nbytes

#: Stored bytes of one SQL exemplar entry of the benchmark: its 512-d float32 embedding
#: (2,048 bytes) + text + metadata. Measured: 3,097 bytes a resident entry on average
#: (``memcurator bench --executor fake --tasks 60``, lru, peak bytes / final entries).
TYPICAL_ENTRY_BYTES = 3_000


def clamp_families(requested: int | None, available: int) -> tuple[int, str | None]:
    """The number of families to use and a warning when ``requested`` exceeds ``available``.

    Examples
    --------
    >>> clamp_families(1000, 348)
    (348, '--families 1000 is more than the 348 variant families in the data; using 348')
    >>> clamp_families(60, 348)
    (60, None)
    """
    if requested is None or requested <= available:
        return (available if requested is None else requested), None
    return available, (
        f"--families {requested} is more than the {available} variant families in the data; "
        f"using {available}"
    )


def budget_warning(
    max_bytes: int, typical_entry: int = TYPICAL_ENTRY_BYTES, vector_dtype: str = "float32"
) -> str | None:
    """A warning when the budget B cannot hold one typical entry (None when it can).

    ``typical_entry`` is for float32 vectors; with another ``vector_dtype`` its vector part
    (2,048 bytes) is replaced by that precision's
    (:func:`memcurator.store.vectors.vector_nbytes`).

    Examples
    --------
    >>> budget_warning(100_000) is None
    True
    >>> budget_warning(10).split(";")[1]
    ' bounded policies (curator, lru, ...) will hold nothing and behave like no-memory'
    >>> "one typical entry" in budget_warning(2500)
    True
    >>> budget_warning(2500, vector_dtype="int8") is None
    True
    """
    dim = HashingEmbedder().dim
    floor = vector_nbytes(dim, vector_dtype)
    typical_entry = typical_entry - vector_nbytes(dim, "float32") + floor
    if max_bytes < floor:
        return (
            f"--max-bytes {max_bytes} is smaller than one entry (at least {floor} bytes: its "
            "embedding alone); bounded policies (curator, lru, ...) will hold nothing and behave "
            "like no-memory"
        )
    if max_bytes < typical_entry:
        return (
            f"--max-bytes {max_bytes} is smaller than one typical entry (about {typical_entry} "
            "bytes); bounded policies will hold nothing or almost nothing"
        )
    return None
