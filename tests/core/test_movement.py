"""Drawing transitions by how far their episode moved its achieved goal (``movement_clip``)."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from core_trajectories import OBSERVATION_FIELDS, STEP_FIELDS, reward_fn

from her_wrap import HindsightSettings
from her_wrap.core.replay import HindsightReplay

CLIP, FLOOR = 1.0, 0.1


def make_replay(capacity: int = 400, n_envs: int = 1, online: bool = True, **settings) -> HindsightReplay:
    options = {"movement_clip": CLIP, "movement_floor": FLOOR, "online": online, **settings}
    return HindsightReplay(
        capacity,
        observation_fields=OBSERVATION_FIELDS,
        step_fields=STEP_FIELDS,
        n_envs=n_envs,
        settings=HindsightSettings(**options),
        reward_fn=reward_fn,
        seed=0,
    )


def add_step(
    replay: HindsightReplay, goals: np.ndarray, next_goals: np.ndarray, done: bool, tag: float
) -> None:
    """One step of every column: achieved goals move from ``goals`` to ``next_goals`` (n_envs x 2)."""
    n = replay.storage.n_envs

    def observation(achieved: np.ndarray) -> dict[str, np.ndarray]:
        return {"observation": achieved, "achieved_goal": achieved, "desired_goal": np.full((n, 2), 9.0)}

    steps = {
        "action": np.full((n, 1), tag, np.float32),
        "reward": np.full(n, -1.0),
        "terminated": np.zeros(n, bool),
        "truncated": np.full(n, done),
    }
    replay.add(observation(goals), observation(next_goals), steps, np.full(n, done))


def add_episode(replay: HindsightReplay, path: list[float], tag: float, *, finish: bool = True) -> None:
    """An episode in column 0 whose achieved goal moves along x by each of ``path``'s steps."""
    x = 0.0
    for index, move in enumerate(path):
        before, x = x, x + move
        done = finish and index == len(path) - 1
        add_step(replay, np.array([[before, 0.0]]), np.array([[x, 0.0]]), done, tag)


def share_of(replay: HindsightReplay, tag: float, n: int = 20_000) -> float:
    return float((replay.sample(n)["action"][:, 0] == tag).mean())


@pytest.mark.parametrize("online", [True, False])
def test_an_episode_is_drawn_in_proportion_to_floor_plus_its_clipped_path(online):
    replay = make_replay(online=online)
    add_episode(replay, [0.0] * 4, tag=1.0)  # never moves: weight FLOOR
    add_episode(replay, [0.1, 0.0, 0.2, 0.0], tag=2.0)  # path 0.3: weight 0.4
    add_episode(replay, [3.0, 4.0, 0.0, 0.0], tag=3.0)  # path 7, clipped to 1: weight 1.1
    total = 4 * (FLOOR + 0.4 + 1.1)
    for tag, weight in ((1.0, FLOOR), (2.0, 0.4), (3.0, 1.1)):
        assert share_of(replay, tag) == pytest.approx(4 * weight / total, abs=0.015)


def test_uniform_without_movement_clip():
    replay = make_replay(movement_clip=None)
    add_episode(replay, [0.0] * 4, tag=1.0)
    add_episode(replay, [3.0, 4.0, 0.0, 0.0], tag=3.0)
    assert replay.movement is None and replay.prioritizer is None
    assert share_of(replay, 1.0) == pytest.approx(0.5, abs=0.015)


def test_an_episode_in_progress_weighs_its_path_so_far_and_only_online():
    online = make_replay()
    add_episode(online, [0.0] * 4, tag=1.0)
    add_episode(online, [0.5, 0.5], tag=2.0, finish=False)  # two steps stored: paths 0.5 and 1.0
    weights = {1.0: 4 * FLOOR, 2.0: (FLOOR + 0.5) + (FLOOR + 1.0)}
    assert share_of(online, 2.0) == pytest.approx(weights[2.0] / sum(weights.values()), abs=0.015)
    offline = make_replay(online=False)
    add_episode(offline, [0.0] * 4, tag=1.0)
    add_episode(offline, [0.5, 0.5], tag=2.0, finish=False)
    assert share_of(offline, 2.0) == 0.0


