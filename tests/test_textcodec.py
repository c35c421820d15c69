"""Entry text compressed with a per-namespace zstd dictionary (memcurator.store.textcodec)."""

from __future__ import annotations

import pytest

from memcurator.errors import InvalidInput
from memcurator.store.textcodec import MIN_SAMPLES, RAW, ZSTD_DICT, TextCodec, stored_bytes


def _sql(i: int) -> str:
    return (
        f"Task: How many orders did customer {i} place after day {i % 30}?\n"
        f"Observation: Table orders(order_id INT, customer_id INT, day INT, total INT)\n"
        f"Example rows: ({1000 + i}, {i}, {i % 30}, {i * 7 % 100})\n"
        f"Action: SELECT COUNT(*) FROM orders WHERE customer_id = {i} AND day > {i % 30};"
    )


KINDS = {
    "sql": [_sql(i) for i in range(300)],
    "cjk": [f"用户 {i} 喜欢喝绿茶，每周三在 {i % 9} 号店买 {i % 5} 杯" for i in range(300)],
    "emoji": [f"note {i}: ship it 🚀 when tests pass ✅ (build #{i})" for i in range(300)],
    "mixed": [
        f"Task: Résumé für Kunde {i} — Straße {i % 40}\nAction: print({i})" for i in range(300)
    ],
}


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_round_trip_and_savings_per_kind(kind: str) -> None:
    texts = KINDS[kind]
    codec = TextCodec.train(texts[:200], dict_bytes=2048)
    for t in texts:  # the held-out 100 too
        blob = codec.encode(t)
        assert codec.decode(blob) == t
        assert len(blob) <= len(t.encode("utf-8")) + 1  # never more than the tag byte
    held = texts[200:]
    z, d = stored_bytes(codec, held)
    assert d == len(codec.dictionary or b"") > 0
    assert z < 0.8 * sum(len(t.encode("utf-8")) for t in held)


def test_texts_written_before_the_dictionary_stay_readable() -> None:
    before = TextCodec()
    old = [before.encode(t) for t in KINDS["sql"][:5]]
    assert {b[0] for b in old} == {RAW}
    after = TextCodec.train(KINDS["sql"], dict_bytes=2048)
    assert [after.decode(b) for b in old] == KINDS["sql"][:5]
    assert after.encode(KINDS["sql"][7])[0] == ZSTD_DICT


def test_a_compressed_text_needs_its_dictionary() -> None:
    codec = TextCodec.train(KINDS["sql"], dict_bytes=2048)
    blob = codec.encode(KINDS["sql"][3])
    with pytest.raises(InvalidInput, match="dictionary this codec does not have"):
        TextCodec().decode(blob)
    with pytest.raises(InvalidInput, match="newer reader"):
        codec.decode(bytes([9]) + b"x")
    with pytest.raises(InvalidInput, match="empty"):
        codec.decode(b"")


def test_training_needs_enough_entries() -> None:
    with pytest.raises(InvalidInput, match=f"at least {MIN_SAMPLES}"):
        TextCodec.train(KINDS["sql"][: MIN_SAMPLES - 1])


def test_incompressible_text_is_stored_as_is() -> None:
    codec = TextCodec.train(KINDS["sql"], dict_bytes=2048)
    t = "x"
    assert codec.encode(t) == bytes([RAW]) + b"x"
