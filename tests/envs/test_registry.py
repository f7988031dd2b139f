"""The env registry (``her_wrap.envs.registry``): which ids can be made, and the errors that name the fix."""

from __future__ import annotations

import functools
import pickle
import subprocess
import sys
import textwrap
from pathlib import Path

import gymnasium
import numpy as np
import pytest
from gymnasium import spaces

from her_wrap.envs import BitFlippingEnv, registry
from her_wrap.envs.registry import (
    MissingExtraError,
    OptionalEnvPackage,
    UnknownEnvError,
    check_goal_space,
    ensure_registered,
    make_goal_env,
)
from her_wrap.runs.env_factory import check_env_id
from her_wrap.runs.env_factory import ensure_registered as ensure_registered_for_runs
from her_wrap.runs.errors import UsageError

BITS = spaces.Box(0.0, 1.0, (3,), dtype=np.float32)

# ---------------------------------------------------------------- making envs


def test_make_goal_env_makes_her_wraps_ids_with_their_kwargs() -> None:
    env = make_goal_env("BitFlippingContinuous-v0", n_bits=3)
    assert (type(env.unwrapped), env.unwrapped.n_bits, env.unwrapped.continuous) == (BitFlippingEnv, 3, True)


def test_make_goal_env_makes_ids_gymnasium_knows_already() -> None:
    assert make_goal_env("CartPole-v1").spec.id == "CartPole-v1"  # type: ignore[union-attr]


def test_make_goal_env_imports_the_module_of_a_module_qualified_id(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "registry_test_envs.py").write_text(
        textwrap.dedent(
            """
            import gymnasium
            gymnasium.register(
                "RegistryTestBits-v0", entry_point="her_wrap.envs.bit_flipping:BitFlippingEnv", kwargs={"n_bits": 2}
            )
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        assert make_goal_env("registry_test_envs:RegistryTestBits-v0").unwrapped.n_bits == 2
    finally:
        gymnasium.registry.pop("RegistryTestBits-v0", None)
        sys.modules.pop("registry_test_envs", None)


def test_make_goal_env_pickles_as_a_partial_for_subprocess_envs() -> None:
    factory = pickle.loads(pickle.dumps(functools.partial(make_goal_env, "BitFlipping-v0", n_bits=4)))
    assert factory().observation_space["desired_goal"].shape == (4,)


def test_a_fresh_process_makes_her_wraps_ids_through_subprocess_vec_env() -> None:
    """SubprocVecEnv workers start from nothing (``spawn``): the factory itself must register the id."""
    from stable_baselines3.common.vec_env import SubprocVecEnv

    vec_env = SubprocVecEnv(
        [functools.partial(make_goal_env, "BitFlipping-v0", n_bits=4)], start_method="spawn"
    )
    try:
        assert vec_env.reset()["desired_goal"].shape == (1, 4)
    finally:
        vec_env.close()


def test_the_registry_imports_no_learner_and_no_optional_package() -> None:
    """``her_wrap.envs`` sits below the learner layer; the robotics packages load only for their ids."""
    code = (
        "import sys; from her_wrap.envs.registry import make_goal_env; make_goal_env('BitFlipping-v0'); "
        "print(sorted({'torch', 'stable_baselines3', 'gymnasium_robotics', 'panda_gym'} & set(sys.modules)))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"


# ---------------------------------------------------------------- errors that name the fix


def test_an_unknown_id_is_a_value_error_naming_the_closest_ids() -> None:
    with pytest.raises(ValueError, match="unknown env id 'BitFliping-v0'; did you mean BitFlipping-v0"):
        ensure_registered("BitFliping-v0")


def test_an_unknown_id_keeps_its_close_matches() -> None:
    with pytest.raises(UnknownEnvError) as caught:
        make_goal_env("BitFlipingContinuous-v0")
    assert caught.value.close_matches[0] == "BitFlippingContinuous-v0"


def test_an_id_close_to_nothing_says_so() -> None:
    with pytest.raises(UnknownEnvError, match="no registered id is close"):
        ensure_registered("Zzzzzzzzzzzzzz-v7")


def test_a_module_qualified_id_whose_module_is_missing_names_the_module() -> None:
    with pytest.raises(UnknownEnvError, match="its module 'no_such_env_module' cannot be imported"):
        ensure_registered("no_such_env_module:Anything-v0")


def test_an_id_of_a_missing_optional_package_names_the_install_command(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    absent = OptionalEnvPackage("her_wrap_absent_env_package", ("AbsentReach",))
    monkeypatch.setattr(registry, "OPTIONAL_ENV_PACKAGES", (absent,))
    with pytest.raises(
        MissingExtraError, match=r"her_wrap_absent_env_package .*pip install 'her_wrap\[robotics\]'"
    ):
        make_goal_env("AbsentReach-v1")


@pytest.mark.parametrize(
    ("env_id", "module"),
    [("FetchReach-v4", "gymnasium_robotics"), ("PandaReach-v3", "panda_gym")],
)
def test_the_robotics_ids_are_registered_by_their_package_on_demand(env_id: str, module: str) -> None:
    pytest.importorskip(module)
    ensure_registered(env_id)
    assert env_id in gymnasium.registry


# ---------------------------------------------------------------- goal spaces


def test_a_goal_dict_space_passes_the_check() -> None:
    check_goal_space(spaces.Dict({"observation": BITS, "achieved_goal": BITS, "desired_goal": BITS}))


def test_a_flat_space_is_rejected_naming_the_goal_dict() -> None:
    with pytest.raises(ValueError, match="Box observations: HER needs the goal dict"):
        check_goal_space(BITS)


def test_a_dict_space_without_goal_keys_is_rejected_naming_them() -> None:
    with pytest.raises(ValueError, match=r"lack the goal keys \['achieved_goal'\]"):
        check_goal_space(spaces.Dict({"observation": BITS, "desired_goal": BITS}))


def test_goals_of_different_shapes_are_rejected() -> None:
    wide = spaces.Box(0.0, 1.0, (4,), dtype=np.float32)
    with pytest.raises(ValueError, match=r"achieved_goal \(3,\) and desired_goal \(4,\) differ in shape"):
        check_goal_space(spaces.Dict({"observation": BITS, "achieved_goal": BITS, "desired_goal": wide}))


# ---------------------------------------------------------------- the command line's one-line errors


def test_runs_report_an_unknown_id_as_one_usage_line() -> None:
    with pytest.raises(UsageError, match=r"^unknown env id 'BitFliping-v0'; did you mean BitFlipping-v0"):
        ensure_registered_for_runs("BitFliping-v0")


def test_runs_report_a_missing_extra_as_one_usage_line(monkeypatch: pytest.MonkeyPatch) -> None:
    absent = OptionalEnvPackage("her_wrap_absent_env_package", ("AbsentReach",))
    monkeypatch.setattr(registry, "OPTIONAL_ENV_PACKAGES", (absent,))
    with pytest.raises(UsageError, match=r"needs the robotics extra .*pip install 'her_wrap\[robotics\]'"):
        check_env_id("AbsentReach-v1", {})