def test_when_an_episode_ends_all_its_transitions_take_the_whole_path():
    replay = make_replay()
    add_episode(replay, [0.0, 0.0, 0.0, 0.9], tag=2.0)  # its first steps moved nothing, its last 0.9
    add_episode(replay, [0.0] * 4, tag=1.0)
    # Its four transitions weigh FLOOR + 0.9 each (had only the last step counted: 3 FLOOR + 1.0).
    assert share_of(replay, 2.0) == pytest.approx(4 * 1.0 / (4 * 1.0 + 4 * FLOOR), abs=0.015)


def test_the_path_is_the_distance_between_goals_in_every_dimension_and_columns_keep_their_own():
    replay = make_replay(n_envs=2, movement_clip=10.0)
    zero = np.zeros((2, 2))
    # column 0 moves (3, 4): distance 5; column 1 does not move
    add_step(replay, zero, np.array([[3.0, 4.0], [0.0, 0.0]]), True, tag=1.0)
    slots = np.array([0, 1])  # ring row 0 of columns 0 and 1
    assert replay.movement.path[slots] == pytest.approx([5.0, 0.0])
    assert replay.prioritizer.probabilities(slots) == pytest.approx([5.1 / 5.2, 0.1 / 5.2])


def test_transitions_the_ring_overwrote_are_never_drawn():
    replay = make_replay(capacity=10)
    add_episode(replay, [5.0, 5.0, 5.0, 5.0], tag=3.0)  # heavy, then overwritten by the episodes below
    for _ in range(2):
        add_episode(replay, [0.0] * 4, tag=1.0)
    assert share_of(replay, 3.0, 2000) == 0.0
    assert len(replay) == 8  # two episodes of 4 steps, 5 rows each, fill the 10 rows


def test_clear_forgets_the_paths():
    replay = make_replay()
    add_episode(replay, [0.5, 0.5], tag=2.0, finish=False)
    replay.clear()
    add_episode(replay, [0.0, 0.0], tag=1.0)
    assert replay.movement.path.max() == 0.0
    assert share_of(replay, 1.0, 500) == 1.0


def test_weights_survive_pickling():
    replay = make_replay()
    add_episode(replay, [0.0] * 4, tag=1.0)
    add_episode(replay, [1.0, 0.0, 0.0, 0.0], tag=3.0)
    copy = pickle.loads(pickle.dumps(replay))
    add_episode(copy, [0.0] * 4, tag=4.0)
    weights = {1.0: 4 * FLOOR, 3.0: 4 * (FLOOR + 1.0), 4.0: 4 * FLOOR}
    assert share_of(copy, 3.0) == pytest.approx(weights[3.0] / sum(weights.values()), abs=0.015)


def test_samples_carry_no_importance_weights_and_priorities_cannot_be_set():
    replay = make_replay()
    add_episode(replay, [0.0, 1.0], tag=1.0)
    assert "weights" not in replay.sample(8)
    with pytest.raises(ValueError, match="instead of movement_clip"):
        replay.update_priorities(np.array([0]), np.array([1.0]))


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"movement_clip": 0.0}, "movement_clip must be a number > 0"),
        ({"movement_clip": float("nan")}, "movement_clip must be a number > 0"),
        ({"movement_clip": "0.2"}, "movement_clip must be a number > 0"),
        ({"movement_clip": 0.2, "movement_floor": 0}, "movement_floor must be a number > 0"),
        ({"movement_clip": 0.2, "movement_floor": True}, "movement_floor must be a number > 0"),
        ({"movement_clip": 0.2, "prioritized": True}, "Choose one of movement_clip and prioritized"),
    ],
)
def test_bad_settings_are_refused_with_the_fix(options, message):
    with pytest.raises(ValueError, match=message):
        HindsightSettings(**options)


def test_settings_round_trip_through_plain_values():
    settings = HindsightSettings(movement_clip=0.2, movement_floor=0.01)
    assert HindsightSettings.from_dict(settings.to_dict()) == settings
    assert HindsightSettings.from_dict({}).movement_clip is None
