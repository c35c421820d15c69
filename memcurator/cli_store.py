"""Store commands of the ``memcurator`` CLI: inspect, export, import, forget, delete; explain.

Thin shells over the library (STYLE.md rule 10); :func:`register` adds them to the app.
Reading commands open the store read-only; ``forget``, ``import`` and ``delete-namespace``
write, and every change they make is in the decision log.
"""

from __future__ import annotations

import sys
from dataclasses import asdict
from pathlib import Path
from typing import Annotated, Any

import typer

from memcurator.cli_common import TableConsole, console, fail
from memcurator.errors import InvalidInput, MemcuratorError, NamespaceNotFound
from memcurator.files import dumps_strict

#: Every store command names its namespace: callers that omitted it used to share "default".
_NS_REQUIRED = " Required: a store holds one namespace per user or agent."


#: Help of every STORE argument.
STORE_HELP = "SQLite store file, or a postgresql:// URL."
#: The STORE argument of the commands that read or change an existing store.
_StoreArg = Annotated[str, typer.Argument(help=STORE_HELP)]
_JsonLinesOpt = Annotated[bool, typer.Option("--json", help="JSON lines instead of a table.")]


def _open(path: str, *, readonly: bool = True) -> Any:
    from memcurator.store import is_url, open_store

    if not is_url(path) and not Path(path).exists():
        fail(FileNotFoundError(f"no store at {path}"))
    try:
        return open_store(path, readonly=readonly)
    except MemcuratorError as e:
        fail(e)


class _ReadView:
    """A read-only stand-in for Memory: ``entries()`` and ``decisions()`` of one namespace."""

    def __init__(self, store: Any, namespace: str):
        self.store = store
        self.namespace = namespace
        store.namespace(namespace)  # NamespaceNotFound early

    def entries(self) -> list[Any]:
        return list(self.store.entries(self.namespace))

    def decisions(self) -> list[Any]:
        return list(self.store.decisions(self.namespace))


def _where(items: list[str]) -> dict[str, str]:
    out = {}
    for it in items:
        key, sep, value = it.partition("=")
        if not sep or not key:
            raise InvalidInput(f"--where takes KEY=VALUE (metadata key and value), got {it!r}")
        out[key] = value
    return out


def _meta_match(meta: dict[str, Any], want: dict[str, str]) -> bool:
    def same(v: Any, s: str) -> bool:
        return str(v).lower() == s.lower() if isinstance(v, bool) else str(v) == s

    return all(k in meta and same(meta[k], v) for k, v in want.items())


#: characters of an entry's text ``memcurator entries`` shows by default
EXCERPT_CHARS = 160


def excerpt(text: str, chars: int | None) -> str:
    """``text`` on one logical line (newlines as ⏎), cut to ``chars`` characters with an ellipsis.

    Parameters
    ----------
    text : str
    chars : int or None
        Characters to keep (None: all of them).

    Examples
    --------
    >>> excerpt("SELECT *\\nFROM t;", None)
    'SELECT * ⏎ FROM t;'
    >>> excerpt("abcdefgh", 5)
    'abcd…'
    """
    flat = text.replace("\n", " ⏎ ")
    if chars is None or len(flat) <= chars:
        return flat
    return flat[: max(chars - 1, 0)] + "…"


