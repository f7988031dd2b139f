"""The shipped recipes of ``configs/her.yml`` as keyword arguments of ``HER(...)``, for code and scripts.

``configs/her.yml`` is the one place a recipe is written; every preset here is read from it (the copy
shipped with her_wrap, never one in the current folder), so the two cannot drift apart. A preset that is
not an entry of its own is an entry changed by ``-params`` items (:data:`BIT_FLIPPING_DQN_LARGE_CHANGES`).
What each recipe achieved, and how it was found, is in ``docs/``.

Robotics presets hold HER's settings and the learner's together, e.g.
``HER("MultiInputPolicy", "FetchReach-v4", SAC, seed=0, **FETCH_REACH_SAC)``; the bit-flipping presets
hold the learner's alone (HER's ``n_sampled_goal=4, goal_selection_strategy="future"`` are the
defaults of the entries).
"""

from __future__ import annotations

import dataclasses
import importlib.resources
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import her_wrap
from her_wrap.runs.config import load_run_config
from her_wrap.runs.model_factory import learner_kwargs

#: The file name of the shipped recipes.
SHIPPED_CONFIG_NAME = "her.yml"


def shipped_config_path() -> Path:
    """``configs/her.yml`` as shipped with her_wrap: the checkout's in a source tree, else the installed
    package ``her_wrap.configs``'s (a wheel holds it there)."""
    checkout = Path(her_wrap.__file__).resolve().parents[1] / "configs" / SHIPPED_CONFIG_NAME
    if checkout.is_file():
        return checkout
    return Path(str(importlib.resources.files("her_wrap.configs").joinpath(SHIPPED_CONFIG_NAME)))


def preset(
    env_id: str,
    *,
    algo: str | None = None,
    overrides: Sequence[str] = (),
    n_actions: int | None = None,
    hindsight: bool = True,
) -> dict[str, Any]:
    """The shipped entry of ``env_id`` as keyword arguments of ``HER(...)``.

    :param algo: learner in place of the entry's ``model_class`` (its arguments must fit that learner)
    :param overrides: ``-params`` items applied to the entry (``"batch_size:256"``)
    :param n_actions: action dimensions, to make the entry's exploration noise (``noise_type``); without
        it the noise is left out
    :param hindsight: include HER's settings (``n_sampled_goal``, ``goal_selection_strategy`` and those
        that differ from ``HER``'s defaults), its options and ``normalize``; ``False``: the learner's
        arguments alone
    """
    from gymnasium import spaces

    config = load_run_config(shipped_config_path(), env_id, algo=algo, overrides=overrides)
    action_space = None if n_actions is None else spaces.Box(-1.0, 1.0, (n_actions,))
    if action_space is None:
        config = dataclasses.replace(config, noise_type=None, noise_std=None)
    kwargs = learner_kwargs(config, action_space)
    if not hindsight:
        return kwargs
    settings = config.hindsight
    primary = {
        "n_sampled_goal": settings.n_sampled_goal,
        "goal_selection_strategy": settings.goal_selection_strategy.value,
    }
    return {**primary, **config.her, "normalize": config.normalize, **kwargs}


def shipped_n_envs(env_id: str, overrides: Sequence[str] = ()) -> int:
    """Envs stepped in lockstep by the shipped entry of ``env_id`` (``train_freq`` counts all of them)."""
    return load_run_config(shipped_config_path(), env_id, overrides=overrides).n_envs


def shipped_num_threads(env_id: str) -> int:
    """Torch threads of the shipped entry of ``env_id`` (1 when it names none)."""
    return load_run_config(shipped_config_path(), env_id).num_threads or 1


# --- Bit flipping: the HER paper's DQN (BitFlipping-v0), and its 50-bit variant.

BIT_FLIPPING_DQN: dict[str, Any] = preset("BitFlipping-v0", hindsight=False)

