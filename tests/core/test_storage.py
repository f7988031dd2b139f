"""Specification of the episode storage (her_wrap.core.storage.EpisodeStorage): ring geometry and bad input.

Trajectories and their oracle come from ``core_trajectories``: observations are tagged ``[episode, step]``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from core_trajectories import (
    OBSERVATION_FIELDS,
    STEP_FIELDS,
    TRAJECTORIES,
    TRAJECTORY_IDS,
    Oracle,
    Trajectory,
    assert_same_state,
    episode_arrays,
    feed,
    make_storage,
    observation_of,
    snapshot,
    step_of,
)

from her_wrap.core.storage import EpisodeStorage, FieldSpec

ON_TRAJECTORIES = pytest.mark.parametrize("trajectory", TRAJECTORIES, ids=TRAJECTORY_IDS)
# Trajectories whose columns end with a finished episode, so add_episode can store them too.
FINISHED = [
    *(
        t
        for t in TRAJECTORIES
        if t.name in {"single_step_episode", "episode_crossing_ring_end", "overwritten_episode"}
    ),
    Trajectory("two_columns_wrapping", capacity=24, lengths=((2, 3), (5,)), n_steps=10),
]


def _fed(trajectory: Trajectory) -> tuple[EpisodeStorage, Oracle]:
    storage = make_storage(trajectory)
    return storage, feed(storage, trajectory)


# --------------------------------------------------------------------------------------------------
# Geometry
# --------------------------------------------------------------------------------------------------


@ON_TRAJECTORIES
def test_every_transition_of_a_live_episode_reads_back_exactly(trajectory: Trajectory) -> None:
    storage, oracle = _fed(trajectory)
    slots = oracle.live_slots(trajectory.n_envs)
    rings, columns = np.divmod(np.array(list(slots)), trajectory.n_envs)
    expected: dict[str, list] = {}
    for episode, step in slots.values():
        length = oracle.episodes[episode].steps if oracle.episodes[episode].closed else -1
        row = {
            **observation_of(episode, step),
            **{f"next_{name}": value for name, value in observation_of(episode, step + 1).items()},
            **step_of(episode, step, length),
        }
        for name, value in row.items():
            expected.setdefault(name, []).append(value)
    batch = storage.gather(rings, columns)
    assert {name: np.asarray(values).tolist() for name, values in expected.items()} == {
        name: batch[name].tolist() for name in expected
    }


def test_an_episode_crossing_the_ring_end_continues_at_row_0() -> None:
    """Episodes of 3 steps take 4 rows: episode 2 takes absolute rows 8-11, ring rows 8, 9, 0, 1."""
    storage, _ = _fed(TRAJECTORIES[1])
    achieved = storage.observations["achieved_goal"][[8, 9, 0, 1], 0]
    np.testing.assert_array_equal(achieved, [[2, 0], [2, 1], [2, 2], [2, 3]])


def test_a_final_observation_has_its_own_row_and_no_step() -> None:
    storage, _ = _fed(TRAJECTORIES[0])
    assert storage.step_index[:2, 0].tolist() == [0, -1]


@pytest.mark.parametrize("trajectory", FINISHED, ids=str)
def test_add_episode_stores_what_step_by_step_add_stores(trajectory: Trajectory) -> None:
    step_by_step, _ = _fed(trajectory)
    whole = make_storage(trajectory)
    for column in range(trajectory.n_envs):
        for episode, length in trajectory.finished_episodes(column):
            whole.add_episode(column, *episode_arrays(episode, length))
    assert_same_state(snapshot(step_by_step), snapshot(whole))


@ON_TRAJECTORIES
def test_n_transitions_counts_transitions_of_episodes_not_overwritten(trajectory: Trajectory) -> None:
    storage, oracle = _fed(trajectory)
    assert storage.n_transitions == oracle.n_transitions()


@ON_TRAJECTORIES
def test_n_finished_transitions_counts_only_ended_episodes(trajectory: Trajectory) -> None:
    storage, oracle = _fed(trajectory)
    assert storage.n_finished_transitions == oracle.n_transitions(finished_only=True)


@ON_TRAJECTORIES
def test_is_transition_marks_exactly_the_live_transitions(trajectory: Trajectory) -> None:
    storage, oracle = _fed(trajectory)
    rings, columns = np.divmod(np.arange(storage.n_rows * storage.n_envs), storage.n_envs)
    marked = np.flatnonzero(storage.is_transition(rings, columns))
    assert marked.tolist() == sorted(oracle.live_slots(trajectory.n_envs))


def test_end_episode_makes_an_open_episode_a_finished_one() -> None:
    storage, _ = _fed(Trajectory("open", capacity=20, lengths=((10,),), n_steps=4))
    storage.end_episode(0)
    assert storage.n_finished_transitions == 4


def test_clear_forgets_every_transition() -> None:
    storage, _ = _fed(TRAJECTORIES[5])
    storage.clear()
    rings, columns = np.divmod(np.arange(storage.n_rows * storage.n_envs), storage.n_envs)
    assert (storage.n_transitions, storage.is_transition(rings, columns).any()) == (0, False)


# --------------------------------------------------------------------------------------------------
# Episodes longer than a column
# --------------------------------------------------------------------------------------------------


def _step_call(episodes: list[tuple[int, int]]) -> dict[str, Any]:
    """Arguments of one ``add`` call: step ``t`` of episode ``e`` in each column (never done)."""
    stack = lambda rows: {name: np.stack([np.asarray(row[name]) for row in rows]) for name in rows[0]}  # noqa: E731
    return {
        "observation": stack([observation_of(e, t) for e, t in episodes]),
        "next_observation": stack([observation_of(e, t + 1) for e, t in episodes]),
        "step": stack([step_of(e, t, 99) for e, t in episodes]),
        "done": np.zeros(len(episodes), dtype=bool),
    }


def _full_column() -> tuple[EpisodeStorage, dict[str, Any]]:
    """Two columns of 8 rows: column 1's open episode has 7 steps (8 rows); its 8th step does not fit."""
    trajectory = Trajectory("filling", capacity=16, lengths=((2,), (20,)), n_steps=7)
    storage, _ = _fed(trajectory)
    return storage, _step_call([(3, 1), (101, 7)])


