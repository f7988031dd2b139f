"""Exploration with uniformly random actions (the HER paper's DDPG explores this way besides its noise).

:class:`RandomActionExploration` is mixed into a learner class (by
:func:`~her_wrap.sb3.train_steps.train_from_source_class`): at each exploration step, each env's action is
replaced, with probability :attr:`~her_wrap.sb3.update_options.UpdateOptions.random_action_prob`, by one
drawn uniformly from the action space. The policy's prediction of those few actions runs on one torch
thread (:func:`one_torch_thread`), through the lean forward of :mod:`her_wrap.sb3.fast_actor` where it
covers the actor (DDPG's and TD3's), with the same actions as SB3's ``predict``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import numpy as np
import torch as th

from her_wrap.sb3.fast_actor import exploration_actions
from her_wrap.sb3.update_options import UpdateOptions


@contextlib.contextmanager
def one_torch_thread() -> Iterator[None]:
    """Run the block on one torch intra-op thread, then give torch back its thread count.

    A forward pass of a few observations (one row per env) is too small to split. On a loaded machine two
    threads made it 2-3x slower than one, waiting for a second thread that had lost its core; on an idle
    machine the two ran alike (docs/manipulation.md, "Using both cores"). The gradient steps, on batches of
    thousands, keep every thread.
    """
    threads = th.get_num_threads()
    if threads == 1:
        yield
        return
    th.set_num_threads(1)
    try:
        yield
    finally:
        th.set_num_threads(threads)


class RandomActionExploration:
    """Makes a continuous-action learner's exploration take uniformly random actions now and then.

    The learner's own ``_sample_action`` (policy, action noise, ``learning_starts``) picks the actions
    first, predicting on one torch thread (:func:`one_torch_thread`) and, for the actors it covers, by
    :func:`~her_wrap.sb3.fast_actor.exploration_actions`; then each env's action is replaced with
    probability ``update_options.random_action_prob``. The draws come from a generator seeded with the
    learner's ``seed``, so a seeded run repeats.
    """

    update_options: UpdateOptions = UpdateOptions()
    _random_action_rng: np.random.Generator | None = None
    _exploring: bool = False

    def _sample_action(
        self, learning_starts: int, action_noise: Any = None, n_envs: int = 1
    ) -> tuple[np.ndarray, np.ndarray]:
        self._exploring = True
        try:
            with one_torch_thread():
                actions, buffer_actions = super()._sample_action(learning_starts, action_noise, n_envs)  # type: ignore[misc]
        finally:
            self._exploring = False
        probability = self.update_options.random_action_prob
        if probability > 0:
            if self._random_action_rng is None:
                self._random_action_rng = np.random.default_rng(self.seed)  # type: ignore[attr-defined]
            rng = self._random_action_rng
            replaced = rng.random(n_envs) < probability
            if replaced.any():
                # Uniform in the policy's [-1, 1] scale (what the buffer stores), then in the env's bounds.
                random_scaled = rng.uniform(-1.0, 1.0, size=(int(replaced.sum()), *buffer_actions.shape[1:]))
                buffer_actions = buffer_actions.copy()
                buffer_actions[replaced] = random_scaled.astype(buffer_actions.dtype)
                actions = self.policy.unscale_action(buffer_actions)  # type: ignore[attr-defined]
        return actions, buffer_actions

    def predict(
        self,
        observation: Any,
        state: Any = None,
        episode_start: Any = None,
        deterministic: bool = False,
    ) -> tuple[Any, Any]:
        """The learner's ``predict``; while exploring, the lean forward where it covers the actor."""
        if self._exploring and state is None:
            actions = exploration_actions(self.policy, observation)  # type: ignore[attr-defined]
            if actions is not None:
                return actions, None
        return super().predict(observation, state, episode_start, deterministic)  # type: ignore[misc]

    def _excluded_save_params(self) -> list[str]:
        # The generator is seeded again after a load: never pickle it into the model zip.
        return [*super()._excluded_save_params(), "_random_action_rng", "_exploring"]  # type: ignore[misc]
