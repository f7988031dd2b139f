"""stable-baselines3's env tests of its ``BitFlippingEnv`` (``tests/test_envs.py``), run against her_wrap's.

Each case keeps what SB3's asserts: SB3's own env checker passes on every observation encoding without
a warning, and the same checker fails once the goal dict loses or renames a key.

.. note:: her_wrap's env differs from SB3's on purpose in two ways these checks see through: its default
    observation parts are ``float32`` boxes of 0.0 / 1.0 (SB3: ``MultiBinary``), so ``MlpPolicy`` and
    ``VecNormalize`` take them without a cast; and its goal is random unless ``fixed_goal=True`` (SB3:
    always all ones), the HER paper's task. The checker accepts both, so the cases run unchanged.
"""

from __future__ import annotations

import warnings
from typing import Any

import pytest
from stable_baselines3.common.env_checker import check_env

from her_wrap.envs import BitFlippingEnv

#: SB3's parametrization of its BitFlippingEnv checks (``test_bit_flipping``), named.
SB3_ENV_OPTIONS: dict[str, dict[str, Any]] = {
    "continuous actions": {"continuous": True},
    "discrete observations": {"discrete_obs_space": True},
    "channel-first images": {"image_obs_space": True, "channel_first": True},
    "channel-last images": {"image_obs_space": True, "channel_first": False},
}


def checker_warnings(env: BitFlippingEnv) -> list[str]:
    """The warnings SB3's checker emits on ``env``, as text."""
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        check_env(env)
    return [str(warning.message) for warning in record]


def test_the_default_env_passes_sb3s_checker_without_warnings() -> None:
    """SB3's ``test_custom_envs`` case of ``BitFlippingEnv``."""
    assert checker_warnings(BitFlippingEnv()) == []


@pytest.mark.parametrize("options", SB3_ENV_OPTIONS.values(), ids=SB3_ENV_OPTIONS.keys())
def test_each_option_passes_sb3s_checker_without_warnings(options: dict[str, Any]) -> None:
    assert checker_warnings(BitFlippingEnv(**options)) == []


@pytest.mark.parametrize("options", SB3_ENV_OPTIONS.values(), ids=SB3_ENV_OPTIONS.keys())
def test_sb3s_checker_fails_when_the_observation_key_is_removed(options: dict[str, Any]) -> None:
    env = BitFlippingEnv(**options)
    del env.observation_space.spaces["observation"]
    with pytest.raises(AssertionError):
        check_env(env)


@pytest.mark.parametrize("options", SB3_ENV_OPTIONS.values(), ids=SB3_ENV_OPTIONS.keys())
def test_sb3s_checker_fails_when_the_observation_key_is_renamed(options: dict[str, Any]) -> None:
    env = BitFlippingEnv(**options)
    env.observation_space.spaces["obs"] = env.observation_space.spaces.pop("observation")
    with pytest.raises(AssertionError):
        check_env(env)
