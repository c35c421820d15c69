"""Unicode-aware tokenization: every script is represented, ASCII features are unchanged."""

from __future__ import annotations

import re

import numpy as np
import pytest

from memcurator import Memory
from memcurator.embed import HashingEmbedder, has_content
from memcurator.embed.text import runs, word_tokens
from memcurator.policy import create_policy
from memcurator.retrieve import BM25Index, dense_topk
from memcurator.retrieve.bm25 import tokenize

ENGLISH_SQL = [
    "Task: count orders per region\nAction: SELECT region, COUNT(*) FROM orders GROUP BY region;",
    "Task: insert a payment of 75 for member 102\nAction: INSERT INTO payments VALUES (102, 75);",
    "Task: delete employees hired before 2020\nAction: DELETE FROM employees WHERE year < 2020;",
    "Task: list the ten most expensive products\nAction: SELECT * FROM products LIMIT 10;",
]

# (entry written, query of the same meaning in the same script)
SCRIPTS = {
    "chinese": ("用户喜欢喝绿茶", "用户喜欢喝什么茶"),
    "japanese": ("ユーザーは緑茶が好きです", "ユーザーはどんなお茶が好きですか"),
    "korean": ("사용자는 녹차를 좋아합니다", "사용자는 어떤 차를 좋아합니까"),
    "arabic": ("المستخدم يحب الشاي الأخضر", "ما الشاي الذي يحبه المستخدم"),
    "russian": ("Пользователь любит зелёный чай", "Какой чай любит пользователь"),
    "thai": ("ผู้ใช้ชอบชาเขียว", "ผู้ใช้ชอบชาอะไร"),
    "mixed": ("SQL查询: 统计 orders 的行数", "怎么统计 orders 行数"),
}


def _old_features(emb: HashingEmbedder, text: str) -> list[tuple[str, float]]:
    """The features before Unicode support ([a-z0-9_]+ over text.lower())."""
    words = re.findall(r"[a-z0-9_]+", text.lower())
    feats = [("w:" + w, emb.word_weight) for w in words]
    lo, hi = emb.ngram_range
    for w in words:
        p = f" {w} "
        for n in range(lo, hi + 1):
            feats += [("c:" + p[i : i + n], 1.0) for i in range(len(p) - n + 1)]
    return feats


@pytest.mark.parametrize("text", ENGLISH_SQL + ["MiXeD Case_42 x-y 'q' 3.5", ""])
def test_ascii_features_and_tokens_are_unchanged(text: str) -> None:
    emb = HashingEmbedder()
    assert emb.features(text) == _old_features(emb, text)
    assert tokenize(text) == re.findall(r"[a-z0-9_]+", text.lower())


@pytest.mark.parametrize("script", sorted(SCRIPTS))
def test_every_script_embeds_to_a_unit_vector(script: str) -> None:
    entry, query = SCRIPTS[script]
    for t in (entry, query):
        assert has_content(t)
        v = HashingEmbedder().embed(t)
        assert np.isfinite(v).all()
        assert float(np.linalg.norm(v)) == pytest.approx(1.0, abs=1e-5)
        assert tokenize(t)


@pytest.mark.parametrize("script", sorted(SCRIPTS))
def test_same_script_entry_is_recalled_first_among_english_sql(script: str) -> None:
    entry, query = SCRIPTS[script]
    others = [e for s, (e, _) in SCRIPTS.items() if s != script]
    texts = ENGLISH_SQL + others + [entry]
    target = len(texts) - 1
    emb = HashingEmbedder()
    ids, _ = dense_topk(emb.embed_many(texts), emb.embed(query), 3)
    assert int(ids[0]) == target
    idx = BM25Index()
    idx.fit(texts)
    b_ids, _ = idx.search(query, 3)
    assert int(b_ids[0]) == target


def test_issue_9_chinese_entry_is_recalled_by_memory() -> None:
    m = Memory(":memory:", policy=create_policy("keep-all"))
    m.write("Task: count orders\nAction: SELECT 1;")
    for t in ENGLISH_SQL:
        m.write(t)
    zh = m.write("用户喜欢喝绿茶")
    assert m.recall("用户喜欢喝什么茶").ids == [zh.id]


@pytest.mark.parametrize("text", ["👍 !!!", "👍👍", "🍵☕ → €", "  \n\t", "!?.,;", ""])
def test_content_free_text_has_no_content_and_a_zero_vector(text: str) -> None:
    assert not has_content(text)
    assert not np.any(HashingEmbedder().embed(text))
    assert tokenize(text) == []


def test_has_content_rejects_non_strings() -> None:
    assert not has_content(None)  # type: ignore[arg-type]
    assert not has_content(b"abc")  # type: ignore[arg-type]


def test_nfkc_and_casefold_unify_variants() -> None:
    assert word_tokens("ＳＥＬＥＣＴ １") == ["select", "1"]
    assert word_tokens("STRASSE") == word_tokens("Straße")
    assert word_tokens("ПРИВЕТ") == word_tokens("привет")
    e = HashingEmbedder()
    assert np.allclose(e.embed("ＣＯＵＮＴ ｏｒｄｅｒｓ"), e.embed("count orders"))


def test_no_space_scripts_give_unigrams_and_bigrams_and_marks_stay_in_words() -> None:
    assert word_tokens("绿茶") == ["绿", "茶", "绿茶"]
    assert [r.spaced for r in runs("SQL查询 ok")] == [True, False, True]
    # Devanagari vowel signs are combining marks: one word, not split at each sign
    assert word_tokens("हिन्दी भाषा") == ["हिन्दी", "भाषा"]
    # Thai: one no-space run including its vowel marks
    (r,) = runs("ผู้ใช้")
    assert not r.spaced and r.text == "ผู้ใช้"
