"""``Memory``: the object a user reaches for — a thin facade over the lifecycle modules.

It wires a store, an embedder and a policy (a bundle of components, :mod:`memcurator.policy`).
The resident set enforces the byte budget for every policy; the policy only chooses what is
admitted, in what order entries stay and how recall ranks (STYLE.md rule 1). Every admission,
rejection, eviction, distillation, reinforcement and forget is in the decision log.
"""

from __future__ import annotations

import inspect
import math
import numbers
import random
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from memcurator.curate.distill import ExtractiveDistiller, render_insight, render_raw
from memcurator.embed import Embedder, HashingEmbedder
from memcurator.embed.text import has_content
from memcurator.errors import BudgetExceeded, DimensionMismatch, EntryNotFound, InvalidInput
from memcurator.lifecycle import exchange, keep
from memcurator.lifecycle import recall as _recall
from memcurator.lifecycle import write as _write
from memcurator.lifecycle.keep import GovernResult
from memcurator.lifecycle.resident import ResidentSet
from memcurator.lifecycle.write import WriteResult, check_text, dedup_key, embed_checked
from memcurator.policy import create_policy
from memcurator.policy.base import Policy
from memcurator.retrieve.hybrid import recall_text
from memcurator.store.sizing import default_sizeof
from memcurator.store.sqlite import KEEP, REEMBED_PENDING, SQLiteStore
from memcurator.store.vectors import check_dtype, stored_vector
from memcurator.trust.auth import OWNER, Claim, KeyRing, Signature
from memcurator.types import Entry, RecallResult, Task, Trajectory

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


