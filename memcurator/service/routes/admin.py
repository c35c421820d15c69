"""The key's namespace: ``GET /v1/namespaces[/{name}]``, its budget (``PATCH``, admin scope),
and ``POST /v1/forget-all`` (admin scope)."""

from __future__ import annotations

from fastapi import APIRouter

from memcurator.service.models import ForgetRequest, ForgetResponse, NamespaceOut, NamespacePatch
from memcurator.service.routes.deps import Key, Pool, namespace_out, own_namespace

router = APIRouter()


@router.post("/v1/forget-all", response_model=ForgetResponse, tags=["entries"])
def forget_all(body: ForgetRequest, key: Key, pool: Pool) -> ForgetResponse:
    """Hard-delete every entry of the key's namespace (admin scope)."""
    key.require("admin")
    with pool.using(key) as t:
        f = t.memory.forget_all(reason=body.reason)
    return ForgetResponse(ids=f.ids, freed=f.freed, erased=f.erased)


@router.get("/v1/namespaces", response_model=list[NamespaceOut], tags=["namespaces"])
def namespaces(key: Key, pool: Pool) -> list[NamespaceOut]:
    """The namespaces this key reaches: its own, with policy and budget."""
    key.require("read")
    with pool.using(key) as t:
        return [namespace_out(t)]


@router.get("/v1/namespaces/{name}", response_model=NamespaceOut, tags=["namespaces"])
def namespace(name: str, key: Key, pool: Pool) -> NamespaceOut:
    """The key's namespace by name (any other name: 404)."""
    key.require("read")
    own_namespace(key, name)
    with pool.using(key) as t:
        return namespace_out(t)


@router.patch("/v1/namespaces/{name}", response_model=NamespaceOut, tags=["namespaces"])
def patch_namespace(name: str, body: NamespacePatch, key: Key, pool: Pool) -> NamespaceOut:
    """Change the budget (admin scope); a smaller one evicts at once, each eviction logged."""
    own_namespace(key, name)
    key.require("admin")
    t = pool.reopen(key.namespace, max_bytes=body.max_bytes)
    with t.lock:
        return namespace_out(t)


__all__ = ["router"]
