"""memcurator: governance of an LLM agent's experience memory under hard budgets.

The entry point is :class:`Memory`; policies are built by name with :func:`create_policy`.
"""

from memcurator.errors import (
    BudgetExceeded,
    DimensionMismatch,
    EntryNotFound,
    InvalidInput,
    MemcuratorError,
    NamespaceNotFound,
    StoreError,
    UnknownName,
)
from memcurator.memory import GovernResult, Memory, WriteResult
from memcurator.policy import POLICIES, create_policy
from memcurator.types import Entry, RecallResult, Step, Task, Trajectory

__version__ = "0.1.0"
__all__ = [
    "Memory",
    "WriteResult",
    "GovernResult",
    "create_policy",
    "POLICIES",
    "Entry",
    "Task",
    "Trajectory",
    "Step",
    "RecallResult",
    "MemcuratorError",
    "InvalidInput",
    "EntryNotFound",
    "NamespaceNotFound",
    "BudgetExceeded",
    "DimensionMismatch",
    "StoreError",
    "UnknownName",
    "__version__",
]
