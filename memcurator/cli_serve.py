"""``memcurator serve`` and ``memcurator keys``: the memory as a REST service, and its API keys.

Thin shells (STYLE.md rule 10) over :mod:`memcurator.service`. ``keys`` needs only the standard
library; ``serve`` needs the ``serve`` extra and says so when it is missing.
"""

from __future__ import annotations

import json
from typing import Annotated

import typer

from memcurator.cli_common import App, console

keys_app = App(
    help="Create, list and revoke the API keys of `memcurator serve` (one namespace per key).",
    no_args_is_help=True,
)

_KEYS_HELP = (
    "The key file (default: STORE.keys beside a file store). A postgresql:// store keeps its "
    "keys in the database; a key file given with it is imported there."
)
_EMBEDDER_HELP = (
    "Embedder of every namespace: NAME or NAME:key=value,... (e.g. "
    "openai:base_url=http://127.0.0.1:8080/v1,model=M; its key from $MEMCURATOR_EMBED_API_KEY). "
    "A namespace embedded otherwise is refused."
)
_SCOPES_HELP = (
    "Comma-separated, any of: read (recall, entries, decisions, namespace), write (write, "
    "feedback, record, update, forget), admin (forget-all, budget, metrics), peer (the hub: "
    "push, pull, sketches of the namespace's peer group)."
)
_IN_STORE_HELP = (
    "Recall inside PostgreSQL (pgvector HNSW + full-text, fused) instead of scanning each "
    "tenant's resident set: only for a postgresql:// store and namespaces Memory allows "
    "(no byte budget, a cosine-rank policy such as keep-all); any other configured namespace "
    "stops the server at start with the reason."
)

_KeysStoreArg = Annotated[str, typer.Argument(help="The store the keys are for (path or URL).")]
_ServedStoreArg = Annotated[str, typer.Argument(help="The store to serve (path or URL).")]
_KeysOpt = Annotated[str | None, typer.Option(help=_KEYS_HELP)]
_EmbedderOpt = Annotated[str, typer.Option(help=_EMBEDDER_HELP)]
_InStoreOpt = Annotated[bool, typer.Option(help=_IN_STORE_HELP)]


def _memory_options(store: str, embedder: str, recall_in_store: bool) -> dict:
    """Every tenant's :class:`~memcurator.Memory` arguments from the shared options of
    ``serve`` and ``mcp``; ``--recall-in-store`` on a SQLite store exits 2 with one line."""
    from memcurator.cli_common import fail
    from memcurator.errors import InvalidInput
    from memcurator.store import is_url

    if recall_in_store and not is_url(store):  # before the embedder is probed
        fail(
            InvalidInput(
                f"--recall-in-store: store {store} cannot search in the database (a SQLite "
                "store); serve a postgresql:// store, or drop the option"
            )
        )
    opts: dict = {"embedder": _embedder(embedder)}
    if recall_in_store:
        opts["recall_in_store"] = True
    return opts


def _open_configured(pool) -> None:
    """With ``--recall-in-store``, open every namespace that has a live key now, so that one
    :class:`~memcurator.Memory` refuses (a budget, a policy that does not rank by cosine) stops
    the server at start with its reason (exit 2), not at the first request."""
    from memcurator.cli_common import fail
    from memcurator.errors import MemcuratorError

    for ns in sorted({k.namespace for k in pool.keys.list() if not k.revoked}):
        try:
            pool.tenant(ns)
        except MemcuratorError as e:
            pool.close()
            fail(f"namespace {ns!r}: {e}")
        console.print(f"namespace {ns!r} recalls in the database (pgvector HNSW + full-text)")


def _embedder(spec: str):
    """The embedder of ``--embedder``, its dimension known (an endpoint is probed now, not at
    the first request); a library error becomes a clean message and exit code 2."""
    from memcurator.cli_common import fail
    from memcurator.embed import embedder_from_spec
    from memcurator.errors import MemcuratorError

    try:
        emb = embedder_from_spec(spec)
        _ = emb.dim
    except MemcuratorError as e:
        fail(e)
    return emb


