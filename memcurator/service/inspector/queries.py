"""What the inspector's routes take: one model per filter set or body, used by the route (it
validates the request) and by the view (it reads the fields), so a filter is declared once.
"""

from __future__ import annotations

from collections.abc import Callable

from pydantic import BaseModel, ConfigDict, Field

from memcurator.service.models import Condition
from memcurator.types import Entry

#: a recall's compiled ``where`` conditions (:func:`memcurator.service.filters.compile_where`;
#: None: none)
Where = Callable[[Entry], bool] | None


class _ByOrigin(BaseModel):
    origin: str | None = Field(default=None, max_length=16)


class EntryFilter(_ByOrigin):
    """The filters of ``GET /ui/api/entries`` (query parameters; None: no filter).

    ``q`` matches a case-insensitive substring of the text, the id or the origin detail;
    ``state`` is one of :data:`memcurator.service.inspector.views.STATES`; ``origin`` and
    ``kind`` the entry's own; ``meta_key`` (with ``meta_value``, compared as text) one
    metadata key.
    """

    q: str | None = Field(default=None, max_length=256)
    state: str | None = Field(default=None, max_length=16)
    kind: str | None = Field(default=None, max_length=16)
    meta_key: str | None = Field(default=None, max_length=128)
    meta_value: str | None = Field(default=None, max_length=256)


class DecisionFilter(_ByOrigin):
    """The filters of ``GET /ui/api/decisions`` (query parameters; None: no filter).

    ``reason`` is a case-insensitive substring; ``origin`` matches the entry's origin where the
    entry is resident, else the origin the row's reason names (``origin peer``, ...); ``peer``
    the sending peer of a resident peer entry, else the peer the row's reason names.
    """

    action: str | None = Field(default=None, max_length=16)
    reason: str | None = Field(default=None, max_length=256)
    peer: str | None = Field(default=None, max_length=256)
    entry_id: str | None = Field(default=None, max_length=256)


class RecallProbe(BaseModel):
    """A recall for the playground; it changes nothing (``observe`` is always off).

    ``domain`` names a read-time curator's aligner (``"sql"``, ``"bash"``).
    """

    model_config = ConfigDict(extra="forbid", strict=True)  # as the /v1 bodies: no coercion

    query: str = Field(min_length=1, max_length=10_000)
    k: int = Field(5, ge=1, le=100)
    where: list[Condition] = Field(default_factory=list, max_length=16)
    user: str | None = Field(default=None, max_length=256)
    min_score: float | None = Field(None, ge=-1.0, le=1.0)
    domain: str = Field("sql", min_length=1, max_length=32, pattern=r"^[a-z0-9_-]+$")


__all__ = ["DecisionFilter", "EntryFilter", "RecallProbe", "Where"]