#: The 50-bit variant: ``BitFlipping-v0`` with these ``-params`` items (more updates per env step, a
#: deeper network, more exploration), run with :data:`BIT_FLIPPING_DQN_LARGE_N_ENVS` envs in lockstep.
BIT_FLIPPING_DQN_LARGE_CHANGES: tuple[str, ...] = (
    "env_kwargs.n_bits:50",
    "n_envs:4",
    "batch_size:256",
    "train_freq:[50, step]",
    "target_update_interval:800",
    "exploration_fraction:0.05",
    "exploration_final_eps:0.3",
    "policy_kwargs.net_arch:[256, 256]",
)
BIT_FLIPPING_DQN_LARGE: dict[str, Any] = preset(
    "BitFlipping-v0", overrides=BIT_FLIPPING_DQN_LARGE_CHANGES, hindsight=False
)
BIT_FLIPPING_DQN_LARGE_N_ENVS = shipped_n_envs("BitFlipping-v0", BIT_FLIPPING_DQN_LARGE_CHANGES)

#: HER(SAC) on continuous bit flipping (``BitFlippingEnv(n_bits=6, continuous=True)``).
CONTINUOUS_BIT_FLIPPING_SAC: dict[str, Any] = preset("BitFlippingContinuous-v0", hindsight=False)

# --- Robotics (gymnasium-robotics Fetch, panda-gym Panda).

FETCH_REACH_SAC: dict[str, Any] = preset("FetchReach-v4")
#: FetchReach-v4's entry run by DDPG, exploring with Gaussian noise of std 0.2 on Fetch's 4 actions.
FETCH_REACH_DDPG: dict[str, Any] = preset(
    "FetchReach-v4", algo="ddpg", overrides=("noise_type:normal", "noise_std:0.2"), n_actions=4
)
PANDA_REACH_SAC: dict[str, Any] = preset("PandaReach-v3")

#: The changes that make FetchPush-v4's entry, tuned for two worker processes, the manipulation recipe of
#: one process (FetchPush's entry before it took two workers): three hidden layers of 256, greedy actions
#: from the actor itself, one-step returns, each update's 2048 rows and each cycle's 500 env steps in the
#: one process.
MANIPULATION_DDPG_CHANGES: tuple[str, ...] = (
    "n_envs:2",
    "policy_kwargs.hidden_dtype:float32",
    "her.n_steps:1",
    "policy_kwargs.net_arch:[256, 256, 256]",
    "policy_kwargs.actor_average:0",
    "batch_size:2048",
    "learning_starts:1000",
    "train_freq:[250, step]",
    "workers:1",
)

#: Manipulation (FetchPush, FetchPickAndPlace, FetchSlide, PandaPush, PandaPickAndPlace) in one process:
#: HER(DDPG), the FetchPush-v4 entry with :data:`MANIPULATION_DDPG_CHANGES`, without its exploration noise
#: (see :func:`manipulation_ddpg`). Run it with :data:`MANIPULATION_DDPG_N_ENVS` envs in lockstep and
#: :data:`MANIPULATION_DDPG_NUM_THREADS` torch threads.
MANIPULATION_DDPG: dict[str, Any] = preset("FetchPush-v4", overrides=MANIPULATION_DDPG_CHANGES)
MANIPULATION_DDPG_N_ENVS = shipped_n_envs("FetchPush-v4", MANIPULATION_DDPG_CHANGES)
MANIPULATION_DDPG_NUM_THREADS = shipped_num_threads("FetchPush-v4")
MANIPULATION_DDPG_NOISE_STD: float = load_run_config(shipped_config_path(), "FetchPush-v4").noise_std or 0.0


def manipulation_ddpg(n_actions: int) -> dict[str, Any]:
    """:data:`MANIPULATION_DDPG` with its Gaussian exploration noise for ``n_actions`` action dimensions."""
    return preset("FetchPush-v4", overrides=MANIPULATION_DDPG_CHANGES, n_actions=n_actions)
