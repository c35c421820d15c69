"""Convention drift for OS tasks: schema drift's counterpart (issue 23, item 2).

Mid-stream, a site changes a convention, and every later task of an affected family follows
it; exemplars remembered before the change are now wrong. A change is applied consistently to
the task's instruction, init, evaluation and reference scripts:

* ``log-dir``: logs move from ``/var/log`` to :data:`LOG_DIR` (the new init creates it, as the
  site's image would). Applies to tasks whose instruction names a path under ``/var/log``.
* ``group-prefix``: group names get the prefix :data:`GROUP_PREFIX` (``devteam`` becomes
  ``grp_devteam``). Applies to tasks that create a named group.

:func:`migrate` keeps a changed task only if it passes the generator's validity rule in the
sandbox (the check fails after init and passes after the reference) **and** the pre-drift
reference fails the changed check: the change must make old exemplars wrong, or its later
tasks would be no victims.

References
----------
LifelongAgentBench (the OS tasks and their validity rule); the SQL stream's schema migration
(:func:`memcurator.envs.sql.migrate`) is the counterpart.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from memcurator.envs.os.data import OSTask
from memcurator.envs.os.families import _sub, named_literals

#: The log directory after a ``log-dir`` change.
LOG_DIR = "/srv/log"
#: The prefix of group names after a ``group-prefix`` change.
GROUP_PREFIX = "grp_"
#: The convention changes, in the order :func:`applicable_kinds` lists them.
DRIFT_KINDS: tuple[str, ...] = ("log-dir", "group-prefix")

_VAR_LOG = re.compile(r"(?<![\w.~/-])/var/log(?=[/\s'\":;,)|&<>]|\.(?![\w.])|$)")


def group_names(task: OSTask) -> list[str]:
    """The named literals of ``task`` that are groups it creates (``groupadd``/``addgroup`` in
    its init or reference, or ``group 'x'`` in its instruction), users excluded.

    Examples
    --------
    >>> t = OSTask(0, "Create group 'dev' and add user 'ann' to it", "", "getent group dev",
    ...            "groupadd dev && useradd ann && usermod -aG dev ann")
    >>> group_names(t)
    ['dev']
    """
    scripts = task.init + "\n" + task.reference
    out = []
    for lit in named_literals(task):
        if lit.startswith("/"):
            continue
        e = re.escape(lit)
        made = re.search(rf"\b(?:groupadd|addgroup)\s+(?:-\S+\s+)*{e}(?![\w-])", scripts)
        said = re.search(rf"\bgroup\s+(?:named\s+|called\s+)?['\"]{e}['\"]", task.instruction)
        user = re.search(rf"\b(?:useradd|adduser)\s+(?:-\S+\s+)*{e}(?![\w-])", scripts)
        if (made or said) and not user:
            out.append(lit)
    return out


def applicable_kinds(task: OSTask) -> list[str]:
    """The convention changes that would touch ``task`` (text only; no sandbox)."""
    kinds = []
    if _VAR_LOG.search(task.instruction):
        kinds.append("log-dir")
    if group_names(task):
        kinds.append("group-prefix")
    return kinds


def change_convention(task: OSTask, kind: str) -> OSTask | None:
    """``task`` under the changed convention ``kind``; None when the change does not touch it.

    Raises
    ------
    InvalidInput
        Unknown ``kind``.

    Examples
    --------
    >>> t = OSTask(3, "Log to /var/log/app.log.", "", "test -f /var/log/app.log",
    ...            "touch /var/log/app.log")
    >>> v = change_convention(t, "log-dir")
    >>> v.instruction, v.init
    ('Log to /srv/log/app.log.', 'mkdir -p /srv/log')
    >>> v.check, v.reference
    ('test -f /srv/log/app.log', 'touch /srv/log/app.log')
    >>> change_convention(t, "group-prefix") is None
    True
    """
    from memcurator.errors import InvalidInput

    if kind not in DRIFT_KINDS:
        raise InvalidInput(f"unknown drift kind {kind!r}; known: {sorted(DRIFT_KINDS)}")
    if kind not in applicable_kinds(task):
        return None
    texts = [task.instruction, task.init, task.check, task.reference]
    if kind == "log-dir":
        texts = [_VAR_LOG.sub(LOG_DIR, s) for s in texts]
        texts[1] = f"mkdir -p {LOG_DIR}" + (f"\n{texts[1]}" if texts[1].strip() else "")
    else:
        for g in sorted(group_names(task), key=len, reverse=True):
            texts = [_sub(s, g, GROUP_PREFIX + g) for s in texts]
    instruction, init, check, reference = texts
    return OSTask(task.index, instruction, init, check, reference, task.skills)


@dataclass(frozen=True)
class Migration:
    """A validated convention change of one task: the changed task and its kind."""

    task: OSTask
    kind: str


def migrate(
    task: OSTask,
    kinds: tuple[str, ...] = DRIFT_KINDS,
    config: object = None,
    cache: object = None,
) -> Migration | None:
    """The first change of ``kinds`` that touches ``task``, is valid and makes the pre-drift
    reference fail; None when none does.

    Parameters
    ----------
    cache : VerdictCache, optional
        Where the sandbox verdicts are looked up and stored
        (:class:`~memcurator.envs.os.validity_cache.VerdictCache`); by default each is run.

    Raises
    ------
    SandboxUnavailable
        No sandbox on this host (and the verdict is not cached).
    """
    from memcurator.envs.os.validity_cache import VerdictCache

    verdicts = cache if isinstance(cache, VerdictCache) else VerdictCache(None)
    for kind in kinds:
        v = change_convention(task, kind)
        if v is None:
            continue
        if not verdicts.valid(v, config):
            continue
        if not verdicts.old_solution_fails(v, task.reference, config):
            continue  # the old solution still passes: no victim
        return Migration(v, kind)
    return None


__all__ = [
    "DRIFT_KINDS",
    "GROUP_PREFIX",
    "LOG_DIR",
    "Migration",
    "applicable_kinds",
    "change_convention",
    "group_names",
    "migrate",
]
