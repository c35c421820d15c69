"""Literal masking: variants of one request differ in their numbers and quoted strings.

"member 102 paid 75" and "member 205 paid 90" are the same kind of request. Replacing the
literals by a placeholder before hashing or BM25 lets the request's words decide similarity.
"""

from __future__ import annotations

import re

# Quoted strings first (they may contain digits), then numbers (ints, decimals, dates' parts).
_QUOTED = re.compile(r"'(?:[^'\\]|\\.|'')*'|\"(?:[^\"\\]|\\.)*\"")
_NUMBER = re.compile(r"(?<![\w.])[-+]?\d+(?:[.,:/-]\d+)*(?![\w])")


def mask_literals(text: str, placeholder: str = " ") -> str:
    """``text`` with quoted strings and numbers replaced by ``placeholder``.

    Parameters
    ----------
    text : str
    placeholder : str, default " "
        What each literal becomes. The default drops it (a space carries no token); a word such
        as ``"num"`` keeps a trace that a literal stood there.

    Returns
    -------
    str

    Examples
    --------
    >>> mask_literals("Member 102 paid 75.50 on 2023-05-01 for 'gold plan'", "#")
    'Member # paid # on # for #'
    >>> mask_literals("table_2 keeps its digits")
    'table_2 keeps its digits'
    """
    return _NUMBER.sub(placeholder, _QUOTED.sub(placeholder, text))


# Words that carry a digit (``u17``, ``ORD-2021-7`` parts, ``table_2``): identifiers, not words.
_IDENT = re.compile(r"\w*\d\w*")


def literal_values(text: str) -> tuple[str, ...]:
    """The literals of ``text`` that tell one fact from another, case-folded, in order.

    Quoted strings (quotes included), numbers (ints, decimals, dates such as ``2023-05-01``)
    and identifiers that carry a digit (``u17``, ``table_2``). Two requests that differ only in
    these ("user 17" and "user 18", ``'north'`` and ``'south'``) ask for different facts, even
    when their embeddings are close: :func:`mask_literals` drops exactly these for similarity,
    this keeps them for identity.

    Parameters
    ----------
    text : str

    Returns
    -------
    tuple of str

    Examples
    --------
    >>> literal_values("Orders of user u17 in 'North' on 2021-03-04 over 75.50")
    ('u17', "'north'", '2021-03-04', '75.50')
    >>> literal_values("get the email of user 18")
    ('18',)
    >>> literal_values("average salary by department")
    ()
    """
    found = [(m.start(), m.group(0)) for m in _QUOTED.finditer(text)]
    rest = _QUOTED.sub(lambda m: " " * len(m.group(0)), text)
    found += [(m.start(), m.group(0)) for m in _NUMBER.finditer(rest)]
    rest = _NUMBER.sub(lambda m: " " * len(m.group(0)), rest)
    found += [(m.start(), m.group(0)) for m in _IDENT.finditer(rest)]
    return tuple(v.casefold() for _, v in sorted(found))
