"""Entry text kept zstd-compressed in the stores, with a dictionary per namespace (issue 35).

A namespace opts in (``text_codec = 'zstd'``: :meth:`~memcurator.store.sqlite.SQLiteStore.
set_text_codec`, ``Memory(..., compress_text=True)`` through the bench's ``--compress-text``,
or ``memcurator compress`` for an existing store). Its entries' texts are then stored in the
layout of :mod:`memcurator.store.textcodec` (a tag byte, then the UTF-8 text or a zstd frame
made with the namespace's dictionary) and decompressed on every read: callers see ``str``.

Dictionary. Trained once, automatically, when the namespace reaches :data:`AUTO_TRAIN`
entries (on their texts), or again on demand (``memcurator compress``: "retrained rarely").
Training rewrites every text of the namespace with the new dictionary in the same transaction
and updates each entry's ``bytes``, so one dictionary per namespace is ever needed. The
dictionary is stored in the store (``text_dicts`` / ``mc_text_dicts``) and counted once in the
namespace's bytes (:func:`fixed_bytes`): ``used_bytes`` is the entries' ``b(m)`` plus it, and a
:class:`~memcurator.Memory` handle subtracts it from the budget its entries may fill.

Accounting. An entry's ``b(m)`` counts its text as stored: the tag byte and the body
(:func:`text_nbytes`), so the budget counts what is stored, every part of it (the vector as
stored, the JSON meta, the origin detail, the statistics, and the namespace's dictionary).
Indexes (SQLite: none over text; PostgreSQL: ``rtsv``, the full-text form of the recall text)
are not counted today, compressed or not (``benchmarks/bytes_per_entry.py`` reports them).

Lexical search. SQLite keeps no text index (BM25 is built in memory from the decompressed
texts). PostgreSQL's full-text column ``rtsv`` was generated from ``text``; schema v7 makes it
a plain column the store fills from the text it is given (the same expression), so it works
for compressed rows too.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from memcurator.errors import InvalidInput
from memcurator.store.textcodec import DICT_BYTES, MIN_SAMPLES, RAW, TextCodec

#: The namespace's text is stored as is / zstd-compressed with its dictionary.
CODECS = ("none", "zstd")

#: Entries a compressing namespace holds when its dictionary is trained automatically (the
#: trainer's minimum, 8: a budget that holds a few dozen entries compresses too; on the SQL
#: stream a 1 KB dictionary trained on 8 entries compresses held-out entries to 262 B, a 4 KB
#: one trained on 64 to 220 B, from 643 B: docs/bytes.md).
AUTO_TRAIN = MIN_SAMPLES

#: A namespace's dictionary is trained again when it holds this many times the entries it was
#: trained on (8 -> 32 -> 128 -> 512 -> ...): each training rewrites every text, so the texts
#: rewritten over a namespace's growth stay under 4/3 of its size.
RETRAIN_FACTOR = 4

#: Texts a dictionary is trained on at most (the newest; enough for 4 KB of dictionary).
TRAIN_MAX = 4096


def check_codec(codec: str) -> str:
    """``codec`` if it is one of :data:`CODECS`.

    Raises
    ------
    InvalidInput
        Any other value.
    """
    if codec not in CODECS:
        raise InvalidInput(f"text codec must be one of {CODECS}, got {codec!r}")
    return codec


@dataclass
class NamespaceCodec:
    """What a namespace stores its texts with: ``codec`` name and the trained TextCodec.

    ``text`` is None when the namespace stores text as is, or has no dictionary yet.
    """

    codec: str = "none"
    text: TextCodec | None = None
    #: entries the dictionary was trained on (0: none, or a dictionary given to the store)
    samples: int = 0

    def due(self, count: int) -> bool:
        """Whether a namespace of ``count`` entries trains (again) now."""
        if not self.compresses:
            return False
        if self.text is None:
            return count >= AUTO_TRAIN
        return self.samples > 0 and count >= RETRAIN_FACTOR * self.samples

    @property
    def compresses(self) -> bool:
        return self.codec == "zstd"

    @property
    def dict_bytes(self) -> int:
        """Bytes of the dictionary (0 without one)."""
        return 0 if self.text is None else len(self.text.dictionary or b"")


def stored_text(codec: NamespaceCodec | None, text: str) -> str | bytes:
    """The value the store writes for ``text``: the text itself when it is stored as is (no
    codec, no dictionary yet, or compression would not save), else the tagged zstd frame.

    Examples
    --------
    >>> stored_text(None, "abc")
    'abc'
    """
    if codec is None or codec.text is None:
        return text
    blob = codec.text.encode(text)
    return text if blob[0] == RAW else blob


def text_nbytes(codec: NamespaceCodec | None, text: str) -> int:
    """Bytes ``text`` costs as stored: UTF-8 bytes when stored as is, the tag byte and the
    zstd frame when compressed.

    Examples
    --------
    >>> text_nbytes(None, "héllo")
    6
    """
    v = stored_text(codec, text)
    return len(v) if isinstance(v, bytes) else len(v.encode("utf-8"))


def read_text(codec: NamespaceCodec | None, value: str | bytes | memoryview) -> str:
    """The text of a stored value (:func:`stored_text`).

    Raises
    ------
    InvalidInput
        A compressed value without the dictionary it was written with.
    """
    if isinstance(value, str):
        return value
    blob = bytes(value)
    if codec is None or codec.text is None:
        return TextCodec().decode(blob)
    return codec.text.decode(blob)


def train(texts: Sequence[str]) -> TextCodec:
    """A dictionary trained on (at most :data:`TRAIN_MAX` of the last) ``texts``.

    Raises
    ------
    InvalidInput
        Fewer than :data:`~memcurator.store.textcodec.MIN_SAMPLES` texts.
    """
    return TextCodec.train(list(texts)[-TRAIN_MAX:], dict_bytes=DICT_BYTES)


def resized(nbytes: int, old_text_bytes: int, new_text_bytes: int) -> int:
    """An entry's ``b(m)`` after its text's stored form changed size (at least 1).

    Examples
    --------
    >>> resized(900, 700, 250)
    450
    """
    return max(1, int(nbytes) - int(old_text_bytes) + int(new_text_bytes))


class CodecCache:
    """The per-namespace codec cache both stores share (issue 35): a backend keeps
    ``_codecs`` (namespace -> (key, codec)) and ``_inserts`` (inserts seen per namespace) and
    gives ``_load_codec`` (the committed codec, cached under its key), ``count`` and
    ``train_text_dict``; this class reads the cache and trains the dictionary when due."""

    _codecs: dict[str, tuple[object, NamespaceCodec]]
    _inserts: dict[str, int]

    def _load_codec(self, namespace: str) -> NamespaceCodec:  # pragma: no cover - backend's
        raise NotImplementedError

    def count(self, namespace: str) -> int:  # pragma: no cover - the backend's
        raise NotImplementedError

    def train_text_dict(self, namespace: str) -> int:  # pragma: no cover - the backend's
        raise NotImplementedError

    def _read_codec(self, namespace: str) -> NamespaceCodec:
        """The cached codec of ``namespace`` when it has a dictionary, else read afresh."""
        cached = self._codecs.get(namespace)
        if cached is not None and cached[1].text is not None:
            return cached[1]
        return self._load_codec(namespace)

    def _write_codec(self, namespace: str) -> NamespaceCodec:
        """The codec as committed (read inside the write lock: never a stale dictionary)."""
        return self._load_codec(namespace)

    def text_codec(self, namespace: str) -> NamespaceCodec:
        """How ``namespace`` stores its texts (:class:`NamespaceCodec`): what ``b(m)`` counts
        for a text (:func:`text_nbytes`)."""
        return self._load_codec(namespace)

    def _auto_train(self, namespace: str) -> None:
        """Train the dictionary of a compressing namespace once it holds AUTO_TRAIN entries,
        and again when it holds RETRAIN_FACTOR times what it was trained on."""
        codec = self._codecs.get(namespace)
        if codec is None or not codec[1].compresses:
            return
        # a retrain is checked every `samples` inserts of this handle (8 to 64: a count is a scan)
        self._inserts[namespace] = seen = self._inserts.get(namespace, 0) + 1
        if codec[1].text is not None and seen % min(64, max(MIN_SAMPLES, codec[1].samples)):
            return
        if codec[1].due(self.count(namespace)):
            self.train_text_dict(namespace)


__all__ = [
    "CodecCache",
    "AUTO_TRAIN",
    "CODECS",
    "MIN_SAMPLES",
    "NamespaceCodec",
    "RETRAIN_FACTOR",
    "TRAIN_MAX",
    "check_codec",
    "read_text",
    "resized",
    "stored_text",
    "text_nbytes",
    "train",
]