def _table(store: str, keys: str | None):
    """The key table of ``store``'s service (its shared state; a key file given with a
    PostgreSQL store is imported into the database)."""
    from memcurator.service.keys import KeyTable

    return KeyTable.for_store(store, keys)


def _where(store: str, keys: str | None) -> str:
    """Where the keys are, in words (for the start-up line and the no-key warning)."""
    from memcurator.service.keys import default_keys_path
    from memcurator.service.state import is_state_url

    if is_state_url(store):
        return "the database" + ("" if keys is None else f", imported from {keys}")
    return keys if keys is not None else default_keys_path(store)


def _ring_path(store: str, keys: str | None) -> str | None:
    """A key ring file of an earlier version to import (beside the key file); None for a
    database's state without a key file. The ring itself lives in the shared state."""
    from memcurator.service.keys import default_keys_path
    from memcurator.service.state import is_state_url
    from memcurator.service.tenants import ring_path_for

    if keys is None and is_state_url(store):
        return None
    return ring_path_for(keys if keys is not None else default_keys_path(store))


@keys_app.command("create")
def keys_create(
    store: _KeysStoreArg,
    namespace: Annotated[str, typer.Option(help="The one namespace the key reaches.")],
    name: Annotated[
        str, typer.Option(help="The holder's identity: origin_detail of its writes; peer id.")
    ],
    scopes: Annotated[str, typer.Option(help=_SCOPES_HELP)] = "read,write",
    origin: Annotated[
        str, typer.Option(help="What its writes are: self (the namespace's agent), peer, external.")
    ] = "self",
    rate: Annotated[
        float | None, typer.Option(help="Requests per minute allowed (429 beyond); none: no limit.")
    ] = None,
    policy: Annotated[
        str | None, typer.Option(help="Policy preset the namespace is served with.")
    ] = None,
    max_bytes: Annotated[
        int | None, typer.Option(help="The namespace's byte budget B (bytes).")
    ] = None,
    keys: _KeysOpt = None,
) -> None:
    """Issue a key; the token is printed once (only its hash is kept)."""
    t = _table(store, keys)
    if policy is not None:
        from memcurator.policy import create_policy

        create_policy(policy)  # an unknown preset is refused now, not at the first request
    info, token = t.create(
        namespace,
        name=name,
        scopes=[s.strip() for s in scopes.split(",") if s.strip()],
        origin=origin,
        rate_per_min=rate,
    )
    if policy is not None or max_bytes is not None:
        t.configure(namespace, policy=policy, max_bytes=max_bytes)
    console.print(
        f"key {info.key_id} for namespace {info.namespace!r} ({info.name}, "
        f"{','.join(info.scopes)}); keep the token secret, it is not shown again:"
    )
    typer.echo(token)


@keys_app.command("list")
def keys_list(
    store: _KeysStoreArg,
    namespace: Annotated[str | None, typer.Option(help="Only this namespace's keys.")] = None,
    keys: _KeysOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per line.")] = False,
) -> None:
    """List keys (never their secrets), revoked ones marked."""
    rows = _table(store, keys).list(namespace)
    for k in rows:
        if as_json:
            typer.echo(json.dumps(k.__dict__ | {"scopes": list(k.scopes)}))
        else:
            state = f"revoked ({k.revoked})" if k.revoked else "live"
            rate = "-" if k.rate_per_min is None else f"{k.rate_per_min:g}/min"
            typer.echo(
                f"{k.key_id}  {k.namespace}  {k.name}  {k.origin}  {','.join(k.scopes)}  "
                f"{rate}  {state}"
            )


@keys_app.command("revoke")
def keys_revoke(
    store: _KeysStoreArg,
    key_id: Annotated[str, typer.Argument(help="The key id (`memcurator keys list`).")],
    reason: Annotated[str, typer.Option(help="Why (kept with the key).")],
    keys: _KeysOpt = None,
) -> None:
    """Revoke a key: its next request gets 401."""
    _table(store, keys).revoke(key_id, reason)
    console.print(f"key {key_id} revoked")


