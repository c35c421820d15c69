"""The bash domain check as the OS environment uses it: :mod:`memcurator.domains.bash` (a core
plug-in that imports no environment); an :class:`~memcurator.envs.os.data.OSTask` given as the
``spec`` opens the sandbox of its dry run (:meth:`~memcurator.envs.os.data.OSTask.sandbox`)."""

from memcurator.domains.bash import (
    SHELL_WORDS,
    BashCheck,
    DryRunTask,
    Finding,
    dry_run_findings,
    static_findings,
)

__all__ = [
    "SHELL_WORDS",
    "BashCheck",
    "DryRunTask",
    "Finding",
    "dry_run_findings",
    "static_findings",
]
