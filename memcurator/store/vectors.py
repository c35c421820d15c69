"""Stored precision of entry embeddings: float32, float16, int8 with one scale per vector, or
binary sign bits whose exact vector is derived again from the entry's text.

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
binary      ``d / 8``      the sign bits ``e_i > 0`` packed little-endian bit order (bit ``i``
                           of byte ``i // 8``); ``d`` must be a multiple of 8. The code alone
                           decodes to the unit vector ``(2·bit − 1) / √d``; the exact vector
                           is derived again from the text (below).
=========== ============== ===============================================================

``binary`` is a *derived* precision (:data:`DERIVED_DTYPES`): the store keeps only the sign
code, and a :class:`~memcurator.Memory` rebuilds each entry's exact float32 vector by embedding
its recall text again when it loads the resident set, checking it against the stored signs
(:func:`derive_checked`). That is exact only with a deterministic embedder, one whose vector of
a text is the same bit for bit in every process (``deterministic = True``: the hashing
embedder); a model embedder (MiniLM, sentence-transformers, an HTTP endpoint) may differ in
the last bits between machines or library versions, so a namespace using one cannot be binary
(int8 is its most compact precision). The code itself serves a process that holds no vectors:
a Hamming short list rescored exactly (:func:`memcurator.retrieve.dense.hamming_topk`).

The byte budget counts these bytes (:func:`memcurator.store.sizing.default_sizeof`): the 512-d
hashing embedding takes 2,048 bytes as float32, 1,024 as float16, 516 as int8 and 64 as binary.
"""

from __future__ import annotations

import numpy as np

from memcurator.errors import InvalidInput

#: The stored precisions, default first.
VECTOR_DTYPES = ("float32", "float16", "int8", "binary")

#: Precisions that store no exact vector: it is derived again from the text (module notes).
DERIVED_DTYPES = ("binary",)

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
    [2048, 1024, 516, 64]
    """
    dtype = check_dtype(dtype)
    if dtype == "float32":
        return 4 * int(dim)
    if dtype == "float16":
        return 2 * int(dim)
    if dtype == "binary":
        return -(-int(dim) // 8)
    return _SCALE.itemsize + int(dim)


def _check_binary_dim(d: int) -> None:
    if d % 8:
        raise InvalidInput(
            f"binary codes need a dimension divisible by 8, got {d}; store this namespace as int8"
        )


def sign_code(embedding: np.ndarray) -> np.ndarray:
    """The packed sign bits of ``embedding`` (shape (d,), d divisible by 8), uint8 of shape
    (d/8,): bit ``i`` (little-endian bit order) is ``embedding[i] > 0``.

    Also takes a matrix (n, d) and gives (n, d/8), one code a row.

    Raises
    ------
    InvalidInput
        ``d`` not divisible by 8.

    Examples
    --------
    >>> sign_code(np.array([1, -1, 0, 2, 0, 0, 0, -3], dtype=np.float32)).tolist()
    [9]
    """
    e = np.asarray(embedding)
    _check_binary_dim(int(e.shape[-1]))
    return np.packbits(e > 0, axis=-1, bitorder="little")


def encode(embedding: np.ndarray, dtype: str) -> bytes:
    """The BLOB of ``embedding`` (shape (d,)) in ``dtype`` (layouts in the module notes).

    float32 gives exactly ``np.asarray(embedding, dtype=np.float32).tobytes()``, as before
    schema v3.

    Raises
    ------
    InvalidInput
        Unknown ``dtype``, a value that float16 cannot hold (over 65504 in magnitude), or a
        binary code of a dimension not divisible by 8.

    Examples
    --------
    >>> len(encode(np.ones(8, dtype=np.float32), "int8")), len(encode(np.ones(8), "binary"))
    (12, 1)
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
    if dtype == "binary":
        return sign_code(e).tobytes()
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
    >>> b = np.array([0.5, -1.0, 0.25, 0.0, -2.0, 3.0, 1.0, -0.1], dtype=np.float32)
    >>> np.sign(decode(encode(b, "binary"), "binary")).tolist()
    [1.0, -1.0, 1.0, -1.0, -1.0, 1.0, 1.0, -1.0]
    """
    dtype = check_dtype(dtype)
    n = len(blob)
    if dtype == "float32":
        ok = n % 4 == 0
        d = n // 4
    elif dtype == "float16":
        ok = n % 2 == 0
        d = n // 2
    elif dtype == "binary":
        ok = True
        d = 8 * n
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
    if dtype == "binary":
        bits = np.unpackbits(np.frombuffer(blob, dtype=np.uint8), bitorder="little")
        return ((2.0 * bits - 1.0) / np.sqrt(d)).astype(np.float32)
    s = np.frombuffer(blob[: _SCALE.itemsize], dtype=_SCALE)[0]
    q = np.frombuffer(blob[_SCALE.itemsize :], dtype=np.int8)
    return (q.astype(np.float32) * np.float32(s)).astype(np.float32)


def stored_vector(embedding: np.ndarray, dtype: str) -> np.ndarray:
    """``embedding`` as the store gives it back after storing it in ``dtype``, float32.

    For float32 this is the input itself as float32 (no rounding, no copy when it already is);
    so it is for a derived precision (:data:`DERIVED_DTYPES`), whose exact vector a handle
    derives again from the text on load.

    Raises
    ------
    InvalidInput
        Unknown ``dtype``; a value float16 cannot hold; a non-zero vector that the precision
        turns into zeros (it could never be recalled by content); a binary code of a dimension
        not divisible by 8.

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
    if dtype in DERIVED_DTYPES:
        _check_binary_dim(int(e.size))
        return e
    out = decode(encode(e, dtype), dtype)
    if np.any(e) and not np.any(out):
        raise InvalidInput(
            f"the embedding is too small for {dtype} (it rounds to the zero vector); store "
            "this namespace as float32"
        )
    return out


def derive_checked(decoded: np.ndarray, derived: np.ndarray, entry_id: str = "") -> np.ndarray:
    """``derived`` (an entry's vector embedded again from its text) if its sign bits equal the
    stored code's (``decoded``, what :func:`decode` gave for a binary row), as float32.

    The check catches an embedder that is not the one that wrote the code, or not
    deterministic: its vectors would silently differ from those the entry was admitted with.

    Raises
    ------
    InvalidInput
        The signs differ (the message names the entry and how many dimensions differ).

    Examples
    --------
    >>> e = np.array([0.5, -0.5, 0.5, 0.5, -0.5, 0.0, 0.0, 0.0], dtype=np.float32)
    >>> c = decode(encode(e, "binary"), "binary")
    >>> derive_checked(c, e) is not None
    True
    """
    d = np.asarray(derived, dtype=np.float32)
    bad = int(np.count_nonzero((d > 0) != (np.asarray(decoded) > 0)))
    if d.shape != np.asarray(decoded).shape or bad:
        raise InvalidInput(
            f"entry {entry_id!r}: its vector embedded again from its text differs from the "
            f"stored binary code in {bad} of {d.size} signs; the embedder is not the one that "
            "wrote it or is not deterministic (convert with `memcurator reembed "
            "--vector-dtype int8` using the original embedder)"
        )
    return d


__all__ = [
    "DEFAULT_DTYPE",
    "DERIVED_DTYPES",
    "VECTOR_DTYPES",
    "check_dtype",
    "decode",
    "derive_checked",
    "encode",
    "sign_code",
    "stored_vector",
    "vector_nbytes",
]
