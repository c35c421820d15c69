"""Unicode-aware text analysis shared by the hashing embedder and BM25.

Pure-ASCII text takes the historical path (lower-case, ``[a-z0-9_]+`` runs), so every ASCII
embedding and BM25 score is unchanged. Any other text is NFKC-normalised and case-folded, and its
word characters of every script (letters, digits, combining marks, connector punctuation such as
``_``) form the runs. Scripts written without spaces between words (Han, Hiragana, Katakana,
Hangul, Thai, Lao, Khmer, Myanmar) are cut out of their runs and indexed as character unigrams
and bigrams, as Lucene's ``CJKBigramFilter`` does, so that ``用户喜欢喝绿茶`` and
``用户喜欢喝什么茶`` share ``用户``, ``喜欢``, ``欢喝`` and ``茶``.

Symbols (emoji, arrows, currency signs) and punctuation carry no content here: ``"👍 !!!"`` has no
run, its hashing embedding is the zero vector and :func:`has_content` is False for it.
"""

from __future__ import annotations

import re
import unicodedata
from typing import NamedTuple

from memcurator.errors import InvalidInput

_ASCII_WORD = re.compile(r"[a-z0-9_]+")

# Code-point ranges of scripts that do not separate words with spaces (inclusive bounds).
_NOSPACE_RANGES: tuple[tuple[int, int], ...] = (
    (0x0E00, 0x0E7F),  # Thai
    (0x0E80, 0x0EFF),  # Lao
    (0x1000, 0x109F),  # Myanmar
    (0x1100, 0x11FF),  # Hangul Jamo
    (0x1780, 0x17FF),  # Khmer
    (0x2E80, 0x2FDF),  # CJK radicals, Kangxi radicals
    (0x3005, 0x3007),  # CJK iteration mark, closing mark, ideographic zero
    (0x3040, 0x30FF),  # Hiragana, Katakana
    (0x3130, 0x318F),  # Hangul compatibility Jamo
    (0x31F0, 0x31FF),  # Katakana phonetic extensions
    (0x3400, 0x4DBF),  # CJK extension A
    (0x4E00, 0x9FFF),  # CJK unified ideographs
    (0xA960, 0xA97F),  # Hangul Jamo extended A
    (0xAC00, 0xD7FF),  # Hangul syllables, Jamo extended B
    (0xF900, 0xFAFF),  # CJK compatibility ideographs
    (0x20000, 0x3FFFF),  # CJK extensions B..H
)


def _nospace(ch: str) -> bool:
    o = ord(ch)
    return any(lo <= o <= hi for lo, hi in _NOSPACE_RANGES)


def _word_char(ch: str) -> bool:
    # Letters, numbers and marks of every script, plus connector punctuation ("_").
    # Marks matter: Thai vowel signs and Devanagari matras are Mn/Mc, which ``\w`` misses.
    cat = unicodedata.category(ch)
    return cat[0] in "LNM" or cat == "Pc"


class Run(NamedTuple):
    """One maximal run of word characters of one kind.

    Attributes
    ----------
    text : str
        The normalised characters of the run.
    spaced : bool
        True for scripts that separate words with spaces (the run is one word); False for
        scripts that do not (the run is indexed by character unigrams and bigrams).
    """

    text: str
    spaced: bool


def normalize(text: str) -> str:
    """The form every feature is taken from: ASCII lower-cased, anything else NFKC + casefold.

    :func:`runs` splits this form of a text into words.

    Examples
    --------
    >>> normalize("SELECT Ｘ")
    'select x'
    >>> normalize("Straße")
    'strasse'
    """
    if text.isascii():
        return text.lower()
    return unicodedata.normalize("NFKC", text).casefold()


def runs(text: str) -> list[Run]:
    """Maximal word-character runs of ``text``, split where a no-space script starts or ends.

    Parameters
    ----------
    text : str
        What to split: one script or a mix of several (with or without spaces).

    Returns
    -------
    list of Run
        In reading order. For pure-ASCII text these are exactly the ``[a-z0-9_]+`` runs of
        ``text.lower()``, all ``spaced``.

    Examples
    --------
    >>> [tuple(r) for r in runs("SQL查询 Москва!")]
    [('sql', True), ('查询', False), ('москва', True)]
    >>> runs("👍 !!!")
    []
    """
    low = normalize(text)
    if low.isascii():
        return [Run(w, True) for w in _ASCII_WORD.findall(low)]
    out: list[Run] = []
    buf: list[str] = []
    kind: bool | None = None  # spaced-ness of the run in ``buf``
    for ch in low:
        if not _word_char(ch):
            if buf:
                out.append(Run("".join(buf), bool(kind)))
                buf, kind = [], None
            continue
        # A combining mark belongs to the run it follows, whatever its code block.
        is_mark = unicodedata.category(ch)[0] == "M"
        k = kind if (is_mark and buf) else not _nospace(ch)
        if buf and k != kind:
            out.append(Run("".join(buf), bool(kind)))
            buf = []
        buf.append(ch)
        kind = k
    if buf:
        out.append(Run("".join(buf), bool(kind)))
    return out


def run_tokens(run: Run) -> list[str]:
    """Word tokens of one run: the run itself if spaced, else its character unigrams and bigrams.

    Examples
    --------
    >>> run_tokens(Run("绿茶", False))
    ['绿', '茶', '绿茶']
    >>> run_tokens(Run("tea", True))
    ['tea']
    """
    if run.spaced:
        return [run.text]
    s = run.text
    return list(s) + [s[i : i + 2] for i in range(len(s) - 1)]


def word_tokens(text: str) -> list[str]:
    """The word tokens of ``text`` used by BM25 and by the hashing embedder's word features.

    Examples
    --------
    >>> word_tokens("Count orders by region_id")
    ['count', 'orders', 'by', 'region_id']
    >>> word_tokens("喝绿茶")
    ['喝', '绿', '茶', '喝绿', '绿茶']
    >>> word_tokens("Привет, МИР")
    ['привет', 'мир']
    """
    out: list[str] = []
    for r in runs(text):
        out.extend(run_tokens(r))
    return out


def has_content(text: str) -> bool:
    """Whether ``text`` has anything the hashing embedder and BM25 can represent.

    True when ``text`` has at least one word character of any script (a letter, digit, combining
    mark or ``_`` after NFKC normalisation). When False, :class:`~memcurator.embed.HashingEmbedder`
    returns the zero vector and BM25 finds no token: the text cannot be recalled by content, so a
    memory should refuse to store it and refuse such a query.

    Parameters
    ----------
    text : str

    Returns
    -------
    bool

    Examples
    --------
    >>> [has_content(t) for t in ("用户喜欢喝绿茶", "x = 1", "👍 !!!", "  ")]
    [True, True, False, False]
    """
    if not isinstance(text, str):
        return False
    if text.isascii():
        return _ASCII_WORD.search(text.lower()) is not None
    return any(_word_char(ch) for ch in unicodedata.normalize("NFKC", text))


def check_text(text: object) -> str:
    """``text`` itself, checked to be a ``str`` (what every embedder's ``embed`` takes).

    Raises
    ------
    InvalidInput
        If ``text`` is not a ``str``.

    Examples
    --------
    >>> check_text("a")
    'a'
    """
    if not isinstance(text, str):
        raise InvalidInput(f"text must be str, got {type(text).__name__}")
    return text
