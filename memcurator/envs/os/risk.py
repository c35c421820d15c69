"""The bash domain check as the OS environment uses it: :mod:`memcurator.domains.bash` (a core
plug-in that imports no environment), re-exported whole; an
:class:`~memcurator.envs.os.data.OSTask` given as the ``spec`` opens the sandbox of its dry run
(:meth:`~memcurator.envs.os.data.OSTask.sandbox`)."""

from memcurator.domains import bash as _bash
from memcurator.domains.bash import *  # noqa: F403 - the domain check's names, whole

__all__ = list(_bash.__all__)
