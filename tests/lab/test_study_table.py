"""The research log's table of an ``her-wrap optimize`` study."""

from __future__ import annotations

from pathlib import Path

import optuna
import pytest

from lab.study_table import main

optuna.logging.set_verbosity(optuna.logging.WARNING)


def add(study: optuna.Study, value: float | None, batch: int, **attributes: object) -> None:
    state = optuna.trial.TrialState.COMPLETE if value is not None else optuna.trial.TrialState.FAIL
    study.add_trial(
        optuna.trial.create_trial(
            state=state,
            value=value,
            params={"batch_size": batch},
            distributions={"batch_size": optuna.distributions.CategoricalDistribution([512, 1024, 2048])},
            user_attrs=attributes,
        )
    )


def test_a_minutes_study_lists_the_fewest_minutes_first_and_unfinished_trials_last(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    storage = f"sqlite:///{tmp_path / 'study.db'}"
    study = optuna.create_study(storage=storage, study_name="minutes", direction="minimize")
    add(study, 9.5, 2048, reached=False, train_minutes=8.0, env_steps=300000, best_success=0.84)
    add(study, None, 1024)
    add(study, 5.25, 512, reached=True, train_minutes=5.25, env_steps=260000, best_success=0.92)
    main([str(tmp_path / "study.db")])
    lines = capsys.readouterr().out.splitlines()
    assert (
        lines[0]
        == "| trial | state | value | batch_size | reached | train_minutes | env_steps | best_success |"
    )
    assert [line.split(" | ")[:4] for line in lines[2:]] == [
        ["| 2", "complete", "5.25", "512"],
        ["| 0", "complete", "9.5", "2048"],
        ["| 1", "fail", "", "1024"],
    ]


def test_a_file_without_the_named_study_is_refused_with_the_names_it_holds(tmp_path: Path) -> None:
    storage = f"sqlite:///{tmp_path / 'study.db'}"
    optuna.create_study(storage=storage, study_name="one")
    optuna.create_study(storage=storage, study_name="two")
    with pytest.raises(SystemExit):
        main([str(tmp_path / "study.db")])
    with pytest.raises(SystemExit):
        main([str(tmp_path / "study.db"), "--study-name", "three"])
