"""``memcurator mcp``: the memory as MCP tools (write, observe, recall, feedback, forget,
explain).

Built on the official ``mcp`` SDK, major version 2 (``mcp.server.mcpserver.MCPServer``; what
was FastMCP in 1.x), pinned ``>=2,<3`` in the ``serve`` extra.

Tenancy is the REST service's (:mod:`memcurator.service.keys`): one key, one namespace.

- **stdio**: the agent host starts ``memcurator mcp STORE --key-env MEMCURATOR_KEY``; the key is
  checked once at start and every tool call acts in its namespace.
- **streamable HTTP** (``--transport http``): each request carries ``Authorization: Bearer
  <key>``, checked by the SDK's bearer middleware through :class:`KeyVerifier` and again by each
  tool (a key revoked mid-session stops at once). Stateless (``stateless_http=True``): no
  session lives in one worker, so several workers behind one address serve any request.

Tool errors name the library's error class; a not-found answer is the same fixed sentence for
another tenant's id and for an id that never existed
(:data:`~memcurator.service.problems.NOT_FOUND_DETAIL`).

Arguments are checked as the REST API checks its bodies: strictly typed (``"k": "2"`` and
``"reward": false`` are refused, not coerced), with the caps and ranges of
:mod:`memcurator.limits` (``k`` at most :data:`~memcurator.limits.MAX_RECALL_K`, ``meta`` at
most :data:`~memcurator.limits.MAX_META_DEPTH` levels deep), before anything is done.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import anyio
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import AnyHttpUrl, Field

from memcurator import limits
from memcurator.errors import EntryNotFound, InvalidInput, MemcuratorError, Unauthorized
from memcurator.service.filters import MAX_CONDITIONS, compile_where
from memcurator.service.keys import NO_KEY, KeyInfo, KeyTable
from memcurator.service.observations import MAX_SESSION_CHARS, SESSION_PATTERN, attach
from memcurator.service.problems import from_error
from memcurator.service.tenants import TenantPool

#: the MCP major version this module is written for
MCP_MAJOR = 2

# the tools' argument types: strict (no coercion) and bounded as the REST bodies are
_K = Annotated[int, Field(strict=True, ge=1, le=limits.MAX_RECALL_K)]
_Reward = Annotated[float, Field(strict=True, ge=0.0, le=1.0, allow_inf_nan=False)]
_User = Annotated[str | None, Field(strict=True, min_length=1, max_length=limits.MAX_USER_CHARS)]
_Text = Annotated[str, Field(strict=True, min_length=1)]
_Ids = Annotated[list[str] | None, Field(strict=True, max_length=limits.MAX_IDS)]
_Where = Annotated[list[dict[str, Any]] | None, Field(strict=True, max_length=MAX_CONDITIONS)]
_Meta = Annotated[dict[str, Any] | None, Field(strict=True)]
_Reason = Annotated[str, Field(strict=True, min_length=1, max_length=1000)]
_Id = Annotated[str, Field(strict=True, min_length=1, max_length=256)]
_Session = Annotated[
    str | None, Field(strict=True, pattern=SESSION_PATTERN, max_length=MAX_SESSION_CHARS)
]
_SourceKind = Literal["tool_output", "web", "user", "document", "external", "peer"]
_Label = Annotated[str | None, Field(strict=True, min_length=1, max_length=512)]


class KeyVerifier:
    """The SDK's token verifier over the key table: a live key is an access token whose
    ``client_id`` is the key id and whose scopes are the key's."""

    def __init__(self, keys: KeyTable):
        self.keys = keys

    async def verify_token(self, token: str) -> AccessToken | None:
        try:
            k = self.keys.authenticate(token)
        except Unauthorized:
            return None
        return AccessToken(token=token, client_id=k.key_id, scopes=list(k.scopes), subject=k.name)


