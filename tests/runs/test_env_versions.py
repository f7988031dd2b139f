"""Hyperparameter files keyed by an older version of an env id (rl-baselines3-zoo's ``FetchReach-v1``)."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import NamedTuple

import pytest

from her_wrap.runs.config import load_run_config
from her_wrap.runs.errors import UsageError
from her_wrap.runs.zoo_translation import other_version_entry


class VersionCase(NamedTuple):
    name: str
    keys: tuple[str, ...]
    asked: str
    expected: str | None


VERSION_CASES = [
    VersionCase("older version is used", ("default", "FetchReach-v1"), "FetchReach-v4", "FetchReach-v1"),
    VersionCase("exact entry wins", ("FetchReach-v1", "FetchReach-v4"), "FetchReach-v4", None),
    VersionCase(
        "newest of several",
        ("FetchReach-v1", "FetchReach-v2", "FetchPush-v3"),
        "FetchReach-v4",
        "FetchReach-v2",
    ),
    VersionCase("newer version is used too", ("FetchPush-v4",), "FetchPush-v1", "FetchPush-v4"),
    VersionCase("another env is not a version", ("FetchReachDense-v1",), "FetchReach-v4", None),
    VersionCase("namespace must match", ("ALE/Pong-v4",), "Pong-v5", None),
    VersionCase("namespaced ids", ("ALE/Pong-v4",), "ALE/Pong-v5", "ALE/Pong-v4"),
    VersionCase("default is not an env", ("default",), "default-v1", None),
    VersionCase("unversioned id asks for nothing else", ("Foo-v0",), "Foo", None),
]


@pytest.mark.parametrize("case", VERSION_CASES, ids=lambda case: case.name)
def test_other_version_entry(case: VersionCase) -> None:
    entries = {key: {} for key in case.keys}
    assert other_version_entry(entries, case.asked) == case.expected


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "tqc.yml"
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def test_older_entry_is_loaded_for_the_new_id_and_the_note_names_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(
        tmp_path,
        """
        FetchReach-v1:
          n_timesteps: 1000
          policy: MultiInputPolicy
          gamma: 0.95
        """,
    )
    config = load_run_config(path, "FetchReach-v4")
    assert (config.env_id, config.learner_kwargs["gamma"]) == ("FetchReach-v4", 0.95)
    assert capsys.readouterr().out.strip().splitlines() == [
        f"Note: {path} has no entry for 'FetchReach-v4'; using its 'FetchReach-v1' entry"
    ]


def test_exact_entry_is_loaded_without_a_note(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(
        tmp_path,
        """
        FetchReach-v1: {n_timesteps: 1000, policy: MultiInputPolicy, gamma: 0.5}
        FetchReach-v4: {n_timesteps: 1000, policy: MultiInputPolicy, gamma: 0.9}
        """,
    )
    assert load_run_config(path, "FetchReach-v4").learner_kwargs["gamma"] == 0.9
    assert capsys.readouterr().out == ""


def test_no_version_of_the_env_still_fails_listing_the_entries(tmp_path: Path) -> None:
    path = write(tmp_path, "FetchPush-v1: {n_timesteps: 1000, policy: MultiInputPolicy}\n")
    with pytest.raises(UsageError, match=r"no entry for 'FetchReach-v4'.*its entries: FetchPush-v1"):
        load_run_config(path, "FetchReach-v4")


def test_installed_zoo_tqc_file_trains_fetch_reach_v4_from_its_v1_entry(
    capsys: pytest.CaptureFixture[str],
) -> None:
    rl_zoo3 = pytest.importorskip("rl_zoo3", reason="the zoo extra (pip install -e '.[zoo]')")
    path = Path(rl_zoo3.__file__).parent / "hyperparams" / "tqc.yml"
    config = load_run_config(path, "FetchReach-v4", overrides=["learning_rate:3e-4"])
    assert (config.model_class, config.learner_kwargs["learning_rate"], config.hindsight.n_sampled_goal) == (
        "tqc",
        3e-4,
        4,
    )
    assert "using its 'FetchReach-v1' entry" in capsys.readouterr().out
