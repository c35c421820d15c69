"""Entry text compressed with zstd and a dictionary trained on the namespace's own entries.

An entry of the SQL stream is ~700 bytes of text (task line, schema, example rows, SQL) that
shares most of its words with every other entry of the namespace. Compressed alone, such a short
text barely shrinks (zstd's frame header and the lack of history eat the gain); with a
dictionary trained on earlier entries of the same namespace it shrinks to about a third
(measured in docs/storage.md, ``benchmarks/bytes_per_entry.py``).

Layout of a compressed text (bytes): one tag byte, then

=====  =========================================================================
tag    body
=====  =========================================================================
``0``  the UTF-8 text as is (no dictionary yet, or compression would not save)
``1``  a zstd frame compressed with the dictionary whose id is in the frame
``2``  a zstd frame (same dictionary) of the entry's meta JSON, a NUL byte, then the text:
       meta and text in one frame (schema v8; the meta column is then empty). JSON never
       holds a raw NUL (``json.dumps`` escapes control characters), so the first NUL ends it
=====  =========================================================================

The dictionary's zstd id is recorded in each frame (``write_dict_id``), so a text written
under an older dictionary names the one it needs; a namespace keeps every dictionary any of its
entries still names. The budget counts what is stored: each entry's tag byte and body, and the
namespace's dictionaries once each (not spread over entries); :func:`stored_bytes` is that sum.

Both stores use it for namespaces that compress (:mod:`memcurator.store.compression`: schema
v6, one dictionary per namespace, measured in docs/bytes.md).
"""

from __future__ import annotations

from collections.abc import Sequence

from memcurator.errors import InvalidInput, MissingExtra

#: Tag of a text stored as is / compressed with a dictionary / compressed with its meta.
RAW, ZSTD_DICT, ZSTD_DICT_META = 0, 1, 2

#: Entries a namespace needs before a dictionary is trained. zstd's trainer works from 8 SQL
#: entries (a 1 KB dictionary trained on 8 compresses 300 held-out entries from 643 to 262 B on
#: average; one of 4 KB trained on 64, to 220 B), so a small budgeted namespace compresses too.
MIN_SAMPLES = 8

#: Largest dictionary in bytes (zstd's trainer default is 110 KB; entries here are short and
#: alike, and the dictionary counts against the namespace's budget).
DICT_BYTES = 4096

#: Dictionary bytes per training sample below :data:`DICT_BYTES`: a dictionary is no larger
#: than its samples can fill, and a small namespace pays for a small one (8 samples: 1 KB).
DICT_BYTES_PER_SAMPLE = 128


def dict_bytes_for(samples: int) -> int:
    """Dictionary size trained on ``samples`` texts, bytes.

    Examples
    --------
    >>> dict_bytes_for(8), dict_bytes_for(16), dict_bytes_for(64)
    (1024, 2048, 4096)
    """
    return int(min(DICT_BYTES, DICT_BYTES_PER_SAMPLE * max(int(samples), MIN_SAMPLES)))


def _zstd():  # type: ignore[no-untyped-def]
    try:
        import zstandard
    except ImportError as e:  # pragma: no cover - a core dependency
        raise MissingExtra("compressed text needs the zstandard package") from e
    return zstandard


