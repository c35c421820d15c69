"""``Memory``: the object a user reaches for. It wires a store, an embedder and a policy.

The store enforces the byte budget; the policy only chooses the order in which entries stay
resident (STYLE.md rule 1). Every admission, rejection, eviction, distillation, reinforcement and
forget is written to the decision log with its score and reason.
"""

from __future__ import annotations

import hashlib
import json
import math
import numbers
import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from memcurator.curate.distill import ExtractiveDistiller, render_insight, render_raw
from memcurator.embed import Embedder, HashingEmbedder
from memcurator.errors import BudgetExceeded, EntryNotFound, InvalidInput
from memcurator.policy import create_policy
from memcurator.policy.base import Policy
from memcurator.retrieve import BM25Index, dense_topk, rrf_fuse
from memcurator.store.sizing import default_sizeof
from memcurator.store.sqlite import SQLiteStore
from memcurator.types import ORIGINS, Entry, RecallResult, Task, Trajectory


@dataclass
class WriteResult:
    """What happened to one write.

    Attributes
    ----------
    id : str or None
        The entry id (None when rejected before an id was useful).
    admitted : bool
    reason : str
    score : float
        The policy's admission score (NaN where none applies).
    evicted : list of str
        Ids evicted by the governance pass this write triggered (may include ``id`` itself).
    distilled : list of str
        Ids distilled in that pass.
    """

    id: str | None
    admitted: bool
    reason: str
    score: float = float("nan")
    evicted: list[str] = field(default_factory=list)
    distilled: list[str] = field(default_factory=list)


@dataclass
class GovernResult:
    """Outcome of one governance (Keep) pass: evicted and distilled ids, resident bytes after."""

    evicted: list[str]
    distilled: list[str]
    used_bytes: int


