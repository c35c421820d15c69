"""``Memory``: the object a user reaches for — a thin facade over the lifecycle modules.

It wires a store, an embedder and a policy (a bundle of components, :mod:`memcurator.policy`).
The resident set enforces the byte budget for every policy; the policy only chooses what is
admitted, in what order entries stay and how recall ranks (STYLE.md rule 1). Every admission,
rejection, eviction, distillation, reinforcement and forget is in the decision log.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from memcurator.curate.distill import ExtractiveDistiller, render_insight, render_raw
from memcurator.embed import Embedder, HashingEmbedder
from memcurator.errors import EntryNotFound, InvalidInput
from memcurator.lifecycle import exchange, keep
from memcurator.lifecycle import recall as _recall
from memcurator.lifecycle import write as _write
from memcurator.lifecycle.keep import GovernResult
from memcurator.lifecycle.resident import ResidentSet
from memcurator.lifecycle.write import WriteResult, sha1
from memcurator.policy import create_policy
from memcurator.policy.base import Policy
from memcurator.store.sizing import default_sizeof
from memcurator.store.sqlite import KEEP, SQLiteStore
from memcurator.trust.auth import OWNER, Claim, KeyRing, Signature
from memcurator.types import Entry, RecallResult, Task, Trajectory

#: ``max_bytes`` not given: keep the namespace's stored budget (unbounded for a new one).
UNSET: Any = KEEP


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

    Raises
    ------
    DimensionMismatch
        If the namespace was created with another embedder or dimension.
    UnknownName
        If ``policy`` is not a registered name.
    InvalidInput
        ``max_bytes`` that is not a positive integer or None; a ``keyring`` without an owner key.

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
        if keyring is not None and OWNER not in keyring.principals():
            raise InvalidInput("keyring holds no owner key; add one with keyring.add(OWNER)")
        self.keyring = keyring
        self.store = store if store is not None else SQLiteStore(path)
        self.namespace = namespace
        self.embedder = embedder if embedder is not None else HashingEmbedder()
        self.policy = create_policy(policy) if isinstance(policy, str) else policy
        self.policy.attach(self.embedder.dim)
        self.sizeof = sizeof
        self.distiller = distiller if distiller is not None else ExtractiveDistiller()
        self.max_text_bytes = max_text_bytes
        self.candidates = candidates
        self.store.create_namespace(
            namespace,
            embedder=self.embedder.name,
            dim=self.embedder.dim,
            max_bytes=None
            if max_bytes is None
            else (int(max_bytes) if max_bytes is not UNSET else UNSET),
        )
        stored = self.store.namespace(namespace).max_bytes
        self.max_bytes: int | None = None if stored is None else int(stored)
        # ids are drawn from the seed and the log's length, so a reopened store (same seed)
        # never draws an id it already used, while a fresh run stays reproducible
        self._rng = random.Random(f"{seed}:{namespace}:{self.store.last_seq()}")
        self.step = 0
        saved = self.store.load_state(namespace)
        if saved is not None and saved[0] == self.policy.name:
            self.step = saved[1]
            self.policy.load_state(saved[2])
        self.energy_bytes = 0.0  # energy proxy: bytes embedded + resident bytes scanned
        self._energy_mark = 0.0  # energy_bytes at the start of the current step
        self._depth = 0
        self._res = ResidentSet(
            self.store, namespace, self.embedder.dim, self.policy.redundancy_delta
        )
        if self.max_bytes is not None and self._res.used > self.max_bytes:
            self.govern()  # reopened with a smaller budget: restore it before anything else

    # ------------------------------------------------------------------ plumbing
    @contextmanager
    def _transaction(self) -> Iterator[None]:
        """One store transaction; the resident set is synced first and, after this handle's
        own commit, marked current (a rollback makes the next call reload it)."""
        with self.store.transaction():
            self._depth += 1
            try:
                self._res.sync()
                yield
            finally:
                self._depth -= 1
        if self._depth == 0:
            self._res.mark_synced()

    def _log(self, step: int, action: str, eid: str, score: float, reason: str, nb: int) -> None:
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
        self.store.save_state(self.namespace, self.policy.name, self.step, self.policy.state())

    def _new_id(self, text: str) -> str:
        return f"{sha1(text)[:10]}{self._rng.getrandbits(32):08x}"

    # ------------------------------------------------------------------ reads
    @property
    def matrix(self) -> np.ndarray:
        """Embeddings of the resident entries, shape (n, d), float32, in ``entries()`` order."""
        self._res.sync()
        return self._res.matrix.copy()

    @property
    def used_bytes(self) -> int:
        """Resident bytes ``sum(b(m))``."""
        self._res.sync()
        return self._res.used

    def __len__(self) -> int:
        self._res.sync()
        return len(self._res.entries)

    def entries(self) -> list[Entry]:
        """Copies of the resident entries (editing them changes nothing stored)."""
        self._res.sync()
        return [ResidentSet.copy_of(m) for m in self._res.entries]

    def get(self, entry_id: str) -> Entry:
        """A copy of one resident entry; :class:`EntryNotFound` for an id that is not resident."""
        self._res.sync()
        m = self._res.get(entry_id)
        if m is None:
            raise EntryNotFound(f"no entry {entry_id!r} in namespace {self.namespace!r}")
        return ResidentSet.copy_of(m)

    def decisions(self, *, since: int = 0, action: str | None = None) -> list[Any]:
        """The decision log of this namespace, oldest first."""
        return self.store.decisions(self.namespace, since=since, action=action)

    # ------------------------------------------------------------------ recall
    def recall(
        self,
        query: str,
        k: int = 1,
        *,
        where: Callable[[Entry], bool] | None = None,
        observe: bool = True,
    ) -> RecallResult:
        """Recall up to ``k`` entries for ``query`` (:func:`memcurator.lifecycle.recall.recall`).

        Parameters
        ----------
        query : str
        k : int, default 1
            At most this many results; fewer when fewer entries are resident or pass ``where``.
        where : callable (Entry) -> bool, optional
            A filter applied before ranking (it receives copies).
        observe : bool, default True
            Fold the query into the policy's running statistics (CURATOR's sketch).

        Returns
        -------
        RecallResult
            ``ids`` (length ``k' <= k``), ``scores`` of shape (k',) descending, ``entries``
            (copies), and the ``features`` and ``step`` that :meth:`feedback` learns from.

        Raises
        ------
        InvalidInput
            Empty query, or ``k`` not a positive integer.
        """
        if not isinstance(query, str) or not query.strip():
            raise InvalidInput("query must be a non-empty string")
        if not isinstance(k, int | np.integer) or isinstance(k, bool) or k < 1:
            raise InvalidInput(f"k must be a positive integer, got {k!r}")
        self._res.sync()
        e_q = self.embedder.embed(query)
        self.energy_bytes += len(query.encode("utf-8")) + self._res.used
        if observe:
            self.policy.observe_query(e_q)
        return _recall.recall(
            self._res,
            self.policy,
            query,
            e_q,
            int(k),
            candidates=self.candidates,
            step=self.step,
            where=where,
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
    ) -> WriteResult:
        """Offer one entry: the policy's admission gate, de-duplication, then the Keep pass.

        Parameters
        ----------
        text : str or UTF-8 bytes
            What is stored and later injected.
        origin : {"self", "peer", "external"}
        kind : {"raw", "insight", "skill"}
        origin_detail : str
            Peer id, tool name, ``"expert"``.
        raw_text : str, optional
            The raw trajectory this entry was distilled from; its size is ``b⁰``.
        meta : dict, optional
            JSON-able metadata (family, task id, evaluation metrics, ...).
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

        Returns
        -------
        WriteResult

        Raises
        ------
        InvalidInput
            Empty, whitespace-only, oversized or invalid UTF-8 text; unknown origin or kind;
            ``meta`` that is not JSON-serialisable; a negative or non-integer ``step``; a
            ``signature`` given to a memory without a keyring.
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
        self.policy.observe_energy(self.energy_bytes - self._energy_mark)
        self._energy_mark = self.energy_bytes
        self.step += 1

    def feedback(self, used: Iterable[str] | RecallResult, reward: float) -> None:
        """Report a task's outcome ``reward`` in [0, 1] for the entries that were injected.

        ``used`` is the :class:`RecallResult` whose entries were injected (learners then train
        on the features of that recall, whatever was recalled since) or a list of ids. Ids no
        longer resident are skipped.

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
        try:
            r = float(reward)
        except (TypeError, ValueError):
            raise InvalidInput(f"reward must be a number in [0, 1], got {reward!r}") from None
        if not math.isfinite(r) or not 0.0 <= r <= 1.0:
            raise InvalidInput(f"reward must be a finite number in [0, 1], got {reward!r}")
        with self._transaction():
            res = self._res
            injected = [res.entries[res.index[i]] for i in used if i in res.index]
            for m in injected:
                m.uses += 1
                m.last_used_step = self.step
                if r >= 0.5:
                    m.successes += 1
                else:
                    m.failures += 1
            updates = self.policy.feedback(
                r, [ResidentSet.copy_of(m) for m in injected], self.step, features
            )
            for m in injected:
                if m.id in updates:
                    m.stats = dict(updates[m.id])
                self.store.update(m)
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
    ) -> list[Any]:
        """Select resident entries to send a peer (CURATOR Alg. 1 lines 13-17, Eq. 7-8).

        ``peer_sketch`` has shape (d,); ``uplink_bytes`` is the round's budget L; ``tau``,
        ``tau_rise`` and ``delta`` are those of :func:`memcurator.policy.share.select_for_peer`.
        Returns :class:`~memcurator.policy.share.SharedEntry` objects, each logged as ``share``.
        With a ``keyring`` and ``sender`` (this agent's id at the peer), each is signed under
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
        )

    def receive(self, shared: Iterable[Any], peer: str) -> list[WriteResult]:
        """Offer entries received from ``peer`` (CURATOR Trust, Alg. 1 lines 18-22).

        Nothing the peer claims is taken on faith (:func:`memcurator.lifecycle.exchange.receive`):
        with a keyring its signature is checked (else the entry is handled as external), the
        abstraction gain is recomputed from the bytes received, the advertised q is shrunk by
        the peer's reputation here, and a quarantined peer's entries are refused.
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
            self._log(self.step, "forget", entry_id, float("nan"), reason, b)
            self._res.remove({entry_id})
        # The WAL still holds page images with the text until it is checkpointed and truncated.
        self.store.checkpoint()

    # ------------------------------------------------------------------ keep
    def govern(self) -> GovernResult:
        """Run the Keep pass now (it also runs after every admitted write)."""
        with self._transaction():
            g = self._govern(self.step)
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
            embed=self.embedder.embed,
            sizeof=self.sizeof,
            log=self._log,
            text_hash=sha1,
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