def entries(
    path: _StoreArg,
    namespace: Annotated[str, typer.Option(help="Namespace to read." + _NS_REQUIRED)],
    where: Annotated[
        list[str] | None,
        typer.Option(help="Only entries whose metadata KEY equals VALUE (repeatable: KEY=VALUE)."),
    ] = None,
    as_json: _JsonLinesOpt = False,
    width: Annotated[
        int,
        typer.Option(
            help="Characters of each entry's text to show (wrapped to the terminal).", min=1
        ),
    ] = EXCERPT_CHARS,
    full: Annotated[bool, typer.Option("--full", help="Show every entry's whole text.")] = False,
) -> None:
    """List the resident entries of a namespace (full ids, for `memcurator forget`).

    The table fits the terminal: each entry's text wraps under its column, cut to --width
    characters (--full: whole; --json: whole, with the metadata).
    """
    from rich import box
    from rich.table import Table
    from rich.text import Text

    store = _open(path)
    want = _where(where or [])
    ents = [m for m in store.entries(namespace) if _meta_match(m.meta, want)]
    if as_json:
        for m in ents:
            d = asdict(m)
            d.pop("embedding")
            print(dumps_strict(d, ensure_ascii=False))
        return
    out = TableConsole()
    t = Table(
        title=f"{len(ents)} entries of {namespace!r}",
        title_justify="left",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
    )
    t.add_column("id", no_wrap=True, min_width=18)  # whole, to copy into `memcurator forget`
    for col in ("kind", "origin", "bytes", "uses", "succ", "fail"):
        left = col in ("kind", "origin")
        t.add_column(col, no_wrap=True, justify="left" if left else "right")
    t.add_column("text", overflow="fold", ratio=1, min_width=20)
    for m in ents:
        t.add_row(
            m.id,
            m.kind,
            m.origin,
            str(m.bytes),
            str(m.uses),
            str(m.successes),
            str(m.failures),
            Text(excerpt(m.text, None if full else width)),
        )
    out.print(t)


def decisions(
    path: _StoreArg,
    namespace: Annotated[str, typer.Option(help="Namespace to read." + _NS_REQUIRED)],
    action: Annotated[
        str | None, typer.Option(help="Only this action (evict, reject, ...).")
    ] = None,
    as_json: _JsonLinesOpt = False,
) -> None:
    """Print a store's decision log: every admit, reject, evict, distill, forget, with reasons."""
    from rich.table import Table

    store = _open(path)
    deleted = False
    try:
        rows = store.decisions(namespace, action=action)
    except NamespaceNotFound:
        rows = store.deleted_namespace_log(namespace, action=action)  # its tombstones stay
        deleted = True
    if as_json:
        for d in rows:
            print(dumps_strict(asdict(d), ensure_ascii=False))  # a missing score is null
        return
    gone = " (deleted; its log stays)" if deleted else ""
    t = Table(title=f"decisions of {namespace!r}{gone} in {path}", title_justify="left")
    for col in ("seq", "step", "action", "entry", "score", "bytes"):
        t.add_column(col, no_wrap=True)
    t.add_column("reason", ratio=1)
    for d in rows:
        score = "—" if d.score != d.score else f"{d.score:.3g}"  # NaN: no score applies
        t.add_row(str(d.seq), str(d.step), d.action, d.entry_id, score, str(d.bytes), d.reason)
    TableConsole().print(t)


def namespaces(
    path: _StoreArg,
    as_json: _JsonLinesOpt = False,
) -> None:
    """List a store's namespaces with their entries, resident bytes, budgets and log lengths
    (and their stored vector precision when one is not float32)."""
    from rich.table import Table

    store = _open(path)
    rows = store.namespace_stats()
    if as_json:
        for r in rows:
            print(dumps_strict(r._asdict()))
        return
    t = Table(title=f"{len(rows)} namespaces in {path}", title_justify="left")
    # the stored vector precision is shown when a namespace is not at the default (float32)
    vec = any(r.vector_dtype != "float32" for r in rows)
    cols = ("namespace", "entries", "bytes", "budget B", "used", "vectors", "policy", "decisions")
    left = ("namespace", "vectors", "policy")
    for col in cols:
        if col != "vectors" or vec:
            t.add_column(col, justify="left" if col in left else "right")
    for r in rows:
        used = f"{r.used_bytes / r.max_bytes:.0%}" if r.max_bytes else "—"
        cells = [
            r.name,
            str(r.entries),
            str(r.used_bytes),
            "unbounded" if r.max_bytes is None else str(r.max_bytes),
            used,
            *([r.vector_dtype] if vec else []),
            r.policy or "—",
            str(r.decisions),
        ]
        t.add_row(*cells)
    TableConsole().print(t)