def _sha1(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8")).hexdigest()


class Memory:
    """An agent's experience memory under a policy and a byte budget.

    Parameters
    ----------
    path : str, default ":memory:"
        SQLite file of the store (created if missing). Ignored when ``store`` is given.
    namespace : str, default "default"
        One namespace per user/agent; every read and write is scoped to it.
    policy : str or Policy, default "curator"
        A registered preset name (see :func:`memcurator.policy.create_policy`) or an instance.
    max_bytes : int or None, default None
        Resident budget B in bytes; None means unbounded. Unbounded policies (keep-all,
        full-oracle) ignore it.
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
        Recall candidate pool K_c from BM25 and dense search before the policy reranks (raised
        to ``k`` when a recall asks for more).

    Raises
    ------
    DimensionMismatch
        If the namespace was created with another embedder or dimension.
    UnknownName
        If ``policy`` is not a registered name.

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
        max_bytes: int | None = None,
        *,
        store: SQLiteStore | None = None,
        embedder: Embedder | None = None,
        sizeof: Callable[[str, dict[str, Any], np.ndarray], int] = default_sizeof,
        distiller: Any = None,
        max_text_bytes: int = 65536,
        seed: int = 0,
        candidates: int = 12,
    ):
        self.store = store if store is not None else SQLiteStore(path)
        self.namespace = namespace
        self.embedder = embedder if embedder is not None else HashingEmbedder()
        self.policy = create_policy(policy) if isinstance(policy, str) else policy
        self.policy.attach(self.embedder.dim)
        if max_bytes is not None and (
            isinstance(max_bytes, bool)
            or not isinstance(max_bytes, int | float)
            or not math.isfinite(max_bytes)
            or int(max_bytes) != max_bytes
            or max_bytes <= 0
        ):
            raise InvalidInput(f"max_bytes must be a positive integer or None, got {max_bytes!r}")
        self.max_bytes = max_bytes if self.policy.bounded else None
        self.sizeof = sizeof
        self.distiller = distiller if distiller is not None else ExtractiveDistiller()
        self.max_text_bytes = max_text_bytes
        self.candidates = candidates
        self.store.create_namespace(
            namespace, embedder=self.embedder.name, dim=self.embedder.dim, max_bytes=self.max_bytes
        )
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
        self._version = -1
        self._reload()
        if self.max_bytes is not None and self._used > self.max_bytes:
            self.govern()  # reopened with a smaller budget: restore it before anything else

    # ------------------------------------------------------------------ cache
    def _reload(self) -> None:
        self._entries: list[Entry] = self.store.entries(self.namespace)
        self._index = {m.id: i for i, m in enumerate(self._entries)}
        self._matrix: np.ndarray | None = None
        self._bm25: BM25Index | None = None
        self._used = sum(m.bytes for m in self._entries)
        self._version = self.store.data_version()
        self._near: dict[str, dict[str, float]] = {}
        if self._delta is not None and self._entries:
            M = self.matrix
            for lo in range(0, len(self._entries), 1024):
                S = M[lo : lo + 1024] @ M.T
                for r, c in zip(*np.nonzero(S >= self._delta), strict=True):
                    i = lo + int(r)
                    if i != int(c):
                        a, b = self._entries[i].id, self._entries[int(c)].id
                        self._near.setdefault(a, {})[b] = float(S[r, c])

    @property
    def _delta(self) -> float | None:
        d = getattr(self.policy, "redundancy_delta", None)
        return None if d is None else float(d)

    def _link(self, m: Entry, exclude: int | None = None) -> None:
        """Record m's near-duplicates (cosine >= the policy's redundancy δ) among the residents."""
        if self._delta is None:
            return
        for nb in self._near.pop(m.id, {}):
            self._near.get(nb, {}).pop(m.id, None)
        if not self._entries:
            return
        sims = self.matrix @ m.embedding
        for jj in np.nonzero(sims >= self._delta)[0]:
            j = int(jj)
            if j == exclude or self._entries[j].id == m.id:
                continue
            other = self._entries[j].id
            c = float(sims[j])
            self._near.setdefault(m.id, {})[other] = c
            self._near.setdefault(other, {})[m.id] = c

    def _sync(self) -> None:
        """Reload if another connection committed since we last looked."""
        if self.store.data_version() != self._version:
            self._reload()

    def _dirty(self) -> None:
        self._index = {m.id: i for i, m in enumerate(self._entries)}
        self._matrix = None
        self._bm25 = None
        self._used = sum(m.bytes for m in self._entries)

    @property
    def matrix(self) -> np.ndarray:
        """Embeddings of the resident entries, shape (n, d), float32, in ``entries()`` order."""
        if self._matrix is None:
            d = self.embedder.dim
            self._matrix = (
                np.vstack([m.embedding for m in self._entries]).astype(np.float32)
                if self._entries
                else np.zeros((0, d), dtype=np.float32)
            )
        return self._matrix

    # ------------------------------------------------------------------ reads
    @property
    def used_bytes(self) -> int:
        """Resident bytes ``sum(b(m))``."""
        self._sync()
        return self._used

    def __len__(self) -> int:
        self._sync()
        return len(self._entries)

    def entries(self) -> list[Entry]:
        """The resident entries (copies of the cached objects are not made; do not mutate)."""
        self._sync()
        return list(self._entries)

    def get(self, entry_id: str) -> Entry:
        """Raises :class:`EntryNotFound` for an id that is not resident."""
        self._sync()
        i = self._index.get(entry_id)
        if i is None:
            raise EntryNotFound(f"no entry {entry_id!r} in namespace {self.namespace!r}")
        return self._entries[i]

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
        """Recall up to ``k`` entries for ``query``.

        BM25 and dense cosine each propose ``candidates`` entries; reciprocal-rank fusion merges
        them; the policy reranks the pool (by default on cosine). A policy with
        ``recall_all = True`` (the oracle) reranks every resident entry instead.

        Parameters
        ----------
        query : str
        k : int, default 1
            At most this many results; fewer when fewer entries are resident or pass ``where``.
        where : callable (Entry) -> bool, optional
            A filter applied before ranking.
        observe : bool, default True
            Fold the query into the policy's running statistics (CURATOR's sketch).

        Returns
        -------
        RecallResult
            ``ids`` (length ``k' <= k``), ``scores`` of shape (k',) descending, ``entries``.

        Raises
        ------
        InvalidInput
            Empty query, or ``k`` not a positive integer.
        """
        if not isinstance(query, str) or not query.strip():
            raise InvalidInput("query must be a non-empty string")
        if not isinstance(k, int | np.integer) or isinstance(k, bool) or k < 1:
            raise InvalidInput(f"k must be a positive integer, got {k!r}")
        self._sync()
        e_q = self.embedder.embed(query)
        self.energy_bytes += len(query.encode("utf-8")) + self._used
        if observe:
            self.policy.observe_query(e_q)
        n = len(self._entries)
        if n == 0:
            return RecallResult([], np.zeros(0), [])
        if getattr(self.policy, "recall_all", False):
            pool = np.arange(n)
        else:
            if self._bm25 is None:
                self._bm25 = BM25Index()
                self._bm25.fit([m.text for m in self._entries])
            kc = max(self.candidates, int(k))  # a pool smaller than k could not return k results
            b_ids, _ = self._bm25.search(query, kc)
            d_ids, _ = dense_topk(self.matrix, e_q, kc)
            pool, _ = rrf_fuse([b_ids, d_ids], k=2 * kc)
        cands = [self._entries[i] for i in pool]
        if where is not None:
            keep = [j for j, m in enumerate(cands) if where(m)]
            pool = pool[keep]
            cands = [cands[j] for j in keep]
        if not cands:
            return RecallResult([], np.zeros(0), [])
        cos = (self.matrix[pool] @ e_q).astype(np.float64)
        scores = np.asarray(self.policy.rerank(cands, cos, e_q, self.step), dtype=np.float64)
        ok = np.isfinite(scores)  # NaN or -inf scores are never ranked
        order = [j for j in np.argsort(-np.where(ok, scores, -np.inf), kind="stable") if ok[j]][:k]
        return RecallResult([cands[j].id for j in order], scores[order], [cands[j] for j in order])

    # ------------------------------------------------------------------ writes
    def _check_text(self, text: Any) -> str:
        if isinstance(text, bytes | bytearray):
            try:
                text = bytes(text).decode("utf-8")
            except UnicodeDecodeError as e:
                raise InvalidInput(f"text is not valid UTF-8: {e}") from None
        if not isinstance(text, str):
            raise InvalidInput(f"text must be str or UTF-8 bytes, got {type(text).__name__}")
        try:
            nbytes = len(text.encode("utf-8"))
        except UnicodeEncodeError as e:  # lone surrogates
            raise InvalidInput(f"text is not valid Unicode: {e}") from None
        if not text.strip():
            raise InvalidInput("text is empty or whitespace; nothing to remember")
        if nbytes > self.max_text_bytes:
            raise InvalidInput(
                f"text is {nbytes} bytes, over max_text_bytes={self.max_text_bytes}; distill it or "
                "raise the limit"
            )
        return text

    def _new_id(self, text: str) -> str:
        return f"{_sha1(text)[:10]}{self._rng.getrandbits(32):08x}"

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
    ) -> WriteResult:
        """Offer one entry to the memory.

        The policy's admission gate runs first (CURATOR's Trust for peer and external writes);
        an identical text already resident is reinforced instead of duplicated; then the Keep
        pass restores the budget.

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
            JSON-able metadata (family, task id, ...).
        step : int, optional
            Logical time; defaults to the memory's step counter.

        Returns
        -------
        WriteResult

        Raises
        ------
        InvalidInput
            Empty, whitespace-only, oversized or invalid UTF-8 text; unknown origin or kind;
            ``meta`` that is not JSON-serialisable; a negative or non-integer ``step``.
        BudgetExceeded
            The entry alone is larger than ``max_bytes`` (logged as a rejection first).
        """
        text = self._check_text(text)
        if origin not in ORIGINS:
            raise InvalidInput(f"origin must be one of {list(ORIGINS)}, got {origin!r}")
        if kind not in ("raw", "insight", "skill"):
            raise InvalidInput(f"kind must be raw, insight or skill, got {kind!r}")
        if step is not None and (
            isinstance(step, bool) or not isinstance(step, numbers.Integral) or step < 0
        ):
            raise InvalidInput(f"step must be an integer >= 0, got {step!r}")
        st = self.step if step is None else int(step)
        meta = dict(meta or {})
        try:
            json.dumps(meta, allow_nan=False)
        except (TypeError, ValueError) as err:
            raise InvalidInput(f"meta must be JSON-serialisable (finite numbers): {err}") from None
        meta["text_sha1"] = _sha1(text)
        with self.store.transaction():
            self._sync()
            existing = next(
                (m for m in self._entries if m.meta.get("text_sha1") == meta["text_sha1"]), None
            )
            if existing is not None:
                existing.reinforcement += 1
                self.store.update(existing)
                self._log(
                    st,
                    "reinforce",
                    existing.id,
                    float("nan"),
                    f"same text written again by {origin}; reinforcement={existing.reinforcement}",
                    existing.bytes,
                )
                return WriteResult(existing.id, True, "reinforced an identical resident entry")
            e = self.embedder.embed(text)
            self.energy_bytes += len(text.encode("utf-8"))
            b = int(self.sizeof(text, meta, e))
            b0 = int(self.sizeof(raw_text, meta, e)) if raw_text else b
            if raw_bytes is not None:
                b0 = int(raw_bytes)
            eid = self._new_id(text)
            cand = Entry(
                eid,
                self.namespace,
                kind,
                text,
                b,
                max(b0, b),
                e,
                origin,
                origin_detail,
                created_step=st,
                meta=meta,
                stats=dict(stats or {}),
            )
            if self.max_bytes is not None and b > self.max_bytes:
                # Log and commit the rejection, then raise outside the transaction: raising inside
                # it would roll the 'reject' decision back with everything else.
                self._log(
                    st,
                    "reject",
                    eid,
                    float("nan"),
                    f"entry of {b} bytes is larger than the whole budget "
                    f"max_bytes={self.max_bytes}",
                    b,
                )
                oversized = BudgetExceeded(
                    f"entry of {b} bytes can never fit max_bytes={self.max_bytes}; distill it or "
                    "raise the budget"
                )
            else:
                oversized = None
                ok, score, reason = self.policy.admit(cand, self._entries, self.matrix, st)
                if not ok:
                    self._log(st, "reject", eid, score, reason, b)
                    return WriteResult(eid, False, reason, score)
                self.store.insert(cand)
                self._link(cand)
                self._entries.append(cand)
                self._dirty()
                self._log(st, "admit", eid, score, reason, b)
                g = self._govern(st)
                self._save_state()
        if oversized is not None:
            raise oversized
        return WriteResult(eid, True, reason, score, g.evicted, g.distilled)

    def record(
        self,
        task: Task,
        trajectory: Trajectory,
        *,
        used: Iterable[str] = (),
        feedback: bool = True,
    ) -> WriteResult | None:
        """Close one task: feed its outcome back to ``used`` entries, then write its experience.

        What is written depends on the policy: the raw trajectory (``form="raw"``) or its
        distilled insight (``form="insight"``, with ``b⁰`` the raw bytes); only successful
        trajectories (reward >= 0.5) are written. Returns None when nothing was written.
        """
        if feedback:
            self.feedback(used, trajectory.reward)
        if not self.policy.writes or trajectory.reward < 0.5 or not trajectory.steps:
            self._end_step()
            return None
        raw = render_raw(task, trajectory)
        meta = {"task_id": task.id, "family": task.family, "solver": trajectory.solver}
        if self.policy.form == "insight":
            text = render_insight(task.instruction, trajectory.steps[-1].action)
            res = self.write(
                text, kind="insight", raw_text=raw, meta=meta, origin_detail=trajectory.solver
            )
        else:
            res = self.write(raw, kind="raw", meta=meta, origin_detail=trajectory.solver)
        self._end_step()
        return res

    def _end_step(self) -> None:
        """Advance the logical clock and hand the step's energy proxy ε(t) to the policy (its
        virtual queue, CURATOR Eq. 6)."""
        self.policy.observe_energy(self.energy_bytes - self._energy_mark)
        self._energy_mark = self.energy_bytes
        self.step += 1

    def feedback(self, used: Iterable[str], reward: float) -> None:
        """Report a task's outcome ``reward`` in [0, 1] for the entries that were injected.

        Unknown ids (evicted since recall) are skipped: their feedback has no one to go to.

        Raises
        ------
        InvalidInput
            NaN, infinite, non-numeric or out-of-range reward, or ``used`` given as one string
            (nothing is updated).
        """
        if isinstance(used, str):
            raise InvalidInput(f"used must be a list of entry ids, not the string {used!r}")
        try:
            r = float(reward)
        except (TypeError, ValueError):
            raise InvalidInput(f"reward must be a number in [0, 1], got {reward!r}") from None
        if not math.isfinite(r) or not 0.0 <= r <= 1.0:
            raise InvalidInput(f"reward must be a finite number in [0, 1], got {reward!r}")
        with self.store.transaction():
            self._sync()
            injected = [self._entries[self._index[i]] for i in used if i in self._index]
            for m in injected:
                m.uses += 1
                m.last_used_step = self.step
                if r >= 0.5:
                    m.successes += 1
                else:
                    m.failures += 1
            self.policy.feedback(r, injected, self.step)
            for m in injected:
                self.store.update(m)
            self._save_state()

    # ------------------------------------------------------------------ share / receive
    @property
    def sketch(self) -> np.ndarray:
        """The query sketch q̄ this memory advertises to peers (CURATOR Eq. 8), shape (d,)."""
        sk = getattr(self.policy, "scorer", None)
        if sk is None:
            raise InvalidInput(f"policy {self.policy.name!r} keeps no query sketch; use curator")
        return np.asarray(sk.sketch)

    def share(
        self,
        peer_sketch: np.ndarray,
        uplink_bytes: int,
        *,
        tau: float = 0.0,
        tau_rise: float = 5e-5,
        delta: float = 0.9,
    ) -> list[Any]:
        """Select resident entries to send a peer (CURATOR Alg. 1 lines 13-17, Eq. 7-8).

        Parameters
        ----------
        peer_sketch : ndarray of shape (d,)
            The peer's advertised query sketch q̄_p.
        uplink_bytes : int
            Uplink budget L for this round, bytes.
        tau, tau_rise, delta : float
            See :func:`memcurator.policy.share.select_for_peer`.

        Returns
        -------
        list of SharedEntry
            Each selected entry is logged as a ``share`` decision with its ρ_s.

        Raises
        ------
        InvalidInput
            The policy does not score entries (only curator-style policies share).
        DimensionMismatch
            ``peer_sketch`` has the wrong dimension.
        """
        from memcurator.errors import DimensionMismatch
        from memcurator.policy.share import SharedEntry, select_for_peer

        scorer = getattr(self.policy, "scorer", None)
        if scorer is None:
            raise InvalidInput(f"policy {self.policy.name!r} cannot share; use a curator policy")
        sk = np.asarray(peer_sketch, dtype=np.float64)
        if sk.shape != (self.embedder.dim,):
            raise DimensionMismatch(
                f"peer sketch has shape {sk.shape}, expected ({self.embedder.dim},)"
            )
        if not np.all(np.isfinite(sk)):
            raise InvalidInput("peer sketch contains NaN or infinite values")
        self._sync()
        if not self._entries:
            return []
        t = scorer.score(self._entries, self.matrix, sketch=sk)
        chosen, _ = select_for_peer(
            self._entries,
            self.matrix,
            t.rho,
            t.q,
            uplink_bytes=uplink_bytes,
            tau=tau,
            tau_rise=tau_rise,
            delta=delta,
        )
        out = []
        with self.store.transaction():
            for i, thr in chosen:
                m = self._entries[i]
                out.append(
                    SharedEntry(
                        m.text, m.kind, m.bytes, float(t.q[i]), float(t.a[i]), float(t.rho[i]), m.id
                    )
                )
                self._log(
                    self.step,
                    "share",
                    m.id,
                    float(t.rho[i]),
                    f"rho_s={t.rho[i]:.3g} > tau={thr:.3g}; q={t.q[i]:.3f}, a={t.a[i]:.2f}",
                    m.bytes,
                )
        return out

    def receive(self, shared: Iterable[Any], peer: str) -> list[WriteResult]:
        """Offer entries received from ``peer`` to this memory (CURATOR Trust, Alg. 1 l. 18-22).

        Each is written with ``origin="peer"``; the sender's advertised q and a are kept (q as
        ``stats["q_adv"]``, a through ``raw_bytes = a·b``) while propensity and harm are
        recomputed locally by the policy's admission gate.
        """
        out = []
        for s in shared:
            if not isinstance(peer, str) or not peer:
                raise InvalidInput("peer must be a non-empty string")
            a = float(s.a)
            if not np.isfinite(a) or a < 1.0 or not np.isfinite(float(s.q)):
                raise InvalidInput(f"advertised q={s.q!r}, a={s.a!r} must be finite, a >= 1")
            text = self._check_text(s.text)
            e_b = int(self.sizeof(text, {}, self.embedder.embed(text)))
            out.append(
                self.write(
                    text,
                    origin="peer",
                    kind=s.kind,
                    origin_detail=peer,
                    raw_bytes=int(round(a * e_b)),
                    stats={"q_adv": float(np.clip(s.q, -1.0, 1.0))},
                    meta={"received_from": peer},
                )
            )
        return out

    def forget(self, entry_id: str, *, reason: str = "forget requested") -> None:
        """Hard-delete one entry: its text leaves the table and every index; a tombstone id
        stays in the decision log.

        Raises
        ------
        EntryNotFound
        """
        with self.store.transaction():
            self._sync()
            b = self.store.delete(self.namespace, entry_id)
            self._log(self.step, "forget", entry_id, float("nan"), reason, b)
            self._entries = [m for m in self._entries if m.id != entry_id]
            self._dirty()
        # The WAL still holds page images with the text until it is checkpointed and truncated.
        self.store.checkpoint()

    # ------------------------------------------------------------------ keep
    def govern(self) -> GovernResult:
        """Run the Keep pass now (it also runs after every admitted write)."""
        with self.store.transaction():
            self._sync()
            g = self._govern(self.step)
            self._save_state()
        return g

    def _govern(self, step: int) -> GovernResult:
        """Density/priority-ordered greedy fill of the budget (CURATOR Alg. 1 lines 7-12).

        Entries are visited by descending policy priority; one that does not fit is first offered
        to the distiller when the policy distills, and evicted if it still does not fit. NaN
        priorities rank last; equal priorities keep the newer entry first.
        """
        evicted = self._evict_victims(step)
        if self.max_bytes is None or self._used <= self.max_bytes:
            return GovernResult(evicted, [], self._used)
        self.energy_bytes += self._used
        pr = np.asarray(self.policy.priority(self._entries, self.matrix, step), dtype=np.float64)
        pr = np.where(np.isfinite(pr), pr, -np.inf)
        # ties go to the newer entry (later in insertion order): writes within one step share
        # created_step, and recency/LRU must not evict the entry just written before older ones
        order = np.lexsort((-np.arange(len(pr)), -pr))
        used = 0
        keep: list[Entry] = []
        kept_ids: set[str] = set()
        distilled: list[str] = []
        delta = self._delta
        for i in order:
            m = self._entries[i]
            dup = None
            if delta is not None:
                dup = next((nb for nb in self._near.get(m.id, {}) if nb in kept_ids), None)
            if (
                dup is None
                and used + m.bytes > self.max_bytes
                and self.policy.distills
                and m.kind == "raw"
            ):
                d = self._distill(m, step, int(i))
                if d:
                    distilled.append(m.id)
            if dup is None and used + m.bytes <= self.max_bytes:
                keep.append(m)
                kept_ids.add(m.id)
                used += m.bytes
            else:
                reason = self.policy.evict_reason()
                if dup is not None:
                    reason = (
                        f"redundant: cosine {self._near[m.id][dup]:.3f} >= delta={delta:g} "
                        f"with higher-ranked resident {dup}"
                    )
                self.store.delete(self.namespace, m.id)
                self._log(step, "evict", m.id, float(pr[i]), reason, m.bytes)
                evicted.append(m.id)
        for eid in evicted:
            for nb in self._near.pop(eid, {}):
                self._near.get(nb, {}).pop(eid, None)
        if evicted or distilled:
            keep_ids = {m.id for m in keep}
            self._entries = [m for m in self._entries if m.id in keep_ids]
            self._dirty()
        return GovernResult(evicted, distilled, self._used)

    def _evict_victims(self, step: int) -> list[str]:
        """Evict what the policy names regardless of bytes (a count capacity, a replacement).

        A policy may define ``victims(entries, E, step) -> list of (id, score, reason)``; each
        named resident is deleted and logged as ``evict`` with the policy's score and reason.
        """
        pick = getattr(self.policy, "victims", None)
        if pick is None or not self._entries:
            return []
        out: list[str] = []
        for eid, score, reason in pick(self._entries, self.matrix, step):
            i = self._index.get(eid)
            if i is None or eid in out:
                continue
            self.store.delete(self.namespace, eid)
            self._log(step, "evict", eid, float(score), reason, self._entries[i].bytes)
            out.append(eid)
        if out:
            gone = set(out)
            self._entries = [m for m in self._entries if m.id not in gone]
            self._dirty()
        return out

    def _distill(self, m: Entry, step: int, row: int | None = None) -> bool:
        text = self.distiller.distill(m.text)
        if not text:
            return False
        e = self.embedder.embed(text)
        self.energy_bytes += len(text.encode("utf-8"))
        meta = dict(m.meta)
        meta.pop("specificity", None)
        meta.pop("instr", None)
        meta["text_sha1"] = _sha1(text)
        b = int(self.sizeof(text, meta, e))
        if b >= m.bytes:
            return False
        old = m.bytes
        m.text, m.kind, m.embedding, m.meta = text, "insight", e, meta
        m.raw_bytes = max(m.raw_bytes, old)
        m.bytes = b
        self.store.update(m)
        if row is not None and self._matrix is not None:
            self._matrix[row] = e  # keep the cached matrix exact for the rest of this pass
        self._link(m, exclude=row)
        self._log(
            step,
            "distill",
            m.id,
            float("nan"),
            f"distilled before falling out: {old} -> {b} bytes (a={m.raw_bytes / b:.2f})",
            b,
        )
        return True

    # ------------------------------------------------------------------ helpers
    def _log(
        self, step: int, action: str, eid: str, score: float, reason: str, nbytes: int
    ) -> None:
        self.store.log(
            self.namespace,
            step=step,
            action=action,
            entry_id=eid,
            score=score,
            reason=reason,
            policy=self.policy.name,
            nbytes=nbytes,
        )

    def _save_state(self) -> None:
        self.store.save_state(self.namespace, self.policy.name, self.step, self.policy.state())
        self._version = self.store.data_version()

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
            f"max_bytes={self.max_bytes}, entries={len(self._entries)})"
        )
