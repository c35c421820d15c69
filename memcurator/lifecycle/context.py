"""What a lifecycle stage runs in: a namespace of a store, its resident set, the policy, the
decision log, the step clock, entry sizing and the energy meter. No stage knows the facade.

**What handles share.** The namespace, not the handle, owns the entries, the byte budget, the
step clock and the policy's learned state. Whenever any commit from another handle or process
is seen (the store's change token), a context catches up on the entries from the namespace's
change feed (only those changed, :class:`.ResidentSet`) and reads the other three again, and
saves step and state in every
transaction it commits, so a second handle continues the step where the first left it. Query
observations (CURATOR's sketch) made by a recall are folded into the state saved by this
handle's next commit; a handle that only recalls loses them to another handle's commit.

Embeddings and BM25 are taken of each entry's recall text (its ``Task:`` line when it has one):
the namespace stores :func:`embedder_identity`, and a store embedded with anything else is
refused until ``memcurator reembed`` has re-embedded it.
"""

from __future__ import annotations

import inspect
import math
import random
import warnings
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np

from memcurator import limits
from memcurator.distill import ExtractiveDistiller
from memcurator.embed import Embedder, HashingEmbedder
from memcurator.errors import DimensionMismatch, InvalidInput, SharedNamespaceWarning
from memcurator.lifecycle.checks import dedup_key, embed_checked
from memcurator.lifecycle.derive import VectorDeriver, check_derivable
from memcurator.lifecycle.query import RECALL_FIELD, embedder_identity
from memcurator.lifecycle.resident import ResidentSet
from memcurator.policy.base import Policy
from memcurator.store.base import KEEP, REEMBED_PENDING, Store
from memcurator.store.sizing import default_sizeof
from memcurator.store.vectors import check_dtype, stored_vector
from memcurator.trust.auth import OWNER, KeyRing
from memcurator.trust.fingerprint import ReadWindow

#: ``max_bytes`` not given: keep the namespace's stored budget (unbounded for a new one).
UNSET: Any = KEEP

#: The namespace of a :class:`~memcurator.Memory` opened without ``namespace=``.
DEFAULT_NAMESPACE = "default"

#: Handles open on an implicit default namespace in this process (for :func:`warn_if_shared`).
_IMPLICIT: weakref.WeakSet[Any] = weakref.WeakSet()