def delete_namespace(
    path: _StoreArg,
    name: Annotated[str, typer.Argument(help="Namespace to delete.")],
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
) -> None:
    """Delete a namespace and its entries (each gets a tombstone in the decision log)."""
    store = _open(path, readonly=True)
    stats = {r.name: r for r in store.namespace_stats()}
    store.close()
    if name not in stats:
        fail(InvalidInput(f"namespace {name!r} does not exist; known: {sorted(stats)}"))
    r = stats[name]
    if not yes and not typer.confirm(
        f"Delete namespace {name!r} ({r.entries} entries, {r.used_bytes} bytes) from {path}?"
    ):
        console.print("nothing deleted")
        raise typer.Exit(code=1)
    store = _open(path, readonly=False)
    try:
        freed = store.delete_namespace(name, reason="deleted from the command line")
    except MemcuratorError as e:
        fail(e)
        return
    finally:
        store.close()
    console.print(
        f"deleted namespace {name!r}: {r.entries} entries, {freed} bytes freed; the decision log "
        f"keeps a tombstone for each (memcurator decisions {path} --namespace {name})"
    )


def export(
    path: _StoreArg,
    namespace: Annotated[str, typer.Option(help="Namespace to export." + _NS_REQUIRED)],
    out: Annotated[
        Path | None, typer.Option(help="JSONL file to write; default: standard output.")
    ] = None,
    with_decisions: Annotated[
        bool, typer.Option("--decisions", help="Also export the decision log.")
    ] = False,
) -> None:
    """Export a namespace as JSON Lines (entries with metadata; --decisions adds the log)."""
    from memcurator.files import atomic_open
    from memcurator.portable import export_namespace

    store = _open(path)
    try:
        view = _ReadView(store, namespace)
        if out is None:
            n = export_namespace(view, sys.stdout, decisions=with_decisions)
        else:
            with atomic_open(out, "w") as fh:
                n = export_namespace(view, fh, decisions=with_decisions)
    except (MemcuratorError, OSError) as e:
        fail(e)
        return
    console.print(f"exported {n - 1} lines of {namespace!r}" + (f" to {out}" if out else ""))


def import_(
    path: Annotated[str, typer.Argument(help=STORE_HELP + " A file is created if missing.")],
    source: Annotated[Path, typer.Argument(help="JSONL file written by memcurator export.")],
    namespace: Annotated[str, typer.Option(help="Namespace to import into." + _NS_REQUIRED)],
    policy: Annotated[
        str | None,
        typer.Option(
            help="Policy whose admission gate applies; default: the namespace's own "
            "(curator for a new namespace)."
        ),
    ] = None,
    max_bytes: Annotated[
        int | None,
        typer.Option(help="Budget B in bytes; default: the namespace's own (unbounded if new)."),
    ] = None,
    vector_dtype: Annotated[
        str | None,
        typer.Option(
            help="Stored precision of a new namespace's vectors: float32, float16, int8 or "
            "binary (sign bits, 64 bytes a 512-d vector; hashing embedder only); "
            "default: the namespace's own (float32 if new)."
        ),
    ] = None,
) -> None:
    """Import a JSONL export: every entry goes through admission; rejections are listed."""
    from memcurator import Memory
    from memcurator.portable import import_namespace
    from memcurator.store import open_store

    if not source.is_file():
        fail(FileNotFoundError(f"no export file {source}"))
    try:
        store = open_store(path)
        known = {r.name: r for r in store.namespace_stats()}.get(namespace)
        pol = policy or (known.policy if known and known.policy else "curator")
        budget = max_bytes if max_bytes is not None else (known.max_bytes if known else None)
        mem = Memory(
            namespace=namespace,
            policy=pol,
            max_bytes=budget,
            store=store,
            vector_dtype=vector_dtype,
        )
        with source.open(encoding="utf-8") as fh:
            rep = import_namespace(mem, fh)
        mem.close()
    except (MemcuratorError, OSError, UnicodeDecodeError) as e:
        fail(ValueError(f"cannot import {source}: {e}"))
        return
    skipped = rep.decisions_skipped
    console.print(
        f"imported into {namespace!r} ({pol}): {len(rep.admitted)} admitted, "
        f"{len(rep.rejected)} rejected"
        + (
            f", {len(rep.reinforced)} duplicates of resident entries (reinforced, not stored again)"
            if rep.reinforced
            else ""
        )
        + (f", {skipped} decision lines not replayed" if skipped else "")
    )
    for no, old, reason in rep.rejected:
        console.print(f"  line {no} {old or '?'}: rejected — {reason}")


