"""What the agent read: ``POST``/``GET``/``DELETE /v1/observations``, and the session every
write belongs to.

An agent behind the service reports the outside content it read (a tool output, a web page, a
mail, a document) with ``POST /v1/observations``; the service keeps a fingerprint of it in the
key's session (:mod:`memcurator.service.observations`), and a later ``/v1/write``,
``PUT /v1/entries/{id}`` or ``/v1/record`` through the same key and session whose text copies it
is tainted exactly as :meth:`memcurator.Memory.observe_read` taints a library write: handled as
the source's channel, a ``downgrade`` row in the decision log, on probation under a policy with
a Trust gate. The session is the key plus the optional ``X-Memcurator-Session`` header.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated, Literal

from fastapi import APIRouter, Header, Request
from pydantic import BaseModel, ConfigDict, Field

from memcurator.limits import MAX_USER_CHARS
from memcurator.service.observations import (
    MAX_SESSION_CHARS,
    SESSION_PATTERN,
    SessionReads,
)
from memcurator.service.routes.deps import Key, Pool

router = APIRouter(tags=["provenance"])

#: the optional session header: one key's calls in one session share what they observed
Session = Annotated[
    str | None,
    Header(
        alias="X-Memcurator-Session",
        pattern=SESSION_PATTERN,
        max_length=MAX_SESSION_CHARS,
        description="The agent session this call belongs to (none: the key's default "
        "session). Writes are checked against what the same key observed in the same session.",
    ),
]


class ObservationRequest(BaseModel):
    """Outside content the agent read (a fingerprint is kept; nothing is written)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    text: str = Field(min_length=1, description="The content as the agent saw it (UTF-8).")
    kind: Literal["tool_output", "web", "user", "document", "external", "peer"] = Field(
        "tool_output", description="What kind of source it came from (its trust channel)."
    )
    label: str | None = Field(
        None,
        min_length=1,
        max_length=512,
        description="Which one (a tool's name, a URL, a mail id); shown in the decision log.",
    )
    user: str | None = Field(
        None,
        min_length=1,
        max_length=MAX_USER_CHARS,
        description="Read on behalf of one user: matched against that user's writes and "
        "unscoped ones.",
    )


class SessionOut(BaseModel):
    """One observation session of the key."""

    session: str = Field(description="The session id ('' for the key's default session).")
    reads: int = Field(description="Observations it holds.")
    bytes: int = Field(description="UTF-8 bytes of observed text it holds.")
    key_bytes: int = Field(description="Bytes all of this key's live sessions hold.")
    max_key_bytes: int = Field(description="The most the key's sessions may hold (413 beyond).")
    expires_in_s: float = Field(description="Seconds until it expires (0: no live session).")
    shingles: int | None = Field(None, description="Shingles this observation recorded.")


class SessionEnded(BaseModel):
    """The answer to ending a session."""

    session: str
    ended: bool = Field(description="False when there was no live session to end.")


def reads_of(request: Request) -> SessionReads:
    """The application's :class:`~memcurator.service.observations.SessionReads`."""
    return request.app.state.reads  # type: ignore[no-any-return]


async def in_session(request: Request, key: Key, session: Session = None) -> AsyncIterator[None]:
    """Run the route in the key's session (a dependency of every route that writes)."""
    with SessionReads.scope(key.key_id, session):
        yield


@router.post("/v1/observations", response_model=SessionOut)
def observe(
    body: ObservationRequest, request: Request, key: Key, pool: Pool, session: Session = None
) -> SessionOut:
    """Report outside content the agent read; a later write in this session that copies it
    is tainted as the source's channel (413 over the key's byte cap for observations)."""
    key.require("write")
    reads = reads_of(request)
    source = body.kind if body.label is None else f"{body.kind}:{body.label}"
    with SessionReads.scope(key.key_id, session), pool.using(key) as t:
        n = t.memory.observe_read(body.text, source, user=body.user)
    return SessionOut(**reads.status(key.key_id, session or ""), shingles=n)


@router.get("/v1/observations", response_model=SessionOut)
def session_status(request: Request, key: Key, session: Session = None) -> SessionOut:
    """What this key's session holds and when it expires."""
    key.require("write")
    return SessionOut(**reads_of(request).status(key.key_id, session or ""))


@router.delete("/v1/observations", response_model=SessionEnded)
def end_session(request: Request, key: Key, session: Session = None) -> SessionEnded:
    """End this key's session: what it observed no longer taints writes."""
    key.require("write")
    sid = session or ""
    return SessionEnded(session=sid, ended=reads_of(request).end(key.key_id, sid))


__all__ = ["ObservationRequest", "Session", "SessionEnded", "SessionOut", "in_session", "router"]
