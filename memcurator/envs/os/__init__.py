"""The OS-interaction environment: LifelongAgentBench bash tasks, each in a fresh sandbox.

>>> from memcurator.envs.os import load_os_tasks, run_episode, Sandbox  # doctest: +SKIP

:data:`UNRUNNABLE` lists the tasks the default (shifted, no network) sandbox cannot run
faithfully, with the reason; :func:`runnable_tasks` leaves them out. The list was measured by
``benchmarks/os_replay.py`` (all 500 tasks, the generator's validity rule) and is checked by
the slow test ``tests/test_os_tasks.py::test_full_replay``.
"""

from __future__ import annotations

import os

from memcurator.envs.os.data import OSTask, find_os_data, load_os_tasks
from memcurator.envs.os.protocol import (
    SYSTEM_PROMPT,
    Episode,
    check_validity,
    parse_action,
    replay,
    run_episode,
)
from memcurator.envs.os.sandbox import (
    CommandResult,
    Sandbox,
    SandboxConfig,
    SandboxError,
    SandboxUnavailable,
)

_NET = "initialisation runs `apt-get install zsh`: the sandbox has no network and no dpkg database"
_USR = (
    "writes into /usr/bin or /bin (init of 33, 193, 302, 493; the reference of 11), which the "
    "sandbox binds read-only from the host (upstream's container lets root write there)"
)
_RACE = "timing-dependent upstream"

#: Task index → why the default sandbox cannot run it faithfully (measured; see module doc).
UNRUNNABLE: dict[int, str] = {
    90: _NET,
    283: _NET,
    11: _USR,
    33: _USR,
    193: _USR,
    302: _USR,
    493: _USR,
    359: _RACE
    + ": the reference's `while [ -s f ]` loop depends on the `ls -t` order of files with "
    "equal mtimes",
    282: _RACE + ": `ls *.txt > output.txt` may list output.txt itself (passed here, flaky)",
    183: _RACE + ": a background `sleep 3; touch` races a foreground `sleep 3` (passed here)",
}


def runnable_tasks(path: str | os.PathLike[str] | None = None) -> tuple[OSTask, ...]:
    """The OS tasks less :data:`UNRUNNABLE`, in index order."""
    return tuple(t for t in load_os_tasks(path) if t.index not in UNRUNNABLE)


__all__ = [
    "SYSTEM_PROMPT",
    "UNRUNNABLE",
    "CommandResult",
    "Episode",
    "OSTask",
    "Sandbox",
    "SandboxConfig",
    "SandboxError",
    "SandboxUnavailable",
    "check_validity",
    "find_os_data",
    "load_os_tasks",
    "parse_action",
    "replay",
    "run_episode",
    "runnable_tasks",
]
