"""Goal selection as one concept: strategies and goal sources in one module, each value parsed once."""

from __future__ import annotations

import pytest

from her_wrap import HindsightReplayBuffer, HindsightSettings
from her_wrap.core.goal_selection import DesiredGoal, GoalSelectionStrategy, GoalSource

# ---------------------------------------------------------------- one concept, one set of members


@pytest.mark.parametrize("strategy", list(GoalSelectionStrategy))
def test_a_goal_source_that_is_a_strategy_is_that_strategy_member(strategy):
    assert getattr(GoalSource, strategy.name) is strategy


def test_the_sources_are_the_four_strategies_and_desired_goals():
    assert GoalSource.MEMBERS == (*GoalSelectionStrategy, DesiredGoal.DESIRED)


def test_goal_source_parses_names_in_any_case():
    assert [GoalSource.parse("Episode"), GoalSource("DESIRED")] == [
        GoalSelectionStrategy.EPISODE,
        DesiredGoal.DESIRED,
    ]


def test_an_unknown_goal_source_is_refused_naming_the_valid_ones():
    with pytest.raises(ValueError, match="Unknown goal source 'past' in goal_mix; use 'future', 'final'"):
        GoalSource.parse("past")


def test_a_single_strategy_reaches_the_draws_as_its_own_member():
    sources = HindsightSettings(goal_selection_strategy="final").goal_sources
    assert sources == ((GoalSelectionStrategy.FINAL, 1.0),) and sources[0][0] is GoalSelectionStrategy.FINAL


def test_a_goal_mix_holds_strategy_members_and_the_desired_source():
    mix = HindsightSettings(goal_mix={"desired": 1, "FUTURE": 3}).goal_mix
    assert mix is not None
    assert [type(source) for source, _ in mix] == [GoalSelectionStrategy, DesiredGoal]


# ---------------------------------------------------------------- parsed once


def test_hindsight_settings_parses_the_raw_strategy_once(strategy_parses):
    settings = HindsightSettings(goal_selection_strategy="EPISODE")
    assert (
        strategy_parses == ["EPISODE"] and settings.goal_selection_strategy is GoalSelectionStrategy.EPISODE
    )


def test_the_cpprb_api_buffer_hands_its_raw_strategy_to_the_settings(strategy_parses):
    buffer = HindsightReplayBuffer(
        20,
        {"obs": {"shape": 2}, "act": {"shape": 1}, "next_obs": {"shape": 2}},
        5,
        lambda s, a, g: s[:, 0],
        strategy="Final",
        additional_goals=4,
    )
    assert strategy_parses[0] == "Final"
    assert (buffer.strategy, buffer.additional_goals) == (GoalSelectionStrategy.FINAL, 1)


def test_a_buffer_shows_its_settings_fields_read_only():
    buffer = HindsightReplayBuffer(
        20,
        {"obs": {"shape": 2}, "act": {"shape": 1}, "next_obs": {"shape": 2}},
        5,
        lambda s, a, g: s[:, 0],
        online=False,
    )
    with pytest.raises(AttributeError, match="online is read from the hindsight settings"):
        buffer.online = True  # type: ignore[misc]
    assert (buffer.online, buffer.prioritized) == (buffer.settings.online, buffer.settings.prioritized)
