"""``her-wrap optimize --minutes-to`` (training minutes to a success rate) and ``--space`` (a search-space file)."""

from __future__ import annotations

import argparse
from pathlib import Path

import optuna
import pytest

from her_wrap.runs import cli
from her_wrap.runs.arguments import default_config_path
from her_wrap.runs.config import load_run_config
from her_wrap.runs.errors import UsageError
from her_wrap.runs.optimize import add_arguments
from her_wrap.runs.search_spaces import Categorical, Uniform, load_search_space, sample_settings
from her_wrap.runs.studies import open_study
from her_wrap.runs.study_storage import open_storage
from her_wrap.runs.trials import TrialEvaluation, best_reached_minutes, minutes_value, train_trial

optuna.logging.set_verbosity(optuna.logging.WARNING)

SPACE = """\
batch_size: [64, 256]
policy_kwargs.net_arch: [[64, 64], [32, 32, 32]]
learning_rate: {low: 1.0e-4, high: 3.0e-3, log: true}
"""


def write_space(tmp_path: Path, text: str = SPACE) -> Path:
    path = tmp_path / "space.yml"
    path.write_text(text)
    return path


def test_a_space_file_reads_lists_as_choices_and_mappings_as_ranges(tmp_path: Path) -> None:
    space = load_search_space(write_space(tmp_path))
    assert space == {
        ("batch_size",): Categorical((64, 256)),
        ("policy_kwargs", "net_arch"): Categorical(([64, 64], [32, 32, 32])),
        ("learning_rate",): Uniform(1e-4, 3e-3, log=True),
    }


def test_list_choices_are_stored_as_text_and_sampled_back_as_lists(tmp_path: Path) -> None:
    space = load_search_space(write_space(tmp_path))
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    drawn = [sample_settings(study.ask(), "dqn", space=space) for _ in range(20)]
    assert {str(settings[("policy_kwargs", "net_arch")]) for settings in drawn} == {
        "[64, 64]",
        "[32, 32, 32]",
    }
    stored = {"batch_size": 64, "policy_kwargs.net_arch": "[32, 32, 32]", "learning_rate": 1e-3}
    replayed = sample_settings(optuna.trial.FixedTrial(stored), "dqn", space=space)
    assert replayed[("policy_kwargs", "net_arch")] == [32, 32, 32]


def test_a_space_samples_only_its_keys_and_leaves_the_fixed_ones(tmp_path: Path) -> None:
    space = load_search_space(write_space(tmp_path))
    settings = sample_settings(optuna.create_study().ask(), "dqn", fixed={("batch_size",)}, space=space)
    assert set(settings) == {("policy_kwargs", "net_arch"), ("learning_rate",)}


@pytest.mark.parametrize(
    "text",
    [
        "batch_size: 64\n",
        "batch_size: []\n",
        "learning_rate: {low: 0.1, high: 0.01}\n",
        "learning_rate: {low: 0, high: 0.01, log: true}\n",
        "learning_rate: {low: 1.0e-4, top: 0.01}\n",
    ],
)
def test_a_bad_space_entry_is_refused_naming_the_key_and_the_forms(tmp_path: Path, text: str) -> None:
    with pytest.raises(UsageError, match=r"space\.yml: (batch_size|learning_rate): .* is no search space"):
        load_search_space(write_space(tmp_path, text))


def test_a_space_file_that_is_no_mapping_is_refused(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="a search space is a YAML mapping"):
        load_search_space(write_space(tmp_path, "- batch_size\n"))


def test_minutes_value_ranks_every_trial_that_reached_the_target_before_every_one_that_did_not() -> None:
    reached_late = minutes_value(7.9, 0.95, 0.9, 8.0)
    missed_narrowly = minutes_value(None, 0.85, 0.9, 8.0)
    missed_widely = minutes_value(None, 0.2, 0.9, 8.0)
    assert reached_late == 7.9
    assert reached_late < 8.0 < missed_narrowly < missed_widely < 16.0


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return parser.parse_args(["--env", "BitFlipping-v0", *argv])


@pytest.mark.parametrize("value", ["0", "1.5", "x"])
def test_minutes_to_takes_a_success_rate(value: str) -> None:
    with pytest.raises(SystemExit):
        parse(["--minutes-to", value])