def forget(
    path: _StoreArg,
    entry_id: Annotated[str, typer.Argument(help="Entry id (from memcurator entries).")],
    namespace: Annotated[str, typer.Option(help="Namespace of the entry." + _NS_REQUIRED)],
    reason: Annotated[str, typer.Option(help="Reason written to the decision log.")] = (
        "forget requested from the command line"
    ),
) -> None:
    """Hard-delete one entry; a tombstone stays in the decision log."""
    from memcurator.lifecycle.forget import forget_stored

    store = _open(path, readonly=False)
    try:
        r = forget_stored(store, namespace, entry_id, reason=reason)
    except MemcuratorError as e:
        fail(e)
        return
    console.print(f"forgot {entry_id} ({r.freed} bytes) in {namespace!r}")
    if not r.erased:
        console.print(
            "warning: the text is gone from every read, but another reader's snapshot kept it "
            "from being erased from the file yet; the next forget on this store erases it"
        )


def reembed(
    path: _StoreArg,
    namespace: Annotated[str, typer.Option(help="Namespace to re-embed." + _NS_REQUIRED)],
    embedder: Annotated[
        str, typer.Option(help="Embedder: NAME or NAME:key=value,... (as `serve --embedder`).")
    ] = "hashing",
    batch: Annotated[int, typer.Option(help="Entries per transaction.")] = 256,
    vector_dtype: Annotated[
        str | None,
        typer.Option(
            help="Convert the stored vectors to float32, float16, int8 or binary (sign bits; "
            "exact vectors derived from the text on load; hashing embedder only) (recomputed from "
            "each entry's text); default: keep the namespace's precision."
        ),
    ] = None,
    compress_text: Annotated[
        bool,
        typer.Option(
            "--compress-text",
            help="Also keep the texts zstd-compressed with a dictionary trained on them (as "
            "`memcurator compress`), once the re-embedding is finished.",
        ),
    ] = False,
) -> None:
    """Re-embed a namespace with the current embedder and recall text (resumable).

    Needed when a store was embedded by another embedder or an older memcurator (Memory then
    refuses to open it), and to change the precision its vectors are stored in
    (--vector-dtype; every entry's bytes change with it). Each batch commits on its own: if
    the command stops, run it again and it resumes; no entry is lost or left without a vector.
    """
    from memcurator.embed import embedder_from_spec
    from memcurator.memory import embedder_identity
    from memcurator.store.reembed import reembed as run

    store = _open(path, readonly=False)
    try:
        emb = embedder_from_spec(embedder)
        if vector_dtype is not None:  # binary needs an embedder that can derive its vectors
            from memcurator.lifecycle.derive import check_derivable

            check_derivable(emb, vector_dtype)
        r = run(
            store,
            namespace,
            emb.embed,
            embedder_identity(emb),
            emb.dim,
            batch=batch,
            vector_dtype=vector_dtype,
        )
        compressed = store.train_text_dict(namespace) if compress_text and r.finished else None
    except MemcuratorError as e:
        fail(e)
        return
    if compressed is not None:
        console.print(
            f"compressed {compressed} texts in {namespace!r} (dictionary "
            f"{store.fixed_bytes(namespace):,} bytes)"
        )
    console.print(
        f"re-embedded {r.reembedded} of {r.total} entries in {namespace!r}"
        + ("" if r.finished else " (not finished; run again to resume)")
    )
    if r.over_budget:
        budget = store.namespace(namespace).max_bytes
        console.print(
            f"warning: the entries now take {r.over_budget:,} bytes more than the namespace's "
            f"budget of {budget:,} bytes; the next Memory opened on it evicts down to the budget "
            f"(each eviction in the decision log). To keep them, raise the budget first: "
            f"Memory(STORE, namespace={namespace!r}, max_bytes=...)."
        )


