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

Meta (schema v8). With a dictionary, an entry's meta JSON and its text are stored as one
frame (tag 2: meta, NUL, text; :func:`stored_entry`) and the meta column is empty; the
dictionary is trained on those payloads (:func:`payload`). Rows written before (tag 1, meta
in its column) read as before (:func:`read_entry`) and fold at the next training.

Accounting. An entry's ``b(m)`` counts its text and meta as stored: the two columns' bytes
(:func:`entry_nbytes`), so the budget counts what is stored, every part of it (the vector as
stored, text and meta, the origin detail, the statistics, and the namespace's dictionary).
Indexes (SQLite: none over text; PostgreSQL: ``rtsv``, the full-text form of the recall text)
are not counted today, compressed or not (``benchmarks/bytes_per_entry.py`` reports them).

Lexical search. SQLite keeps no text index (BM25 is built in memory from the decompressed
texts). PostgreSQL's full-text column ``rtsv`` was generated from ``text``; schema v7 makes it
a plain column the store fills from the text it is given (the same expression), so it works
for compressed rows too.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, NamedTuple

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


def stored_entry(
    codec: NamespaceCodec | None, text: str, meta_json: str
) -> tuple[str | bytes, str]:
    """(text column, meta column) the store writes for an entry (schema v8): with the
    namespace's dictionary, meta and text in one zstd frame (tag ``2``) and an empty meta
    column, when that is shorter than both as is; else the text as is and the meta JSON.

    Examples
    --------
    >>> stored_entry(None, "abc", '{"a": 1}')
    ('abc', '{"a": 1}')
    """
    if codec is not None and codec.text is not None:
        blob = codec.text.encode_with_meta(text, meta_json)
        if blob is not None:
            return blob, ""
    return text, meta_json


def entry_nbytes(codec: NamespaceCodec | None, text: str, meta_json: str) -> int:
    """Bytes text and meta cost as stored (:func:`stored_entry`): the lengths of the two
    columns' values.

    Examples
    --------
    >>> entry_nbytes(None, "héllo", "{}")
    8
    """
    t, m = stored_entry(codec, text, meta_json)
    return (len(t) if isinstance(t, bytes) else len(t.encode("utf-8"))) + len(m.encode("utf-8"))


def read_entry(
    codec: NamespaceCodec | None, value: str | bytes | memoryview, meta_value: str
) -> tuple[str, str]:
    """(text, meta JSON) of an entry's stored text and meta columns (:func:`stored_entry`;
    rows written before v8 keep their meta in its column).

    Raises
    ------
    InvalidInput
        A compressed value without the dictionary it was written with.
    """
    if isinstance(value, str):
        return value, meta_value
    blob = bytes(value)
    reader = TextCodec() if codec is None or codec.text is None else codec.text
    text, meta = reader.decode_with_meta(blob)
    return text, meta_value if meta is None else meta


def payload(text: str, meta_json: str) -> str:
    """What a dictionary trains on for an entry: its meta JSON, a NUL, its text (the layout
    of a tag-``2`` frame, :mod:`~memcurator.store.textcodec`)."""
    return meta_json + "\0" + text


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


class TextRow(NamedTuple):
    """One entry's text and meta as a rewrite sees them (:meth:`CodecCache._text_rows`)."""

    id: str
    text: str
    meta: str
    #: the entry's ``b(m)``
    nbytes: int
    #: bytes its text and meta take as stored (the two columns)
    stored: int
    #: stored as is (text column holds the text, meta column the JSON)
    raw: bool


def text_row(
    codec: NamespaceCodec | None, eid: str, value: str | bytes | memoryview, meta: str, nb: int
) -> TextRow:
    """The :class:`TextRow` of a stored (id, text value, meta value, ``b(m)``)."""
    text, meta_json = read_entry(codec, value, meta)
    tb = len(value.encode("utf-8")) if isinstance(value, str) else len(bytes(value))
    return TextRow(eid, text, meta_json, int(nb), tb + len(meta.encode("utf-8")),
                   isinstance(value, str))  # fmt: skip


class CodecCache:
    """The text-codec steps both stores share (issue 35): the per-namespace codec cache, the
    automatic training, and training / switching / rewriting a namespace's stored texts in
    one transaction. A backend keeps ``_codecs`` (namespace -> (key, codec)) and ``_inserts``
    (inserts seen per namespace), names its dictionary table (``_dict_table``) and gives the
    dialect: ``_load_codec`` (the committed codec), ``count``, ``namespace``,
    ``_codec_tx`` (a write transaction on the namespace), ``_codec_x`` (a statement with
    ``?`` placeholders), ``_stored_rows`` (every entry's id, text value, meta value and
    ``b(m)`` in insertion order), ``_store_row`` (write one entry's text and meta values and
    ``b(m)``) and ``_mark_retrained`` (other handles catch up)."""

    _codecs: dict[str, tuple[object, NamespaceCodec]]
    _inserts: dict[str, int]
    _dict_table: str

    def _load_codec(self, namespace: str) -> NamespaceCodec:  # pragma: no cover - backend's
        raise NotImplementedError

    def count(self, namespace: str) -> int:  # pragma: no cover - the backend's
        raise NotImplementedError

    def namespace(self, name: str) -> Any:  # pragma: no cover - the backend's
        raise NotImplementedError

    def _codec_tx(self, namespace: str) -> AbstractContextManager[Any]:  # pragma: no cover
        raise NotImplementedError

    def _codec_x(self, sql: str, args: tuple[Any, ...]) -> None:  # pragma: no cover
        raise NotImplementedError

    def _stored_rows(self, namespace: str) -> list[tuple[Any, ...]]:  # pragma: no cover
        raise NotImplementedError

    def _store_row(  # pragma: no cover - the backend's
        self, namespace: str, eid: str, value: str | bytes, meta: str, nbytes: int
    ) -> None:
        raise NotImplementedError

    def _mark_retrained(self) -> None:  # pragma: no cover - the backend's
        raise NotImplementedError

    def _drop_dict(self, namespace: str) -> int:  # pragma: no cover - the backend's
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
        for a text and its meta (:func:`entry_nbytes`)."""
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

    def set_text_codec(self, namespace: str, codec: str) -> int:
        """Store ``namespace``'s texts with ``codec`` (``'zstd'`` or ``'none'``) from now on.

        ``'none'`` decompresses every stored text (and meta) and drops the dictionary (each
        ``b(m)`` updated); ``'zstd'`` compresses new texts once a dictionary is trained
        (automatically at :data:`AUTO_TRAIN` entries, or :meth:`train_text_dict`). Returns
        the entries rewritten.

        Raises
        ------
        InvalidInput
            An unknown codec. NamespaceNotFound.
        """
        check_codec(codec)
        with self._codec_tx(namespace):
            self.namespace(namespace)
            self._codec_x("UPDATE namespaces SET text_codec=? WHERE name=?", (codec, namespace))
            if codec == "zstd":
                return 0
            n = self._rewrite_texts(namespace, NamespaceCodec())  # decompressed
            self._drop_dict(namespace)
            return n

    def train_text_dict(self, namespace: str) -> int:
        """Train ``namespace``'s dictionary on its entries (meta and text, the layout of a
        tag-2 frame) and rewrite every entry with it, each ``b(m)`` updated, in one
        transaction; the namespace compresses from now on. Returns the entries rewritten.

        Raises
        ------
        InvalidInput
            Fewer entries than a dictionary needs (:data:`MIN_SAMPLES`).
        """
        with self._codec_tx(namespace):
            self.namespace(namespace)
            rows = self._text_rows(namespace)
            codec = NamespaceCodec("zstd", train([payload(r.text, r.meta) for r in rows]))
            self._codec_x("UPDATE namespaces SET text_codec='zstd' WHERE name=?", (namespace,))
            self._codec_x(
                f"INSERT INTO {self._dict_table}(namespace, dict, samples, at) VALUES "
                "(?,?,?,?) ON CONFLICT (namespace) DO UPDATE SET dict=excluded.dict, "
                "samples=excluded.samples, at=excluded.at",
                (namespace, codec.text.dictionary if codec.text else b"", len(rows), time.time()),
            )
            return self._rewrite_texts(namespace, codec, rows)

    def _text_rows(self, namespace: str) -> list[TextRow]:
        """Every entry's :class:`TextRow`, in insertion order."""
        codec = self._load_codec(namespace)
        return [text_row(codec, str(r[0]), r[1], str(r[2]), int(r[3]))
                for r in self._stored_rows(namespace)]  # fmt: skip

    def _rewrite_texts(
        self, namespace: str, codec: NamespaceCodec, rows: list[TextRow] | None = None
    ) -> int:
        """Every entry of ``namespace`` stored again with ``codec``, ``b(m)`` updated."""
        n = 0
        for r in self._text_rows(namespace) if rows is None else rows:
            value, meta = stored_entry(codec, r.text, r.meta)
            if r.raw and isinstance(value, str):
                continue
            after = entry_nbytes(codec, r.text, r.meta)
            self._store_row(namespace, r.id, value, meta, resized(r.nbytes, r.stored, after))
            n += 1
        self._codecs.pop(namespace, None)
        if n:
            self._mark_retrained()
        return n


__all__ = [
    "CodecCache",
    "TextRow",
    "text_row",
    "AUTO_TRAIN",
    "CODECS",
    "MIN_SAMPLES",
    "NamespaceCodec",
    "RETRAIN_FACTOR",
    "TRAIN_MAX",
    "check_codec",
    "entry_nbytes",
    "payload",
    "read_entry",
    "read_text",
    "resized",
    "stored_entry",
    "stored_text",
    "text_nbytes",
    "train",
]