def test_minutes_to_trains_until_the_target_and_records_the_minutes_and_env_steps(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status = cli.main(
        ["optimize", "--env", "BitFlipping-v0", "-params", "env_kwargs.n_bits:4", "-n", "3000",
         "--n-evaluations", "10", "--n-trials", "1", "--minutes-to", "0.9", "--seed", "0",
         "--space", str(write_space(tmp_path)), "-f", str(tmp_path / "logs")]
    )  # fmt: skip
    assert status == 0
    storage = open_storage(f"sqlite:///{tmp_path / 'logs/her/her-BitFlipping-v0-dqn/study.db'}")
    study = optuna.load_study(study_name="her-BitFlipping-v0-dqn", storage=storage)
    assert study.direction == optuna.study.StudyDirection.MINIMIZE
    [trial] = study.trials
    # 4 bits reach 0.9 well before the 3000 steps; the trial stopped at that evaluation
    assert trial.user_attrs["reached"] is True
    assert trial.user_attrs["env_steps"] < 3000 and trial.user_attrs["env_steps"] % 300 == 0
    assert trial.value == pytest.approx(trial.user_attrs["train_minutes"], abs=1e-3)
    assert trial.user_attrs["best_success"] >= 0.9
    assert "training minutes to success 0.9" in capsys.readouterr().out


def test_a_trial_stops_once_it_trained_longer_than_the_best_trial_took(tmp_path: Path) -> None:
    storage = open_storage(f"sqlite:///{tmp_path / 'study.db'}")
    study = open_study(storage, "minutes", direction="minimize")
    study.add_trial(
        optuna.trial.create_trial(
            value=1e-6,
            user_attrs={"reached": True},
            params={"batch_size": 64, "policy_kwargs.net_arch": "[64, 64]", "learning_rate": 1e-3},
            distributions={
                "batch_size": optuna.distributions.CategoricalDistribution([64, 256]),
                "policy_kwargs.net_arch": optuna.distributions.CategoricalDistribution(
                    ["[64, 64]", "[32, 32, 32]"]
                ),
                "learning_rate": optuna.distributions.FloatDistribution(1e-4, 3e-3, log=True),
            },
        )
    )
    assert best_reached_minutes(study) == 1e-6
    status = cli.main(
        ["optimize", "--env", "BitFlipping-v0", "-n", "20000", "--n-evaluations", "20", "--n-trials", "1",
         "--minutes-to", "1.0", "--max-minutes", "5", "--seed", "0", "--storage", f"sqlite:///{tmp_path / 'study.db'}",
         "--study-name", "minutes", "--space", str(write_space(tmp_path))]
    )  # fmt: skip
    assert status == 0
    trial = optuna.load_study(study_name="minutes", storage=storage).trials[-1]
    # the 15-bit task is far from 1.0 after its first evaluation, already past the best trial's minutes
    assert trial.user_attrs["reached"] is False and trial.user_attrs["env_steps"] == 1000
    assert trial.value == pytest.approx(5 * (2 - trial.user_attrs["best_success"]))


def test_a_maximizing_study_is_not_joined_by_a_minutes_search(tmp_path: Path) -> None:
    storage = open_storage(f"sqlite:///{tmp_path / 'study.db'}")
    open_study(storage, "success")
    with pytest.raises(UsageError, match="give another --study-name"):
        open_study(storage, "success", direction="minimize")


def test_the_grid_sampler_runs_every_combination_of_a_space_once(tmp_path: Path) -> None:
    space = write_space(tmp_path, "batch_size: [64, 256]\npolicy_kwargs.net_arch: [[64, 64], [32, 32]]\n")
    status = cli.main(
        ["optimize", "--env", "BitFlipping-v0", "-params", "env_kwargs.n_bits:4", "-n", "600",
         "--n-evaluations", "1", "--n-trials", "10", "--sampler", "grid", "--space", str(space), "--seed", "0",
         "-f", str(tmp_path / "logs")]
    )  # fmt: skip
    assert status == 0
    storage = open_storage(f"sqlite:///{tmp_path / 'logs/her/her-BitFlipping-v0-dqn/study.db'}")
    trials = optuna.load_study(study_name="her-BitFlipping-v0-dqn", storage=storage).trials
    combinations = sorted((t.params["batch_size"], t.params["policy_kwargs.net_arch"]) for t in trials)
    assert combinations == [(64, "[32, 32]"), (64, "[64, 64]"), (256, "[32, 32]"), (256, "[64, 64]")]


def test_the_grid_sampler_needs_a_space_of_choices(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status = cli.main(
        ["optimize", "--env", "BitFlipping-v0", "--sampler", "grid", "--space", str(write_space(tmp_path)),
         "-f", str(tmp_path / "logs")]
    )  # fmt: skip
    assert status == 2
    assert "--sampler grid runs every combination" in capsys.readouterr().err


def test_a_trial_reports_each_evaluation_with_its_env_steps_and_training_seconds() -> None:

    config = load_run_config(default_config_path(), "BitFlipping-v0", overrides=["env_kwargs.n_bits:4"])
    seen: list[TrialEvaluation] = []

    def report(evaluation: TrialEvaluation) -> bool:
        seen.append(evaluation)
        return evaluation.index < 2  # stop after the third

    evaluations = train_trial(
        config, n_timesteps=1000, n_evaluations=10, eval_episodes=5, seed=0, report=report
    )
    assert evaluations == seen
    assert [evaluation.index for evaluation in seen] == [0, 1, 2]
    assert [evaluation.env_steps for evaluation in seen] == [100, 200, 300]
    seconds = [evaluation.train_seconds for evaluation in seen]
    assert 0 < seconds[0] <= seconds[1] <= seconds[2]


def test_an_in_process_trial_stops_at_its_entrys_max_minutes() -> None:
    """As ``her-wrap train`` would: the entry's budget (a few milliseconds here) ends the trial first."""
    overrides = ["env_kwargs.n_bits:4", "max_minutes:0.0001"]
    config = load_run_config(default_config_path(), "BitFlipping-v0", overrides=overrides)
    evaluations = train_trial(
        config, n_timesteps=100_000, n_evaluations=2, eval_episodes=2, seed=0, report=lambda evaluation: True
    )
    assert evaluations and evaluations[-1].env_steps < 50_000
