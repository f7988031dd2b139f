"""The cpprb-compatible ``HindsightReplayBuffer``, on top of :class:`~her_wrap.core.replay.HindsightReplay`.

Code written for cpprb's HER buffer runs after changing one import::

    from her_wrap import HindsightReplayBuffer  # was: from cpprb import HindsightReplayBuffer

    rb = HindsightReplayBuffer(size, {"obs": {"shape": n}, "act": {"shape": 1}, "next_obs": {"shape": n}},
                               max_episode_len=n, reward_func=reward_func)
    for step in range(n):
        rb.add(obs=obs, act=act, next_obs=next_obs)
    rb.on_episode_end(goal)
    batch = rb.sample(256)            # obs, act, next_obs, rew, goal, weights, indexes
    rb.update_priorities(batch["indexes"], np.abs(td_error))

Differences from cpprb, all deliberate:

- ``size`` counts real transitions, not rows: no relabeled copy is stored (see the class note).
- ``online=True`` (default) draws new goals at every sample; ``online=False`` freezes them when the
  episode ends, as cpprb does (only the goal indexes are stored, not copies of the transition).
- ``seed`` makes every draw reproducible.
- ``Nstep={"size": n, "gamma": g}`` works with hindsight goals: each step's reward in the window is
  ``reward_func`` of that step for the sample's own (possibly relabeled) goal, and the sample carries
  ``discounts``. cpprb's HER buffer has no n-step returns (``Nstep`` fails there for want of a ``done``
  field).
- Bad input raises ``ValueError`` / ``TypeError`` that names the fix and leaves stored data as it was.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import numpy as np

from her_wrap.core.cpprb_arguments import (
    DISCOUNTS,
    DONE,
    GOAL,
    REWARD,
    StagedEpisode,
    check_buffer_arguments,
    check_compact,
    cpprb_layout,
    episode_goals,
    parse_nstep,
)
from her_wrap.core.goal_selection import GoalSelectionStrategy
from her_wrap.core.n_step import n_step_window
from her_wrap.core.replay import HindsightReplay
from her_wrap.core.settings import HindsightSettings, SettingsField, check_positive_int

#: The hindsight defaults (:class:`HindsightSettings`), which this buffer's signature shows.
_DEFAULTS = HindsightSettings()

CpprbRewardFn = Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]
"""``reward_func(next_state, action, goal) -> rewards``, batched over a leading dimension (cpprb's signature)."""


class HindsightReplayBuffer:
    """Replay buffer for Hindsight Experience Replay (Andrychowicz et al. 2017, arXiv:1707.01495) with
    cpprb's ``HindsightReplayBuffer`` interface.

    Steps are staged with :meth:`add` until :meth:`on_episode_end` stores the episode with its goal.
    A sample holds every ``env_dict`` field, ``goal`` and ``rew`` (and ``weights``, ``indexes`` when
    prioritized), each shaped ``(batch_size, *shape)``: a field of shape 1 comes back as ``(batch_size, 1)``.

    Semantics:

    - A share ``k / (k + 1)`` of a batch (``k = additional_goals``) carries a goal relabeled in hindsight:
      ``goal_func(next_state[j])`` for a step ``j`` of the same episode chosen by ``strategy``:
      ``future``: ``j`` uniform in ``[t, T - 1]``, inclusive of ``t`` (as cpprb and SB3); ``final``:
      ``j = T - 1``; ``episode``: any step of the episode; ``random``: any stored step of any episode.
    - ``rew`` of every sampled row is ``reward_func(next_state, action, goal)`` of that row's returned
      values: the same numbers cpprb computes when the episode ends.
    - ``online=True`` draws goals at sample time (each sample sees fresh goals); ``online=False`` draws
      ``k`` goals per transition when the episode ends and a sample picks the original or one of them
      uniformly, as cpprb (which stores ``k`` copies instead).
    - ``strategy="final"`` has one possible new goal per episode, so, as in cpprb, ``additional_goals``
      above 1 counts as 1 (half of a batch relabeled); ``additional_goals=0`` disables relabeling.
    - Every field other than ``goal`` and ``rew`` comes back as stored (a ``done`` field is not recomputed
      for the new goal; cpprb does the same).
    - ``Nstep={"size": n, "gamma": g}``: a sample of step ``t`` sums ``m <= min(n, T - t)`` steps (its
      window never crosses the episode's end, and ends at a step whose ``done`` field is set):
      ``rew = sum_i g**i * reward_func(next_state[t+i], action[t+i], goal)`` with the sample's own goal at
      every step, ``next_state`` is ``next_state[t+m-1]``,
      a ``done`` field is 1 when any step of the window stored 1, and ``discounts = g**m`` (shape
      ``(batch_size, 1)``) is the factor of the bootstrapped value: ``target = rew + discounts * (1 - done)
      * V(next_state, goal)``. Other fields are those of step ``t``.

    .. note::
        Units differ from cpprb. cpprb's ``size`` counts stored rows, ``k + 1`` per real transition
        (the real one plus ``k`` relabeled copies), so ``size=1_000_000`` with ``k=4`` holds 200,000 real
        transitions. Here ``size`` counts **real transitions** and no copy is stored: the buffer holds
        :meth:`get_buffer_size` transitions (``size`` rounded up to a multiple of ``max_episode_len``) when
        every episode has ``max_episode_len`` steps, and fewer when episodes are shorter, since an episode of
        ``T`` steps takes ``T + 1`` rows (its final ``next_state`` is the extra one).

    .. note::
        Memory (``compact=True``, the default): the state is stored once per row and ``next_state[t]`` is
        read from row ``t + 1``, which requires ``next_state[t] == state[t + 1]`` inside an episode.
        :meth:`on_episode_end` checks this and raises if it does not hold. ``compact=False`` stores
        ``state`` as an extra per-step field, so both values come back exactly as added, at the cost of a
        second copy of the state (still no relabeled copies). In both modes new goals are read from the
        stored ``next_state`` values.

    :param size: real transitions to hold (see the note); at least ``max_episode_len``
    :param env_dict: cpprb's field description: ``{name: {"shape": ..., "dtype": ...}}``, shape 1 and
        ``default_dtype`` (float32) by default. Must contain ``state``, ``action`` and ``next_state``;
        ``goal`` and ``rew`` are added by the buffer.
    :param max_episode_len: most steps one episode may have
    :param reward_func: ``reward_func(next_state, action, goal) -> rewards``, batched (see :data:`CpprbRewardFn`);
        must return one reward per row, shape ``(n,)`` or ``(n, 1)``
    :param goal_func: maps a batch of states to goals; identity when None
    :param goal_shape: shape of a goal; the state's shape when None
    :param state: name of the state field in ``env_dict``
    :param action: name of the action field
    :param next_state: name of the next-state field (same shape and dtype as ``state``)
    The hindsight parameters keep cpprb's names and map onto :class:`~her_wrap.HindsightSettings`, whose
    docstring is their reference: ``strategy`` is ``goal_selection_strategy``, ``additional_goals`` is
    ``n_sampled_goal``; ``online``, ``goal_mix`` and ``alpha`` keep their names. Their defaults are the
    settings' own (cpprb's are the same: ``future``, 4, 0.6); two defaults are cpprb's where its API differs
    from the settings: ``prioritized=True`` (the settings default to uniform draws) and ``eps=1e-4``.

    :param strategy: ``"future"``, ``"final"``, ``"episode"`` or ``"random"`` (any case)
    :param additional_goals: ``k``, relabeled goals per real one (>= 0)
    :param prioritized: proportional prioritized replay (Schaul et al. 2016); new transitions get the
        highest priority seen so far (True by default, as cpprb)
    :param online: relabel at sample time (True) or freeze the goals at episode end (False, as cpprb)
    :param compact: store the state once per row (see the note)
    :param seed: seed or ``np.random.Generator`` for every random draw
    :param goal_mix: relabeled goals from several sources with shares (``{"future": 0.8, "desired": 0.2}``;
        ``desired``: the goals given to ``on_episode_end`` for other episodes); replaces ``strategy``
        (online only)
    :param alpha: priority exponent
    :param eps: added to priorities before the exponent (cpprb's default 1e-4)
    :param kwargs: ``default_dtype`` (cpprb's, float32 by default) for fields that name no dtype, and
        ``Nstep`` (cpprb's ``{"size": n, "gamma": 0.99, "rew": "rew", "next": next_state}``): n-step
        returns for each sample's goal (see Semantics)
    """

    def __init__(
        self,
        size: int,
        env_dict: Mapping[str, Mapping[str, Any]],
        max_episode_len: int,
        reward_func: CpprbRewardFn,
        *,
        goal_func: Callable[[np.ndarray], np.ndarray] | None = None,
        goal_shape: Iterable[int] | int | None = None,
        state: str = "obs",
        action: str = "act",
        next_state: str = "next_obs",
        strategy: str | GoalSelectionStrategy = _DEFAULTS.goal_selection_strategy,
        additional_goals: int = _DEFAULTS.n_sampled_goal,
        prioritized: bool = True,
        online: bool = _DEFAULTS.online,
        compact: bool = True,
        seed: int | np.random.Generator | None = None,
        goal_mix: Mapping[str, float] | None = None,
        alpha: float = _DEFAULTS.alpha,
        eps: float = 1e-4,
        **kwargs: Any,
    ) -> None:
        check_buffer_arguments(size, max_episode_len, reward_func, goal_func, additional_goals, kwargs)
        #: steps summed per sample, and their discount (None without ``Nstep``: one-step samples)
        self.n_steps: int = 1
        self.gamma: float | None = None
        if kwargs.get("Nstep") is not None:
            self.n_steps, self.gamma = parse_nstep(kwargs["Nstep"], next_state)
        settings = HindsightSettings(
            n_sampled_goal=additional_goals,
            goal_selection_strategy=strategy,
            online=online,
            prioritized=prioritized,
            alpha=alpha,
            goal_mix=goal_mix,
        )
        if settings.goal_selection_strategy is GoalSelectionStrategy.FINAL and settings.n_sampled_goal > 1:
            # One possible final goal per episode: more copies of it would only shift the relabeled share.
            settings = settings.replace(n_sampled_goal=1)
        default_dtype = np.dtype(kwargs.get("default_dtype", np.float32))
        layout = cpprb_layout(
            env_dict,
            state=state,
            action=action,
            next_state=next_state,
            goal_shape=goal_shape,
            goal_func=goal_func,
            default_dtype=default_dtype,
            compact=compact,
        )

        self.max_episode_len = int(max_episode_len)
        self.reward_func = reward_func
        self.goal_func = goal_func
        self.goal_shape = layout.goal_spec.shape
        self.state = state
        self.action = action
        self.next_state = next_state
        self.settings = settings
        self.compact = bool(compact)
        self.env_specs = layout.env_specs
        self.reward_dtype = default_dtype
        # The storage's one observation field (see her_wrap.core.cpprb_arguments) and its next value.
        self._row_field = layout.row_field
        self._next_row_field = layout.next_row_field

        n_episodes = math.ceil(size / self.max_episode_len)
        self._buffer_size = n_episodes * self.max_episode_len
        self.replay = HindsightReplay(
            n_episodes * (self.max_episode_len + 1),
            observation_fields={self._row_field: self.env_specs[state]},
            step_fields=layout.step_fields,
            settings=settings,
            achieved_goal_key=self._row_field,
            desired_goal_key=GOAL,
            terminated_key=None,
            reward_fn=None,  # rewards of every row are computed here, with cpprb's signature
            goal_fn=goal_func,
            eps=eps,
            seed=seed,
        )
        self._staged = StagedEpisode(self.env_specs, self.max_episode_len)

    strategy: SettingsField[GoalSelectionStrategy] = SettingsField(
        "goal_selection_strategy", "The goal selection strategy."
    )
    additional_goals: SettingsField[int] = SettingsField(
        "n_sampled_goal", "``k``, relabeled goals per real one (at most 1 for ``final``)."
    )
    prioritized: SettingsField[bool] = SettingsField("prioritized", "Whether sampling is prioritized (PER).")
    online: SettingsField[bool] = SettingsField("online", "Whether goals are relabeled at sample time.")

    # ------------------------------------------------------------------ adding
    def add(self, **kwargs: Any) -> None:
        """Stage one step, or several rows at once, of the episode in progress.

        Each field is reshaped to ``(n, *shape)`` as cpprb does, so one step may be passed without a batch
        dimension and ``n`` rows with one. Keywords that ``env_dict`` does not define are ignored (as cpprb).

        :param kwargs: one value per ``env_dict`` field, all with the same number of rows ``n``
        :raises ValueError: for a missing field, a value that does not reshape to the field's shape, fields
            with different row counts, or an episode that would exceed ``max_episode_len`` (nothing is staged)
        """
        self._staged.add(kwargs)

    def on_episode_end(self, goal: Any) -> None:
        """Store the staged episode with its goal and start a new one (nothing happens when none is staged).

        :param goal: the goal the episode was played for, shaped ``goal_shape`` (broadcast over the steps),
            or ``(T, *goal_shape)`` with one goal per step
        :raises ValueError: for a goal of the wrong shape, a ``goal_func`` whose goals are not ``goal_shape``,
            or (``compact=True``) an episode whose ``next_state[t]`` differs from ``state[t + 1]``. The staged
            steps and the stored data stay as they were.
        """
        length = len(self._staged)
        if length == 0:
            return
        goals = episode_goals(goal, length, self.goal_shape)
        states = self._staged.field(self.state)
        next_states = self._staged.field(self.next_state)
        if self.compact:
            check_compact(states, next_states)
        if self.goal_func is not None:
            achieved = np.asarray(self.goal_func(next_states))
            if achieved.shape != (length, *self.goal_shape):
                raise ValueError(
                    f"goal_func returned shape {achieved.shape} for {length} states; it must return "
                    f"(n, *goal_shape) = {(length, *self.goal_shape)}: fix goal_func or goal_shape."
                )
        observations = {self._row_field: np.concatenate([states[:1], next_states])}
        steps = {name: self._staged.field(name) for name in self.replay.storage.step_specs if name != GOAL}
        steps[GOAL] = goals
        self.replay.add_episode(0, observations, steps)
        self._staged.clear()

    # ------------------------------------------------------------------ sampling
    def sample(self, batch_size: int, beta: float | None = None) -> dict[str, np.ndarray]:
        """Draw a batch with replacement; a share ``k / (k + 1)`` carries goals relabeled in hindsight.

        :param batch_size: rows to draw (> 0)
        :param beta: importance-sampling exponent in ``[0, 1]`` (prioritized only; ignored otherwise);
            ``settings.beta`` (0.4, cpprb's default) when None
        :return: new arrays ``(batch_size, *shape)``: every ``env_dict`` field, ``rew`` (float32 by default,
            ``(batch_size, 1)``, from ``reward_func``), ``goal``, and when prioritized ``weights`` and
            ``indexes``. ``weights`` (float32) are importance weights normalized by the largest one *in this
            batch* (cpprb divides by the weight of the least probable row of the whole buffer; the two differ
            by one factor per batch). ``indexes`` (uint64, as cpprb) name storage slots, for
            :meth:`update_priorities`; a slot the ring has overwritten since the sample is skipped there.
        :raises ValueError: for ``batch_size <= 0``, an empty buffer, or a ``reward_func`` that does not
            return one reward per row
        """
        batch_size = check_positive_int(batch_size, "batch_size")
        if self.get_stored_size() == 0:
            raise ValueError(
                "Cannot sample: no episode is stored yet; call on_episode_end(goal) after adding an episode's steps."
            )
        raw = self.replay.sample(batch_size, beta)
        batch = self._transitions(raw)
        if self.gamma is not None:
            self._n_step_returns(batch, raw["indexes"], self.gamma)
        if self.prioritized:
            batch["weights"] = raw["weights"]
            batch["indexes"] = raw["indexes"].astype(np.uint64)
        return batch

    def _transitions(self, raw: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """cpprb's layout (env_dict fields, ``rew``, ``goal``) from the core's gathered rows."""
        batch = {
            name: raw[self._next_row_field if name == self.next_state else name] for name in self.env_specs
        }
        goals = raw[GOAL]
        rewards = self._rewards(batch[self.next_state], batch[self.action], goals)
        batch[REWARD] = rewards.astype(self.reward_dtype, copy=False).reshape(-1, 1)
        batch[GOAL] = goals
        return batch

    def _rewards(self, next_states: np.ndarray, actions: np.ndarray, goals: np.ndarray) -> np.ndarray:
        """``reward_func`` of a batch of rows, checked to give one reward per row, as a flat array."""
        rewards = np.asarray(self.reward_func(next_states, actions, goals))
        n = len(goals)
        if rewards.shape not in ((n,), (n, 1)):
            raise ValueError(
                f"reward_func returned shape {rewards.shape} for {n} rows; it must return one reward per row, "
                f"shape ({n},) or ({n}, 1): make it vectorized over the leading dimension."
            )
        return rewards.reshape(n)

    def _read(self, name: str, rings: np.ndarray) -> np.ndarray:
        """One stored field at the given rows, shaped ``(n, *shape)`` as in a sample."""
        spec = self.env_specs[name]
        return self.replay.storage.read_field(name, rings, np.zeros_like(rings)).reshape(
            len(rings), *spec.shape
        )

    def _n_step_returns(self, batch: dict[str, np.ndarray], rings: np.ndarray, gamma: float) -> None:
        """Turn a sample of one-step transitions into n-step ones for each row's own goal (see Semantics).

        Worked example, ``Nstep = {"size": 3, "gamma": g}``, a sample at step 4 of a 6-step episode: the
        window holds steps 4 and 5, ``rew = r_4 + g * r_5`` (both ``reward_func`` of the sample's goal),
        ``next_state`` is ``next_state[5]`` and ``discounts = g ** 2``.
        """
        storage = self.replay.storage
        n_rows = storage.n_rows
        columns = np.zeros_like(rings)
        goals = batch[GOAL]
        returns = batch[REWARD][:, 0].astype(np.float64)
        stored_done = batch.get(DONE)
        done = np.zeros(rings.size, bool) if stored_done is None else stored_done.reshape(rings.size) != 0

        def step(
            rows: np.ndarray, step_rings: np.ndarray, _: np.ndarray
        ) -> tuple[np.ndarray, np.ndarray | None]:
            next_states = self._read(self._row_field, (step_rings + 1) % n_rows)
            rewards = self._rewards(next_states, self._read(self.action, step_rings), goals[rows])
            terminated = None if stored_done is None else self._read(DONE, step_rings).reshape(rows.size) != 0
            return rewards, terminated

        taken = n_step_window(storage, rings, columns, self.n_steps, gamma, returns, done, step)
        moved = np.flatnonzero(taken > 1)
        if moved.size:
            last = (rings[moved] + taken[moved]) % n_rows  # the row after the window's last step
            batch[self.next_state][moved] = self._read(self._row_field, last)
        batch[REWARD] = returns.astype(self.reward_dtype).reshape(-1, 1)
        if stored_done is not None:
            batch[DONE] = done.reshape(stored_done.shape).astype(stored_done.dtype)
        batch[DISCOUNTS] = (gamma**taken).astype(np.float32).reshape(-1, 1)

    def get_all_transitions(self, shuffle: bool = False) -> dict[str, np.ndarray]:
        """Every stored real transition with its original goal and reward (no relabeled copy: none is stored).

        :param shuffle: shuffle the rows (with the buffer's generator); otherwise oldest first
        :return: the layout of :meth:`sample` without ``weights``, ``indexes`` and ``discounts``: one-step
            transitions, also when built with ``Nstep``
        """
        storage = self.replay.storage
        rings = np.flatnonzero(storage.step_index[:, 0] >= 0)
        if rings.size == 0:
            empty = {name: np.zeros((0, *spec.shape), spec.dtype) for name, spec in self.env_specs.items()}
            return {
                **empty,
                REWARD: np.zeros((0, 1), self.reward_dtype),
                GOAL: np.zeros((0, *self.goal_shape), self.env_specs[self.state].dtype),
            }
        columns = np.zeros_like(rings)
        alive = storage.is_transition(rings, columns)
        rings, columns = rings[alive], columns[alive]
        rings = rings[np.argsort(storage.absolute_rows(rings, columns), kind="stable")]
        if shuffle:
            rings = self.replay.rng.permutation(rings)
        return self._transitions(storage.gather(rings, columns))

    # ------------------------------------------------------------------ priorities
    def update_priorities(self, indexes: Any, priorities: Any) -> None:
        """Set the priorities of sampled rows (their ``|TD error|``, typically).

        With online relabeling a row is seen with a new goal at each sample: its priority is the error of
        the goal it was last trained on.

        :param indexes: ``indexes`` of a sample
        :param priorities: finite values ``>= 0``, one per index (shape ``(n,)`` or ``(n, 1)``)
        :raises ValueError: when built with ``prioritized=False``, or for out-of-range indexes, NaN or
            negative priorities, or mismatched lengths (nothing changes)
        """
        if not self.prioritized:
            raise ValueError(
                "This buffer was built without prioritized replay; pass prioritized=True to use priorities."
            )
        index_array = np.asarray(indexes)
        if index_array.dtype.kind == "u":
            slots = self.replay.storage.n_rows * self.replay.storage.n_envs
            if index_array.size and int(index_array.max()) >= slots:
                raise ValueError(
                    f"indexes must lie in [0, {slots}), got up to {int(index_array.max())}; pass a sample's indexes."
                )
            index_array = index_array.astype(np.int64)
        priority_array = np.asarray(priorities)
        if priority_array.ndim == 2 and priority_array.shape[1] == 1:
            priority_array = priority_array[:, 0]
        self.replay.update_priorities(index_array, priority_array)

    def get_max_priority(self) -> float:
        """Largest priority seen so far (1.0 at first); new transitions get it.

        :raises ValueError: when built with ``prioritized=False``
        """
        if self.replay.prioritizer is None:
            raise ValueError(
                "This buffer was built without prioritized replay; pass prioritized=True to use priorities."
            )
        return self.replay.prioritizer.max_priority

    # ------------------------------------------------------------------ sizes
    def get_stored_size(self) -> int:
        """Real transitions stored (staged steps of an unfinished episode not counted)."""
        return len(self.replay)

    def get_buffer_size(self) -> int:
        """Real transitions the buffer holds when every episode has ``max_episode_len`` steps: ``size``
        rounded up to a multiple of ``max_episode_len``. Never below :meth:`get_stored_size`."""
        return self._buffer_size

    def clear(self) -> None:
        """Drop every stored transition and the staged episode."""
        self.replay.clear()
        self._staged.clear()
