"""Writing SB3's one-step ``add`` calls to the hindsight storage: in chunks, episode bounds and infos.

A stable-baselines3 learner calls ``add`` once per env step. :class:`StagedStepWriter` keeps those steps
and writes them in one vectorized :meth:`~her_wrap.core.replay.HindsightReplay.add_steps` call per chunk
(single writes for a few), and finds where an episode ended without a ``done``: a step that does not start
from the previous step's next observation came after a reset the buffer was not told of.

:class:`InfoProbe` decides whether the info dicts are written at all. Keeping every step's info dict costs
memory and time, and most goal envs' ``compute_reward`` never reads them: it asks on the first ``add``, with
info dicts that record reads (:func:`~her_wrap.envs.checks.reads_infos`); when that call cannot tell (it
raised before reading anything), infos are kept and the question is asked again at the first sample, where
unread infos are dropped.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
from gymnasium import spaces

from her_wrap.core.replay import HindsightReplay
from her_wrap.core.storage import FieldSpec
from her_wrap.envs.checks import check_finite_step, check_finite_steps, reads_infos
from her_wrap.sb3.goal_functions import GoalFunctions

# Fewer staged steps than this are written one by one: a vectorized chunk has a fixed cost of a few
# single writes.
_SINGLE_WRITES_BELOW = 8

# A staged step: obs, next_obs, action, reward, terminated, truncated, done, infos.
StagedStep = tuple[Any, ...]


class StagedStepWriter:
    """The writing side of :class:`~her_wrap.sb3.HerReplayBuffer`.

    The class that mixes it in sets :attr:`replay`, :attr:`keys` and :attr:`n_envs`, and calls
    :meth:`_start_staging` before the first step.
    """

    replay: HindsightReplay
    keys: tuple[str, ...]
    n_envs: int
    #: refuse steps with NaN or infinite values before they are written (:func:`check_finite_steps`)
    check_finite: bool
    #: steps of every env column added so far, staged ones included
    steps_added: int

    def _start_staging(self) -> None:
        self._staged: list[StagedStep] = []
        # The next observation of the last step written: where an episode in progress goes on from.
        self._pending_next: dict[str, np.ndarray] | None = None
        # Chunks of this many add calls are written at once; a sample writes what is staged before it.
        self._stage_limit = 256

    def _stage(self, step: StagedStep, write_now: bool = False) -> None:
        """Keep one step of every env (its arrays are not copied); write the chunk when it is full."""
        self._staged.append(step)
        if write_now or len(self._staged) >= self._stage_limit:
            self.flush()

    def flush(self) -> None:
        """Write the staged steps to the storage: one vectorized write for a chunk, single writes for a few.

        Every method that reads the storage calls it first; call it before reading ``replay`` directly.
        """
        staged, self._staged = self._staged, []
        if not staged:
            return
        if self.check_finite:
            self._refuse_non_finite(staged)
        keep_infos = self.replay.storage.stores_infos
        if len(staged) < _SINGLE_WRITES_BELOW:
            for obs, next_obs, action, reward, terminated, truncated, done, infos in staged:
                self._close_episodes_left(obs)
                step = {"action": action, "reward": reward, "terminated": terminated, "truncated": truncated}
                self.replay.add(obs, next_obs, step, done, infos if keep_infos else None)
                self._pending_next = next_obs
            return
        observations, next_observations, actions, rewards, terminated, truncated, dones, infos = zip(
            *staged, strict=True
        )
        self._close_episodes_left(observations[0])
        stacked = {
            key: stacked_arrays([observation[key] for observation in observations]) for key in self.keys
        }
        stacked_next = {
            key: stacked_arrays([observation[key] for observation in next_observations]) for key in self.keys
        }
        ends = stacked_arrays(dones)
        # A step inside an episode starts from the previous step's next observation; one that does not was
        # taken after a reset the buffer was not told of: the episode ended with the step before it.
        left = np.zeros(ends[:-1].shape, dtype=bool)
        for key in self.keys:
            differ = stacked[key][1:] != stacked_next[key][:-1]
            left |= differ.reshape(*left.shape, -1).any(axis=2)
        ends[:-1] |= left
        self.replay.add_steps(
            stacked,
            stacked_next,
            {
                "action": stacked_arrays(actions),
                "reward": stacked_arrays(rewards),
                "terminated": stacked_arrays(terminated),
                "truncated": stacked_arrays(truncated),
            },
            ends,
            infos if keep_infos else None,
        )
        self._pending_next = next_observations[-1]

    def _refuse_non_finite(self, staged: list[StagedStep]) -> None:
        """Write the steps before the first one holding a NaN or an infinity, then refuse it and the rest.

        Checked once per chunk, before anything of it is stored; a sample writes what is staged first, so
        no update reads such a value (``HER`` refuses it at the step itself, before its policy sees it).

        :raises NonFiniteDataError: naming the env column, the step and the field
        """
        next_observations = {key: stacked_arrays([step[1][key] for step in staged]) for key in self.keys}
        rewards = stacked_arrays([step[3] for step in staged])
        first = self.steps_added - len(staged)
        index = check_finite_steps(next_observations, rewards, first)
        if index is None:
            return
        self._staged = staged[:index]
        self.check_finite = False  # the steps before it are finite: write them as they are
        try:
            self.flush()
        finally:
            self.check_finite = True
        check_finite_step(staged[index][1], staged[index][3], first + index)

    def _close_episodes_left(self, observation: dict[str, np.ndarray]) -> None:
        """Close the episodes in progress whose env did not go on from their last next observation.

        SB3's ``learn(reset_num_timesteps=True)`` resets the env without telling the buffer: the first step
        after it starts from the reset observation, and the episode in progress must end before it, or the
        buffer would glue two episodes together (a goal from one relabeling the other). Loading a buffer
        with ``truncate_last_traj=False`` and going on in the same episode passes this test.
        """
        pending = self._pending_next
        if pending is None:
            return
        differ = np.zeros(self.n_envs, dtype=bool)
        for key in self.keys:
            differ |= (observation[key] != pending[key]).reshape(self.n_envs, -1).any(axis=1)
        if differ.any():
            for column in np.flatnonzero(differ & (self.replay.storage.open_start >= 0)).tolist():
                self.replay.end_episode(column)

    def end_open_episodes(self) -> None:
        """Close every episode in progress (the env was reset, e.g. at the start of a new ``learn``)."""
        self.flush()
        for column in range(self.n_envs):
            self.replay.end_episode(column)

    def has_open_episodes(self) -> bool:
        """Whether an episode is in progress in some env (it continues with the next ``add``)."""
        self.flush()
        return bool((self.replay.storage.open_start >= 0).any())

    def truncate_last_trajectory(self) -> None:
        """Close the episodes in progress, as SB3's ``load_replay_buffer(truncate_last_traj=True)`` asks.

        Warns when there is one, as SB3 does: training that goes on in the same episode should load with
        ``truncate_last_traj=False``, and the episode then continues with the next ``add``.
        """
        if self.has_open_episodes():
            warnings.warn(
                "The last trajectory in the replay buffer will be truncated. If you are in the same episode "
                "as when the replay buffer was saved, load it with truncate_last_traj=False to go on with it.",
                UserWarning,
                stacklevel=2,
            )
        self.end_open_episodes()


class InfoProbe:
    """The first-add and first-sample checks of :class:`~her_wrap.sb3.HerReplayBuffer`.

    The class that mixes it in sets the attributes annotated here and calls :meth:`_start_probing` before
    the first step.
    """

    replay: HindsightReplay
    goal_functions: GoalFunctions | None
    store_infos: bool | None
    copy_info_dict: bool

    def _start_probing(self) -> None:
        # What is still to find out on real data: whether compute_reward reads infos (None: not yet); the
        # first add writes at once, so that a setup whose shapes do not fit fails there, not at a sample.
        self._infos_read: bool | None = True if self.store_infos else None
        self._awaiting_first_add = True
        self._first_sample_done = False
        self._copy_infos = self.copy_info_dict and self.store_infos is True

    def _first_add(
        self, obs: dict[str, np.ndarray], next_obs: dict[str, np.ndarray], infos: list[dict[str, Any]]
    ) -> None:
        """Find out, on the first step's real data, whether ``compute_reward`` reads infos; keep them if so
        (and, when it cannot tell yet, until the first sample tells)."""
        self._awaiting_first_add = False
        if self._infos_read is not None or self.goal_functions is None:
            reads = self._infos_read
        else:
            reads = reads_infos(
                self.goal_functions.compute_reward,
                next_obs["achieved_goal"],
                obs["desired_goal"],
                infos,
            )
        self._check_infos_kept(reads)
        self._infos_read = reads
        if self.store_infos is None:
            self.replay.storage.store_infos(reads is not False)
        self._copy_infos = self.copy_info_dict and self.stores_infos

    def _check_infos_kept(self, reads: bool | None) -> None:
        if reads and self.store_infos is False:
            raise ValueError(
                "compute_reward reads the info dicts, but this buffer was built with store_infos=False: "
                "relabeled rewards would be computed without them. Pass store_infos=True (or None: keep them "
                "when compute_reward reads them)."
            )

    def _settle_infos(self, batch: dict[str, np.ndarray]) -> None:
        """At the first sample: ask again whether ``compute_reward`` reads infos, if the first add could not
        tell, and drop them (from the storage and ``batch``) if it does not."""
        if self._infos_read is None:
            assert self.goal_functions is not None
            reads = reads_infos(
                self.goal_functions.compute_reward,
                batch["next_achieved_goal"],
                batch["desired_goal"],
                batch.get("infos"),
            )
            self._check_infos_kept(reads)
            self._infos_read = reads is not False
            if self.store_infos is None and not self._infos_read:
                self.replay.storage.store_infos(False)
                batch.pop("infos", None)

    @property
    def stores_infos(self) -> bool:
        """Whether info dicts are being kept now."""
        return self.replay.storage.stores_infos


def storage_fields(
    dict_space: spaces.Dict, action_space: spaces.Space, action_dim: int
) -> tuple[dict[str, FieldSpec], dict[str, FieldSpec]]:
    """What each storage row holds: one field per observation key, and the step's action, reward and flags.

    float64 observations and actions are stored as float32 (what the policy computes in), other dtypes
    as they are.

    :return: the observation fields and the step fields of :class:`~her_wrap.core.replay.HindsightReplay`
    """
    observation_fields = {
        name: FieldSpec(space.shape or (), _storage_dtype(space.dtype))
        for name, space in dict_space.spaces.items()
    }
    step_fields = {
        "action": FieldSpec((action_dim,), _storage_dtype(action_space.dtype)),
        "reward": FieldSpec((), np.float32),
        "terminated": FieldSpec((), np.bool_),
        "truncated": FieldSpec((), np.bool_),
    }
    return observation_fields, step_fields


def _storage_dtype(dtype: Any) -> np.dtype:
    dtype = np.dtype(dtype) if dtype is not None else np.dtype(np.float32)
    return np.dtype(np.float32) if dtype == np.float64 else dtype


def stacked_arrays(arrays: Any) -> np.ndarray:
    """``np.stack`` of arrays of one shape, through one ``np.concatenate`` (several times faster)."""
    return np.concatenate(arrays).reshape(len(arrays), *np.shape(arrays[0]))
