"""HindsightSettings: one validated object, enums kept from the public API to the sampler."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from stable_baselines3.her.goal_selection_strategy import GoalSelectionStrategy as SB3Strategy

from her_wrap import HER, BitFlippingEnv, HindsightSettings
from her_wrap.core.goal_selection import GoalSelectionStrategy
from her_wrap.core.laber import LaBERmean
from her_wrap.core.settings import LaBERVariant, check_positive_int, is_real
from her_wrap.core.sum_tree import ProportionalPrioritizer, SumTree


@pytest.mark.parametrize("member", list(SB3Strategy))
def test_stable_baselines3_strategy_members_are_accepted(member: SB3Strategy):
    settings = HindsightSettings(goal_selection_strategy=member)  # type: ignore[arg-type]
    assert settings.goal_selection_strategy is GoalSelectionStrategy(member.name.lower())


def test_strategy_name_is_parsed_to_the_enum():
    assert (
        HindsightSettings(goal_selection_strategy="FINAL").goal_selection_strategy
        is GoalSelectionStrategy.FINAL
    )  # type: ignore[arg-type]


@pytest.mark.parametrize("name", ["mean", "LaBERmean", "MEAN"])
def test_laber_names_are_parsed_to_the_enum(name: str):
    assert HindsightSettings(laber=name).laber is LaBERVariant.MEAN  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"n_sampled_goal": -1}, "n_sampled_goal must be an integer >= 0"),
        ({"n_sampled_goal": 2.5}, "n_sampled_goal must be an integer >= 0"),
        ({"n_sampled_goal": True}, "n_sampled_goal must be an integer >= 0"),
        ({"goal_selection_strategy": "futur"}, "Unknown goal_selection_strategy 'futur'"),
        ({"online": "yes"}, "online must be True or False"),
        ({"laber": "median"}, "Unknown laber='median'"),
        ({"laber_m": 0}, "laber_m must be an integer >= 1"),
        ({"alpha": float("nan")}, "alpha must be >= 0"),
        ({"beta": 1.5}, r"beta must lie in \[0, 1\]"),
        ({"laber": "mean", "prioritized": True}, "Choose one of laber and prioritized"),
    ],
)
def test_bad_setting_is_refused_with_its_name(changes: dict, message: str):
    with pytest.raises(ValueError, match=message):
        HindsightSettings(**changes)


def test_settings_are_frozen():
    with pytest.raises(AttributeError):
        HindsightSettings().n_sampled_goal = 2  # type: ignore[misc]


@given(
    n_sampled_goal=st.integers(0, 16),
    strategy=st.sampled_from(list(GoalSelectionStrategy)),
    online=st.booleans(),
    laber=st.sampled_from([None, *LaBERVariant]),
    alpha=st.floats(0, 2),
    beta=st.floats(0, 1),
)
def test_to_dict_is_json_and_from_dict_gives_the_same_settings(
    n_sampled_goal, strategy, online, laber, alpha, beta
):
    settings = HindsightSettings(
        n_sampled_goal=n_sampled_goal,
        goal_selection_strategy=strategy,
        online=online,
        laber=laber,
        alpha=alpha,
        beta=beta,
    )
    assert HindsightSettings.from_dict(json.loads(json.dumps(settings.to_dict()))) == settings


def test_from_dict_names_an_unknown_key_and_the_closest_one():
    with pytest.raises(ValueError, match="'n_sample_goal' \\(did you mean 'n_sampled_goal'\\?\\)"):
        HindsightSettings.from_dict({"n_sample_goal": 4})


def test_weighted_means_prioritized_or_laber():
    assert [
        HindsightSettings().weighted,
        HindsightSettings(prioritized=True).weighted,
        HindsightSettings(laber=LaBERVariant.MAX).weighted,
    ] == [False, True, True]


def test_her_passes_one_settings_object_down_to_the_core_sampler():
    model = HER("MlpPolicy", BitFlippingEnv(n_bits=3), "dqn", 2, "episode", learning_starts=10)
    assert model.replay_buffer.replay.settings is model.settings
    assert model.settings.goal_selection_strategy is GoalSelectionStrategy.EPISODE


def test_her_hands_its_raw_values_to_the_settings_which_parse_them_once(strategy_parses):
    parsed = strategy_parses
    model = HER(
        "MlpPolicy", BitFlippingEnv(n_bits=3), "dqn", 2, "Final", laber="LaBERmax", learning_starts=10
    )
    assert parsed == ["Final"]
    assert (model.settings.goal_selection_strategy, model.settings.laber) == (
        GoalSelectionStrategy.FINAL,
        LaBERVariant.MAX,
    )


# --------------------------------------------------------------------------- the one rule for counts


@pytest.mark.parametrize("value", [1, 32, np.int64(32), np.int32(4), np.uint8(7)], ids=repr)
def test_a_count_is_a_python_or_numpy_integer(value: Any) -> None:
    assert check_positive_int(value, "batch_size") == int(value)
    assert type(check_positive_int(value, "batch_size")) is int


@pytest.mark.parametrize("value", [0, -3, True, 2.5, "8", None, np.float64(4.0)], ids=repr)
def test_anything_else_is_refused_naming_the_parameter(value: Any) -> None:
    with pytest.raises(ValueError, match=r"^batch_size must be an integer >= 1, got "):
        check_positive_int(value, "batch_size")


def test_an_integral_float_is_refused_with_the_fix() -> None:
    with pytest.raises(ValueError, match=r"got 32.0; pass int\(32.0\) = 32\.$"):
        check_positive_int(32.0, "batch_size")


@pytest.mark.parametrize(
    "build",
    [
        pytest.param(lambda: SumTree(32.0), id="sum-tree-capacity"),
        pytest.param(
            lambda: ProportionalPrioritizer(4).sample(32.0, np.random.default_rng(0)), id="per-batch"
        ),
        pytest.param(lambda: LaBERmean(32.0), id="laber-batch-size"),
        pytest.param(lambda: LaBERmean(32, 4.0), id="laber-m"),
        pytest.param(lambda: HindsightSettings(laber_m=4.0), id="settings-laber-m"),
    ],
)
def test_every_count_of_the_core_follows_the_one_rule(build: Any) -> None:
    with pytest.raises(ValueError, match=r"must be an integer >= 1.*got (32|4)\.0; pass int"):
        build()


def test_is_real_refuses_bools_and_complex_numbers() -> None:
    assert [is_real(value) for value in (1, 0.5, np.float32(2), np.int8(3), True, 1j, "1")] == [
        True,
        True,
        True,
        True,
        False,
        False,
        False,
    ]
