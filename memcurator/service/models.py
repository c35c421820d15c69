"""Request and response bodies of ``memcurator serve`` (pydantic; the OpenAPI schemas).

Every request model forbids unknown fields, so a client that sends ``namespace``,
``origin_detail`` or ``signature`` is told so (422) instead of silently ignored: the tenant and
the writer's identity come from the API key alone (:mod:`memcurator.service.keys`).

Every request model is strict: a value of the wrong JSON type is refused (422), never coerced
(``"k": "2"``, ``"reward": false``, ``"personal": "yes"``); an integer goes into a number field
as a number. Numbers, depths and sizes are bounded by :mod:`memcurator.limits`, the library's
own limits, so every transport refuses the same inputs.
"""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from memcurator import limits
from memcurator.errors import InvalidInput
from memcurator.limits import MAX_INT, MAX_RECALL_K, MAX_USER_CHARS
from memcurator.service.filters import MAX_CONDITIONS, check_condition
from memcurator.trust import state
from memcurator.types import Decision, Entry

Scalar = str | int | float | bool | None
#: meta keys the library sets itself (besides those starting with ``_``: ``_user``, ...)
RESERVED_META = frozenset({"text_sha1", "claimed_origin"})


#: a count, seq, round or byte size: a 64-bit integer >= 0
Count = Annotated[int, Field(ge=0, le=MAX_INT)]
#: the user a write or recall is scoped to
User = Annotated[str | None, Field(max_length=MAX_USER_CHARS)]


