"""Hindsight replay: episode storage, a sampler, goal relabeling and n-step returns, numpy only.

This is the engine under :class:`her_wrap.HindsightReplayBuffer` (the cpprb-compatible buffer) and
:class:`her_wrap.HindsightExperienceReplayWrapper` (the stable-baselines3 buffer). It can be used from
any framework: everything it needs from outside comes in as plain callables.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from her_wrap.core.goal_selection import (
    GoalSelectionStrategy,
    select_goal_rows,
    select_goals_from_sources,
)
from her_wrap.core.n_step import add_n_step_returns
from her_wrap.core.samplers import MovementWeights, Sampler, make_sampler
from her_wrap.core.settings import HindsightSettings, SettingsField, check_positive_int
from her_wrap.core.storage import AddReport, EpisodeStorage, FieldSpec
from her_wrap.core.sum_tree import ProportionalPrioritizer

RewardFn = Callable[[np.ndarray, np.ndarray, Any], np.ndarray]
"""``reward_fn(achieved_goal, desired_goal, infos) -> rewards``, vectorized over a batch (gymnasium-robotics'
``compute_reward`` signature). ``infos`` is an object array of info dicts, or None when infos are not stored."""

TerminatedFn = Callable[[np.ndarray, np.ndarray, Any], np.ndarray]
"""``terminated_fn(achieved_goal, desired_goal, infos) -> bool array``, same conventions as :data:`RewardFn`."""


def as_generator(seed: int | np.random.Generator | None) -> np.random.Generator:
    """A ``np.random.Generator`` from a seed, a generator (used as is) or None (fresh entropy)."""
    return seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)


class HindsightReplay:
    """Stores episodes and samples batches whose goals are relabeled in hindsight.

    Semantics (each one tested):

    - The new goal of transition ``t`` is the achieved goal of the observation that followed a step
      ``j`` of the same episode and env column, ``j`` chosen by ``goal_selection_strategy`` (see
      :class:`GoalSelectionStrategy`; ``random`` takes any stored step).
    - ``online=True`` (default): a share ``k / (k + 1)`` of every batch (``k = n_sampled_goal``, rounded
      down) gets new goals drawn at sample time, so every sample sees fresh goals. Episodes in progress
      can be sampled; their ``future`` and ``final`` goals come from the steps stored so far.
    - ``online=False``: goals are drawn once, when an episode ends, ``k`` per transition (stable-baselines
      v2 and cpprb); a sample picks the original goal or one of the ``k`` frozen ones uniformly, so the
      relabeled share is ``k / (k + 1)`` in expectation. Only ended episodes are sampled. Only the goal
      indexes are stored, not ``k`` copies of the transition.
    - The reward of a relabeled transition is ``reward_fn(next_achieved_goal[t], new_goal, infos[t])``,
      one vectorized call per batch; its ``terminated`` is ``terminated_fn(...)`` for the new goal, or
      False when no ``terminated_fn`` is given (it is never copied from the original goal). Every other
      step field, truncation included, is kept as stored.
    - Sampling costs O(batch): no pass over the stored data.
    - Every draw comes from one seeded ``np.random.Generator``: the same seed gives the same samples.
    - A sample is made of new arrays: changing it never changes the stored data.

    :param capacity: rows over all env columns (one per step plus one per episode), see :class:`EpisodeStorage`
    :param observation_fields: fields of an observation, e.g. observation / achieved_goal / desired_goal
    :param step_fields: fields of a step, e.g. action / reward / terminated / truncated
    :param n_envs: env columns whose episodes interleave
    :param settings: ``k`` (``n_sampled_goal``, 0 disables relabeling), the goal selection strategy,
        online or offline relabeling, n-step returns, and how rows are drawn: uniformly, prioritized
        (``alpha``, and ``beta`` when :meth:`sample` gets none) or by movement weights, see
        :func:`~her_wrap.core.samplers.make_sampler` (default: ``HindsightSettings()``: future, k = 4,
        online, uniform). LaBER subsamples a uniform large batch above this class.
    :param achieved_goal_key: observation field holding the achieved goal (or what ``goal_fn`` maps to one)
    :param desired_goal_key: field the new goal is written to: an observation field (then its ``next_``
        value gets it too) or a step field
    :param reward_key: step field receiving recomputed rewards (when ``reward_fn`` is given)
    :param terminated_key: step field receiving recomputed terminations, if the storage has it; None keeps
        every stored field as it is (cpprb's buffer recomputes only the reward)
    :param reward_fn: vectorized reward, see :data:`RewardFn`; None leaves rewards to the caller
    :param terminated_fn: vectorized termination for a goal, see :data:`TerminatedFn`
    :param goal_fn: maps the ``achieved_goal_key`` field to a goal (identity when None)
    :param store_infos: keep info dicts (by reference) and pass them to ``reward_fn``
    :param discount: ``gamma`` of n-step returns (needed when ``settings.n_steps > 1``)
    :param eps: added to priorities before the exponent (prioritized only)
    :param seed: seed or generator for every random draw
    """

    def __init__(
        self,
        capacity: int,
        *,
        observation_fields: Mapping[str, FieldSpec],
        step_fields: Mapping[str, FieldSpec],
        n_envs: int = 1,
        settings: HindsightSettings | None = None,
        achieved_goal_key: str = "achieved_goal",
        desired_goal_key: str = "desired_goal",
        reward_key: str = "reward",
        terminated_key: str | None = "terminated",
        reward_fn: RewardFn | None = None,
        terminated_fn: TerminatedFn | None = None,
        goal_fn: Callable[[np.ndarray], np.ndarray] | None = None,
        store_infos: bool = False,
        discount: float | None = None,
        eps: float = 1e-6,
        seed: int | np.random.Generator | None = None,
    ) -> None:
        self.settings = HindsightSettings() if settings is None else settings
        if not isinstance(self.settings, HindsightSettings):
            raise TypeError(
                f"settings must be a HindsightSettings, got {type(settings).__name__}: "
                "build one with HindsightSettings(n_sampled_goal=..., goal_selection_strategy=...)."
            )
        if achieved_goal_key not in observation_fields:
            raise ValueError(
                f"achieved_goal_key {achieved_goal_key!r} is not an observation field; "
                f"pick one of {sorted(observation_fields)}."
            )
        if desired_goal_key not in observation_fields and desired_goal_key not in step_fields:
            raise ValueError(
                f"desired_goal_key {desired_goal_key!r} is neither an observation nor a step field; "
                f"pick one of {sorted([*observation_fields, *step_fields])}."
            )
        if reward_fn is not None and reward_key not in step_fields:
            raise ValueError(f"reward_key {reward_key!r} must name a step field to hold recomputed rewards.")
        self.achieved_goal_key = achieved_goal_key
        self.desired_goal_key = desired_goal_key
        self.goal_in_observation = desired_goal_key in observation_fields
        self.reward_key = reward_key
        self.terminated_key = terminated_key
        self.reward_fn = reward_fn
        self.terminated_fn = terminated_fn
        self.goal_fn = goal_fn
        self.discount = discount
        self.rng = as_generator(seed)
        self.storage = EpisodeStorage(
            capacity,
            n_envs,
            observation_fields=observation_fields,
            step_fields=step_fields,
            store_infos=store_infos,
        )
        #: draws the rows of each batch: uniform, prioritized or movement-weighted (see :mod:`~her_wrap.core.samplers`)
        self.sampler: Sampler = make_sampler(
            self.settings, self.storage, eps=eps, achieved_goal_key=achieved_goal_key, goal_fn=goal_fn
        )
        # Offline relabeling: the absolute goal row (times n_envs, plus column) of each frozen goal.
        self.frozen_goals: np.ndarray | None = None
        if not self.online and self.n_sampled_goal > 0:
            self.frozen_goals = np.zeros(
                (self.storage.n_rows, self.storage.n_envs, self.n_sampled_goal), np.int64
            )

    n_sampled_goal: SettingsField[int] = SettingsField("n_sampled_goal", "``k`` of :attr:`settings`.")
    strategy: SettingsField[GoalSelectionStrategy] = SettingsField(
        "goal_selection_strategy", "The goal selection strategy of :attr:`settings`."
    )
    online: SettingsField[bool] = SettingsField(
        "online", "Whether goals are relabeled at sample time (see :attr:`settings`)."
    )

    # ------------------------------------------------------------------ adding
    # Each write takes the arguments of the EpisodeStorage method of its name, then updates the side
    # tables (priorities, frozen goals) from the report that method returns.
    def add(self, *args: Any, **kwargs: Any) -> None:
        """Store one step of every env column; see :meth:`EpisodeStorage.add`."""
        self._after_add(self.storage.add(*args, **kwargs))

    def add_steps(self, *args: Any, **kwargs: Any) -> None:
        """Store ``S`` consecutive steps of every env column at once; see :meth:`EpisodeStorage.add_steps`."""
        self._after_add(self.storage.add_steps(*args, **kwargs))

    def add_episode(self, *args: Any, **kwargs: Any) -> None:
        """Store a finished episode in one column; see :meth:`EpisodeStorage.add_episode`."""
        self._after_add(self.storage.add_episode(*args, **kwargs))

    def end_episode(self, column: int) -> None:
        """Close the episode in progress in ``column``."""
        self._after_add(self.storage.end_episode(column))

    def _after_add(self, report: AddReport) -> None:
        self.sampler.after_add(report)
        if self.frozen_goals is not None:
            for column, start, length in report.finished:
                self._freeze_goals(np.arange(start, start + length) % self.storage.n_rows, column)

    @property
    def prioritizer(self) -> ProportionalPrioritizer | None:
        """The sum tree of prioritized or movement-weighted draws (None for uniform draws)."""
        return self.sampler.prioritizer

    @property
    def movement(self) -> MovementWeights | None:
        """The achieved goals' paths of movement-weighted draws (``settings.movement_clip``), else None."""
        return self.sampler.movement

    def read_achieved_goals(self, rings: np.ndarray, columns: np.ndarray) -> np.ndarray:
        """The achieved goals stored at ring rows ``rings`` of ``columns``, as goals (``goal_fn`` applied)."""
        return self.goal_of(self.storage.read_field(self.achieved_goal_key, rings, columns))

    def _freeze_goals(self, rings: np.ndarray, column: int) -> None:
        assert self.frozen_goals is not None
        k = self.n_sampled_goal
        repeated = np.repeat(rings, k)
        columns = np.full(repeated.size, column, dtype=np.int64)
        goal_rings, goal_columns = select_goal_rows(self.storage, repeated, columns, self.strategy, self.rng)
        goal_abs = self.storage.absolute_rows(goal_rings, goal_columns)
        self.frozen_goals[rings, column] = (goal_abs * self.storage.n_envs + goal_columns).reshape(-1, k)

    # ------------------------------------------------------------------ sampling
    def __len__(self) -> int:
        """Transitions that can be sampled now."""
        return len(self.sampler)

    def sample(self, batch_size: int, beta: float | None = None) -> dict[str, np.ndarray]:
        """Draw a batch, relabeled in hindsight.

        Steps: the sampler draws the rows, the storage copies them, a share of them gets new goals with
        recomputed rewards and terminations, then (``settings.n_steps > 1``) n-step returns.

        :param batch_size: transitions to draw (with replacement)
        :param beta: importance-sampling exponent (prioritized only); ``settings.beta`` when None
        :return: new arrays: every observation field and its ``next_`` value, every step field, ``infos``
            when stored, ``indexes`` (flat slots ``ring_row * n_envs + column``, for
            :meth:`update_priorities`), ``relabeled`` (bool), ``discounts`` (n-step only) and, when
            prioritized, ``weights``
        """
        batch_size = check_positive_int(batch_size, "batch_size")
        draw = self.sampler.draw(batch_size, self.rng, self.settings.beta if beta is None else beta)
        rings, columns = draw.rings, draw.columns
        batch = self.storage.gather(rings, columns)
        relabeled, rows, goal_rings, goal_columns, from_desired = self._choose_relabels(rings, columns)
        if goal_rings.size:
            self._relabel(batch, rows, goal_rings, goal_columns, from_desired)
        if self.settings.n_steps > 1:
            add_n_step_returns(batch, self, rings, columns, relabeled)
        batch["indexes"] = draw.indexes
        batch["relabeled"] = relabeled
        if draw.weights is not None:
            batch["weights"] = draw.weights
        return batch

    def _choose_relabels(
        self, rings: np.ndarray, columns: np.ndarray
    ) -> tuple[np.ndarray, slice | np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
        """Which rows of a batch get new goals, and the rows those goals come from.

        :return: the relabeled mask, the same rows as a selector (a slice when they are a prefix), the
            ring rows and columns of the goals' rows, and a mask of those whose goal is the desired goal
            stored there rather than the achieved one (None when every goal is achieved)
        """
        size = rings.size
        relabeled = np.zeros(size, dtype=bool)
        k = self.n_sampled_goal
        if k == 0:
            empty = np.empty(0, dtype=np.int64)
            return relabeled, relabeled, empty, empty, None
        if self.frozen_goals is None:
            # The rows of a batch are independent draws in random order, so its first k / (k + 1) are a
            # uniformly chosen share; a slice keeps the relabeling writes cheap.
            prefix = slice(0, size * k // (k + 1))
            relabeled[prefix] = True
            goal_rings, goal_columns, from_desired = select_goals_from_sources(
                self.storage, rings[prefix], columns[prefix], self.settings.goal_sources, self.rng
            )
            return relabeled, prefix, goal_rings, goal_columns, from_desired
        version = self.rng.integers(0, k + 1, size=size)  # 0: the original goal, i > 0: frozen goal i - 1
        relabeled = version > 0
        encoded = self.frozen_goals[rings[relabeled], columns[relabeled], version[relabeled] - 1]
        goal_abs, goal_columns = np.divmod(encoded, self.storage.n_envs)
        # A frozen goal is stale as soon as the ring overwrote the *first row* of its episode, not only
        # its own row: the rest of that episode still holds data but is no longer sampleable, and online
        # `random` never draws from it either.
        # The goal row holds o_{j+1}; its transition j sits one absolute row earlier.
        transition_abs = goal_abs - 1
        stale = transition_abs < self.storage.oldest(goal_columns)
        stale[~stale] = ~self.storage.is_transition(
            transition_abs[~stale] % self.storage.n_rows, goal_columns[~stale]
        )
        if stale.any():
            # Only `random` goals live outside the transition's episode; if their row was overwritten
            # since the episode ended, a fresh random goal stands in.
            fresh_rings, fresh_columns = select_goal_rows(
                self.storage, rings[relabeled][stale], columns[relabeled][stale], self.strategy, self.rng
            )
            goal_abs[stale] = self.storage.absolute_rows(fresh_rings, fresh_columns)
            goal_columns[stale] = fresh_columns
        return relabeled, relabeled, goal_abs % self.storage.n_rows, goal_columns, None

    def _relabel(
        self,
        batch: dict[str, np.ndarray],
        relabeled: slice | np.ndarray,
        goal_rings: np.ndarray,
        goal_columns: np.ndarray,
        from_desired: np.ndarray | None = None,
    ) -> None:
        goals = self.read_achieved_goals(goal_rings, goal_columns)
        key = self.desired_goal_key
        if from_desired is not None:
            # Desired goals are goals already (goal_fn maps achieved states to goals, not these).
            goals = goals.copy()
            goals[from_desired] = self.storage.read_field(
                key, goal_rings[from_desired], goal_columns[from_desired]
            )
        if goals.shape[1:] != batch[key].shape[1:]:
            raise ValueError(
                f"Achieved goals have shape {goals.shape[1:]} but {key!r} has shape {batch[key].shape[1:]}; "
                "make goal_fn return goals shaped like the desired goal (or fix goal_shape)."
            )
        batch[key][relabeled] = goals
        if self.goal_in_observation:
            batch["next_" + key][relabeled] = goals
        achieved = self.goal_of(batch["next_" + self.achieved_goal_key][relabeled])
        infos = batch["infos"][relabeled] if "infos" in batch else None
        if self.reward_fn is not None:
            rewards = np.asarray(self.reward_fn(achieved, goals, infos))
            target = batch[self.reward_key]
            if rewards.size != goals.shape[0] or rewards.ndim > target.ndim:
                raise ValueError(
                    f"reward_fn returned shape {rewards.shape} for a batch of {goals.shape[0]} goals; it must "
                    f"return one reward per goal, shape ({goals.shape[0]},). Make compute_reward vectorized "
                    "over a leading batch dimension."
                )
            target[relabeled] = rewards.reshape(target[relabeled].shape)
        if self.terminated_key is not None and self.terminated_key in batch:
            target = batch[self.terminated_key]
            if self.terminated_fn is None:
                target[relabeled] = 0
            else:
                terminated = np.asarray(self.terminated_fn(achieved, goals, infos))
                target[relabeled] = terminated.reshape(target[relabeled].shape)

    def goal_of(self, values: np.ndarray) -> np.ndarray:
        return values if self.goal_fn is None else np.asarray(self.goal_fn(values))

    # ------------------------------------------------------------------ priorities
    def update_priorities(self, indexes: np.ndarray, priorities: np.ndarray) -> None:
        """Set the priorities of sampled transitions (their |TD error|, typically).

        Under online relabeling a transition is seen with a different goal at each sample: its priority
        is the error of the goal it was last trained on. Slots that stopped holding a transition since
        they were sampled (overwritten by the ring) keep priority 0.

        :param indexes: ``indexes`` of a sample
        :param priorities: non-negative finite values, one per index
        """
        self.sampler.update(indexes, priorities)

    def clear(self) -> None:
        """Forget every stored transition."""
        self.storage.clear()
        self.sampler.clear()
