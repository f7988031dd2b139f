"""The relabeling buffer against a small model, over random runs (hypothesis' stateful testing).

A run adds steps of 1-4 env columns in lockstep (each column ends its episode when the run says so, or
before the episode would outgrow its ring), samples, pickles and restores the buffer, and wraps its ring
many times. Every observation is tagged ``[episode, step]`` (``tests/core_trajectories.py``), so after
every rule the model can check what the buffer holds and what a sample hands out:

- it holds exactly the transitions of the episodes whose rows the ring has not overwritten;
- a sampled transition is one of them, its next observation the one after it;
- a row kept as stored carries its episode's desired goal and stored reward;
- a relabeled goal is an achieved goal of the same episode (``future``: at or after the transition's
  next observation; ``final``: the episode's last stored one), or, for ``random``, of any held episode;
  its reward is ``compute_reward`` of the next achieved goal against it;
- sampling changes nothing stored, and a restored pickle holds what the buffer held.
"""

from __future__ import annotations

import pickle

import numpy as np
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from tests.core_trajectories import (
    STRATEGIES,
    Oracle,
    StoredEpisode,
    _stack,
    assert_same_state,
    make_replay,
    observation_of,
    reward_fn,
    snapshot,
    step_of,
    stored_goal,
    stored_reward,
)
from tests.core_trajectories import Trajectory as Shape


class BufferAgainstModel(RuleBasedStateMachine):
    @initialize(
        n_envs=st.integers(1, 4),
        rows=st.integers(4, 10),
        strategy=st.sampled_from(STRATEGIES),
        seed=st.integers(0, 2**16),
    )
    def build(self, n_envs: int, rows: int, strategy: str, seed: int) -> None:
        self.n_envs, self.rows, self.strategy = n_envs, rows, strategy
        shape = Shape("state-machine", capacity=rows * n_envs, lengths=((1,),) * n_envs, n_steps=0)
        self.buffer = make_replay(shape, goal_selection_strategy=strategy, n_sampled_goal=4, seed=seed)
        self.oracle = Oracle(n_rows=rows, written=[0] * n_envs)
        self.open: list[int | None] = [None] * n_envs  # the episode in progress in each column
        self.started = [0] * n_envs

    # ------------------------------------------------------------------ rules

    @rule(ends=st.lists(st.booleans(), min_size=4, max_size=4))
    def step(self, ends: list[bool]) -> None:
        now = []
        for column in range(self.n_envs):
            episode = self.open[column]
            if episode is None:
                episode = 1000 * column + self.started[column]
                self.started[column] += 1
                self.open[column] = episode
                self.oracle.episodes[episode] = StoredEpisode(
                    column=column, start=self.oracle.written[column]
                )
                self.oracle.written[column] += 1
            record = self.oracle.episodes[episode]
            step = record.steps
            # An episode never outgrows its ring: it ends at the latest with rows - 1 rows stored.
            end = ends[column] or step + 3 >= self.rows
            now.append((episode, step, step + 1 if end else step + 2))
            record.steps += 1
            record.closed = end
            self.oracle.written[column] += 1
            if end:
                self.open[column] = None
        self.buffer.add(
            _stack([observation_of(episode, step) for episode, step, _ in now]),
            _stack([observation_of(episode, step + 1) for episode, step, _ in now]),
            _stack([step_of(episode, step, length) for episode, step, length in now]),
            np.array([step == length - 1 for _, step, length in now]),
        )

    @precondition(lambda self: len(self.buffer) > 0)
    @rule(batch_size=st.integers(1, 32))
    def sample(self, batch_size: int) -> None:
        before = snapshot(self.buffer)
        batch = self.buffer.sample(batch_size)
        assert_same_state(before, snapshot(self.buffer))
        live = self.oracle.live()
        for row in range(batch_size):
            episode, step = (int(value) for value in batch["observation"][row])
            assert episode in live, f"transition of an overwritten or unknown episode {episode}"
            assert step < self.oracle.episodes[episode].steps
            assert batch["next_observation"][row].tolist() == [episode, step + 1]
            goal = batch["desired_goal"][row]
            if not batch["relabeled"][row]:
                assert goal.tolist() == stored_goal(episode).tolist()
                assert batch["reward"][row] == stored_reward(episode, step)
                continue
            self._check_relabeled(episode, step, int(goal[0]), int(goal[1]), live)
            expected = reward_fn(batch["next_achieved_goal"][row][None], goal[None], None)[0]
            assert batch["reward"][row] == expected

    def _check_relabeled(
        self, episode: int, step: int, goal_episode: int, goal_step: int, live: set[int]
    ) -> None:
        stored = self.oracle.episodes[episode].steps
        if self.strategy == "random":
            assert goal_episode in live and 1 <= goal_step <= self.oracle.episodes[goal_episode].steps
            return
        assert goal_episode == episode, f"{self.strategy} goal from episode {goal_episode}, not {episode}"
        if self.strategy == "future":
            assert step + 1 <= goal_step <= stored
        elif self.strategy == "final":
            assert goal_step == stored
        else:
            assert 1 <= goal_step <= stored

    @rule()
    def save_and_restore(self) -> None:
        before = snapshot(self.buffer)
        self.buffer = pickle.loads(pickle.dumps(self.buffer))
        assert_same_state(before, snapshot(self.buffer))

    # ------------------------------------------------------------------ invariants

    @invariant()
    def holds_the_transitions_of_the_live_episodes(self) -> None:
        if hasattr(self, "buffer"):
            assert len(self.buffer) == self.oracle.n_transitions()


TestBufferAgainstModel = BufferAgainstModel.TestCase
TestBufferAgainstModel.settings = settings(
    max_examples=60, stateful_step_count=50, suppress_health_check=[HealthCheck.too_slow]
)