def test_an_episode_longer_than_a_column_is_refused_naming_the_fix() -> None:
    storage, call = _full_column()
    with pytest.raises(ValueError, match=r"raise the buffer capacity"):
        storage.add(**call)


def test_an_episode_longer_than_a_column_leaves_every_column_as_it_was() -> None:
    storage, call = _full_column()
    before = snapshot(storage)
    with pytest.raises(ValueError):
        storage.add(**call)
    assert_same_state(before, snapshot(storage))


def test_add_episode_longer_than_a_column_is_refused_naming_the_fix() -> None:
    storage, _ = _fed(TRAJECTORIES[1])
    with pytest.raises(ValueError, match="raise the capacity"):
        storage.add_episode(0, *episode_arrays(50, 10))


def test_add_episode_longer_than_a_column_leaves_the_data_intact() -> None:
    storage, _ = _fed(TRAJECTORIES[1])
    before = snapshot(storage)
    with pytest.raises(ValueError):
        storage.add_episode(0, *episode_arrays(50, 10))
    assert_same_state(before, snapshot(storage))


@pytest.mark.parametrize(("capacity", "n_envs"), [(3, 2), (1, 1), (10, 0)])
def test_a_capacity_below_two_rows_per_column_is_refused(capacity: int, n_envs: int) -> None:
    with pytest.raises(ValueError, match="n_envs"):
        EpisodeStorage(
            capacity, n_envs, observation_fields={"o": FieldSpec()}, step_fields={"a": FieldSpec()}
        )


# --------------------------------------------------------------------------------------------------
# Wrong field names and shapes
# --------------------------------------------------------------------------------------------------


def _without(fields: dict[str, np.ndarray], name: str) -> dict[str, np.ndarray]:
    return {key: value for key, value in fields.items() if key != name}


def _reshaped(fields: dict[str, np.ndarray], name: str, shape: tuple[int, ...]) -> dict[str, np.ndarray]:
    return {**fields, name: np.zeros(shape)}


BAD_ADD: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
    "missing_observation_field": lambda c: {**c, "observation": _without(c["observation"], "achieved_goal")},
    "unknown_step_field": lambda c: {**c, "step": {**c["step"], "velocity": np.zeros((2, 1))}},
    "wrong_goal_shape": lambda c: {
        **c,
        "next_observation": _reshaped(c["next_observation"], "achieved_goal", (2, 3)),
    },
    "wrong_n_envs": lambda c: {**c, "step": _reshaped(c["step"], "action", (3, 1))},
    "wrong_done_size": lambda c: {**c, "done": np.zeros(3, dtype=bool)},
}


def _two_columns_midway() -> tuple[EpisodeStorage, dict[str, Any]]:
    trajectory = Trajectory("midway", capacity=24, lengths=((3,), (5,)), n_steps=4)
    storage, _ = _fed(trajectory)
    return storage, _step_call([(1, 1), (100, 4)])


@pytest.mark.parametrize("case", BAD_ADD, ids=str)
def test_add_with_wrong_fields_is_refused(case: str) -> None:
    storage, call = _two_columns_midway()
    with pytest.raises(ValueError):
        storage.add(**BAD_ADD[case](call))