class _StrictServer(MCPServer):
    """The SDK's server, refusing a tool call that passes an argument the tool does not take
    (the SDK drops unknown arguments; the REST bodies refuse unknown fields the same way)."""

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        known = {t.name: set(t.input_schema.get("properties", {})) for t in await self.list_tools()}
        extra = sorted(set(arguments) - known.get(name, set(arguments)))
        if extra:
            raise ToolError(f"InvalidInput: unknown arguments {extra}; {name} takes "
                            f"{sorted(known[name])}")  # fmt: skip
        return await super().call_tool(name, arguments, context)


def _server(pool: TenantPool, base_url: str | None) -> MCPServer:
    """The bare server; over HTTP, with the key table as its bearer-token verifier."""
    kw: dict[str, Any] = {}
    if base_url is not None:
        kw["token_verifier"] = KeyVerifier(pool.keys)
        kw["auth"] = AuthSettings(
            issuer_url=AnyHttpUrl(base_url),
            resource_server_url=AnyHttpUrl(f"{base_url}/mcp"),
            validate_token_resource=False,
        )
    return _StrictServer(
        "memcurator",
        instructions="A governed experience memory: recall before a task, write what worked, "
        "give feedback on what was recalled, forget on request; every decision is logged.",
        **kw,
    )


def create_mcp(
    pool: TenantPool,
    *,
    key: KeyInfo | None = None,
    base_url: str | None = None,
) -> MCPServer:
    """The MCP server over ``pool``'s tenants.

    Parameters
    ----------
    pool : TenantPool
    key : KeyInfo, optional
        The one key of a stdio server (checked by the caller at start).
    base_url : str, optional
        ``http://host:port`` of an HTTP server: requests then need a bearer key (its resource
        URL is ``base_url + "/mcp"``).

    Raises
    ------
    ValueError
        Neither ``key`` nor ``base_url`` (a server open to anyone is not built).
    """
    if (key is None) == (base_url is None):
        raise ValueError("give key (stdio) or base_url (HTTP), exactly one")
    server = _server(pool, base_url)
    reads = attach(pool)  # what each key's session observed (memcurator.service.observations)

    def caller() -> KeyInfo:
        if key is not None:
            return pool.keys.live(key.key_id)
        tok = get_access_token()
        if tok is None:
            raise Unauthorized(NO_KEY)
        return pool.keys.authenticate(tok.token)

    async def run(scope: str, fn: Any) -> Any:
        try:
            k = caller()
            k.require(scope)
            return await anyio.to_thread.run_sync(lambda: fn(k))
        except MemcuratorError as e:
            doc = from_error(e)
            raise ToolError(f"{doc['error']}: {doc['detail']}") from None

    @server.tool()
    async def write(
        text: _Text,
        kind: Annotated[str, Field(strict=True, max_length=16)] = "insight",
        meta: _Meta = None,
        user: _User = None,
        session: _Session = None,
    ) -> dict[str, Any]:
        """Offer one experience to the memory; its origin is this key's identity. Returns
        whether it was admitted, why, and what it evicted. A text that copies what this
        key's ``session`` observed (the observe tool) is handled as that source's channel."""

        def go(k: KeyInfo) -> dict[str, Any]:
            if meta is not None:
                limits.meta_json(meta)  # depth, 64-bit integers, size: before anything else
            signed = pool.signature(k, None, kind, text)
            with reads.scope(k.key_id, session), pool.using(k) as t:
                r = t.memory.write(text, kind=kind, meta=meta, user=user, **signed.write_kw())
                return {"id": r.id, "admitted": r.admitted, "reason": r.reason,
                        "evicted": list(r.evicted), "used_bytes": t.memory.used_bytes}  # fmt: skip

        return await run("write", go)

    @server.tool()
    async def observe(
        text: _Text,
        kind: _SourceKind = "tool_output",
        label: _Label = None,
        user: _User = None,
        session: _Session = None,
    ) -> dict[str, Any]:
        """Report outside content the agent read (a tool output, a page, a mail): nothing is
        written, but a later write in the same session that copies it is handled as coming
        from that source (tainted, on probation). ``label`` names the source (a tool, a URL)."""

        def go(k: KeyInfo) -> dict[str, Any]:
            source = kind if label is None else f"{kind}:{label}"
            with reads.scope(k.key_id, session), pool.using(k) as t:
                n = t.memory.observe_read(text, source, user=user)
            return reads.status(k.key_id, session or "") | {"shingles": n}

        return await run("write", go)

    @server.tool()
    async def recall(
        query: _Text,
        k: _K = 3,
        where: _Where = None,
        user: _User = None,
    ) -> dict[str, Any]:
        """Up to k remembered experiences for a task, best first. ``where`` filters as data:
        [{"field": "meta.family", "op": "eq", "value": "f3"}]. Pass the returned recall_id to
        feedback."""

        def go(key_: KeyInfo) -> dict[str, Any]:
            conds = [_Cond(**c) for c in (where or [])]
            pred = compile_where(conds)
            with pool.using(key_) as t:
                r = t.memory.recall(query, k=k, where=pred, user=user)
                rid = t.remember(r)
            return {
                "recall_id": rid,
                "entries": [
                    {"id": e.id, "text": e.text, "score": float(s)}
                    for e, s in zip(r.entries, r.scores, strict=True)
                ],
            }

        return await run("read", go)

    _entry_tools(server, pool, run)
    return server


