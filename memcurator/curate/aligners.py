"""Aligners: the plug-in interface through which the extractive ``align`` operator adapts an
exemplar of one task domain to the current task.

JitMem's extractive curator (:mod:`memcurator.curate.extractive`) picks the remembered
trajectory that maps best onto the current task and, where the map is complete and consistent,
rewrites its literals for the current task; where it is not, it falls back to ``closest`` (the
exemplar with its own task) with a note. How an exemplar's action is parsed and rewritten
depends on the task domain: an SQL statement on its parse tree against the current schema, a
bash script on its words. Each domain implements :class:`Aligner` and registers in
:data:`ALIGNERS` under its name, as a lazy ``"module:attribute"`` string (STYLE.md rule 8), so
the core curators never import an environment: the OS environment's bash aligner lives in
:mod:`memcurator.envs.os.align`, as the Trust gate's bash check does
(:data:`memcurator.trust.domains.DOMAIN_CHECKS`). A read-time curator reads the domain from
:attr:`memcurator.curate.base.CurateContext.domain`.

Examples
--------
>>> sorted(ALIGNERS)
['bash', 'sql']
>>> a = create_aligner("sql")
>>> p = a.parse("Task: member 102 paid 75\\nObservation: Table pay(mid INT, amt INT)\\n"
...             "Action: INSERT INTO pay VALUES (102, 75);\\nOutcome: success")
>>> a.align(p, 0, "member 205 paid 90", "Table pay(mid INT, amt INT)").sql
'INSERT INTO pay VALUES (205, 90);'

References
----------
JitMem, Sec. 3 ("Memory Curator"); the literal map is our extractive reading of it.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from memcurator.curate.extractive import Alignment, ParsedTrajectory, align, parse_raw, parse_schema
from memcurator.registry import Registry


@runtime_checkable
class Aligner(Protocol):
    """What the extractive ``align`` / ``closest`` operators need from a task domain.

    One is registered per domain in :data:`ALIGNERS`; :func:`create_aligner` builds it by name.

    Attributes
    ----------
    name : str
        The name it is registered under in :data:`ALIGNERS`.
    whole_trajectory : bool
        True when the exemplar shown is every step of the trajectory (bash: the rounds together
        make the solution); False when it is the final action (SQL: one statement).
    """

    name: str
    whole_trajectory: bool

    def parse(self, text: str) -> ParsedTrajectory | None:
        """A stored raw trajectory parsed as this domain writes it; None if it is not one."""
        ...

    def align(self, parsed: ParsedTrajectory, index: int, task: str, observation: str) -> Alignment:
        """Score and adapt ``parsed`` to ``task``; a non-empty ``problem`` says why the
        adaptation must not be shown as the current task's (the caller falls back)."""
        ...


class SQLAligner:
    """The SQL domain: literals and schema aligned on sqlglot's parse tree
    (:func:`memcurator.curate.extractive.align`); the exemplar is the final statement."""

    name = "sql"
    whole_trajectory = False

    def parse(self, text: str) -> ParsedTrajectory | None:
        """:func:`~memcurator.curate.extractive.parse_raw` (one-line fields)."""
        return parse_raw(text)

    def align(self, parsed: ParsedTrajectory, index: int, task: str, observation: str) -> Alignment:
        """:func:`~memcurator.curate.extractive.align` against ``observation``'s schema."""
        table, cols = parse_schema(observation)
        return align(parsed, index, task, table, cols)


ALIGNERS: Registry[Aligner] = Registry(
    "aligner",
    {
        "bash": "memcurator.envs.os.align:BashAligner",
        "sql": "memcurator.curate.aligners:SQLAligner",
    },
)
"""Domain name to aligner (``"module:Class"``, imported when first created). Another domain
registers with ``ALIGNERS.register("name", factory)``."""


def create_aligner(name: str, **kwargs: Any) -> Aligner:
    """Build the aligner registered under ``name``.

    Parameters
    ----------
    name : str
        A domain of :data:`ALIGNERS`: ``"sql"``, ``"bash"`` or one registered since.
    **kwargs
        The aligner's constructor arguments.

    Raises
    ------
    UnknownName
        ``name`` is not in :data:`ALIGNERS`; the message lists the registered names.
    """
    return ALIGNERS.create(name, **kwargs)


__all__ = ["ALIGNERS", "Aligner", "SQLAligner", "create_aligner"]
