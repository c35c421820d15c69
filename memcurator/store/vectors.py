"""Stored precision of entry embeddings: float32, float16 or int8 with one scale per vector.

A namespace records its ``vector_dtype``; every entry's embedding BLOB is stored in it, and each
row records the precision it was written in (so a namespace being converted stays readable).
The resident matrix in memory is always float32: a vector is dequantised on load, and a new
entry enters the resident set as the store will give it back (:func:`stored_vector`), so a
handle that keeps running and one that reopens the file see the same vectors.

BLOB layouts (little-endian, ``d`` the namespace's dimension):

=========== ============== ===============================================================
dtype       bytes          layout
=========== ============== ===============================================================
float32     ``4·d``        ``d`` IEEE float32 values (the layout of schema v1-v2, unchanged)
float16     ``2·d``        ``d`` IEEE float16 values
int8        ``4 + d``      one float32 scale ``s = max|e| / 127``, then ``d`` signed bytes
                           ``q = round(e / s)`` in [-127, 127]; ``e ≈ q · s``. A zero vector
                           has ``s = 0`` and stores ``q = 0`` (no division by zero).
=========== ============== ===============================================================

The byte budget counts these bytes (:func:`memcurator.store.sizing.default_sizeof`): the 512-d
hashing embedding takes 2,048 bytes as float32, 1,024 as float16 and 516 as int8.
"""

from __future__ import annotations

import numpy as np

from memcurator.errors import InvalidInput

#: The stored precisions, default first.
VECTOR_DTYPES = ("float32", "float16", "int8")

#: The precision of a namespace that does not name one (every store before schema v3).
DEFAULT_DTYPE = "float32"

_SCALE = np.dtype("<f4")


def check_dtype(name: object) -> str:
    """``name`` if it is a known stored precision.

    Raises
    ------
    InvalidInput
        Anything else; the message lists :data:`VECTOR_DTYPES`.

    Examples
    --------
    >>> check_dtype("float16")
    'float16'
    """
    if not isinstance(name, str) or name not in VECTOR_DTYPES:
        raise InvalidInput(f"unknown vector_dtype {name!r}; known: {list(VECTOR_DTYPES)}")
    return name


def vector_nbytes(dim: int, dtype: str) -> int:
    """Bytes of one stored ``dim``-dimensional vector in ``dtype``.

    Examples
    --------
    >>> [vector_nbytes(512, d) for d in VECTOR_DTYPES]
    [2048, 1024, 516]
    """
    dtype = check_dtype(dtype)
    if dtype == "float32":
        return 4 * int(dim)
    if dtype == "float16":
        return 2 * int(dim)
    return _SCALE.itemsize + int(dim)


def encode(embedding: np.ndarray, dtype: str) -> bytes:
    """The BLOB of ``embedding`` (shape (d,)) in ``dtype`` (layouts in the module notes).

    float32 gives exactly ``np.asarray(embedding, dtype=np.float32).tobytes()``, as before
    schema v3.

    Raises
    ------
    InvalidInput
        Unknown ``dtype``, or a value that float16 cannot hold (over 65504 in magnitude).

    Examples
    --------
    >>> len(encode(np.ones(8, dtype=np.float32), "int8"))
    12
    """
    dtype = check_dtype(dtype)
    e = np.asarray(embedding, dtype=np.float32)
    if dtype == "float32":
        return e.tobytes()
    if dtype == "float16":
        with np.errstate(over="ignore"):
            h = e.astype("<f2")
        if not np.all(np.isfinite(h)) and np.all(np.isfinite(e)):
            raise InvalidInput(
                "embedding has values beyond float16's range (|x| > 65504); store this "
                "namespace as float32 or int8"
            )
        return h.tobytes()
    m = float(np.max(np.abs(e))) if e.size else 0.0
    s = np.float32(m / 127.0)
    if s > 0:
        q = np.clip(np.rint(e / s), -127, 127).astype(np.int8)
    else:  # the zero vector: nothing to scale
        q = np.zeros(e.shape, dtype=np.int8)
    return np.asarray([s], dtype=_SCALE).tobytes() + q.tobytes()


def decode(blob: bytes, dtype: str, dim: int | None = None) -> np.ndarray:
    """The float32 vector of a BLOB written by :func:`encode` in ``dtype``.

    Parameters
    ----------
    blob : bytes
    dtype : str
    dim : int, optional
        Expected dimension; checked when given.

    Returns
    -------
    ndarray of shape (d,), float32
        A fresh array (never a view of ``blob``).

    Raises
    ------
    InvalidInput
        Unknown ``dtype``, or a BLOB whose length does not fit ``dtype`` (and ``dim``).

    Examples
    --------
    >>> e = np.array([0.5, -1.0, 0.25], dtype=np.float32)
    >>> decode(encode(e, "float16"), "float16").tolist()
    [0.5, -1.0, 0.25]
    >>> decode(encode(np.zeros(3), "int8"), "int8").tolist()
    [0.0, 0.0, 0.0]
    """
    dtype = check_dtype(dtype)
    n = len(blob)
    if dtype == "float32":
        ok = n % 4 == 0
        d = n // 4
    elif dtype == "float16":
        ok = n % 2 == 0
        d = n // 2
    else:
        ok = n >= _SCALE.itemsize
        d = n - _SCALE.itemsize
    if not ok or (dim is not None and d != int(dim)):
        raise InvalidInput(
            f"stored vector of {n} bytes does not fit {dtype}"
            + (f" of dim {dim}" if dim is not None else "")
        )
    if dtype == "float32":
        return np.frombuffer(blob, dtype=np.float32).copy()
    if dtype == "float16":
        return np.frombuffer(blob, dtype="<f2").astype(np.float32)
    s = np.frombuffer(blob[: _SCALE.itemsize], dtype=_SCALE)[0]
    q = np.frombuffer(blob[_SCALE.itemsize :], dtype=np.int8)
    return (q.astype(np.float32) * np.float32(s)).astype(np.float32)


def stored_vector(embedding: np.ndarray, dtype: str) -> np.ndarray:
    """``embedding`` as the store gives it back after storing it in ``dtype``, float32.

    For float32 this is the input itself as float32 (no rounding, no copy when it already is).

    Raises
    ------
    InvalidInput
        Unknown ``dtype``; a value float16 cannot hold; a non-zero vector that the precision
        turns into zeros (it could never be recalled by content).

    Examples
    --------
    >>> e = np.array([0.6, -0.8], dtype=np.float32)
    >>> stored_vector(e, "float32") is e
    True
    >>> bool(np.abs(stored_vector(e, "int8") - e).max() <= 0.8 / 127 / 2 + 1e-7)
    True
    """
    dtype = check_dtype(dtype)
    e = np.asarray(embedding, dtype=np.float32)
    if dtype == "float32":
        return e
    out = decode(encode(e, dtype), dtype)
    if np.any(e) and not np.any(out):
        raise InvalidInput(
            f"the embedding is too small for {dtype} (it rounds to the zero vector); store "
            "this namespace as float32"
        )
    return out


__all__ = [
    "DEFAULT_DTYPE",
    "VECTOR_DTYPES",
    "check_dtype",
    "decode",
    "encode",
    "stored_vector",
    "vector_nbytes",
]
