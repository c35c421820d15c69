"""Locate and load the LifelongAgentBench OS-interaction tasks (500 bash tasks).

The file (``shared/data/lifelongagentbench-os/entry_dict.json``, see its README) is read in
place. Every task has three bash scripts: initialisation, evaluation (the task is correct iff it
exits 0) and a reference ("ground truth") solution.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

from memcurator.envs.sql.data import DataNotFound, find_entry_dict
from memcurator.errors import InvalidInput

if TYPE_CHECKING:
    from memcurator.envs.os.sandbox import Sandbox

DATA_REL = Path("lifelongagentbench-os") / "entry_dict.json"


@dataclass(frozen=True)
class OSTask:
    """One OS-interaction task.

    Attributes
    ----------
    index : int
        ``sample_index`` in the data (0..499).
    instruction : str
        What the agent is asked to do.
    init : str
        Initialisation script (may be empty).
    check : str
        Evaluation script: the task is solved iff it exits 0 (a timeout is a failure).
    reference : str
        The generator's reference solution.
    skills : tuple of str
        The upstream ``skill_list``.
    """

    index: int
    instruction: str
    init: str
    check: str
    reference: str
    skills: tuple[str, ...] = ()

    @property
    def family(self) -> str:
        """The task's own id as a family name, e.g. ``"os007"``."""
        return f"os{self.index:03d}"

    def sandbox(self, *, timeout_s: float, max_output: int) -> Sandbox:
        """A fresh bubblewrap sandbox for this task (not yet entered), ``timeout_s`` seconds and
        ``max_output`` bytes a command: what the bash domain check dry-runs an action in
        (:class:`memcurator.domains.bash.DryRunTask`)."""
        from memcurator.envs.os.sandbox import Sandbox, SandboxConfig

        return Sandbox(SandboxConfig(timeout_s=timeout_s, max_output=max_output))


def find_os_data(path: str | os.PathLike[str] | None = None) -> Path:
    """Locate the OS tasks' ``entry_dict.json``.

    Looks at ``path`` (the file, or a folder holding it or ``lifelongagentbench-os/``), then
    ``$MEMCURATOR_DATA_DIR/lifelongagentbench-os/``, then upward from this package and from the
    current directory for ``shared/data/lifelongagentbench-os/entry_dict.json``.

    Raises
    ------
    DataNotFound
        Nothing found; the message lists where it looked.
    """
    return find_entry_dict(path, DATA_REL, "OS task data", Path(__file__))


def _script(entry: dict[str, object], *keys: str) -> str:
    node: object = entry
    for k in keys:
        if not isinstance(node, dict) or k not in node:
            raise InvalidInput(f"missing field {'.'.join(keys)}")
        node = node[k]
    if not isinstance(node, dict) or node.get("command_name") != "bash":
        raise InvalidInput(f"{'.'.join(keys)} is not a bash command item")
    script = node.get("script")
    if not isinstance(script, str):
        raise InvalidInput(f"{'.'.join(keys)}.script is not a string")
    return script


def parse_task(key: str, entry: dict[str, object]) -> OSTask:
    """One :class:`OSTask` from a raw ``entry_dict.json`` value.

    Raises
    ------
    InvalidInput
        A field is missing or has the wrong type; the message names the task key and field.
    """
    try:
        index = entry["sample_index"]
        instruction = entry["instruction"]
        if not isinstance(index, int) or not isinstance(instruction, str) or not instruction:
            raise InvalidInput("sample_index must be an int and instruction a non-empty string")
        skills = entry.get("skill_list", [])
        if not isinstance(skills, list):
            raise InvalidInput("skill_list is not a list")
        return OSTask(
            index=index,
            instruction=instruction,
            init=_script(entry, "initialization_command_item"),
            check=_script(entry, "evaluation_info", "evaluation_command_item"),
            reference=_script(entry, "evaluation_info", "ground_truth_command_item"),
            skills=tuple(str(s) for s in skills),
        )
    except (KeyError, InvalidInput) as e:
        raise InvalidInput(f"OS task {key!r}: {e}") from None


@lru_cache(maxsize=4)
def _load(path: Path) -> tuple[OSTask, ...]:
    try:
        raw = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise InvalidInput(f"cannot read OS tasks from {path}: {e}") from None
    if not isinstance(raw, dict):
        raise InvalidInput(f"{path}: expected a JSON object keyed by task index")
    tasks = [parse_task(k, v) for k, v in raw.items()]
    return tuple(sorted(tasks, key=lambda t: t.index))


def load_os_tasks(path: str | os.PathLike[str] | None = None) -> tuple[OSTask, ...]:
    """All OS tasks, in ``sample_index`` order.

    Parameters
    ----------
    path : str or PathLike, optional
        See :func:`find_os_data`.

    Raises
    ------
    DataNotFound, InvalidInput
    """
    return _load(find_os_data(path).resolve())


__all__ = ["DATA_REL", "DataNotFound", "OSTask", "find_os_data", "load_os_tasks", "parse_task"]
