"""The tuned robotics presets of ``her_wrap.sb3.presets`` are the entries of ``configs/her.yml``.

``configs/her.yml`` is where tuned settings live (``her-wrap train`` reads it); the presets are the same
settings as keyword arguments of ``HER(...)`` for code and scripts. These tests keep the two equal.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from gymnasium import spaces
from stable_baselines3.common.noise import NormalActionNoise

from her_wrap.core.settings import SETTING_NAMES, HindsightSettings
from her_wrap.runs.config import hindsight_settings, load_run_config
from her_wrap.runs.model_factory import learner_kwargs
from her_wrap.sb3 import presets

CONFIG = Path(__file__).resolve().parents[1] / "configs" / "her.yml"
FETCH_ACTIONS = spaces.Box(-1.0, 1.0, (4,), dtype=np.float32)

CASES = [
    pytest.param(presets.FETCH_REACH_SAC, "FetchReach-v4", None, (), id="FetchReach-SAC"),
    pytest.param(
        presets.FETCH_REACH_DDPG,
        "FetchReach-v4",
        "ddpg",
        ("noise_type:normal", "noise_std:0.2"),
        id="FetchReach-DDPG",
    ),
    pytest.param(presets.PANDA_REACH_SAC, "PandaReach-v3", None, (), id="PandaReach-SAC"),
    pytest.param(presets.manipulation_ddpg(4), "FetchPush-v4", None, (), id="FetchPush-DDPG"),
]


def config_as_her_kwargs(env_id: str, algo: str | None, overrides: tuple[str, ...]) -> dict[str, Any]:
    config = load_run_config(CONFIG, env_id, algo=algo, overrides=overrides)
    return {
        "settings": hindsight_settings(config.her),
        "normalize": config.normalize,
        **{key: value for key, value in config.her.items() if key not in SETTING_NAMES},
        **learner_kwargs(config, FETCH_ACTIONS),
    }


def preset_as_her_kwargs(preset: dict[str, Any]) -> dict[str, Any]:
    kwargs = dict(preset)
    settings = {key: kwargs.pop(key) for key in list(kwargs) if key in SETTING_NAMES}
    return {"settings": HindsightSettings(**settings), "normalize": kwargs.pop("normalize", False), **kwargs}


def comparable(kwargs: dict[str, Any]) -> dict[str, Any]:
    """Action noise compared by kind and scale (two noise objects are never equal)."""
    result = dict(kwargs)
    noise = result.pop("action_noise", None)
    if noise is not None:
        assert isinstance(noise, NormalActionNoise)
        result["action_noise"] = ("normal", noise._mu.tolist(), noise._sigma.tolist())
    if isinstance(result.get("train_freq"), list):
        result["train_freq"] = tuple(result["train_freq"])
    return result


def test_manipulation_preset_runs_the_configs_number_of_envs_and_threads():
    config = load_run_config(CONFIG, "FetchPush-v4")
    assert (config.n_envs, config.num_threads) == (
        presets.MANIPULATION_DDPG_N_ENVS,
        presets.MANIPULATION_DDPG_NUM_THREADS,
    )


@pytest.mark.parametrize(("preset", "env_id", "algo", "overrides"), CASES)
def test_preset_equals_the_config_entry(preset, env_id, algo, overrides):
    assert comparable(preset_as_her_kwargs(preset)) == comparable(
        config_as_her_kwargs(env_id, algo, overrides)
    )