def _entry_tools(server: MCPServer, pool: TenantPool, run: Any) -> None:
    """The tools on entries already written (feedback, forget, explain) on ``server``;
    ``run(scope, fn)`` calls ``fn`` with the caller's key once it holds ``scope`` (as in
    :func:`create_mcp`)."""

    @server.tool()
    async def feedback(
        reward: _Reward,
        recall_id: Annotated[str | None, Field(strict=True, max_length=64)] = None,
        used: _Ids = None,
    ) -> str:
        """The outcome (0..1) of the task that used a recall (recall_id) or entries (used)."""

        def go(k: KeyInfo) -> str:
            with pool.using(k) as t:
                if (recall_id is None) == (used is None):
                    raise InvalidInput("give recall_id or used, exactly one")
                target: Any = t.recalled(recall_id) if recall_id is not None else used
                t.memory.feedback(target, reward)
            return "ok"

        return await run("write", go)

    @server.tool()
    async def forget(entry_id: _Id, reason: _Reason = "forget requested") -> dict[str, Any]:
        """Hard-delete one entry; a tombstone stays in the decision log."""

        def go(k: KeyInfo) -> dict[str, Any]:
            with pool.using(k) as t:
                f = t.memory.forget(entry_id, reason=reason)
            return {"ids": f.ids, "freed": f.freed}

        return await run("write", go)

    @server.tool()
    async def explain(entry_id: _Id) -> list[dict[str, Any]]:
        """Every decision the memory took about one entry (admit, reject, evict, forget...),
        oldest first, with its reason."""

        def go(k: KeyInfo) -> list[dict[str, Any]]:
            with pool.using(k) as t:
                rows = [d for d in t.memory.decisions() if d.entry_id == entry_id]
            if not rows:
                raise EntryNotFound("no such entry")
            return [
                {"seq": d.seq, "action": d.action, "reason": d.reason, "bytes": d.bytes}
                for d in rows
            ]

        return await run("read", go)


class _Cond:
    """A ``where`` condition given to an MCP tool as a plain dict."""

    def __init__(self, field: str = "", op: str = "", value: Any = None, **extra: Any):
        if extra:
            raise InvalidInput(f"where: unknown keys {sorted(extra)}; use field, op, value")
        self.field, self.op, self.value = field, op, value


__all__ = ["MCP_MAJOR", "KeyVerifier", "create_mcp"]