class _Request(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class Condition(_Request):
    """One ``where`` condition (:mod:`memcurator.service.filters`)."""

    field: str = Field(description="kind, origin, origin_detail, user, uses, ... or meta.<key>")
    op: Literal["eq", "ne", "in", "not_in", "lt", "le", "gt", "ge", "contains", "exists"]
    value: Scalar | list[Scalar] = None

    @field_validator("value")
    @classmethod
    def _finite(cls, v: Any) -> Any:
        vals = v if isinstance(v, list) else [v]
        if any(isinstance(x, float) and not math.isfinite(x) for x in vals):
            raise ValueError("numbers must be finite")
        return v

    def model_post_init(self, _: Any) -> None:
        try:
            check_condition(self.field, self.op, self.value)
        except InvalidInput as e:
            raise ValueError(str(e)) from None


class WriteRequest(_Request):
    """Offer one entry (:meth:`memcurator.Memory.write`); the origin is the key's own."""

    text: str = Field(min_length=1, description="What is stored and later injected (UTF-8).")
    kind: Literal["raw", "insight", "skill"] = "insight"
    origin: Literal["self", "peer", "external"] | None = Field(
        None,
        description="Defaults to the key's origin; a key may lower its own claim to "
        "'external', never raise it or claim another identity's (403).",
    )
    raw_text: str | None = None
    meta: dict[str, Any] | None = Field(
        None,
        description=f"JSON metadata: at most {limits.MAX_META_DEPTH} levels deep, "
        f"{limits.MAX_META_BYTES} bytes as JSON, integers in the 64-bit range.",
    )
    user: User = None
    personal: bool = False

    @field_validator("meta")
    @classmethod
    def _own_keys(cls, meta: dict[str, Any] | None) -> dict[str, Any] | None:
        bad = sorted(k for k in (meta or {}) if k.startswith("_") or k in RESERVED_META)
        if bad:
            raise ValueError(
                f"meta keys {bad} are memcurator's (the user scope is the user field; the "
                "origin is the key's)"
            )
        if meta is not None:  # depth, 64-bit integers, size: the library's own limits
            try:
                limits.meta_json(meta)
            except InvalidInput as e:
                raise ValueError(str(e)) from None
        return meta


class WriteResponse(BaseModel):
    """What happened to one write, and the namespace's budget right after it."""

    id: str | None
    admitted: bool
    reason: str
    score: float | None = Field(description="Admission score; null where none applies.")
    evicted: list[str]
    distilled: list[str]
    origin: str = Field(description="The origin the memory acted on (proven by signature).")
    used_bytes: int
    max_bytes: int | None


def _fields_of(model: type[BaseModel], obj: Any, **computed: Any) -> dict[str, Any]:
    """The values of ``model``'s fields: ``computed`` where given, else ``obj``'s attribute of
    the same name."""
    return {f: computed[f] if f in computed else getattr(obj, f) for f in model.model_fields}


class EntryOut(BaseModel):
    """One entry as the API shows it (no embedding)."""

    id: str
    kind: str
    text: str
    bytes: int
    raw_bytes: int
    origin: str
    origin_detail: str
    reinforcement: int
    uses: int
    successes: int
    failures: int
    created_step: int
    last_used_step: int
    user: str | None
    meta: dict[str, Any]

    @classmethod
    def of(cls, e: Entry) -> EntryOut:
        return cls(**_fields_of(cls, e, user=state.user_of(e), meta=dict(e.meta)))


class RecallRequest(_Request):
    """Recall up to ``k`` entries (:meth:`memcurator.Memory.recall`)."""

    query: str = Field(min_length=1)
    k: int = Field(1, ge=1, le=MAX_RECALL_K)
    where: list[Condition] = Field(default_factory=list, max_length=MAX_CONDITIONS)
    min_score: float | None = Field(None, ge=-1.0, le=1.0)
    user: User = None
    observe: bool = True


class RecallResponse(BaseModel):
    """``recall_id`` lets a later feedback train on this recall's features."""

    recall_id: str
    ids: list[str]
    scores: list[float]
    entries: list[EntryOut]
    step: int


class FeedbackRequest(_Request):
    """A task's outcome for the entries injected into it (:meth:`memcurator.Memory.feedback`).

    Give ``recall_id`` (the recall whose entries were injected: learners train on its
    features) or ``used`` (entry ids), not both."""

    reward: float = Field(ge=0.0, le=1.0)
    used: list[str] | None = Field(None, max_length=limits.MAX_IDS)
    recall_id: str | None = Field(None, max_length=64)


class StepIn(_Request):
    observation: str = ""
    action: str = ""


class TaskIn(_Request):
    id: str = Field(min_length=1, max_length=256)
    instruction: str = Field(min_length=1)
    family: str = Field("", max_length=256)


class TrajectoryIn(_Request):
    steps: list[StepIn] = Field(default_factory=list, max_length=1000)
    reward: float = Field(ge=0.0, le=1.0)
    solver: str = Field("local", max_length=64)
    metrics: dict[str, float] = Field(default_factory=dict)


class RecordRequest(_Request):
    """Close one task: feedback for ``used``/``recall_id``, then its experience written."""

    task: TaskIn
    trajectory: TrajectoryIn
    used: list[str] = Field(default_factory=list, max_length=limits.MAX_IDS)
    recall_id: str | None = Field(None, max_length=64)
    feedback: bool = True


class RecordResponse(BaseModel):
    written: WriteResponse | None


class UpdateRequest(_Request):
    text: str = Field(min_length=1)
    reason: str = Field("", max_length=1000)


class ForgetRequest(_Request):
    reason: str = Field("forget requested", min_length=1, max_length=1000)


class ForgetResponse(BaseModel):
    ids: list[str]
    freed: int
    erased: bool


class EntriesPage(BaseModel):
    """One page of entries, oldest first; ``next_offset`` is null on the last page."""

    total: int
    offset: int
    entries: list[EntryOut]
    next_offset: int | None


class DecisionOut(BaseModel):
    seq: int
    step: int
    action: str
    entry_id: str
    score: float | None
    reason: str
    policy: str
    bytes: int
    at: float

    @classmethod
    def of(cls, d: Decision) -> DecisionOut:
        score = None if not math.isfinite(d.score) else float(d.score)
        return cls(**_fields_of(cls, d, score=score))


class DecisionsPage(BaseModel):
    """Decisions after ``since`` (a ``seq``), oldest first; pass ``next_since`` for the next
    page (null on the last)."""

    decisions: list[DecisionOut]
    next_since: int | None


class NamespaceOut(BaseModel):
    name: str
    policy: str
    max_bytes: int | None
    used_bytes: int
    entries: int
    decisions: int
    step: int


class NamespacePatch(_Request):
    """Change the namespace's byte budget (admin scope); a smaller one evicts at once."""

    max_bytes: int = Field(gt=0, le=MAX_INT)


class Health(BaseModel):
    status: Literal["ok"]
    version: str


class Problem(BaseModel):
    """An error (RFC 9457 ``application/problem+json``); ``error`` names the memcurator
    error class (:mod:`memcurator.errors`)."""

    type: str
    title: str
    status: int
    detail: str
    error: str


# ------------------------------------------------------------------ the peer hub
class SignedOutcomeIn(_Request):
    """A sender's signed verified outcome for the entry it comes with
    (:meth:`memcurator.trust.outcome.SignedOutcome.to_wire`); the receiver verifies it."""

    claim: dict[str, str] = Field(description="task, action, verdict, state_hash, entry_sha")
    signature: tuple[str, str] = Field(strict=False, description="[key_id, mac]")


class SharedEntryIn(_Request):
    """One shared entry as a peer pushes it (:class:`memcurator.policy.share.SharedEntry`);
    no sender field: the hub names the sender from the key."""

    text: str = Field(min_length=1, max_length=1 << 18)
    kind: str = Field(max_length=16)
    bytes: Count = Field(description="The entry's stored bytes at the sender (its uplink cost)")
    q: float = Field(allow_inf_nan=False, description="Advertised helpfulness")
    a: float = Field(ge=1.0, allow_inf_nan=False, description="Advertised abstraction gain")
    rho_s: float = Field(allow_inf_nan=False, description="Share score per byte")
    source_id: str = Field(min_length=1, max_length=256)
    raw_text: str | None = Field(default=None, max_length=1 << 18)
    signature: tuple[str, str] | None = Field(
        default=None,
        strict=False,  # a JSON array [key_id, mac] becomes the tuple
        description="[key_id, mac]: the sender's MAC for the receiver",
    )
    outcome: SignedOutcomeIn | None = Field(
        default=None, description="The sender's signed verified outcome (issue 33)"
    )


class SharedEntryOut(SharedEntryIn):
    model_config = ConfigDict(extra="ignore")


class HubPush(_Request):
    """Shared entries and forget notices for the group (or one peer of it)."""

    to: str | None = Field(default=None, max_length=128, description="One peer; none: all")
    round: Count = Field(default=0, description="The sender's round counter")
    entries: list[SharedEntryIn] = Field(default_factory=list)
    notices: list[str] = Field(default_factory=list, description="Forgotten source ids")


class HubPushResponse(BaseModel):
    seq: int
    sender: str
    entries: int
    notices: int


class HubMessage(BaseModel):
    """One push as another peer pulls it; ``sender`` is the pushing key's name and every entry
    reaches the receiver with origin ``peer`` and origin detail ``sender``."""

    seq: int
    sender: str
    to: str | None
    round: int
    entries: list[SharedEntryOut]
    notices: list[str]


class HubPull(BaseModel):
    messages: list[HubMessage]
    next_since: int = Field(description="Pass as ``since`` next time")


class SketchIn(_Request):
    round: Count = 0
    sketch: list[float] = Field(min_length=1, max_length=4096)

    @field_validator("sketch")
    @classmethod
    def _finite(cls, v: list[float]) -> list[float]:
        if not all(math.isfinite(x) for x in v):
            raise ValueError("sketch values must be finite")
        return v


class SketchOut(BaseModel):
    round: int
    sketch: list[float]


#: most inputs in one ``/v1/embeddings`` request (OpenAI's limit)
MAX_EMBED_INPUTS = 2048


class EmbeddingsRequest(_Request):
    """OpenAI's ``POST /v1/embeddings`` body; text inputs only (no token arrays)."""

    input: Annotated[str, Field(min_length=1)] | list[Annotated[str, Field(min_length=1)]] = Field(
        description="One text or a list of texts (at most 2048), each non-empty."
    )
    model: str | None = Field(
        None,
        max_length=256,
        description="Accepted for compatibility and not used: the namespace has one embedder, "
        "whose name the answer's `model` gives.",
    )
    encoding_format: Literal["float", "base64"] = Field(
        "float", description="float: lists of numbers; base64: little-endian float32 bytes."
    )
    dimensions: int | None = Field(
        None,
        ge=1,
        le=1 << 20,
        description="If given, must equal the namespace's dimension (else 422).",
    )
    user: str | None = Field(None, max_length=256, description="Accepted and not used.")

    @field_validator("input")
    @classmethod
    def _not_too_many(cls, v: str | list[str]) -> str | list[str]:
        if isinstance(v, list) and not 1 <= len(v) <= MAX_EMBED_INPUTS:
            raise ValueError(f"input must hold 1 to {MAX_EMBED_INPUTS} texts, got {len(v)}")
        return v


class EmbeddingOut(BaseModel):
    """One embedding, at the position of its input."""

    object: Literal["embedding"] = "embedding"
    index: int
    embedding: list[float] | str = Field(description="Numbers, or base64 float32 bytes.")


class EmbeddingsUsage(BaseModel):
    """Tokens counted as memcurator's word tokens (:func:`memcurator.embed.text.word_tokens`),
    not a model tokenizer's."""

    prompt_tokens: int
    total_tokens: int


class EmbeddingsResponse(BaseModel):
    """OpenAI's embeddings answer; ``model`` is the name of the namespace's embedder."""

    object: Literal["list"] = "list"
    data: list[EmbeddingOut]
    model: str
    usage: EmbeddingsUsage


__all__ = [
    "Condition",
    "DecisionOut",
    "DecisionsPage",
    "EntriesPage",
    "EmbeddingOut",
    "EmbeddingsRequest",
    "EmbeddingsResponse",
    "EmbeddingsUsage",
    "EntryOut",
    "FeedbackRequest",
    "ForgetRequest",
    "ForgetResponse",
    "Health",
    "HubMessage",
    "HubPull",
    "HubPush",
    "HubPushResponse",
    "MAX_EMBED_INPUTS",
    "NamespaceOut",
    "NamespacePatch",
    "Problem",
    "RecallRequest",
    "RecallResponse",
    "RecordRequest",
    "RecordResponse",
    "SharedEntryIn",
    "SignedOutcomeIn",
    "SharedEntryOut",
    "SketchIn",
    "SketchOut",
    "TaskIn",
    "TrajectoryIn",
    "UpdateRequest",
    "WriteRequest",
    "WriteResponse",
]