class DecisionLog:
    """Appends one namespace's decisions under one policy name and applies its retention.

    Called as ``log(step, action, entry_id, score, reason, nbytes)``
    (:data:`memcurator.lifecycle.keep.Log`).

    Parameters
    ----------
    store : Store
    namespace : str
    policy : str
        Policy name written on every row.
    keep : int or None, default None
        Retention: at most about this many rows; older rows are dropped in batches and
        summarised by one ``compact`` row (:meth:`Store.compact_log`). None keeps every row.
    max_age_s : float or None, default None
        Also drop rows older than this many seconds (store clock).
    """

    def __init__(
        self,
        store: Store,
        namespace: str,
        policy: str,
        *,
        keep: int | None = None,
        max_age_s: float | None = None,
    ):
        self.store = store
        self.namespace = namespace
        self.policy = policy
        self.keep = keep
        self.max_age_s = max_age_s
        self._rows: int | None = None  # rows of this namespace's log (None: not counted)
        self._age_mark = 0  # _rows when the age limit was last applied

    def __call__(
        self, step: int, action: str, eid: str, score: float, reason: str, nb: int
    ) -> None:
        if self._rows is not None:
            self._rows += 1
        self.store.log(
            self.namespace,
            step=step,
            action=action,
            entry_id=eid,
            score=score,
            reason=reason,
            policy=self.policy,
            nbytes=nb,
        )

    def compact(self, step: int, res: ResidentSet) -> None:
        """Apply the retention in batches (every ``max(keep // 10, 100)`` rows over ``keep``,
        every 100 rows with an age limit); ``res`` stays current if only the log changed."""
        if self.keep is None and self.max_age_s is None:
            return
        if self._rows is None:
            self._rows = self._age_mark = self.store.decision_count(self.namespace)
        slack = max(self.keep // 10, 100) if self.keep is not None else 100
        due = (self.keep is not None and self._rows > self.keep + slack) or (
            self.max_age_s is not None and self._rows - self._age_mark >= 100
        )
        if not due:
            return
        # under the namespace's lock: no other writer commits between the check and the compaction
        with self.store.transaction(namespace=self.namespace):
            fresh = res.current()
            self.store.compact_log(
                self.namespace, keep=self.keep, max_age_s=self.max_age_s, step=step
            )
        if fresh:  # only the log changed since this handle's own commit
            res.mark_synced()
        self._rows = self._age_mark = self.store.decision_count(self.namespace)


@dataclass
class EnergyMeter:
    """The energy proxy ε (CURATOR Eq. 6): bytes embedded plus resident bytes scanned.

    Attributes
    ----------
    total : float
        Bytes counted so far.
    mark : float
        ``total`` at the start of the current step.
    """

    total: float = 0.0
    mark: float = 0.0

    def add(self, nbytes: float) -> None:
        self.total += nbytes

    def end_step(self) -> float:
        """The step's ε(t), bytes; the next step starts counting from here."""
        eps, self.mark = self.total - self.mark, self.total
        return eps


class Sizing:
    """Byte accounting ``b(m)`` of an entry as its namespace stores it (``vector_dtype``).

    ``sizeof(text, meta, embedding)``; one with a ``vector_dtype`` parameter is also given the
    namespace's stored precision.
    """

    def __init__(self, sizeof: Callable[..., int], vector_dtype: str = "float32"):
        self.sizeof = sizeof
        self.vector_dtype = vector_dtype
        #: how the namespace stores text (a compressing store's codec; None: as is)
        self.text_codec: Any = None
        try:
            params = inspect.signature(sizeof).parameters
        except (TypeError, ValueError):  # a callable without a signature (a builtin)
            params = {}  # type: ignore[assignment]
        self._with_dtype = "vector_dtype" in params
        self._with_codec = "text_codec" in params

    def entry_bytes(self, text: str, meta: dict[str, Any], embedding: np.ndarray) -> int:
        """``sizeof`` of an entry in this namespace's precision (and text codec), bytes."""
        if self._with_codec and self.text_codec is not None:
            return int(
                self.sizeof(
                    text,
                    meta,
                    embedding,
                    vector_dtype=self.vector_dtype,
                    text_codec=self.text_codec,
                )  # fmt: skip
            )
        if self._with_dtype:
            return int(self.sizeof(text, meta, embedding, vector_dtype=self.vector_dtype))
        return int(self.sizeof(text, meta, embedding))

    def stored(self, embedding: np.ndarray) -> np.ndarray:
        """``embedding`` as the store gives it back in this precision (float32).

        Raises
        ------
        InvalidInput
            A vector the precision cannot hold (:func:`memcurator.store.vectors.stored_vector`).
        """
        return stored_vector(embedding, self.vector_dtype)


def _text_codec_of(store: Any, namespace: str) -> tuple[Any, int]:
    """(how ``store`` keeps ``namespace``'s text, bytes it stores besides the entries): a
    compressing store's codec and dictionary (:mod:`memcurator.store.compression`)."""
    codec = getattr(store, "text_codec", None)
    if codec is None:
        return None, 0
    c = codec(namespace)
    return c, int(store.fixed_bytes(namespace))


class Scope:
    """One namespace of a store with its resident set, decision log and step clock: what a
    stage that changes entries needs (forget needs no more, so the CLI builds only this).

    :meth:`transaction` syncs the resident set first and, after its own commit, marks it
    current and applies the log's retention; a rollback makes the next sync reload it
    (:meth:`.ResidentSet.invalidate`).
    """

    def __init__(self, store: Store, namespace: str, res: ResidentSet, log: DecisionLog, step: int):
        self.store = store
        self.namespace = namespace
        self.res = res
        self.log = log
        self.step = step
        self.depth = 0
        self.in_where = False  # inside a recall(where=...) callback: no changes

    @staticmethod
    def open(store: Store, namespace: str) -> Scope:
        """A scope on an existing namespace, logging under its saved policy name and step.

        Raises
        ------
        NamespaceNotFound
        """
        info = store.namespace(namespace)
        saved = store.load_state(namespace)
        name, step = (saved[0], saved[1]) if saved else ("", 0)
        res = ResidentSet(store, namespace, info.dim, None)
        return Scope(store, namespace, res, DecisionLog(store, namespace, name), step)

    def sync(self) -> bool:
        """Reload after a foreign commit or a rollback; True if it did."""
        return self.res.sync()

    def sync_usable(self) -> None:
        self.sync()

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """One store transaction around a stage's changes.

        Raises
        ------
        InvalidInput
            Inside a ``recall(where=...)`` callback: a change there would move the rows the
            recall in progress is ranking.
        """
        if self.in_where:
            raise InvalidInput(
                "a recall(where=...) callback cannot write to, give feedback to or forget from "
                "the memory it filters; collect what to change and do it after recall returns"
            )
        try:
            with self.store.transaction(namespace=self.namespace):
                self.depth += 1
                try:
                    if self.depth == 1:
                        self.sync_usable()
                    yield
                finally:
                    self.depth -= 1
        except BaseException:
            # rolled back: what the stage changed in the resident set never reached the store
            # (and is in no change feed): read the namespace again on the next sync
            self.res.invalidate()
            raise
        if self.depth == 0:
            self.res.mark_synced()
            self.log.compact(self.step, self.res)


class Context(Scope):
    """A :class:`Scope` with the policy and what the stages read beside it.

    Built by :func:`open_context`; :class:`~memcurator.Memory` holds one and passes it to every
    stage. Attributes are the :class:`~memcurator.Memory` parameters of the same names.
    """

    def __init__(
        self,
        store: Store,
        namespace: str,
        policy: Policy,
        embedder: Embedder,
        sizing: Sizing,
        log: DecisionLog,
        *,
        distiller: Any,
        keyring: KeyRing | None,
        max_text_bytes: int,
        candidates: int,
        lexical_weight: float,
        same_request: float | None,
        seed: int,
    ):
        self.policy = policy
        self.embedder = embedder
        self.sizing = sizing
        self.distiller = distiller
        self.keyring = keyring
        self.max_text_bytes = max_text_bytes
        self.candidates = candidates
        self.lexical_weight = lexical_weight
        self.same_request = same_request
        self.energy = EnergyMeter()
        self.max_bytes: int | None = None
        self.converting = False
        #: recall's pool comes from the store (:mod:`memcurator.lifecycle.store_recall`)
        self.recall_in_store = False
        #: what this handle observed the agent read (:mod:`memcurator.lifecycle.reads`)
        self.reads = ReadWindow()
        # ids are drawn from the seed and the log's length, so a reopened store (same seed)
        # never draws an id it already used, while a fresh run stays reproducible
        self.rng = random.Random(f"{seed}:{namespace}:{store.last_seq()}")
        derive = VectorDeriver(store, namespace, embedder, embedder_identity(embedder))
        res = ResidentSet(store, namespace, embedder.dim, policy.redundancy_delta, derive)
        res.same_request = same_request  # Keep's versions follow the memory's same-request rule
        super().__init__(store, namespace, res, log, 0)
        self.load_shared()

    def load_shared(self) -> None:
        """Read what the namespace owns: budget (handed to the policy), vector precision, step
        clock and the policy's learned state."""
        info = self.store.namespace(self.namespace)
        self.max_bytes = None if info.max_bytes is None else int(info.max_bytes)
        self.sizing.vector_dtype = info.vector_dtype
        self._load_text_codec()
        # an unfinished `memcurator reembed` (begun after this handle opened): its vectors are
        # half converted, so this handle neither reads nor writes until it finishes
        # ... or one that finished with another embedder than this handle's
        self.converting = info.embedder.startswith(REEMBED_PENDING) or (
            info.embedder != embedder_identity(self.embedder) or info.dim != self.embedder.dim
        )
        saved = self.store.load_state(self.namespace)
        if saved is not None:
            self.step = max(self.step, saved[1])
            if saved[0] == self.policy.name:
                self.policy.load_state(saved[2])
        set_budget = getattr(self.policy, "set_budget", None)
        if set_budget is not None:  # rules that read the byte budget (tokenworth/bytes-capacity)
            set_budget(self.max_bytes)

    def _load_text_codec(self) -> None:
        """The namespace's text codec for sizing; its dictionary's bytes count in the resident
        bytes (the budget counts what is stored, the dictionary included)."""
        self.sizing.text_codec, fixed = _text_codec_of(self.store, self.namespace)
        self.res.used += fixed - self.res.fixed
        self.res.fixed = fixed

    def sync(self) -> bool:
        if self.res.sync():
            self.load_shared()
            return True
        return False

    def sync_usable(self) -> None:
        """:meth:`sync`, then refuse to go on while a re-embedding is unfinished or after one
        with another embedder than this handle's.

        Raises
        ------
        DimensionMismatch
        """
        self.sync()
        if self.converting:
            raise DimensionMismatch(
                f"namespace {self.namespace!r} is being re-embedded or converted by an unfinished "
                "`memcurator reembed`, or was re-embedded with another embedder; run the reembed "
                "again to finish, then open a new Memory (this handle's vectors are out of date)"
            )

    def save_state(self) -> None:
        self.store.save_state(self.namespace, self.policy.name, self.step, self.policy.state())

    def close(self) -> None:
        """Persist the policy state and step (recall updates the sketch without a write), close
        the store; a closed handle no longer counts as sharing its namespace."""
        with self.store.transaction(namespace=self.namespace):
            self.save_state()
        self.store.close()
        _IMPLICIT.discard(self)

    def new_id(self, text: str) -> str:
        return f"{dedup_key(text)[:10]}{self.rng.getrandbits(32):08x}"

    def embed(self, text: str) -> np.ndarray:
        """The stored embedding of ``text``'s recall text (validated, in this precision)."""
        return self.sizing.stored(embed_checked(self.embedder.embed, text))


@dataclass(frozen=True)
class Options:
    """The options of one :class:`~memcurator.Memory` handle, named and defaulted as its
    parameters (their meaning is documented there); built once by ``Memory`` and read by
    :func:`open_context`."""

    path: str = ":memory:"
    namespace: str | None = None  # None: DEFAULT_NAMESPACE, implicitly (warn_if_shared)
    policy: Any = "curator"
    max_bytes: Any = UNSET
    store: Store | None = None
    embedder: Embedder | None = None
    sizeof: Callable[..., int] = default_sizeof
    distiller: Any = None
    max_text_bytes: int = 65536
    seed: int = 0
    candidates: int = 12
    keyring: KeyRing | None = None
    lexical_weight: float = 0.5
    same_request: float | None = 0.99
    log_keep: int | None = 100_000
    log_max_age_s: float | None = None
    vector_dtype: str | None = None
    recall_in_store: bool = False
    read_window: ReadWindow | None = None

    def check(self) -> None:
        """Validate the options before anything is opened.

        Raises
        ------
        InvalidInput
            See :class:`~memcurator.Memory`.
        """
        if self.policy is None:
            raise InvalidInput(
                "policy is None; pass a preset name (see `memcurator policies`, e.g. 'curator') "
                "or a Policy instance"
            )
        check_budget(self.max_bytes)
        if self.vector_dtype is not None:
            check_dtype(self.vector_dtype)
        if self.keyring is not None and OWNER not in self.keyring.principals():
            raise InvalidInput("keyring holds no owner key; add one with keyring.add(OWNER)")
        if self.read_window is not None and not isinstance(self.read_window, ReadWindow):
            raise InvalidInput(f"read_window must be a ReadWindow, got {self.read_window!r}")
        _check_tuning(self.lexical_weight, self.same_request, self.log_keep, self.log_max_age_s)


def check_budget(max_bytes: Any) -> None:
    """Refuse a ``max_bytes`` that is not :data:`UNSET`, None or a positive integer
    (:class:`InvalidInput`)."""
    if max_bytes is UNSET or max_bytes is None:
        return
    if (
        isinstance(max_bytes, bool)
        or not isinstance(max_bytes, int | float)
        or not math.isfinite(max_bytes)
        or int(max_bytes) != max_bytes
        or not 0 < max_bytes <= limits.MAX_INT
    ):
        raise InvalidInput(
            f"max_bytes must be a positive integer of at most {limits.MAX_INT} (MAX_INT) or "
            f"None, got {max_bytes!r}"
        )


def _check_tuning(
    lexical_weight: Any, same_request: Any, log_keep: Any, log_max_age_s: Any
) -> None:
    if not (isinstance(lexical_weight, int | float) and lexical_weight >= 0):
        raise InvalidInput(f"lexical_weight must be a number >= 0, got {lexical_weight!r}")
    if same_request is not None and not -1.0 <= float(same_request) <= 1.0:
        raise InvalidInput(f"same_request must be in [-1, 1] or None, got {same_request!r}")
    if log_keep is not None and (
        isinstance(log_keep, bool) or not isinstance(log_keep, int) or log_keep < 1
    ):
        raise InvalidInput(f"log_keep must be a positive integer or None, got {log_keep!r}")
    if log_max_age_s is not None and not float(log_max_age_s) > 0:
        raise InvalidInput(f"log_max_age_s must be positive or None, got {log_max_age_s!r}")


def warn_if_shared(ctx: Context) -> None:
    """Warn (:class:`~memcurator.errors.SharedNamespaceWarning`) when ``ctx``, opened without
    a namespace, shares the implicit default namespace: another live handle of this process
    opened it implicitly on the same store (the same file or URL, or the same store object), or
    it already holds entries (another process, or an earlier run, wrote them). A private
    in-memory store is never shared."""
    store = ctx.store
    path = str(getattr(store, "path", ""))
    private = path in ("", ":memory:")
    others = [
        h
        for h in list(_IMPLICIT)
        if h.store is store or (not private and str(getattr(h.store, "path", "")) == path)
    ]
    _IMPLICIT.add(ctx)
    held = len(ctx.res.entries)
    if not others and (private or held == 0):
        return
    who = f"{len(others)} other open handle(s)" if others else f"{held} entries already in it"
    warnings.warn(
        f"namespace not given: this Memory uses the implicit {DEFAULT_NAMESPACE!r} namespace "
        f"of {path or 'its store'}, shared with every caller that leaves namespace out "
        f"({who}); pass namespace='...' to keep this memory apart, or "
        f"namespace={DEFAULT_NAMESPACE!r} to share it knowingly",
        SharedNamespaceWarning,
        stacklevel=5,  # the caller of Memory(...), through the thread_safe __init__
    )


def default_vector_dtype(embedder: Any, max_bytes: Any) -> str | None:
    """The precision a new namespace stores its vectors in when ``vector_dtype`` is omitted.

    A budgeted namespace (``max_bytes`` an integer) stores compact vectors, since the vector is
    most of an entry's bytes ``b(m)`` at float32 (2,048 of ~2,870 B on the SQL stream, CURATOR
    Eq. 2's denominator): ``binary`` (64 B at 512-d) with a deterministic embedder, whose exact
    vectors are derived from the texts on load (:mod:`memcurator.lifecycle.derive`) so that
    Keep, admission and recall see the same cosines as at float32; ``int8`` (516 B) with any
    other. An unbounded namespace keeps float32 (None: the store's default), where bytes
    buy nothing.

    Parameters
    ----------
    embedder : Embedder
    max_bytes : int, None or UNSET
        The budget the handle was opened with.

    Returns
    -------
    str or None
        ``"binary"``, ``"int8"``, or None (the store's default, float32).

    Examples
    --------
    >>> from memcurator.embed import HashingEmbedder
    >>> default_vector_dtype(HashingEmbedder(), 36_000), default_vector_dtype(object(), 36_000)
    ('binary', 'int8')
    >>> default_vector_dtype(HashingEmbedder(), None) is None
    True
    """
    if max_bytes is None or max_bytes is UNSET:
        return None
    return "binary" if getattr(embedder, "deterministic", False) else "int8"


def open_context(opts: Options) -> Context:
    """Validate the options, open (or create) the namespace and build its context.

    Raises
    ------
    InvalidInput, DimensionMismatch, UnknownName
        See :class:`~memcurator.Memory`.
    """
    opts.check()
    namespace = DEFAULT_NAMESPACE if opts.namespace is None else opts.namespace
    store = opts.store
    if store is None:
        from memcurator.store import open_store  # a SQLite file, or a postgresql:// URL

        store = open_store(opts.path)
    emb = opts.embedder if opts.embedder is not None else HashingEmbedder()
    dtype = opts.vector_dtype
    if dtype is None and namespace not in store.namespaces():
        dtype = default_vector_dtype(emb, opts.max_bytes)
    if dtype is not None:
        check_derivable(emb, dtype)  # before the namespace is created
    policy = opts.policy
    if isinstance(policy, str):
        from memcurator.policy import create_policy

        policy = create_policy(policy)
    policy.attach(emb.dim)
    max_bytes = opts.max_bytes
    store.create_namespace(
        namespace,
        embedder=embedder_identity(emb),
        dim=emb.dim,
        max_bytes=max_bytes if max_bytes is None or max_bytes is UNSET else int(max_bytes),
        vector_dtype=KEEP if dtype is None else dtype,
    )
    ctx = Context(
        store,
        namespace,
        policy,
        emb,
        Sizing(opts.sizeof),
        DecisionLog(
            store, namespace, policy.name, keep=opts.log_keep, max_age_s=opts.log_max_age_s
        ),
        distiller=opts.distiller if opts.distiller is not None else ExtractiveDistiller(),
        keyring=opts.keyring,
        max_text_bytes=opts.max_text_bytes,
        candidates=opts.candidates,
        lexical_weight=float(opts.lexical_weight),
        same_request=opts.same_request,
        seed=opts.seed,
    )
    if opts.read_window is not None:
        ctx.reads = opts.read_window
    if opts.recall_in_store:
        _recall_in_store(ctx)
    if opts.namespace is None:
        warn_if_shared(ctx)
    return ctx


def _recall_in_store(ctx: Context) -> None:
    """Switch ``ctx``'s recall to the store's search, or say why it cannot (InvalidInput)."""
    from memcurator.lifecycle.store_recall import rank_in_store
    from memcurator.store.base import SearchableStore

    why = rank_in_store(ctx.policy)
    if ctx.max_bytes is not None:
        why = (
            f"namespace {ctx.namespace!r} has a byte budget ({ctx.max_bytes} bytes): its Keep "
            "pass reads every resident entry, so its recall stays in memory"
        )
    if not isinstance(ctx.store, SearchableStore):
        why = f"store {ctx.store.path} cannot search in the database (a SQLite store)"
    if why is not None:
        raise InvalidInput(f"recall_in_store: {why}")
    ctx.recall_in_store = True


__all__ = [
    "DEFAULT_NAMESPACE",
    "RECALL_FIELD",
    "UNSET",
    "Context",
    "DecisionLog",
    "EnergyMeter",
    "Scope",
    "Sizing",
    "Options",
    "check_budget",
    "embedder_identity",
    "open_context",
    "warn_if_shared",
]
