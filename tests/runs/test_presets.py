"""The presets of ``her_wrap.runs.presets`` are the entries of ``configs/her.yml``.

``configs/her.yml`` is where recipes live (``her-wrap train`` reads it); the presets read the same
settings as keyword arguments of ``HER(...)`` for code and scripts, so the two cannot differ.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from gymnasium import spaces
from stable_baselines3.common.noise import NormalActionNoise

from her_wrap.core.settings import SETTING_NAMES, HindsightSettings
from her_wrap.runs import presets
from her_wrap.runs.config import load_run_config
from her_wrap.runs.model_factory import learner_kwargs
from her_wrap.runs.run_config import hindsight_settings

CONFIG = Path(__file__).resolve().parents[2] / "configs" / "her.yml"
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
    pytest.param(
        presets.manipulation_ddpg(4),
        "FetchPush-v4",
        None,
        presets.MANIPULATION_DDPG_CHANGES,
        id="FetchPush-DDPG-one-process",
    ),
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


def test_the_manipulation_preset_is_the_one_process_recipe_of_the_fetch_push_entry_on_two_workers():
    """FetchPush's entry trains on two workers, each with a quarter of an update's rows and half of a
    cycle's env steps; the preset, for a script of one process, keeps the whole of both in that process."""
    shipped = load_run_config(CONFIG, "FetchPush-v4")
    assert shipped.workers == 2 and shipped.learner_kwargs["batch_size"] == 512
    preset = presets.MANIPULATION_DDPG
    assert (preset["batch_size"], preset["learning_starts"]) == (2048, 1000)
    assert preset["train_freq"] == (250, "step")
    # greedy actions from the actor, as the one-process entry played them (FetchPush's two workers: an average)
    # and float32 hidden layers, as it was measured (FetchPush's entry: bfloat16)
    assert preset["policy_kwargs"] == {
        "net_arch": [256, 256, 256],
        "layer_norm": True,
        "actor_average": 0,
        "hidden_dtype": "float32",
    }
    assert presets.MANIPULATION_DDPG_N_ENVS == 2
    assert shipped.learner_kwargs["policy_kwargs"]["actor_average"] > 0
    assert "n_steps" not in preset and preset["n_sampled_goal"] == 8  # one-step returns, FetchPush's goals


def test_manipulation_preset_runs_the_configs_number_of_envs_and_threads():
    config = load_run_config(CONFIG, "FetchPush-v4", overrides=presets.MANIPULATION_DDPG_CHANGES)
    assert (config.n_envs, config.num_threads) == (
        presets.MANIPULATION_DDPG_N_ENVS,
        presets.MANIPULATION_DDPG_NUM_THREADS,
    )


@pytest.mark.parametrize(("preset", "env_id", "algo", "overrides"), CASES)
def test_preset_equals_the_config_entry(preset, env_id, algo, overrides):
    assert comparable(preset_as_her_kwargs(preset)) == comparable(
        config_as_her_kwargs(env_id, algo, overrides)
    )


def test_the_bit_flipping_preset_is_the_papers_setup_of_the_bit_flipping_entry():
    config = load_run_config(CONFIG, "BitFlipping-v0")
    assert presets.BIT_FLIPPING_DQN == learner_kwargs(config, None)
    assert (presets.BIT_FLIPPING_DQN["train_freq"], presets.BIT_FLIPPING_DQN["gradient_steps"]) == (
        (16, "episode"),
        40,
    )


def test_the_50_bit_preset_is_the_bit_flipping_entry_with_its_named_changes():
    assert presets.BIT_FLIPPING_DQN_LARGE == presets.preset(
        "BitFlipping-v0", overrides=presets.BIT_FLIPPING_DQN_LARGE_CHANGES, hindsight=False
    )
    assert presets.BIT_FLIPPING_DQN_LARGE_N_ENVS == 4
    assert presets.BIT_FLIPPING_DQN_LARGE["policy_kwargs"] == {"net_arch": [256, 256]}


def test_presets_read_the_shipped_file_not_one_in_the_current_folder(tmp_path, monkeypatch):
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "her.yml").write_text("BitFlipping-v0: {model_class: dqn, n_timesteps: 1}\n")
    monkeypatch.chdir(tmp_path)
    assert presets.shipped_config_path() == CONFIG
    assert presets.preset("BitFlipping-v0", hindsight=False) == presets.BIT_FLIPPING_DQN


def test_the_shipped_config_is_package_data_of_the_wheel():
    tomllib = pytest.importorskip("tomllib")

    pyproject = tomllib.loads((CONFIG.parents[1] / "pyproject.toml").read_text())
    setuptools = pyproject["tool"]["setuptools"]
    assert setuptools["package-dir"]["her_wrap.configs"] == "configs"
    assert "*.yml" in setuptools["package-data"]["her_wrap.configs"]