class Memory:
    """An agent's experience memory under a policy and a byte budget.

    Parameters
    ----------
    path : str, default ":memory:"
        SQLite file of the store (created if missing). Ignored when ``store`` is given.
    namespace : str, default "default"
        One namespace per user/agent; every read and write is scoped to it.
    policy : str or Policy, default "curator"
        A preset name (``memcurator policies``) or an instance.
    max_bytes : int or None, optional
        Resident budget B in bytes, enforced for every policy; None means unbounded. Omitted,
        the namespace keeps the budget it was stored with (unbounded when new).
    store : SQLiteStore, optional
        Pass an open store to share it between memories (multi-tenant).
    embedder : Embedder, optional
        Defaults to the 512-d :class:`~memcurator.embed.HashingEmbedder`.
    sizeof : callable (text, meta, embedding) -> int, optional
        Byte accounting of an entry; default :func:`~memcurator.store.sizing.default_sizeof`.
        A callable with a ``vector_dtype`` parameter is also given the namespace's stored
        precision (the default counts the vector's stored bytes that way); one without it
        must count the vector itself.
    distiller : object with ``distill(text) -> str | None``, optional
        Used by policies that distill on fall-out; default extractive.
    max_text_bytes : int, default 65536
        Longest accepted text, UTF-8 bytes.
    seed : int, default 0
        Seeds entry-id generation only.
    candidates : int, default 12
        Recall candidate pool K_c from BM25 and dense search before the policy reranks.
    keyring : KeyRing, optional
        Keys that prove origins (:mod:`memcurator.trust.auth`); it must hold an owner key
        (``ring.add(OWNER)``). With it, a ``self`` or ``peer`` write needs a valid ``signature``
        (:meth:`sign`; :meth:`record` signs its own writes) or is handled as ``external`` and
        logged as ``downgrade``. Without it, origins are taken as claimed.
    lexical_weight : float, default 0.5
        Weight of the normalised BM25 score added to the policy's recall scores
        (:func:`~memcurator.retrieve.hybrid.blend_scores`); 0 ranks by the policy alone.
    same_request : float or None, default 0.99
        Cosine between two entries' recall texts at or above which they are versions of one
        request (0.99: the same task line; with the hashing embedder "customer 3" and
        "customer 4" have cosine 0.97 and are different requests): recall ranks the newer
        first unless the older is proven better
        (:func:`memcurator.lifecycle.versions.proven_better`). None turns this off.
    log_keep : int or None, default 100000
        Decision-log retention: at most about this many rows per namespace; older rows are
        dropped in batches and replaced by one ``compact`` row counting them by action and
        bytes. None keeps every row.
    log_max_age_s : float or None, optional
        Also drop rows older than this many seconds (store clock), summarised the same way.
    vector_dtype : {"float32", "float16", "int8"}, optional
        Precision the namespace stores its entries' vectors in (:mod:`memcurator.store.vectors`),
        fixed when it is created; the byte budget counts the bytes stored (512-d hashing
        vector: 2,048 / 1,024 / 516 bytes). Omitted, the namespace keeps its own (float32 when
        new). Recall always computes on float32 vectors, dequantised on load.

    Notes
    -----
    **What handles share.** The namespace, not the handle, owns the entries, the byte budget,
    the step clock and the policy's learned state. A handle reloads all four whenever any
    commit from another handle or process is seen (the store's version token), and saves step
    and state in every transaction it commits, so a second handle continues the step where the
    first left it. Query observations (CURATOR's sketch) made by ``recall`` are folded into the
    state saved by this handle's next commit; a handle that only recalls loses them to another
    handle's commit.

    Embeddings and BM25 are taken of each entry's recall text (its ``Task:`` line when it has
    one): the namespace stores :func:`embedder_identity`, and a store embedded with anything
    else is refused at open until ``memcurator reembed`` has re-embedded it.

    Raises
    ------
    DimensionMismatch
        If the namespace was created with another embedder or dimension.
    UnknownName
        If ``policy`` is not a registered name.
    InvalidInput
        ``max_bytes`` that is not a positive integer or None; a ``keyring`` without an owner key;
        an unknown ``vector_dtype``, or one other than an existing namespace's (convert it with
        ``memcurator reembed --vector-dtype``).

    Examples
    --------
    >>> mem = Memory(policy="lru", max_bytes=6000)
    >>> r = mem.write("Task: count rows in t\\nAction: SELECT COUNT(*) FROM t;")
    >>> r.admitted
    True
    >>> hit = mem.recall("how many rows does t have", k=1)
    >>> hit.ids == [r.id]
    True
    >>> mem.used_bytes <= 6000
    True
    >>> [d.action for d in mem.decisions()]
    ['admit']
    """

    def __init__(
        self,
        path: str = ":memory:",
        namespace: str = "default",
        policy: str | Policy = "curator",
        max_bytes: int | None = UNSET,
        *,
        store: SQLiteStore | None = None,
        embedder: Embedder | None = None,
        sizeof: Callable[[str, dict[str, Any], np.ndarray], int] = default_sizeof,
        distiller: Any = None,
        max_text_bytes: int = 65536,
        seed: int = 0,
        candidates: int = 12,
        keyring: KeyRing | None = None,
        lexical_weight: float = 0.5,
        same_request: float | None = 0.99,
        log_keep: int | None = 100_000,
        log_max_age_s: float | None = None,
        vector_dtype: str | None = None,
    ):
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
        self.keyring = keyring
        self.store = store if store is not None else SQLiteStore(path)
        self.namespace = namespace
        self.embedder = embedder if embedder is not None else HashingEmbedder()
        self.policy = create_policy(policy) if isinstance(policy, str) else policy
        self.policy.attach(self.embedder.dim)
        self.sizeof = sizeof
        try:
            self._sizeof_dtype = "vector_dtype" in inspect.signature(sizeof).parameters
        except (TypeError, ValueError):  # a callable without a signature (a builtin)
            self._sizeof_dtype = False
        self.distiller = distiller if distiller is not None else ExtractiveDistiller()
        self.max_text_bytes = max_text_bytes
        self.candidates = candidates
        if not (isinstance(lexical_weight, int | float) and lexical_weight >= 0):
            raise InvalidInput(f"lexical_weight must be a number >= 0, got {lexical_weight!r}")
        self.lexical_weight = float(lexical_weight)
        if same_request is not None and not -1.0 <= float(same_request) <= 1.0:
            raise InvalidInput(f"same_request must be in [-1, 1] or None, got {same_request!r}")
        self.same_request = same_request
        if log_keep is not None and (
            isinstance(log_keep, bool) or not isinstance(log_keep, int) or log_keep < 1
        ):
            raise InvalidInput(f"log_keep must be a positive integer or None, got {log_keep!r}")
        if log_max_age_s is not None and not float(log_max_age_s) > 0:
            raise InvalidInput(f"log_max_age_s must be positive or None, got {log_max_age_s!r}")
        self.log_keep = log_keep
        self.log_max_age_s = log_max_age_s
        self._log_rows: int | None = None  # rows of this namespace's log (None: not counted)
        self._age_mark = 0  # _log_rows when the age limit was last applied
        self.store.create_namespace(
            namespace,
            embedder=embedder_identity(self.embedder),
            dim=self.embedder.dim,
            max_bytes=None
            if max_bytes is None
            else (int(max_bytes) if max_bytes is not UNSET else UNSET),
            vector_dtype=KEEP if vector_dtype is None else vector_dtype,
        )
        # ids are drawn from the seed and the log's length, so a reopened store (same seed)
        # never draws an id it already used, while a fresh run stays reproducible
        self._rng = random.Random(f"{seed}:{namespace}:{self.store.last_seq()}")
        self._step = 0
        self.max_bytes: int | None = None
        self.vector_dtype = "float32"
        self._load_shared()
        self.energy_bytes = 0.0  # energy proxy: bytes embedded + resident bytes scanned
        self._energy_mark = 0.0  # energy_bytes at the start of the current step
        self._depth = 0
        self._in_where = False  # inside a recall(where=...) callback: no changes
        self._res = ResidentSet(
            self.store, namespace, self.embedder.dim, self.policy.redundancy_delta
        )
        if self.max_bytes is not None and self._res.used > self.max_bytes:
            self.govern()  # reopened with a smaller budget: restore it before anything else

    # ------------------------------------------------------------------ plumbing
    def _load_shared(self) -> None:
        """Read what the namespace owns: budget, vector precision, step clock and the policy's
        learned state."""
        info = self.store.namespace(self.namespace)
        self.max_bytes = None if info.max_bytes is None else int(info.max_bytes)
        self.vector_dtype = info.vector_dtype
        # an unfinished `memcurator reembed` (begun after this handle opened): its vectors are
        # half converted, so this handle neither reads nor writes until it finishes
        # ... or one that finished with another embedder than this handle's
        self._converting = info.embedder.startswith(REEMBED_PENDING) or (
            info.embedder != embedder_identity(self.embedder) or info.dim != self.embedder.dim
        )
        saved = self.store.load_state(self.namespace)
        if saved is not None:
            self._step = max(self._step, saved[1])
            if saved[0] == self.policy.name:
                self.policy.load_state(saved[2])

    def _sync(self) -> None:
        """Reload the resident set and the namespace's shared state after a foreign commit."""
        if self._res.sync():
            self._load_shared()

    def _sync_usable(self) -> None:
        """:meth:`_sync`, then refuse to go on if a re-embedding began since this handle opened
        (its vectors are half converted) or finished with another embedder than this handle's.

        Raises
        ------
        DimensionMismatch
        """
        self._sync()
        if self._converting:
            raise DimensionMismatch(
                f"namespace {self.namespace!r} is being re-embedded or converted by an unfinished "
                "`memcurator reembed`, or was re-embedded with another embedder; run the reembed "
                "again to finish, then open a new Memory (this handle's vectors are out of date)"
            )

    @property
    def step(self) -> int:
        """The namespace's logical clock (shared by every handle on it)."""
        if self._depth == 0:
            self._sync()
        return self._step

    @step.setter
    def step(self, value: int) -> None:
        self._step = int(value)

    @contextmanager
    def _transaction(self) -> Iterator[None]:
        """One store transaction; the resident set is synced first and, after this handle's
        own commit, marked current (a rollback makes the next call reload it).

        Raises :class:`InvalidInput` inside a ``recall(where=...)`` callback: a change to the
        memory there would move the rows the recall in progress is ranking."""
        if self._in_where:
            raise InvalidInput(
                "a recall(where=...) callback cannot write to, give feedback to or forget from "
                "the memory it filters; collect what to change and do it after recall returns"
            )
        with self.store.transaction():
            self._depth += 1
            try:
                if self._depth == 1:
                    self._sync_usable()
                yield
            finally:
                self._depth -= 1
        if self._depth == 0:
            self._res.mark_synced()
            self._compact_log()

    def _compact_log(self) -> None:
        """Apply the decision-log retention (``log_keep``, ``log_max_age_s``) in batches."""
        if self.log_keep is None and self.log_max_age_s is None:
            return
        if self._log_rows is None:
            self._log_rows = self._age_mark = self.store.decision_count(self.namespace)
        slack = max(self.log_keep // 10, 100) if self.log_keep is not None else 100
        due = (self.log_keep is not None and self._log_rows > self.log_keep + slack) or (
            self.log_max_age_s is not None and self._log_rows - self._age_mark >= 100
        )
        if not due:
            return
        fresh = self.store.version() == self._res._version
        self.store.compact_log(
            self.namespace, keep=self.log_keep, max_age_s=self.log_max_age_s, step=self._step
        )
        if fresh:  # only the log changed since this handle's own commit
            self._res.mark_synced()
        self._log_rows = self._age_mark = self.store.decision_count(self.namespace)

    def _log(self, step: int, action: str, eid: str, score: float, reason: str, nb: int) -> None:
        if self._log_rows is not None:
            self._log_rows += 1
        self.store.log(
            self.namespace,
            step=step,
            action=action,
            entry_id=eid,
            score=score,
            reason=reason,
            policy=self.policy.name,
            nbytes=nb,
        )

    def _save_state(self) -> None:
        self.store.save_state(self.namespace, self.policy.name, self._step, self.policy.state())

    def _new_id(self, text: str) -> str:
        return f"{dedup_key(text)[:10]}{self._rng.getrandbits(32):08x}"

    def entry_bytes(self, text: str, meta: dict[str, Any], embedding: np.ndarray) -> int:
        """``sizeof`` of an entry as this namespace stores it (its ``vector_dtype``), bytes.

        Examples
        --------
        >>> e = np.ones(512, dtype=np.float32)
        >>> Memory(vector_dtype="int8").entry_bytes("abc", {}, e)
        521
        """
        if self._sizeof_dtype:
            return int(self.sizeof(text, meta, embedding, vector_dtype=self.vector_dtype))  # type: ignore[call-arg]
        return int(self.sizeof(text, meta, embedding))

    def stored(self, embedding: np.ndarray) -> np.ndarray:
        """``embedding`` as the store gives it back in this namespace's precision (float32):
        what the resident matrix holds, so that a reopened handle recalls the same.

        Raises
        ------
        InvalidInput
            A vector the precision cannot hold (:func:`memcurator.store.vectors.stored_vector`).
        """
        return stored_vector(embedding, self.vector_dtype)

    # ------------------------------------------------------------------ reads
    @property
    def matrix(self) -> np.ndarray:
        """Embeddings of the resident entries, shape (n, d), float32, in ``entries()`` order."""
        self._sync()
        return self._res.matrix.copy()

    @property
    def used_bytes(self) -> int:
        """Resident bytes ``sum(b(m))``."""
        self._sync()
        return self._res.used

    def __len__(self) -> int:
        self._sync()
        return len(self._res.entries)

    def entries(self) -> list[Entry]:
        """Copies of the resident entries (editing them changes nothing stored)."""
        self._sync()
        return [ResidentSet.copy_of(m) for m in self._res.entries]

    def get(self, entry_id: str) -> Entry:
        """A copy of one resident entry; :class:`EntryNotFound` for an id that is not resident."""
        self._sync()
        m = self._res.get(entry_id)
        if m is None:
            raise EntryNotFound(f"no entry {entry_id!r} in namespace {self.namespace!r}")
        return ResidentSet.copy_of(m)

    def decisions(self, *, since: int = 0, action: str | None = None) -> list[Any]:
        """The decision log of this namespace, oldest first."""
        return self.store.decisions(self.namespace, since=since, action=action)

    # ------------------------------------------------------------------ recall
    def _query_vector(self, query: str) -> tuple[str, np.ndarray]:
        """A task query's task line (:func:`~memcurator.retrieve.hybrid.recall_text`) and its
        embedding, float32 of shape (d,), after validation."""
        if not isinstance(query, str) or not query.strip():
            raise InvalidInput("query must be a non-empty string")
        if not has_content(query):
            raise InvalidInput(
                f"query {query[:40]!r} has no letter or digit of any script; nothing to match"
            )
        line = recall_text(query)  # a query written as an entry is compared by its task line
        e_q = np.asarray(self.embedder.embed(line), dtype=np.float32)
        if not np.all(np.isfinite(e_q)):
            raise InvalidInput("the embedder returned NaN or infinite values for this query")
        return line, e_q

    def observe(self, query: str) -> None:
        """Fold a task's query into the policy's running statistics without recalling.

        For a reader that does not go through :meth:`recall`: a read-time curator that scans
        the resident set with its own retriever (JitMem's BM25 over task descriptions) still
        tells the policy what the working tasks are (CURATOR's query sketch q̄ and working-task
        centroid, Sec. III-A; a local helpfulness baseline's pending query). Nothing is read
        or returned, so no energy is counted.

        Raises
        ------
        InvalidInput
            Empty query, one without a letter or digit of any script, or one the embedder maps
            to NaN or infinite values (nothing is changed).

        Examples
        --------
        >>> from memcurator import Memory
        >>> mem = Memory(":memory:", policy="curator")
        >>> mem.observe("Count the orders of customer 7")
        >>> bool(abs(mem.sketch).sum() > 0)
        True
        """
        _, e_q = self._query_vector(query)
        self._sync_usable()
        self.policy.observe_query(e_q)

    def recall(
        self,
        query: str,
        k: int = 1,
        *,
        where: Callable[[Entry], bool] | None = None,
        observe: bool = True,
        min_score: float | None = None,
        user: str | None = None,
    ) -> RecallResult:
        """Recall up to ``k`` entries for ``query`` (:func:`memcurator.lifecycle.recall.recall`).

        Parameters
        ----------
        query : str
        k : int, default 1
            At most this many results; fewer when fewer entries are resident or pass ``where``,
            or when the policy's rank caps what it injects (``tokenworth``: K_max = 1, the
            paper's default; ``create_policy("tokenworth", k_max=3)`` raises it).
        where : callable (Entry) -> bool, optional
            A filter applied before ranking (it receives copies). It may read the memory but
            not change it: a write, feedback, forget or update from inside it raises
            :class:`~memcurator.errors.InvalidInput` (the recall then fails; nothing changed).
        observe : bool, default True
            Fold the query into the policy's running statistics (CURATOR's sketch).
        min_score : float, optional
            Drop candidates whose cosine with the query is below this (in [-1, 1]); a query
            that matches nothing then returns nothing.
        user : str, optional
            The user recalling: entries written with ``user=`` are returned only to that
            user; entries without one are shared by every user of the namespace.

        Ranking: the policy's score plus ``lexical_weight`` times the candidate's BM25 score
        over the pool's best; between versions of one request (cosine >= ``same_request``)
        the newer first unless the older is proven better. This is the only way recency
        enters recall (see :func:`memcurator.lifecycle.recall.recall`).

        Returns
        -------
        RecallResult
            ``ids`` (length ``k' <= k``), ``scores`` of shape (k',) descending, ``entries``
            (copies), and the ``features`` and ``step`` that :meth:`feedback` learns from.

        Raises
        ------
        InvalidInput
            Empty query or one without a letter or digit of any script, a query the embedder
            maps to NaN or infinite values, ``k`` not a positive integer, or ``min_score``
            that is not a finite number.
        """
        query, e_q = self._query_vector(query)  # validates the query first
        if not isinstance(k, int | np.integer) or isinstance(k, bool) or k < 1:
            raise InvalidInput(f"k must be a positive integer, got {k!r}")
        if min_score is not None and (
            not isinstance(min_score, int | float) or not math.isfinite(min_score)
        ):
            raise InvalidInput(f"min_score must be a finite number or None, got {min_score!r}")
        self._sync_usable()
        self.energy_bytes += len(query.encode("utf-8")) + self._res.used
        if observe:
            self.policy.observe_query(e_q)
        guarded = None
        if where is not None:
            user_where = where

            def guarded(e: Entry) -> bool:
                self._in_where = True
                try:
                    return bool(user_where(e))
                finally:
                    self._in_where = False

        return _recall.recall(
            self._res,
            self.policy,
            query,
            e_q,
            int(k),
            candidates=self.candidates,
            step=self._step,
            where=guarded,
            min_score=min_score,
            user=user,
            lexical_weight=self.lexical_weight,
            same_request=self.same_request,
        )

    # ------------------------------------------------------------------ writes
    def write(
        self,
        text: str | bytes,
        *,
        origin: str = "self",
        kind: str = "insight",
        origin_detail: str = "",
        raw_text: str | None = None,
        meta: dict[str, Any] | None = None,
        step: int | None = None,
        raw_bytes: int | None = None,
        stats: dict[str, float] | None = None,
        signature: Signature | None = None,
        user: str | None = None,
        personal: bool = False,
    ) -> WriteResult:
        """Offer one entry: the policy's admission gate, de-duplication, then the Keep pass.

        Parameters
        ----------
        text : str or UTF-8 bytes
            What is stored and later injected.
        origin : {"self", "peer", "external"}
        kind : {"raw", "insight", "skill"}
        origin_detail : str
            Peer id, tool name, ``"expert"``; at most 256 UTF-8 bytes, counted in ``b(m)``.
        raw_text : str, optional
            The raw trajectory this entry was distilled from; its size is ``b⁰``.
        meta : dict, optional
            JSON-able metadata (family, task id, evaluation metrics, ...); counted in ``b(m)``
            by the default ``sizeof``, at most ``max_text_bytes`` as JSON.
        step : int, optional
            Logical time; defaults to the memory's step counter.
        raw_bytes : int, optional
            ``b⁰`` given directly (a peer's advertised abstraction gain × b).
        stats : dict, optional
            Initial per-method statistics (a peer's advertised ``q_adv``).
        signature : Signature, optional
            Proof of a ``self``/``peer`` origin under the memory's ``keyring`` (:meth:`sign`).
            Missing or invalid with a keyring: the write is handled as ``external`` (logged as
            ``downgrade``).
        user : str, optional
            Scope the entry to one user of the namespace (``recall(user=...)``).
        personal : bool, default False
            Personal data of ``user``: never shared to peers.

        Returns
        -------
        WriteResult

        Notes
        -----
        Duplicates are found on the text with case folded and whitespace collapsed
        (:func:`memcurator.lifecycle.write.dedup_key`): writing one again reinforces it.

        Raises
        ------
        InvalidInput
            Empty, whitespace-only, content-free (only emoji, symbols or punctuation),
            oversized or invalid UTF-8 text; an embedding that is zero, NaN or infinite;
            unknown origin or kind; ``meta`` that is not JSON-serialisable or too large; an
            ``origin_detail`` over 256 bytes; a negative or non-integer ``step``; a
            ``signature`` given to a memory without a keyring; ``stats`` that is not a dict of
            str to finite numbers.
        BudgetExceeded
            The entry alone is larger than ``max_bytes`` (logged as a rejection first).
        """
        return _write.write(
            self,
            text,
            origin=origin,
            kind=kind,
            origin_detail=origin_detail,
            raw_text=raw_text,
            meta=meta,
            step=step,
            raw_bytes=raw_bytes,
            stats=stats,
            signature=signature,
            user=user,
            personal=personal,
        )

    def sign(self, text: str, *, kind: str = "insight", origin_detail: str = "") -> Signature:
        """The owner's signature for writing ``text`` with ``origin="self"`` here.

        Raises
        ------
        InvalidInput
            The memory has no keyring, or its owner key is revoked.

        Examples
        --------
        >>> from memcurator.trust.auth import OWNER, KeyRing
        >>> ring = KeyRing()
        >>> _ = ring.add(OWNER)
        >>> mem = Memory(policy="lru", keyring=ring)
        >>> t = "Task: count rows in t\\nAction: SELECT COUNT(*) FROM t;"
        >>> mem.write(t, signature=mem.sign(t)).admitted, mem.get(mem.entries()[0].id).origin
        (True, 'self')
        """
        if self.keyring is None:
            raise InvalidInput("this memory has no keyring; pass keyring= to sign writes")
        return self.keyring.sign(Claim(self.namespace, "self", origin_detail, kind, text))

    def record(
        self,
        task: Task,
        trajectory: Trajectory,
        *,
        used: Iterable[str] | RecallResult = (),
        feedback: bool = True,
    ) -> WriteResult | None:
        """Close one task: feed its outcome back to ``used``, then write its experience.

        The policy's form decides what is written: the raw trajectory or its distilled insight
        (``b⁰`` the raw bytes), only when the reward is at least its ``min_reward``. The
        trajectory's evaluation ``metrics`` go into the entry's ``meta``. Returns None when
        nothing was written.
        """
        if feedback:
            self.feedback(used, trajectory.reward)
        pol = self.policy
        if not pol.writes or trajectory.reward < pol.min_reward or not trajectory.steps:
            self._end_step()
            return None
        raw = render_raw(task, trajectory)
        meta: dict[str, Any] = {
            "task_id": task.id,
            "family": task.family,
            "solver": trajectory.solver,
        }
        meta.update(trajectory.metrics)
        kind = "insight" if pol.form == "insight" else "raw"
        text = raw
        if kind == "insight":
            text = render_insight(task.instruction, trajectory.steps[-1].action)
        sig = self.sign(text, kind=kind, origin_detail=trajectory.solver) if self.keyring else None
        r = self.write(
            text,
            kind=kind,
            raw_text=raw if kind == "insight" else None,
            meta=meta,
            origin_detail=trajectory.solver,
            signature=sig,
        )
        self._end_step()
        return r

    def _end_step(self) -> None:
        """Advance the logical clock; hand the step's energy ε(t) to the policy (CURATOR Eq. 6)."""
        with self._transaction():
            self.policy.observe_energy(self.energy_bytes - self._energy_mark)
            self._energy_mark = self.energy_bytes
            self._step += 1
            self._save_state()

    def feedback(self, used: Iterable[str] | RecallResult, reward: float) -> None:
        """Report a task's outcome ``reward`` in [0, 1] for the entries that were injected.

        ``reward`` is a real number (True/False count as 1/0); a string is refused.

        ``used`` is the :class:`RecallResult` whose entries were injected (learners then train
        on the features of that recall, whatever was recalled since) or a list of ids. Ids no
        longer resident are skipped; an id listed twice counts once (an entry is injected into a
        task or not).

        Raises
        ------
        InvalidInput
            NaN, infinite, non-numeric or out-of-range reward, or ``used`` given as one string
            (nothing is updated).
        """
        features = None
        if isinstance(used, RecallResult):
            features, used = used.features, list(used.ids)
        if isinstance(used, str):
            raise InvalidInput(f"used must be a list of entry ids, not the string {used!r}")
        if not isinstance(reward, numbers.Real):  # a string such as "1" is not a reward
            raise InvalidInput(f"reward must be a number in [0, 1], got {reward!r}")
        r = float(reward)  # True/False count as 1/0
        if not math.isfinite(r) or not 0.0 <= r <= 1.0:
            raise InvalidInput(f"reward must be a finite number in [0, 1], got {reward!r}")
        with self._transaction():
            res = self._res
            ids = list(dict.fromkeys(used))  # one outcome per entry, in first-seen order
            injected = [res.entries[res.index[i]] for i in ids if i in res.index]
            for m in injected:
                m.uses += 1
                m.last_used_step = self._step
                if r >= 0.5:
                    m.successes += 1
                else:
                    m.failures += 1
            updates = self.policy.feedback(
                r, [ResidentSet.copy_of(m) for m in injected], self._step, features
            )
            for m in injected:
                if m.id in updates:
                    m.stats = dict(updates[m.id])
                self.store.update(m)
            res.touch([m.id for m in injected])
            # what must go regardless of the budget (feedback quarantine) goes now, logged
            keep.evict_victims(res, self.policy, self.step, self._log)
            exchange.log_reputation(self)
            self._save_state()

    # ------------------------------------------------------------------ share / receive
    @property
    def sketch(self) -> np.ndarray:
        """The query sketch q̄ this memory advertises to peers (CURATOR Eq. 8), shape (d,)."""
        return self.policy.sketch

    def share(
        self,
        peer_sketch: np.ndarray,
        uplink_bytes: int,
        *,
        tau: float = 0.0,
        tau_rise: float = 5e-5,
        delta: float = 0.9,
        sender: str | None = None,
        to: str = "",
        peer: str = "",
    ) -> list[Any]:
        """Select resident entries to send a peer (CURATOR Alg. 1 lines 13-17, Eq. 7-8).

        ``peer_sketch`` has shape (d,); ``uplink_bytes`` is the round's budget L; ``tau``,
        ``tau_rise`` and ``delta`` are those of :func:`memcurator.policy.share.select_for_peer`.
        Returns :class:`~memcurator.policy.share.SharedEntry` objects, each logged as ``share``,
        preceded by a :class:`~memcurator.policy.share.ForgetNotice` for every entry shared
        with ``peer`` before (or shared with no peer name) and forgotten since, each logged as
        ``notice``; send the list as a whole over the channel to :meth:`receive`. Personal
        entries (``write(personal=True)``) are never shared.
        With a ``keyring`` and ``sender`` (this agent's id at the peer), each entry is signed under
        ``sender``'s link key for the receiving namespace ``to`` and carries the raw trajectory
        it was distilled from when known (so the receiver can recompute its abstraction gain).

        Raises
        ------
        InvalidInput
            The policy has no share component (only curator-style policies share).
        DimensionMismatch
            ``peer_sketch`` has the wrong dimension.
        """
        return exchange.share(
            self,
            peer_sketch,
            uplink_bytes,
            tau=tau,
            tau_rise=tau_rise,
            delta=delta,
            sender=sender,
            to=to,
            peer=peer,
        )

    def receive(self, shared: Iterable[Any], peer: str) -> list[WriteResult]:
        """Offer entries received from ``peer`` (CURATOR Trust, Alg. 1 lines 18-22).

        Nothing the peer claims is taken on faith (:func:`memcurator.lifecycle.exchange.receive`):
        with a keyring its signature is checked (else the entry is handled as external), the
        abstraction gain is recomputed from the bytes received, the advertised q is shrunk by
        the peer's reputation here, and a quarantined peer's entries are refused. The sender's
        id is kept as ``meta["source_id"]``; a :class:`~memcurator.policy.share.ForgetNotice`
        in ``shared`` forgets the copy received from ``peer`` under that source id.
        """
        return exchange.receive(self, shared, peer)

    def release_peer(self, peer: str, reason: str, *, reset: bool = False) -> None:
        """Lift the quarantine of ``peer`` (logged as ``release``); see
        :meth:`memcurator.trust.reputation.PeerReputation.release`.

        Raises
        ------
        InvalidInput
            The policy keeps no reputation, the peer is not quarantined, or no reason.
        """
        exchange.release_peer(self, peer, reason, reset=reset)

    def forget(self, entry_id: str, *, reason: str = "forget requested") -> None:
        """Hard-delete one entry: its text leaves the table and every index; a tombstone id
        stays in the decision log.

        Raises
        ------
        EntryNotFound
        """
        with self._transaction():
            b = self.store.delete(self.namespace, entry_id)
            self._log(self._step, "forget", entry_id, float("nan"), reason, b)
            self.store.mark_forgotten(self.namespace, entry_id)
            self._res.remove({entry_id})
        # The WAL still holds page images with the text until it is checkpointed and truncated.
        self.store.checkpoint()

    def forget_all(self, *, reason: str = "forget_all requested") -> int:
        """Hard-delete every entry of this namespace (no other namespace is touched).

        Each entry gets a ``forget`` tombstone; copies shared to peers are owed a forget notice
        (:meth:`share`). The namespace, its budget, step and policy state stay.

        Returns
        -------
        int
            Bytes freed.
        """
        with self._transaction():
            ids = [m.id for m in self._res.entries]
            freed = 0
            for eid in ids:
                b = self.store.delete(self.namespace, eid)
                freed += b
                self._log(self._step, "forget", eid, float("nan"), reason, b)
                self.store.mark_forgotten(self.namespace, eid)
            self._res.remove(set(ids))
        self.store.checkpoint()
        return freed

    def update(self, entry_id: str, text: str | bytes, *, reason: str = "") -> WriteResult:
        """Replace one entry's text, atomically: the old version stays if anything fails.

        The new text is validated as in :meth:`write`, embedded, sized and written in one
        transaction with an ``update`` decision (old and new bytes, ``reason``); the Keep pass
        then runs. Use, success and failure counts stay with the entry (it is the same memory,
        corrected). If any step raises (validation, budget, the store, the Keep pass), nothing
        changes, in the store or in this handle.

        Returns
        -------
        WriteResult
            ``id`` is ``entry_id``; ``evicted`` may name it if Keep evicted it.

        Raises
        ------
        EntryNotFound
            ``entry_id`` is not resident.
        InvalidInput
            Text refused by :meth:`write`'s checks, or identical (case and whitespace aside) to
            another resident entry (forget one of them instead).
        BudgetExceeded
            The new version alone is larger than ``max_bytes`` (nothing changes).
        """
        new_text = check_text(text, self.max_text_bytes)
        e0 = embed_checked(self.embedder.embed, new_text)
        key = dedup_key(new_text)
        oversized: BudgetExceeded | None = None
        with self._transaction():
            res = self._res
            cur = res.get(entry_id)
            if cur is None:
                raise EntryNotFound(f"no entry {entry_id!r} in namespace {self.namespace!r}")
            other = res.by_key(key)
            if other is not None and other.id != entry_id:
                raise InvalidInput(f"entry {other.id!r} already holds this text; forget one")
            new = ResidentSet.copy_of(cur)
            new.meta["text_sha1"] = key
            e = self.stored(e0)
            b = self.entry_bytes(new_text, new.meta, e) + len(cur.origin_detail.encode("utf-8"))
            if self.max_bytes is not None and b > self.max_bytes:
                # logged and committed, raised outside the transaction (as in write)
                msg = f"new version of {b} bytes can never fit max_bytes={self.max_bytes}"
                self._log(self._step, "reject", entry_id, float("nan"), f"update: {msg}", b)
                oversized = BudgetExceeded(msg + "; the old version stays")
        if oversized is not None:
            raise oversized
        with self._transaction():
            res = self._res
            cur = res.get(entry_id)
            if cur is None:
                raise EntryNotFound(f"no entry {entry_id!r} in namespace {self.namespace!r}")
            new = ResidentSet.copy_of(cur)
            new.meta["text_sha1"] = key
            e = self.stored(e0)
            b = self.entry_bytes(new_text, new.meta, e) + len(cur.origin_detail.encode("utf-8"))
            new.text, new.embedding, new.bytes = new_text, e, b
            new.raw_bytes = max(cur.raw_bytes, b)
            self.store.update(new)
            why = f"text replaced: {cur.bytes} -> {b} bytes" + (f"; {reason}" if reason else "")
            self._log(self._step, "update", entry_id, float("nan"), why, b)
            res.replace(res.index[entry_id], new)
            g = self._govern(self._step)
            self._save_state()
        return WriteResult(entry_id, True, why, float("nan"), g.evicted, g.distilled)

    # ------------------------------------------------------------------ keep
    def govern(self) -> GovernResult:
        """Run the Keep pass now (it also runs after every admitted write)."""
        with self._transaction():
            g = self._govern(self._step)
            self._save_state()
        return g

    def _govern(self, step: int) -> GovernResult:
        def scan(n: int) -> None:
            self.energy_bytes += n

        return keep.govern(
            self._res, self.policy, self.max_bytes, step, self._log, self._distill, scan
        )

    def _distill(self, m: Entry, step: int, row: int | None = None) -> bool:
        ok, n = keep.distill_entry(
            self._res,
            m,
            step,
            row,
            distiller=self.distiller,
            embed=lambda t: self.stored(embed_checked(self.embedder.embed, t)),
            sizeof=self.entry_bytes,
            log=self._log,
            text_hash=dedup_key,
        )
        self.energy_bytes += n
        return ok

    # ------------------------------------------------------------------ lifetime
    def close(self) -> None:
        """Persist the policy state and step (recall updates the sketch without a write), close."""
        with self.store.transaction():
            self._save_state()
        self.store.close()

    def __enter__(self) -> Memory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (
            f"Memory(namespace={self.namespace!r}, policy={self.policy!r}, "
            f"max_bytes={self.max_bytes}, entries={len(self._res.entries)})"
        )


__all__ = ["GovernResult", "Memory", "WriteResult"]
