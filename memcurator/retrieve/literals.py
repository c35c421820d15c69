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
