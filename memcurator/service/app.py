"""The REST API of ``memcurator serve``: :func:`create_app` builds it over any store.

Every route but ``/healthz`` needs ``Authorization: Bearer <key>``; the key alone names the
tenant (:mod:`memcurator.service.keys`), so no path, body or header chooses a namespace. Routes
that take an entry id look it up only inside the key's namespace, and answer another
namespace's id exactly as an id that never existed (:mod:`memcurator.service.problems`).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Awaitable, Callable
from importlib.metadata import PackageNotFoundError, version
from typing import Annotated, Any

from fastapi import Depends, FastAPI, Query, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.exceptions import HTTPException as StarletteHTTPException

from memcurator.errors import Forbidden, InvalidInput, MemcuratorError, NamespaceNotFound
from memcurator.service.hub import Hub
from memcurator.service.keys import KeyInfo, KeyTable, RateLimiter
from memcurator.service.metrics import CONTENT_TYPE, Metrics
from memcurator.service.models import (
    DecisionOut,
    DecisionsPage,
    EmbeddingOut,
    EmbeddingsRequest,
    EmbeddingsResponse,
    EmbeddingsUsage,
    EntriesPage,
    EntryOut,
    FeedbackRequest,
    ForgetRequest,
    ForgetResponse,
    Health,
    HubMessage,
    HubPull,
    HubPush,
    HubPushResponse,
    NamespaceOut,
    NamespacePatch,
    Problem,
    RecallRequest,
    RecallResponse,
    RecordRequest,
    RecordResponse,
    SharedEntryOut,
    SketchIn,
    SketchOut,
    UpdateRequest,
    WriteRequest,
    WriteResponse,
)
from memcurator.service.problems import INTERNAL_DETAIL, MEDIA_TYPE, from_error, problem
from memcurator.service.tenants import Tenant, TenantPool
from memcurator.types import Step, Task, Trajectory

log = logging.getLogger("memcurator.service")

#: the largest request body accepted, bytes (a write's text is further bounded by the memory's
#: ``max_text_bytes``)
MAX_BODY_BYTES = 1 << 20

_ERRORS: dict[int | str, dict[str, Any]] = {
    s: {
        "model": Problem,
        "description": d,
        "content": {MEDIA_TYPE: {"schema": {"$ref": "#/components/schemas/Problem"}}},
    }
    for s, d in (
        (401, "Missing, malformed, unknown or revoked key"),
        (403, "The key lacks the scope, or claims an origin it does not hold"),
        (404, "No such entry (or recall) in this namespace"),
        (409, "Conflicts with what the namespace holds"),
        (413, "Larger than the budget or the body limit"),
        (422, "Invalid request"),
        (429, "Over the key's rate limit"),
    )
}


def _score(x: float) -> float | None:
    return float(x) if math.isfinite(x) else None


def _pkg_version() -> str:
    try:
        return version("memcurator")
    except PackageNotFoundError:  # pragma: no cover - running from a tree without metadata
        return "unknown"


def create_app(
    store_url: str,
    *,
    keys: KeyTable | str,
    ring_path: str | None = None,
    memory_options: dict[str, Any] | None = None,
    rate_clock: Callable[[], float] = time.monotonic,
    max_body_bytes: int = MAX_BODY_BYTES,
) -> FastAPI:
    """The FastAPI application serving ``store_url``.

    Parameters
    ----------
    store_url : str
        Opened by :class:`~memcurator.Memory` for each tenant (a SQLite path or a store URL).
    keys : KeyTable or str
        The key table, or the path of its file.
    ring_path : str, optional
        The service's key ring file (see :class:`~memcurator.service.tenants.TenantPool`);
        None keeps the ring in memory.
    memory_options : dict, optional
        Extra :class:`~memcurator.Memory` arguments for every tenant (``embedder``, ``seed``).
    rate_clock : callable () -> float
        Seconds for the rate limiter (tests pass a fake clock).
    max_body_bytes : int, default 1 MiB
        Larger request bodies are refused (413) before they are read.

    Returns
    -------
    FastAPI
        ``app.state.pool`` holds the tenants; close it with ``app.state.pool.close()``.
    """
    table = keys if isinstance(keys, KeyTable) else KeyTable(keys)
    pool = TenantPool(store_url, table, ring_path, memory_options)
    limiter = RateLimiter(clock=rate_clock)
    metrics = Metrics()
    app = FastAPI(
        title="memcurator",
        version=_pkg_version(),
        description="A governed agent memory: write, recall, feedback and forget under a byte "
        "budget, every decision logged. Tenants by API key.",
        responses=_ERRORS,
    )
    app.state.pool = pool
    app.state.keys = table
    app.state.metrics = metrics
    hub = Hub()
    app.state.hub = hub
    bearer = HTTPBearer(auto_error=False, description="An API key from `memcurator keys create`.")

    # ------------------------------------------------------------------ errors and metrics
    def problem_response(doc: dict[str, object], headers: dict[str, str] | None = None):
        status = int(doc["status"])  # type: ignore[call-overload]
        return JSONResponse(doc, status_code=status, media_type=MEDIA_TYPE, headers=headers)

    @app.exception_handler(MemcuratorError)
    async def _library_error(request: Request, e: MemcuratorError) -> Response:
        doc = from_error(e)
        headers = None
        if doc["status"] == 429:
            headers = {"Retry-After": str(max(1, math.ceil(getattr(e, "retry_after_s", 1.0))))}
        if doc["status"] == 401:
            headers = {"WWW-Authenticate": "Bearer"}
        return problem_response(doc, headers)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, e: RequestValidationError) -> Response:
        errs = e.errors()
        if any(err.get("type") == "json_invalid" for err in errs):
            return problem_response(problem(400, "InvalidInput", "the body is not valid JSON"))
        parts = []
        for err in errs[:5]:
            where = ".".join(str(x) for x in err.get("loc", ()) if x != "body")
            parts.append(f"{where or 'body'}: {err.get('msg', 'invalid')}")
        return problem_response(problem(422, "InvalidInput", "; ".join(parts)))

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, e: StarletteHTTPException) -> Response:
        detail = "no such route" if e.status_code == 404 else str(e.detail)
        return problem_response(problem(e.status_code, "HTTPError", detail))

    @app.middleware("http")
    async def _guard(request: Request, call_next: Callable[[Request], Awaitable[Response]]):
        t0 = time.perf_counter()
        try:
            size = int(request.headers.get("content-length") or 0)
        except ValueError:
            size = -1
        if size < 0:
            resp: Response = problem_response(problem(400, "InvalidInput", "bad Content-Length"))
        elif size > max_body_bytes:
            resp = problem_response(
                problem(413, "InvalidInput", f"request body over {max_body_bytes} bytes")
            )
        else:
            try:
                resp = await call_next(request)
            except Exception:  # the one place a bug is turned into a 500, logged in full
                log.exception("unhandled error on %s %s", request.method, request.url.path)
                resp = problem_response(problem(500, "InternalError", INTERNAL_DETAIL))
        route = getattr(request.scope.get("route"), "path", "unmatched")
        ns = getattr(request.state, "namespace", "")
        metrics.observe(ns, route, request.method, resp.status_code, time.perf_counter() - t0)
        return resp

    # ------------------------------------------------------------------ auth
    def key_of(
        request: Request,
        cred: HTTPAuthorizationCredentials | None = Depends(bearer),
    ) -> KeyInfo:
        k = table.authenticate(cred.credentials if cred is not None else None)
        request.state.namespace = k.namespace
        limiter.check(k)
        return k

    def out(t: Tenant, r: Any, origin: str) -> WriteResponse:
        m = t.memory
        return WriteResponse(
            id=r.id,
            admitted=r.admitted,
            reason=r.reason,
            score=_score(r.score),
            evicted=list(r.evicted),
            distilled=list(r.distilled),
            origin=origin,
            used_bytes=m.used_bytes,
            max_bytes=m.max_bytes,
        )

    def namespace_out(t: Tenant) -> NamespaceOut:
        m = t.memory
        return NamespaceOut(
            name=m.namespace,
            policy=m.policy.name,
            max_bytes=m.max_bytes,
            used_bytes=m.used_bytes,
            entries=len(m),
            decisions=m.store.decision_count(m.namespace),
            step=m.step,
        )

    def own_namespace(key: KeyInfo, name: str) -> None:
        if name != key.namespace:
            raise NamespaceNotFound("no such namespace")

    # ------------------------------------------------------------------ routes
    @app.get("/healthz", response_model=Health, tags=["service"])
    def health() -> Health:
        """Liveness; needs no key and says nothing about any tenant."""
        return Health(status="ok", version=app.version)

    @app.get(
        "/metrics",
        response_class=PlainTextResponse,
        tags=["service"],
        responses={200: {"content": {CONTENT_TYPE: {}}}},
    )
    def metrics_text(key: KeyInfo = Depends(key_of)) -> PlainTextResponse:
        """Prometheus text of the key's namespace (admin scope)."""
        key.require("admin")
        with pool.using(key) as t:
            m = t.memory
            metrics.fold_decisions(
                key.namespace, m.decisions(since=metrics.seen_seq[key.namespace])
            )
            gauges: dict[str, float | None] = {
                "used_bytes": float(m.used_bytes),
                "max_bytes": None if m.max_bytes is None else float(m.max_bytes),
                "entries": float(len(m)),
            }
        return PlainTextResponse(metrics.render(key.namespace, gauges), media_type=CONTENT_TYPE)

    @app.post("/v1/write", response_model=WriteResponse, tags=["memory"])
    def write(body: WriteRequest, key: KeyInfo = Depends(key_of)) -> WriteResponse:
        """Offer one entry; its origin is the key's identity, signed by the service."""
        key.require("write")
        origin, detail, sig = pool.signature(key, body.origin, body.kind, body.text)
        with pool.using(key) as t:
            r = t.memory.write(
                body.text,
                origin=origin,
                kind=body.kind,
                origin_detail=detail,
                raw_text=body.raw_text,
                meta=body.meta,
                signature=sig,
                user=body.user,
                personal=body.personal,
            )
            return out(t, r, origin)

    @app.post("/v1/recall", response_model=RecallResponse, tags=["memory"])
    def recall(body: RecallRequest, key: KeyInfo = Depends(key_of)) -> RecallResponse:
        """Up to ``k`` entries for ``query``, filtered by ``where`` conditions (data, not code)."""
        from memcurator.service.filters import compile_where

        key.require("read")
        where = compile_where(body.where)
        with pool.using(key) as t:
            r = t.memory.recall(
                body.query,
                k=body.k,
                where=where,
                min_score=body.min_score,
                user=body.user,
                observe=body.observe,
            )
            rid = t.remember(r)
        return RecallResponse(
            recall_id=rid,
            ids=list(r.ids),
            scores=[float(s) for s in r.scores],
            entries=[EntryOut.of(e) for e in r.entries],
            step=r.step,
        )

    @app.post("/v1/embeddings", response_model=EmbeddingsResponse, tags=["memory"])
    def embeddings(body: EmbeddingsRequest, key: KeyInfo = Depends(key_of)) -> EmbeddingsResponse:
        """OpenAI-compatible embeddings by the namespace's own embedder (read scope).

        Any OpenAI client, and :class:`~memcurator.embed.openai_compat.OpenAICompatEmbedder`,
        can embed with it. Each input is embedded as given (a memory embeds only an entry's
        recall line); nothing is stored and nothing enters the decision log.
        """
        import base64

        import numpy as np

        from memcurator.embed.text import word_tokens

        key.require("read")
        texts = [body.input] if isinstance(body.input, str) else list(body.input)
        with pool.using(key) as t:
            emb = t.memory.embedder
            ident = emb.name
            dim = int(emb.dim)
            if body.dimensions is not None and body.dimensions != dim:
                raise InvalidInput(
                    f"dimensions={body.dimensions}: this namespace's embedder ({ident}) gives {dim}"
                )
            many = getattr(emb, "embed_many", None)
            vecs = np.asarray(
                many(texts) if many is not None else [emb.embed(x) for x in texts],
                dtype=np.float32,
            ).reshape(len(texts), dim)
        ntok = sum(len(word_tokens(x)) for x in texts)
        data = [
            EmbeddingOut(
                index=i,
                embedding=(
                    base64.b64encode(v.astype("<f4").tobytes()).decode("ascii")
                    if body.encoding_format == "base64"
                    else [float(x) for x in v]
                ),
            )
            for i, v in enumerate(vecs)
        ]
        return EmbeddingsResponse(
            data=data,
            model=ident,
            usage=EmbeddingsUsage(prompt_tokens=ntok, total_tokens=ntok),
        )

    def used_of(t: Tenant, used: list[str] | None, recall_id: str | None) -> Any:
        if (used is None) == (recall_id is None):
            if used is None:
                raise InvalidInput("give recall_id (the recall injected) or used (entry ids)")
            raise InvalidInput("give recall_id or used, not both")
        return t.recalled(recall_id) if recall_id is not None else used

    @app.post("/v1/feedback", status_code=204, tags=["memory"])
    def feedback(body: FeedbackRequest, key: KeyInfo = Depends(key_of)) -> Response:
        """A task's outcome for the entries injected into it."""
        key.require("write")
        with pool.using(key) as t:
            t.memory.feedback(used_of(t, body.used, body.recall_id), body.reward)
        return Response(status_code=204)

    @app.post("/v1/record", response_model=RecordResponse, tags=["memory"])
    def record(body: RecordRequest, key: KeyInfo = Depends(key_of)) -> RecordResponse:
        """Close one task: feedback, then its experience written as the owner's (self keys)."""
        key.require("write")
        if key.origin != "self":
            raise Forbidden(
                f"record writes the namespace's own experience; this key writes as {key.origin!r}"
            )
        task = Task(body.task.id, body.task.instruction, body.task.family)
        traj = Trajectory(
            body.task.id,
            [Step(s.observation, s.action) for s in body.trajectory.steps],
            reward=body.trajectory.reward,
            solver=body.trajectory.solver,
            metrics=dict(body.trajectory.metrics),
        )
        with pool.using(key) as t:
            used: Any = body.used
            if body.recall_id is not None:
                used = used_of(t, None, body.recall_id)
            r = t.memory.record(task, traj, used=used, feedback=body.feedback)
            return RecordResponse(written=None if r is None else out(t, r, "self"))

    @app.get("/v1/entries", response_model=EntriesPage, tags=["entries"])
    def entries(
        key: KeyInfo = Depends(key_of),
        offset: Annotated[int, Query(ge=0)] = 0,
        limit: Annotated[int, Query(ge=1, le=1000)] = 100,
        kind: Annotated[str | None, Query(max_length=16)] = None,
        origin: Annotated[str | None, Query(max_length=16)] = None,
        user: Annotated[str | None, Query(max_length=256)] = None,
        created_from_step: Annotated[int | None, Query(ge=0)] = None,
        created_to_step: Annotated[int | None, Query(ge=0)] = None,
        admitted_after: Annotated[float | None, Query(description="Unix seconds")] = None,
        admitted_before: Annotated[float | None, Query(description="Unix seconds")] = None,
    ) -> EntriesPage:
        """Resident entries, oldest first, filtered by kind, origin, user and time (step, or
        unix seconds of admission from the decision log)."""
        key.require("read")
        with pool.using(key) as t:
            es = t.memory.entries()
            admitted: dict[str, float] = {}
            if admitted_after is not None or admitted_before is not None:
                for d in t.memory.decisions(action="admit"):
                    admitted[d.entry_id] = d.at
        sel = [
            e
            for e in es
            if (kind is None or e.kind == kind)
            and (origin is None or e.origin == origin)
            and (user is None or e.meta.get("_user") == user)
            and (created_from_step is None or e.created_step >= created_from_step)
            and (created_to_step is None or e.created_step <= created_to_step)
            and (admitted_after is None or admitted.get(e.id, -math.inf) >= admitted_after)
            and (admitted_before is None or admitted.get(e.id, math.inf) <= admitted_before)
        ]
        page = sel[offset : offset + limit]
        nxt = offset + limit if offset + limit < len(sel) else None
        return EntriesPage(
            total=len(sel), offset=offset, entries=[EntryOut.of(e) for e in page], next_offset=nxt
        )

    @app.get("/v1/entries/{entry_id}", response_model=EntryOut, tags=["entries"])
    def get_entry(entry_id: str, key: KeyInfo = Depends(key_of)) -> EntryOut:
        """One resident entry of the key's namespace."""
        key.require("read")
        with pool.using(key) as t:
            return EntryOut.of(t.memory.get(entry_id))

    @app.put("/v1/entries/{entry_id}", response_model=WriteResponse, tags=["entries"])
    def update(entry_id: str, body: UpdateRequest, key: KeyInfo = Depends(key_of)) -> WriteResponse:
        """Replace one entry's text, atomically, through the trust checks (``admitted`` false
        when the gate refuses the new text; the old version stays). The service signs the new
        text as the entry's origin when this key holds it; an update by a key that does not
        (an external key editing an own entry) leaves the entry unproven (tainted external)."""
        key.require("write")
        with pool.using(key) as t:
            cur = t.memory.get(entry_id)  # EntryNotFound before anything changes
            sig = None
            if cur.origin in ("self", "peer"):
                try:
                    _, _, sig = pool.signature(key, cur.origin, cur.kind, body.text)
                except Forbidden:
                    sig = None
            r = t.memory.update(entry_id, body.text, reason=body.reason, signature=sig)
            return out(t, r, cur.origin)

    @app.delete("/v1/entries/{entry_id}", response_model=ForgetResponse, tags=["entries"])
    def forget(
        entry_id: str,
        key: KeyInfo = Depends(key_of),
        reason: Annotated[str, Query(min_length=1, max_length=1000)] = "forget requested",
    ) -> ForgetResponse:
        """Hard-delete one entry (a tombstone in the decision log)."""
        key.require("write")
        with pool.using(key) as t:
            f = t.memory.forget(entry_id, reason=reason)
        return ForgetResponse(ids=f.ids, freed=f.freed, erased=f.erased)

    @app.post("/v1/forget-all", response_model=ForgetResponse, tags=["entries"])
    def forget_all(body: ForgetRequest, key: KeyInfo = Depends(key_of)) -> ForgetResponse:
        """Hard-delete every entry of the key's namespace (admin scope)."""
        key.require("admin")
        with pool.using(key) as t:
            f = t.memory.forget_all(reason=body.reason)
        return ForgetResponse(ids=f.ids, freed=f.freed, erased=f.erased)

    @app.get("/v1/decisions", response_model=DecisionsPage, tags=["entries"])
    def decisions(
        key: KeyInfo = Depends(key_of),
        since: Annotated[int, Query(ge=0, description="Rows after this seq")] = 0,
        limit: Annotated[int, Query(ge=1, le=1000)] = 100,
        action: Annotated[str | None, Query(max_length=16)] = None,
    ) -> DecisionsPage:
        """The namespace's decision log, oldest first, one page after ``since``."""
        key.require("read")
        with pool.using(key) as t:
            rows = t.memory.store.decisions(t.memory.namespace, since=since, action=action)
        page = rows[:limit]
        nxt = page[-1].seq if len(rows) > limit else None
        return DecisionsPage(decisions=[DecisionOut.of(d) for d in page], next_since=nxt)

    @app.get("/v1/namespaces", response_model=list[NamespaceOut], tags=["namespaces"])
    def namespaces(key: KeyInfo = Depends(key_of)) -> list[NamespaceOut]:
        """The namespaces this key reaches: its own, with policy and budget."""
        key.require("read")
        with pool.using(key) as t:
            return [namespace_out(t)]

    @app.get("/v1/namespaces/{name}", response_model=NamespaceOut, tags=["namespaces"])
    def namespace(name: str, key: KeyInfo = Depends(key_of)) -> NamespaceOut:
        """The key's namespace by name (any other name: 404)."""
        key.require("read")
        own_namespace(key, name)
        with pool.using(key) as t:
            return namespace_out(t)

    @app.patch("/v1/namespaces/{name}", response_model=NamespaceOut, tags=["namespaces"])
    def patch_namespace(
        name: str, body: NamespacePatch, key: KeyInfo = Depends(key_of)
    ) -> NamespaceOut:
        """Change the budget (admin scope); a smaller one evicts at once, each eviction logged."""
        own_namespace(key, name)
        key.require("admin")
        t = pool.reopen(key.namespace, max_bytes=body.max_bytes)
        with t.lock:
            return namespace_out(t)

    # ------------------------------------------------------------------ the peer hub
    @app.post("/v1/hub/push", response_model=HubPushResponse, tags=["hub"])
    def hub_push(body: HubPush, key: KeyInfo = Depends(key_of)) -> HubPushResponse:
        """Push shared entries and forget notices to the key's peer group (peer scope); the
        sender is the key's name, the group the key's namespace."""
        key.require("peer")
        seq = hub.push(
            key.namespace,
            key.name,
            to=body.to,
            round=body.round,
            entries=[e.model_dump() for e in body.entries],
            notices=list(body.notices),
        )
        return HubPushResponse(
            seq=seq, sender=key.name, entries=len(body.entries), notices=len(body.notices)
        )

    @app.get("/v1/hub/pull", response_model=HubPull, tags=["hub"])
    def hub_pull(
        key: KeyInfo = Depends(key_of),
        since: Annotated[int, Query(ge=0, description="The last seq already pulled")] = 0,
        limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    ) -> HubPull:
        """What other peers of the key's group pushed after ``since``, for this peer (peer
        scope), oldest first; never the caller's own pushes, never another group's."""
        key.require("peer")
        msgs, nxt = hub.pull(key.namespace, key.name, since, limit)
        return HubPull(
            messages=[
                HubMessage(
                    seq=m.seq,
                    sender=m.sender,
                    to=m.to,
                    round=m.round,
                    entries=[SharedEntryOut(**e) for e in m.entries],
                    notices=m.notices,
                )
                for m in msgs
            ],
            next_since=nxt,
        )

    @app.put("/v1/hub/sketch", status_code=204, tags=["hub"])
    def hub_sketch(body: SketchIn, key: KeyInfo = Depends(key_of)) -> Response:
        """Publish this peer's query sketch to its group (peer scope)."""
        key.require("peer")
        hub.set_sketch(key.namespace, key.name, body.round, body.sketch)
        return Response(status_code=204)

    @app.get("/v1/hub/sketches", response_model=dict[str, SketchOut], tags=["hub"])
    def hub_sketches(
        key: KeyInfo = Depends(key_of),
        min_round: Annotated[int, Query(ge=0, description="Only sketches of this round on")] = 0,
        peer: Annotated[
            list[str] | None, Query(max_length=64, description="Only these peers (repeat)")
        ] = None,
    ) -> dict[str, SketchOut]:
        """The last sketch of each peer in the key's group, by peer name (peer scope); a peer
        waiting for a round asks for the ones it still lacks (``min_round``, ``peer``)."""
        key.require("peer")
        want = None if peer is None else set(peer)
        return {
            p: SketchOut(round=r, sketch=s)
            for p, (r, s) in hub.sketches(key.namespace).items()
            if r >= min_round and (want is None or p in want)
        }

    # ------------------------------------------------------------------ /ui, offline /docs
    from memcurator.service.inspector import mount_inspector

    mount_inspector(app, key_of)
    return app


__all__ = ["MAX_BODY_BYTES", "create_app"]
