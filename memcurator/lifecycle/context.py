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
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np

from memcurator.curate.distill import ExtractiveDistiller
from memcurator.embed import Embedder, HashingEmbedder
from memcurator.errors import DimensionMismatch, InvalidInput
from memcurator.lifecycle.checks import dedup_key, embed_checked
from memcurator.lifecycle.resident import ResidentSet
from memcurator.policy.base import Policy
from memcurator.store.base import KEEP, REEMBED_PENDING, Store
from memcurator.store.vectors import check_dtype, stored_vector
from memcurator.trust.auth import OWNER, KeyRing
from memcurator.trust.fingerprint import ReadWindow

#: ``max_bytes`` not given: keep the namespace's stored budget (unbounded for a new one).
UNSET: Any = KEEP

#: What of an entry is embedded and indexed for recall (its ``Task:`` line: ``recall_text``).
#: Part of the namespace's embedder identity, so a store embedded otherwise is detected.
RECALL_FIELD = "task-line"


def embedder_identity(embedder: Embedder) -> str:
    """The embedder identity a namespace stores: the embedder's name and what it embeds.

    Examples
    --------
    >>> embedder_identity(HashingEmbedder())
    'hashing-512-3-5-1+task-line'
    """
    return f"{embedder.name}+{RECALL_FIELD}"


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
        try:
            self._with_dtype = "vector_dtype" in inspect.signature(sizeof).parameters
        except (TypeError, ValueError):  # a callable without a signature (a builtin)
            self._with_dtype = False

    def entry_bytes(self, text: str, meta: dict[str, Any], embedding: np.ndarray) -> int:
        """``sizeof`` of an entry in this namespace's precision, bytes."""
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
        res = ResidentSet(store, namespace, embedder.dim, policy.redundancy_delta)
        res.same_request = same_request  # Keep's versions follow the memory's same-request rule
        super().__init__(store, namespace, res, log, 0)
        self.load_shared()

    def load_shared(self) -> None:
        """Read what the namespace owns: budget (handed to the policy), vector precision, step
        clock and the policy's learned state."""
        info = self.store.namespace(self.namespace)
        self.max_bytes = None if info.max_bytes is None else int(info.max_bytes)
        self.sizing.vector_dtype = info.vector_dtype
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

    def new_id(self, text: str) -> str:
        return f"{dedup_key(text)[:10]}{self.rng.getrandbits(32):08x}"

    def embed(self, text: str) -> np.ndarray:
        """The stored embedding of ``text``'s recall text (validated, in this precision)."""
        return self.sizing.stored(embed_checked(self.embedder.embed, text))


def check_options(
    *,
    max_bytes: Any,
    vector_dtype: str | None,
    keyring: KeyRing | None,
    lexical_weight: Any,
    same_request: Any,
    log_keep: Any,
    log_max_age_s: Any,
    policy: Any,
) -> None:
    """Validate :class:`~memcurator.Memory`'s options before anything is opened.

    Raises
    ------
    InvalidInput
        See :class:`~memcurator.Memory`.
    """
    if policy is None:
        raise InvalidInput(
            "policy is None; pass a preset name (see `memcurator policies`, e.g. 'curator') "
            "or a Policy instance"
        )
    if (
        max_bytes is not UNSET
        and max_bytes is not None
        and (
            isinstance(max_bytes, bool)
            or not isinstance(max_bytes, int | float)
            or not math.isfinite(max_bytes)
            or int(max_bytes) != max_bytes
            or max_bytes <= 0
        )
    ):
        raise InvalidInput(f"max_bytes must be a positive integer or None, got {max_bytes!r}")
    if vector_dtype is not None:
        check_dtype(vector_dtype)
    if keyring is not None and OWNER not in keyring.principals():
        raise InvalidInput("keyring holds no owner key; add one with keyring.add(OWNER)")
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


def open_context(
    path: str,
    namespace: str,
    policy: str | Policy,
    max_bytes: Any,
    *,
    store: Store | None,
    embedder: Embedder | None,
    sizeof: Callable[..., int],
    distiller: Any,
    max_text_bytes: int,
    seed: int,
    candidates: int,
    keyring: KeyRing | None,
    lexical_weight: float,
    same_request: float | None,
    log_keep: int | None,
    log_max_age_s: float | None,
    vector_dtype: str | None,
) -> Context:
    """Validate the options, open (or create) the namespace and build its context; the
    parameters are :class:`~memcurator.Memory`'s.

    Raises
    ------
    InvalidInput, DimensionMismatch, UnknownName
        See :class:`~memcurator.Memory`.
    """
    check_options(
        max_bytes=max_bytes,
        vector_dtype=vector_dtype,
        keyring=keyring,
        lexical_weight=lexical_weight,
        same_request=same_request,
        log_keep=log_keep,
        log_max_age_s=log_max_age_s,
        policy=policy,
    )
    if store is None:
        from memcurator.store import open_store  # a SQLite file, or a postgresql:// URL

        store = open_store(path)
    emb = embedder if embedder is not None else HashingEmbedder()
    if isinstance(policy, str):
        from memcurator.policy import create_policy

        policy = create_policy(policy)
    policy.attach(emb.dim)
    store.create_namespace(
        namespace,
        embedder=embedder_identity(emb),
        dim=emb.dim,
        max_bytes=max_bytes if max_bytes is None or max_bytes is UNSET else int(max_bytes),
        vector_dtype=KEEP if vector_dtype is None else vector_dtype,
    )
    return Context(
        store,
        namespace,
        policy,
        emb,
        Sizing(sizeof),
        DecisionLog(store, namespace, policy.name, keep=log_keep, max_age_s=log_max_age_s),
        distiller=distiller if distiller is not None else ExtractiveDistiller(),
        keyring=keyring,
        max_text_bytes=max_text_bytes,
        candidates=candidates,
        lexical_weight=float(lexical_weight),
        same_request=same_request,
        seed=seed,
    )


__all__ = [
    "RECALL_FIELD",
    "UNSET",
    "Context",
    "DecisionLog",
    "EnergyMeter",
    "Scope",
    "Sizing",
    "check_options",
    "embedder_identity",
    "open_context",
]