@pytest.mark.parametrize("case", BAD_ADD, ids=str)
def test_add_with_wrong_fields_leaves_the_data_intact(case: str) -> None:
    storage, call = _two_columns_midway()
    before = snapshot(storage)
    with pytest.raises(ValueError):
        storage.add(**BAD_ADD[case](call))
    assert_same_state(before, snapshot(storage))


def test_add_with_wrong_fields_names_the_expected_fields() -> None:
    storage, call = _two_columns_midway()
    with pytest.raises(ValueError, match=r"pass exactly \['achieved_goal', 'desired_goal', 'observation'\]"):
        storage.add(**BAD_ADD["missing_observation_field"](call))


EpisodeArgs = tuple[dict[str, np.ndarray], dict[str, np.ndarray]]
BAD_EPISODE: dict[str, Callable[[EpisodeArgs], EpisodeArgs]] = {
    "unknown_observation_field": lambda e: ({**e[0], "velocity": np.zeros((4, 1))}, e[1]),
    "missing_step_field": lambda e: (e[0], _without(e[1], "reward")),
    "wrong_goal_shape": lambda e: (_reshaped(e[0], "achieved_goal", (4, 3)), e[1]),
    "observations_not_t_plus_1": lambda e: (_reshaped(e[0], "observation", (3, 2)), e[1]),
    "step_lengths_differ": lambda e: (e[0], _reshaped(e[1], "action", (2, 1))),
}


def _crossing_and_one_episode() -> tuple[EpisodeStorage, EpisodeArgs]:
    """The ring is full: a new 3-step episode would overwrite episode 1's first row."""
    storage, _ = _fed(TRAJECTORIES[1])
    return storage, episode_arrays(3, 3)


@pytest.mark.parametrize("case", BAD_EPISODE, ids=str)
def test_add_episode_with_wrong_fields_is_refused(case: str) -> None:
    storage, arrays = _crossing_and_one_episode()
    with pytest.raises(ValueError):
        storage.add_episode(0, *BAD_EPISODE[case](arrays))


@pytest.mark.parametrize("case", BAD_EPISODE, ids=str)
def test_add_episode_with_wrong_fields_leaves_the_data_intact(case: str) -> None:
    storage, arrays = _crossing_and_one_episode()
    before = snapshot(storage)
    with pytest.raises(ValueError):
        storage.add_episode(0, *BAD_EPISODE[case](arrays))
    assert_same_state(before, snapshot(storage))


def test_add_episode_refuses_a_column_with_an_episode_in_progress() -> None:
    storage, _ = _fed(Trajectory("open", capacity=20, lengths=((10,),), n_steps=4))
    with pytest.raises(ValueError, match="in progress"):
        storage.add_episode(0, *episode_arrays(5, 2))


def test_a_scalar_field_given_as_n_envs_by_1_is_stored() -> None:
    storage, call = _two_columns_midway()
    call["step"]["reward"] = np.array([[7.0], [8.0]])
    storage.add(**call)
    rings = (storage.written - 2) % storage.n_rows  # the step just added, in each column
    assert storage.steps["reward"][rings, [0, 1]].tolist() == [7.0, 8.0]


def test_add_episode_takes_a_scalar_field_given_as_t_by_1() -> None:
    storage, (observations, steps) = _crossing_and_one_episode()
    storage.add_episode(0, observations, {**steps, "reward": steps["reward"][:, None]})
    rings = (storage.written[0] - 4 + np.arange(3)) % storage.n_rows
    np.testing.assert_array_equal(storage.steps["reward"][rings, 0], steps["reward"])


def _storing_infos(trajectory: Trajectory) -> EpisodeStorage:
    storage = EpisodeStorage(
        trajectory.capacity,
        trajectory.n_envs,
        observation_fields=OBSERVATION_FIELDS,
        step_fields=STEP_FIELDS,
        store_infos=True,
    )
    feed(storage, trajectory)
    return storage


def test_add_with_an_info_per_column_missing_leaves_the_data_intact() -> None:
    storage = _storing_infos(Trajectory("midway", capacity=24, lengths=((3,), (5,)), n_steps=4))
    before = snapshot(storage)
    with pytest.raises(ValueError, match="one info dict per env column"):
        storage.add(**_step_call([(1, 1), (100, 4)]), infos=[{}])
    assert_same_state(before, snapshot(storage))


def test_add_episode_with_an_info_per_step_missing_leaves_the_data_intact() -> None:
    storage = _storing_infos(TRAJECTORIES[1])
    before = snapshot(storage)
    with pytest.raises(ValueError, match="one info dict per step"):
        storage.add_episode(0, *episode_arrays(3, 3), infos=[{}, {}])
    assert_same_state(before, snapshot(storage))