class TextCodec:
    """Compress and decompress a namespace's entry texts.

    Parameters
    ----------
    dictionary : bytes, optional
        A trained zstd dictionary (:meth:`train`); None stores texts as is.
    level : int, default 3
        zstd level (3 is zstd's default; higher saves a few percent more on these texts).

    Examples
    --------
    >>> c = TextCodec()
    >>> c.decode(c.encode("Task: count the rows"))
    'Task: count the rows'
    >>> texts = [f"Task: count the rows of table t{i} where id > {i}" for i in range(200)]
    >>> c = TextCodec.train(texts, dict_bytes=1024)
    >>> blob = c.encode(texts[7])
    >>> c.decode(blob) == texts[7], len(blob) < len(texts[7].encode())
    (True, True)
    """

    def __init__(self, dictionary: bytes | None = None, level: int = 3):
        self.dictionary = dictionary
        self.level = int(level)
        self._c = self._d = None
        if dictionary is not None:
            z = _zstd()
            d = z.ZstdCompressionDict(dictionary)
            self._c = z.ZstdCompressor(level=self.level, dict_data=d, write_content_size=True,
                                       write_checksum=False, write_dict_id=True)  # fmt: skip
            self._d = z.ZstdDecompressor(dict_data=d)

    @classmethod
    def train(
        cls, texts: Sequence[str], *, dict_bytes: int | None = None, level: int = 3
    ) -> TextCodec:
        """A codec with a dictionary trained on ``texts`` (at least :data:`MIN_SAMPLES`), of
        ``dict_bytes`` (default :func:`dict_bytes_for` the number of texts).

        Raises
        ------
        InvalidInput
            Fewer than :data:`MIN_SAMPLES` texts, or zstd could not train on them.
        """
        if len(texts) < MIN_SAMPLES:
            raise InvalidInput(
                f"a text dictionary needs at least {MIN_SAMPLES} entries, got {len(texts)}"
            )
        z = _zstd()
        try:
            size = dict_bytes_for(len(texts)) if dict_bytes is None else int(dict_bytes)
            d = z.train_dictionary(size, [t.encode("utf-8") for t in texts])
        except z.ZstdError as e:
            raise InvalidInput(f"zstd could not train a dictionary: {e}") from e
        return cls(d.as_bytes(), level=level)

    def encode(self, text: str) -> bytes:
        """The stored form of ``text``: a tag byte and a body (module notes)."""
        raw = text.encode("utf-8")
        if self._c is not None:
            z = self._c.compress(raw)
            if len(z) < len(raw):
                return bytes([ZSTD_DICT]) + z
        return bytes([RAW]) + raw

    def encode_with_meta(self, text: str, meta_json: str) -> bytes | None:
        """Text and meta JSON in one frame (tag ``2``), or None when this codec has no
        dictionary or the frame would not be shorter than both stored as is.

        Examples
        --------
        >>> TextCodec().encode_with_meta("t", "{}") is None
        True
        """
        if self._c is None:
            return None
        raw = meta_json.encode("utf-8") + b"\0" + text.encode("utf-8")
        z = self._c.compress(raw)
        return bytes([ZSTD_DICT_META]) + z if len(z) + 1 < len(raw) - 1 else None

    def decode(self, blob: bytes) -> str:
        """The text of a stored form written by any codec with this dictionary, or by none.

        Raises
        ------
        InvalidInput
            An unknown tag, or a compressed body without this codec's dictionary.
        """
        return self.decode_with_meta(blob)[0]

    def decode_with_meta(self, blob: bytes) -> tuple[str, str | None]:
        """(text, meta JSON) of a stored form; the meta is None unless the frame holds it
        (tag ``2``).

        Raises
        ------
        InvalidInput
            An unknown tag, or a compressed body without this codec's dictionary.
        """
        if not blob:
            raise InvalidInput("empty stored text")
        tag, body = blob[0], blob[1:]
        if tag == RAW:
            return body.decode("utf-8"), None
        if tag in (ZSTD_DICT, ZSTD_DICT_META) and self._d is not None:
            raw = bytes(self._d.decompress(body))
            if tag == ZSTD_DICT:
                return raw.decode("utf-8"), None
            meta, _, text = raw.partition(b"\0")
            return text.decode("utf-8"), meta.decode("utf-8")
        raise InvalidInput(
            f"stored text with tag {tag} needs "
            + (
                "a dictionary this codec does not have"
                if tag in (ZSTD_DICT, ZSTD_DICT_META)
                else "a newer reader"
            )
        )


def stored_bytes(codec: TextCodec, texts: Sequence[str]) -> tuple[int, int]:
    """(bytes of the texts as ``codec`` stores them, bytes of its dictionary): what a namespace
    holding ``texts`` counts for its text, the dictionary once.

    Examples
    --------
    >>> stored_bytes(TextCodec(), ["abc", "de"])
    (7, 0)
    """
    return sum(len(codec.encode(t)) for t in texts), len(codec.dictionary or b"")


__all__ = [
    "DICT_BYTES",
    "DICT_BYTES_PER_SAMPLE",
    "MIN_SAMPLES",
    "dict_bytes_for",
    "RAW",
    "ZSTD_DICT",
    "ZSTD_DICT_META",
    "TextCodec",
    "stored_bytes",
]