def _warn_without_keys(table, kpath: str, store: str) -> None:
    """Say loudly, on stderr, when no live key exists: every request would get 401."""
    import sys

    if any(not k.revoked for k in table.list()):
        return
    print(
        f"WARNING: no live API key in {kpath}: every request to this server will get 401.\n"
        f"  Make one: memcurator keys create {store} --namespace NS --name NAME "
        "--scopes read,write",
        file=sys.stderr,
        flush=True,
    )


def serve(
    store: _ServedStoreArg,
    host: Annotated[str, typer.Option(help="Address to listen on (loopback by default).")] = (
        "127.0.0.1"
    ),
    port: Annotated[int, typer.Option(help="TCP port.")] = 8000,
    keys: _KeysOpt = None,
    log_level: Annotated[str, typer.Option(help="uvicorn log level.")] = "info",
    embedder: _EmbedderOpt = "hashing",
    recall_in_store: _InStoreOpt = False,
) -> None:
    """Serve the store's namespaces over HTTP; each request needs a key (`memcurator keys`)."""
    from memcurator.service import require_extra

    require_extra()
    import uvicorn

    from memcurator.service.app import create_app

    kpath = _where(store, keys)
    opts = _memory_options(store, embedder, recall_in_store)
    app = create_app(
        store, keys=_table(store, keys), ring_path=_ring_path(store, keys), memory_options=opts
    )
    if recall_in_store:
        _open_configured(app.state.pool)
    _warn_without_keys(app.state.keys, kpath, store)
    console.print(f"serving {store} on http://{host}:{port} (keys: {kpath})")
    try:
        uvicorn.run(app, host=host, port=port, log_level=log_level)
    finally:
        app.state.pool.close()


def mcp(
    store: _ServedStoreArg,
    transport: Annotated[
        str,
        typer.Option(help="stdio (one key, from --key-env) or http (a bearer key per request)."),
    ] = "stdio",
    key_env: Annotated[
        str, typer.Option(help="stdio: the environment variable holding the API key.")
    ] = "MEMCURATOR_KEY",
    host: Annotated[str, typer.Option(help="http: address (loopback by default).")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="http: TCP port.")] = 8001,
    keys: _KeysOpt = None,
    embedder: _EmbedderOpt = "hashing",
    recall_in_store: _InStoreOpt = False,
) -> None:
    """Serve the store as MCP tools (write, recall, feedback, forget, explain); http is
    stateless streamable HTTP at /mcp."""
    import os

    from memcurator.errors import InvalidInput
    from memcurator.service import require_extra
    from memcurator.service.tenants import TenantPool

    require_extra()
    from memcurator.service.guard import MAX_BODY_BYTES
    from memcurator.service.mcp_server import create_mcp

    kpath = _where(store, keys)
    opts = _memory_options(store, embedder, recall_in_store)
    pool = TenantPool(store, _table(store, keys), _ring_path(store, keys), opts)
    try:
        if recall_in_store:
            _open_configured(pool)
        if transport == "http":
            _warn_without_keys(pool.keys, kpath, store)
        if transport == "stdio":
            key = pool.keys.authenticate(os.environ.get(key_env))
            create_mcp(pool, key=key).run("stdio")
        elif transport == "http":
            server = create_mcp(pool, base_url=f"http://{host}:{port}")
            console.print(f"MCP on http://{host}:{port}/mcp (stateless; keys: {kpath})")
            server.run(
                "streamable-http",
                host=host,
                port=port,
                stateless_http=True,
                max_request_body_size=MAX_BODY_BYTES,  # the REST API's limit, streamed too
            )
        else:
            raise InvalidInput(f"--transport must be stdio or http, got {transport!r}")
    finally:
        pool.close()


def register(app: typer.Typer) -> None:
    """Add ``serve``, ``mcp`` and the ``keys`` group to ``app``."""
    app.command()(serve)
    app.command()(mcp)
    app.add_typer(keys_app, name="keys")


__all__ = ["keys_app", "register", "serve"]
