"""Named trajectories for the core's tests, and an oracle of what a buffer fed with one must hold.

Every observation is tagged with where it came from: ``observation = achieved_goal = [episode_id, step]``
(``step`` is the step of the observation: ``o_0`` of episode 7 is ``[7, 0]``, its final observation after
``T`` steps is ``[7, T]``). A relabeled goal ``[g, s]`` therefore says: episode ``g``, the observation that
followed step ``s - 1``. Episode ids are ``100 * column + index in the column``, so an id also names its
env column. Stored goals, rewards and flags are tags too, never values a relabeling could produce:

- desired goal of episode ``e``: ``[-(e + 1), -1]`` (no achieved goal has a negative step);
- reward of step ``t``: ``1000 * e + t + 0.5`` (``reward_fn`` only returns 0 or -1);
- the last step of an even episode is ``terminated``, the last step of an odd one ``truncated``.

Columns step in lockstep, as a VecEnv does: each column cycles through its list of episode lengths for
``n_steps`` steps, and a column whose last episode is unfinished leaves it in progress.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from her_wrap.core.replay import HindsightReplay
from her_wrap.core.settings import SETTING_NAMES, HindsightSettings
from her_wrap.core.storage import EpisodeStorage, FieldSpec

OBSERVATION_FIELDS = {
    "observation": FieldSpec((2,), np.float64),
    "achieved_goal": FieldSpec((2,), np.float64),
    "desired_goal": FieldSpec((2,), np.float64),
}
STEP_FIELDS = {
    "action": FieldSpec((1,), np.float32),
    "reward": FieldSpec((), np.float64),
    "terminated": FieldSpec((), np.bool_),
    "truncated": FieldSpec((), np.bool_),
}
STRATEGIES = ["future", "final", "episode", "random"]


def reward_fn(achieved_goal: np.ndarray, desired_goal: np.ndarray, infos: Any) -> np.ndarray:
    """Sparse goal reward, vectorized: 0 where the goal is reached, -1 elsewhere."""
    return -np.any(achieved_goal != desired_goal, axis=-1).astype(np.float64)


def terminated_fn(achieved_goal: np.ndarray, desired_goal: np.ndarray, infos: Any) -> np.ndarray:
    """Terminate where the goal is reached, vectorized."""
    return np.all(achieved_goal == desired_goal, axis=-1)


def episode_id(column: int, index: int) -> int:
    return 100 * column + index


def stored_goal(episode: int) -> np.ndarray:
    return np.array([-(episode + 1), -1], dtype=np.float64)


def stored_reward(episode: int, step: int) -> float:
    return 1000.0 * episode + step + 0.5


def stored_terminated(episode: int, step: int, length: int) -> bool:
    return step == length - 1 and episode % 2 == 0


def stored_truncated(episode: int, step: int, length: int) -> bool:
    return step == length - 1 and episode % 2 == 1


@dataclass(frozen=True)
class Trajectory:
    """What is fed to a buffer.

    :param name: test id
    :param capacity: buffer capacity over all columns (``capacity // n_envs`` rows per column)
    :param lengths: per column, the episode lengths it cycles through
    :param n_steps: steps fed to every column
    :param first_index: index of the first episode in each column (to feed a second trajectory after a
        first one with distinct episode ids)
    """

    name: str
    capacity: int
    lengths: tuple[tuple[int, ...], ...]
    n_steps: int
    first_index: int = 0

    @property
    def n_envs(self) -> int:
        return len(self.lengths)

    def schedule(self, column: int) -> list[tuple[int, int, int]]:
        """``(episode_id, step, episode_length)`` of each step fed to ``column``."""
        out = []
        index, step = 0, 0
        cycle = self.lengths[column]
        for _ in range(self.n_steps):
            length = cycle[index % len(cycle)]
            out.append((episode_id(column, self.first_index + index), step, length))
            step += 1
            if step == length:
                index, step = index + 1, 0
        return out

    def finished_episodes(self, column: int) -> list[tuple[int, int]]:
        """``(episode_id, length)`` of each episode ``column`` finishes, in order."""
        return [(episode, length) for episode, step, length in self.schedule(column) if step == length - 1]


TRAJECTORIES = [
    # One episode of one step: rows o_0, o_1.
    Trajectory("single_step_episode", capacity=4, lengths=((1,),), n_steps=1),
    # Episodes of 3 steps take 4 rows of a 10-row ring: episode 2 takes rows 8, 9, 0, 1 and kills episode 0.
    Trajectory("episode_crossing_ring_end", capacity=10, lengths=((3,),), n_steps=9),
    # Column 0 alternates 2- and 3-step episodes, column 1 runs 5-step ones; both end with one in progress.
    Trajectory("two_env_columns_interleaved", capacity=32, lengths=((2, 3), (5,)), n_steps=11),
    # Episode 0 (rows 0-6) loses rows 0-2 to episode 2; its rows 3-6 still hold data but must never be used.
    Trajectory("overwritten_episode", capacity=10, lengths=((6, 2, 2),), n_steps=10),
    # A finished 3-step episode, then one of 10 steps of which 4 are stored so far.
    Trajectory("episode_in_progress", capacity=20, lengths=((3, 10),), n_steps=7),
    # Three columns of 1- to 3-step episodes wrapping a 16-row ring many times.
    Trajectory("many_short_episodes", capacity=48, lengths=((1,), (1, 2), (2, 1, 3)), n_steps=40),
]
TRAJECTORY_IDS = [trajectory.name for trajectory in TRAJECTORIES]


@dataclass
class StoredEpisode:
    """Oracle record of one episode: column, first absolute row, steps stored, whether it ended."""

    column: int
    start: int
    steps: int = 0
    closed: bool = False


@dataclass
class Oracle:
    """What a buffer fed with a trajectory must hold, computed without looking at the buffer."""

    n_rows: int
    written: list[int]
    episodes: dict[int, StoredEpisode] = field(default_factory=dict)

    def is_live(self, episode: int) -> bool:
        """Whether the episode's first row is still in the ring (so all of it is)."""
        record = self.episodes[episode]
        return record.start >= self.written[record.column] - self.n_rows

    def live(self, *, finished_only: bool = False) -> set[int]:
        return {
            episode
            for episode, record in self.episodes.items()
            if self.is_live(episode) and (record.closed or not finished_only)
        }

    def n_transitions(self, *, finished_only: bool = False) -> int:
        return sum(self.episodes[episode].steps for episode in self.live(finished_only=finished_only))

    def slot(self, episode: int, step: int, n_envs: int) -> int:
        """Flat slot (``ring_row * n_envs + column``) of a transition, as ``indexes`` of a sample name it."""
        record = self.episodes[episode]
        return (record.start + step) % self.n_rows * n_envs + record.column

    def live_slots(self, n_envs: int, *, finished_only: bool = False) -> dict[int, tuple[int, int]]:
        """Slot of every sampleable transition, mapped to its ``(episode, step)``."""
        return {
            self.slot(episode, step, n_envs): (episode, step)
            for episode in self.live(finished_only=finished_only)
            for step in range(self.episodes[episode].steps)
        }


def tag(episode: int, step: int) -> np.ndarray:
    return np.array([episode, step], dtype=np.float64)


def observation_of(episode: int, step: int) -> dict[str, np.ndarray]:
    return {
        "observation": tag(episode, step),
        "achieved_goal": tag(episode, step),
        "desired_goal": stored_goal(episode),
    }


def step_of(episode: int, step: int, length: int) -> dict[str, Any]:
    return {
        "action": np.array([step], dtype=np.float32),
        "reward": stored_reward(episode, step),
        "terminated": stored_terminated(episode, step, length),
        "truncated": stored_truncated(episode, step, length),
    }


def _stack(per_column: list[Mapping[str, Any]]) -> dict[str, np.ndarray]:
    return {name: np.stack([np.asarray(values[name]) for values in per_column]) for name in per_column[0]}


def feed(
    buffer: EpisodeStorage | HindsightReplay, trajectory: Trajectory, oracle: Oracle | None = None
) -> Oracle:
    """Add the trajectory step by step (all columns at once, as a VecEnv) and return its oracle.

    :param oracle: the oracle of what the buffer already holds (its episodes must have ended), to go on from
    """
    if oracle is None:
        oracle = Oracle(n_rows=trajectory.capacity // trajectory.n_envs, written=[0] * trajectory.n_envs)
    schedules = [trajectory.schedule(column) for column in range(trajectory.n_envs)]
    for moment in range(trajectory.n_steps):
        now = [schedule[moment] for schedule in schedules]
        for column, (episode, step, _) in enumerate(now):
            if step == 0:
                oracle.episodes[episode] = StoredEpisode(column=column, start=oracle.written[column])
                oracle.written[column] += 1
            oracle.episodes[episode].steps += 1
            oracle.written[column] += 1
        done = np.array([step == length - 1 for _, step, length in now])
        for episode, step, length in now:
            oracle.episodes[episode].closed = step == length - 1
        buffer.add(
            _stack([observation_of(episode, step) for episode, step, _ in now]),
            _stack([observation_of(episode, step + 1) for episode, step, _ in now]),
            _stack([step_of(episode, step, length) for episode, step, length in now]),
            done,
        )
    return oracle


def episode_arrays(episode: int, length: int) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Observations ``o_0 .. o_T`` and steps of one finished episode, for ``add_episode``."""
    observations = _stack([observation_of(episode, step) for step in range(length + 1)])
    steps = _stack([step_of(episode, step, length) for step in range(length)])
    return observations, steps


def make_storage(trajectory: Trajectory) -> EpisodeStorage:
    return EpisodeStorage(
        trajectory.capacity,
        trajectory.n_envs,
        observation_fields=OBSERVATION_FIELDS,
        step_fields=STEP_FIELDS,
    )


def make_replay(trajectory: Trajectory, **options: Any) -> HindsightReplay:
    """A HindsightReplay shaped for the trajectory; ``options`` override the defaults (seed 0, k = 4).

    Options named like a :class:`HindsightSettings` field (``n_sampled_goal``, ``online``...) go into its
    settings, the others to the constructor.
    """
    settings = {key: options.pop(key) for key in list(options) if key in SETTING_NAMES}
    defaults: dict[str, Any] = {"reward_fn": reward_fn, "seed": 0}
    return HindsightReplay(
        trajectory.capacity,
        observation_fields=OBSERVATION_FIELDS,
        step_fields=STEP_FIELDS,
        n_envs=trajectory.n_envs,
        settings=HindsightSettings(**settings),
        **{**defaults, **options},
    )


def fed_replay(trajectory: Trajectory, **options: Any) -> tuple[HindsightReplay, Oracle]:
    replay = make_replay(trajectory, **options)
    return replay, feed(replay, trajectory)


def snapshot(buffer: EpisodeStorage | HindsightReplay) -> dict[str, Any]:
    """Copies of everything a buffer stores (and its priorities), to compare before and after a call."""
    storage = buffer.storage if isinstance(buffer, HindsightReplay) else buffer
    state: dict[str, Any] = {
        **{f"observation/{name}": array.copy() for name, array in storage.observations.items()},
        **{f"step/{name}": array.copy() for name, array in storage.steps.items()},
        "step_index": storage.step_index.copy(),
        "episode_length": storage.episode_length.copy(),
        "written": storage.written.copy(),
        "open_start": storage.open_start.copy(),
        "n_transitions": np.array([storage.n_transitions, storage.n_finished_transitions]),
    }
    if isinstance(buffer, HindsightReplay) and buffer.prioritizer is not None:
        slots = np.arange(buffer.prioritizer.capacity)
        state["priorities"] = np.array([buffer.prioritizer.total(), buffer.prioritizer.max_priority])
        if buffer.prioritizer.total() > 0:
            state["probabilities"] = buffer.prioritizer.probabilities(slots)
    return state


def assert_same_state(before: Mapping[str, Any], after: Mapping[str, Any]) -> None:
    """Every stored array is exactly as it was."""
    assert before.keys() == after.keys()
    changed = [name for name in before if not np.array_equal(before[name], after[name])]
    assert changed == [], f"changed: {changed}"
