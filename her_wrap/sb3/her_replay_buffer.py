"""``HerReplayBuffer``: a drop-in ``replay_buffer_class`` for stable-baselines3's own learners.

Code written for SB3's buffer switches with one import::

    from her_wrap.sb3 import HerReplayBuffer

    model = SAC("MultiInputPolicy", env, replay_buffer_class=HerReplayBuffer,
                replay_buffer_kwargs=dict(n_sampled_goal=4, goal_selection_strategy="future"))

It is :class:`~her_wrap.sb3.replay_wrapper.HindsightExperienceReplayWrapper` (the buffer ``HER`` uses)
behind SB3's constructor signature: one storage and sampling path for both.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch as th
from gymnasium import spaces
from stable_baselines3.her.goal_selection_strategy import GoalSelectionStrategy as StableBaselinesStrategy

from her_wrap.core.goal_selection import GoalSelectionStrategy
from her_wrap.core.settings import HindsightSettings
from her_wrap.sb3.replay_wrapper import HindsightExperienceReplayWrapper


class HerReplayBuffer(HindsightExperienceReplayWrapper):
    """Hindsight Experience Replay buffer with stable-baselines3's ``HerReplayBuffer`` constructor.

    SB3's learners build it themselves (``replay_buffer_class=HerReplayBuffer``) and pass it their env;
    ``save_replay_buffer`` / ``load_replay_buffer(path, truncate_last_traj=...)`` and ``VecNormalize`` work
    as with SB3's buffer, under ``DummyVecEnv`` and ``SubprocVecEnv`` alike.

    .. note::
        What differs from SB3's ``HerReplayBuffer``, and why:

        - Rewards of relabeled transitions are computed in this process, one vectorized ``compute_reward``
          call per batch (SB3 calls ``env_method``: an inter-process round trip per batch under
          ``SubprocVecEnv``). A ``compute_reward`` that takes single goals only is called row by row, with
          a warning.
        - ``terminated`` of a relabeled transition is recomputed for its new goal (``compute_terminated``
          when the env has one, else False); SB3 copies the original goal's.
        - Episodes in progress can be sampled: training may start before the first episode ends.
        - Each observation is stored once (an episode of ``T`` steps takes ``T + 1`` rows), and sampling
          costs O(batch) instead of a pass over the whole buffer.
        - Info dicts are kept only when ``compute_reward`` reads them (``store_infos=None``), found out
          by a probe call on the first step's data; SB3 keeps none unless ``copy_info_dict=True``.
        - ``goal_selection_strategy="random"`` (any stored goal, as in stable-baselines v2) is available.
        - Prioritized replay and LaBER need per-sample weights in the learner's loss, which SB3's own
          ``train()`` ignores: they are ``her_wrap.HER(..., prioritized=True)`` / ``HER(..., laber="mean")``.

    :param buffer_size: capacity over all envs (SB3's ``buffer_size``: the learner passes its own)
    :param observation_space: the goal dict space (the learner passes it)
    :param action_space: the action space (the learner passes it)
    :param env: the training env (the learner passes it); relabeling takes its ``compute_reward``
    :param device: torch device of the samples
    :param n_envs: envs stepped in parallel
    :param optimize_memory_usage: must stay False, as for SB3's ``HerReplayBuffer``: each observation is
        stored once already
    :param handle_timeout_termination: a time-limit truncation keeps its bootstrap (default); False counts
        it as terminal, as SB3 does
    :param n_sampled_goal: ``k``: a share ``k / (k + 1)`` of every batch gets new goals
    :param goal_selection_strategy: ``"future"`` (inclusive of the transition's own step, as SB3),
        ``"final"``, ``"episode"`` or ``"random"``; a string, a her_wrap or an SB3 ``GoalSelectionStrategy``
    :param copy_info_dict: keep deep copies of the info dicts (and keep them: SB3's meaning of True)
    :param online: relabel at sample time (default), or freeze ``k`` goals per transition when its
        episode ends (stable-baselines v2)
    :param goal_mix: relabeled goals from several sources with shares, e.g. ``{"future": 0.6, "desired":
        0.2, "random": 0.2}`` (``desired``: other episodes' desired goals); replaces the strategy (see
        :class:`~her_wrap.HindsightSettings`)
    :param n_steps: n-step returns, every reward recomputed for the sample's goal (as SB3's
        ``NStepReplayBuffer``, which refuses dict observations); samples carry ``discounts``
    :param movement_clip: draw transitions by how far their episode moved its achieved goal, with weight
        ``movement_floor + min(path, movement_clip)`` (goal units; None: uniform draws; see
        :mod:`her_wrap.core.movement`). The weights choose what is replayed and leave the loss as it is,
        so SB3's own ``train()`` uses them
    :param movement_floor: the draw weight of a transition whose episode moved nothing
    :param gamma: discount of the n-step returns: give the learner's ``gamma`` (SB3's learners do not pass
        it to their buffer)
    :param store_infos: keep each step's info dict for ``compute_reward``: None (default) when it reads
        them, True always, False never
    :param seed: seed of the sampling and relabeling draws (default: drawn from numpy's global generator,
        which a learner's ``seed=`` seeds before it builds its buffer, so a seeded learner samples the same
        batches run to run)
    :param prioritized: not available here: raises, naming ``her_wrap.HER(..., prioritized=True)``
    :param laber: not available here: raises, naming ``her_wrap.HER(..., laber=...)``
    """

    def __init__(
        self,
        buffer_size: int,
        observation_space: spaces.Dict,
        action_space: spaces.Space,
        env: Any,
        device: th.device | str = "auto",
        n_envs: int = 1,
        optimize_memory_usage: bool = False,
        handle_timeout_termination: bool = True,
        n_sampled_goal: int = 4,
        goal_selection_strategy: GoalSelectionStrategy | StableBaselinesStrategy | str = "future",
        copy_info_dict: bool = False,
        *,
        online: bool = True,
        goal_mix: Mapping[str, float] | None = None,
        n_steps: int = 1,
        movement_clip: float | None = None,
        movement_floor: float = 0.05,
        gamma: float = 0.99,
        store_infos: bool | None = None,
        seed: int | None = None,
        prioritized: bool = False,
        laber: str | None = None,
        **unknown: Any,
    ) -> None:
        if prioritized or laber is not None or {"alpha", "beta", "laber_m"} & set(unknown):
            raise ValueError(
                "Prioritized replay and LaBER weight each sample's loss, which the learners' own train() "
                "ignores: use her_wrap.HER(policy, env, SAC, prioritized=True) or HER(..., laber='mean') "
                "instead of replay_buffer_class=HerReplayBuffer."
            )
        if unknown:
            raise TypeError(
                f"HerReplayBuffer got unknown keyword arguments {sorted(unknown)}; it takes SB3's "
                "(n_sampled_goal, goal_selection_strategy, copy_info_dict, handle_timeout_termination) and "
                "online, goal_mix, n_steps, movement_clip, movement_floor, gamma, store_infos, seed."
            )
        if optimize_memory_usage:
            raise ValueError(
                "optimize_memory_usage is not supported (nor by SB3's HerReplayBuffer): this buffer stores "
                "each observation once already. Leave it False."
            )
        if seed is None:
            # SB3's learners seed numpy's global generator (their seed=) before building the buffer, and
            # pass it no seed: one drawn from there makes a seeded learner's samples the same run to run,
            # as they are with SB3's own buffer.
            seed = int(np.random.randint(2**31))  # noqa: NPY002  (the generator SB3 seeds)
        if not isinstance(observation_space, spaces.Dict):
            raise ValueError(
                f"HerReplayBuffer needs goal dict observations, got {type(observation_space).__name__}: use a "
                "goal env (observation, achieved_goal, desired_goal) with MultiInputPolicy."
            )
        super().__init__(
            buffer_size,
            observation_space,
            action_space,
            env,
            device=device,
            n_envs=n_envs,
            settings=HindsightSettings(
                n_sampled_goal=n_sampled_goal,
                goal_selection_strategy=goal_selection_strategy,
                online=online,
                goal_mix=goal_mix,
                n_steps=n_steps,
                movement_clip=movement_clip,
                movement_floor=movement_floor,
            ),
            store_infos=store_infos,
            discount=gamma,
            copy_info_dict=copy_info_dict,
            handle_timeout_termination=handle_timeout_termination,
            seed=seed,
        )
