import pytest

from memcurator.errors import InvalidInput, UnknownName
from memcurator.llm.pricing import LOCAL, Price, cost_usd, price_table


def test_local_costs_nothing_and_expert_is_a_parameter():
    assert cost_usd("gemma-3-270m-q4_k_m", 10_000, 500) == 0.0
    table = price_table(expert=Price(10.0, 30.0))
    assert cost_usd("expert", 1_000_000, 1_000_000, table=table) == pytest.approx(40.0)
    assert cost_usd("expert", 2_000, 100) == pytest.approx(2_000 * 3e-6 + 100 * 15e-6)


def test_unknown_model_is_an_error_unless_default():
    with pytest.raises(UnknownName, match="'expert'") as e:
        cost_usd("gtp-4o", 1, 1)
    assert isinstance(e.value, KeyError)
    assert cost_usd("gtp-4o", 1, 1, default=LOCAL) == 0.0
    assert cost_usd("x", 10**6, 0, default=Price(1.5, 0)) == pytest.approx(1.5)


def test_bad_prices_and_tokens():
    with pytest.raises(InvalidInput):
        Price(-1.0, 0.0)
    with pytest.raises(InvalidInput):
        Price(float("nan"), 0.0)
    with pytest.raises(InvalidInput):
        cost_usd("local", -1, 0)
