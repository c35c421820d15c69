"""Observed reads: provenance that follows the content when the writer declares nothing.

:func:`observe_read` records a fingerprint of outside content the agent read (a tool output, a
web page, a document, a user turn the application distrusts) in the handle's
:class:`~memcurator.trust.fingerprint.ReadWindow`; nothing is written to the store. On every
write (and update), :func:`observed_sources` asks the window whether the text copies any of it;
the write path then handles the entry exactly as if the writer had declared
``derived_from=[that source]`` (taint, ``downgrade`` row, probation), with the source marked
``"via": "observed"`` in the entry's ``trust["_derived_from"]``.

The caller chooses what to observe. The user's own turn should not be observed unless the
application distrusts it: an agent's record of a task repeats the task's words, and observing
them would taint every record of the user's own requests.
"""

from __future__ import annotations

from typing import Any

from memcurator.errors import InvalidInput
from memcurator.lifecycle.checks import check_text
from memcurator.lifecycle.context import Context
from memcurator.trust.fingerprint import Match, ReadWindow
from memcurator.trust.provenance import parse_sources

#: longest text one :func:`observe_read` accepts, UTF-8 bytes (observe a longer page in parts)
MAX_READ_BYTES = 1 << 20


def observe_read(ctx: Context, text: Any, source: str = "tool_output", user: Any = None) -> int:
    """Record that the agent read ``text`` from ``source`` (for ``user``): a fingerprint only.

    Parameters
    ----------
    text : str or UTF-8 bytes
        The outside content as the agent saw it.
    source : str, default "tool_output"
        A kind of :data:`memcurator.trust.provenance.SOURCE_KINDS` other than ``"entry"``
        (``"tool_output"``, ``"web"``, ``"user"``, ``"document"``, ``"external"``, ``"peer"``),
        optionally ``"kind:id"`` (``"tool_output:calendar"``).
    user : str, optional
        Read on behalf of one user: matched against that user's writes and unscoped ones.

    Returns
    -------
    int
        Shingles recorded (0 for a text of fewer than ``n`` words or only common words).

    Raises
    ------
    InvalidInput
        Text that is empty, content-free, not UTF-8 or over :data:`MAX_READ_BYTES`; an unknown
        source kind, an ``entry`` source (an entry of this memory already carries its own
        taint: declare it with ``derived_from``), a source that is not a string; a bad
        ``user``. Nothing is recorded.
    """
    if isinstance(text, str) and len(text) > MAX_READ_BYTES:  # cheap bound before encoding
        raise InvalidInput(
            f"observed text is over {MAX_READ_BYTES} bytes; observe it in parts of at most that"
        )
    text = check_text(text, MAX_READ_BYTES)
    if not isinstance(source, str):
        raise InvalidInput(f"source must be a str such as 'tool_output:calendar', got {source!r}")
    (src,) = parse_sources([source])
    if src["kind"] == "entry":
        raise InvalidInput(
            "an entry of this memory is not an outside read; declare it with "
            "derived_from=['entry:<id>'] on the write"
        )
    if user is not None and (not isinstance(user, str) or not user.strip()):
        raise InvalidInput(f"user must be a non-empty string, got {user!r}")
    name = f"{src['kind']}:{src['id']}" if src["id"] else src["kind"]
    return ctx.reads.add(text, name, user)


def observed_sources(
    reads: ReadWindow, text: str, user: str | None
) -> tuple[list[dict[str, str]], Match | None]:
    """The sources ``text`` copies from a handle's read window (``ctx.reads``), as
    ``derived_from`` items marked ``"via": "observed"``, and the match (None, ``[]`` when it
    copies nothing)."""
    m = reads.match(text, user)
    if m is None:
        return [], None
    out = []
    for s in m.sources:
        (src,) = parse_sources([s])
        out.append({**src, "via": "observed"})
    return out, m


def observed_reason(m: Match) -> str:
    """The decision-log words for a match: ``copies 14 words observed from tool_output:x``."""
    return f"copies {m.words} words observed from {', '.join(m.sources)}"


__all__ = ["MAX_READ_BYTES", "observe_read", "observed_reason", "observed_sources"]