def compress(
    path: _StoreArg,
    namespace: Annotated[str, typer.Option(help="Namespace to convert." + _NS_REQUIRED)],
    off: Annotated[
        bool, typer.Option("--off", help="Store the texts uncompressed again (no dictionary).")
    ] = False,
) -> None:
    """Keep a namespace's entry texts zstd-compressed with a dictionary trained on them.

    Trains the namespace's dictionary on its texts (again, if it has one) and rewrites every
    text with it in one transaction; each entry's bytes and the namespace's (the dictionary
    counted once) change with it, and handles open on the store catch up. New texts are
    compressed from then on. --off decompresses every text and drops the dictionary.
    """
    store = _open(path, readonly=False)
    try:
        before = store.used_bytes(namespace)
        n = store.set_text_codec(namespace, "none") if off else store.train_text_dict(namespace)
        after = store.used_bytes(namespace)
        store.log(
            namespace,
            step=(store.load_state(namespace) or ("", 0, {}))[1],
            action="update",
            entry_id="",
            reason=f"text {'decompressed' if off else 'compressed (zstd, namespace dictionary)'}"
            f": {n} entries rewritten, {before:,} -> {after:,} bytes",
        )
    except MemcuratorError as e:
        fail(e)
        return
    console.print(
        f"{'decompressed' if off else 'compressed'} {n} entries in {namespace!r}: "
        f"{before:,} -> {after:,} bytes"
        + ("" if off else f" (dictionary {store.fixed_bytes(namespace):,} bytes included)")
    )


def explain(
    term: Annotated[str | None, typer.Argument(help="A term; omit to list them all.")] = None,
) -> None:
    """Say what a term of the tables and options means (victim accuracy, ρ, θ, B, ...)."""
    from memcurator.glossary import GLOSSARY, lookup

    out = TableConsole()
    if term is None:
        for t in GLOSSARY:
            out.print(f"[bold]{t.name}[/bold]: {t.text}\n")
        return
    try:
        t = lookup(term)
    except MemcuratorError as e:
        fail(e)
        return
    out.print(f"[bold]{t.name}[/bold]: {t.text}")


def migrate(
    path: Annotated[str, typer.Argument(help=STORE_HELP + " A file is created if missing.")],
) -> None:
    """Bring a store to this memcurator's schema (idempotent; refuses a newer schema)."""
    from memcurator.store import migrate_store

    try:
        before, after = migrate_store(path)
    except MemcuratorError as e:
        fail(e)
        return
    if before == after:
        console.print(f"schema version {after}: up to date")
    else:
        console.print(f"schema version {before} -> {after}")


def copy(
    src: Annotated[str, typer.Argument(help="Store to copy from: " + STORE_HELP)],
    dst: Annotated[str, typer.Argument(help="Store to copy into: " + STORE_HELP)],
    namespace: Annotated[
        list[str] | None,
        typer.Option(help="Namespace to copy (repeat for several); default: all of them."),
    ] = None,
    via: Annotated[
        Path | None,
        typer.Option(help="Also keep the JSONL stream in this file (memcurator.store.transfer)."),
    ] = None,
) -> None:
    """Copy namespaces exactly between stores of any backend (SQLite <-> PostgreSQL).

    Entries keep their ids, counts, vectors and metadata; the decision log and the policy's
    state and step come along. A namespace that already holds entries or a log in DST is
    refused (nothing of it is written).
    """
    import io

    from memcurator.files import atomic_open
    from memcurator.store import open_store
    from memcurator.store.postgres import redact
    from memcurator.store.transfer import dump_store, load_store

    source = _open(src)
    try:
        buf = io.StringIO()
        dump_store(source, buf, namespace or None)
        if via is not None:
            with atomic_open(via, "w") as fh:
                fh.write(buf.getvalue())
        buf.seek(0)
        n = load_store(open_store(dst), buf)
    except (MemcuratorError, OSError) as e:
        fail(e)
        return
    console.print(
        f"copied {n['namespaces']} namespaces, {n['entries']} entries and {n['decisions']} "
        f"decisions into {redact(dst)}"
    )


def register(app: typer.Typer) -> None:
    """Add the store commands and ``explain`` to ``app``."""
    app.command()(entries)
    app.command()(decisions)
    app.command()(namespaces)
    app.command("delete-namespace")(delete_namespace)
    app.command()(export)
    app.command("import")(import_)
    app.command()(forget)
    app.command()(explain)
    app.command()(reembed)
    app.command()(compress)
    app.command()(migrate)
    app.command()(copy)
