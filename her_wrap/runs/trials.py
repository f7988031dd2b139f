"""One trial of ``her-wrap optimize``: train an agent, evaluate it on the way, and score it.

Two scores: the mean success of the evaluations (:func:`trial_value`, maximized), or the training minutes
until an evaluation reached a success rate (:func:`minutes_trial`, ``--minutes-to``, minimized).

A trial trains in the ``her-wrap optimize`` process (:func:`train_trial`), or, for an entry of several
workers, as ``her-wrap train --workers N`` in a child process that the trial follows through its
``evaluations.npz`` and stops with SIGTERM (:func:`train_trial_in_workers`), so that a trial measures the
recipe as the entry ships it.
"""

from __future__ import annotations

import argparse
import gc
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from her_wrap.runs.env_factory import make_training_envs
from her_wrap.runs.errors import EXIT_USAGE, RunError, UsageError, signal_status
from her_wrap.runs.run_config import RunConfig
from her_wrap.runs.run_layout import ALGO_FOLDER, folder_name
from her_wrap.runs.yaml_io import write_yaml_file
from her_wrap.sb3.evaluation import EvaluationResult


@dataclass(frozen=True)
class TrialEvaluation:
    """One evaluation of a trial's agent, as its ``report`` receives it.

    :param index: 0 for the trial's first evaluation, then 1, 2, ...
    :param env_steps: the env steps the agent had trained on
    :param train_seconds: the wall time it had trained, evaluations left out
    :param result: the evaluation's success rate, returns and lengths
    """

    index: int
    env_steps: int
    train_seconds: float
    result: EvaluationResult


def train_trial(
    config: RunConfig,
    *,
    n_timesteps: int,
    n_evaluations: int,
    eval_episodes: int,
    seed: int,
    report: Callable[[TrialEvaluation], bool],
    vec_env: str = "dummy",
    device: str = "auto",
    verbose: int = 0,
    max_train_seconds: float | None = None,
) -> list[TrialEvaluation]:
    """Train one trial's agent and evaluate it ``n_evaluations`` times on the way.

    :param report: called with each evaluation as it ends; ``False`` stops training (pruned)
    :param max_train_seconds: stop training after this much wall time, evaluations left out (the entry's
        ``max_minutes``, when shorter, stops it first, as it stops ``her-wrap train``)
    :return: the evaluations that ran
    """
    from her_wrap.runs.callbacks import SuccessEvalCallback
    from her_wrap.runs.model_factory import build_agent

    envs = make_training_envs(config, seed, vec_env=vec_env)
    try:
        agent = build_agent(config, envs.train, seed=seed, verbose=verbose, device=device)
        done: list[TrialEvaluation] = []

        def after_evaluation(result: EvaluationResult) -> bool:
            env_steps, _ = evaluation.results[-1]
            done.append(TrialEvaluation(len(done), env_steps, evaluation.train_seconds[-1], result))
            return report(done[-1])

        evaluation = SuccessEvalCallback(
            agent,
            envs.evaluate,
            eval_freq=max(n_timesteps // n_evaluations, 1),
            n_eval_episodes=eval_episodes,
            after_evaluation=after_evaluation,
            max_train_seconds=_shorter_budget(max_train_seconds, config.max_minutes),
            verbose=verbose,
        )
        agent.learn(n_timesteps, callback=evaluation, progress_bar=False)
        return done
    finally:
        envs.close()
        gc.collect()


def _shorter_budget(seconds: float | None, entry_minutes: float | None) -> float | None:
    """The tighter of a trial's budget in seconds and its entry's ``max_minutes`` (None: neither sets one)."""
    budgets = [
        value
        for value in (seconds, None if entry_minutes is None else 60.0 * entry_minutes)
        if value is not None
    ]
    return min(budgets, default=None)


#: Seconds between two reads of a worker trial's ``evaluations.npz``.
POLL_SECONDS = 0.5
#: Seconds a worker trial's run has to save and exit once stopped, before it is killed.
STOP_GRACE_SECONDS = 180.0
#: What ``her-wrap train`` prints as it starts training (its clock of training time starts there).
TRAINING_STARTS = b"\nTraining HER("


def _evaluation_rows(path: Path) -> list[tuple[int, float, EvaluationResult]]:
    """The evaluations a run has written so far: (env steps of one worker, training seconds, result)."""
    if not path.is_file():
        return []
    with np.load(path) as arrays:
        return [
            (int(steps), float(seconds), EvaluationResult(list(map(float, returns)), list(map(int, lengths)),
                                                          list(map(bool, successes))))
            for steps, seconds, returns, lengths, successes in zip(
                arrays["timesteps"], arrays["train_seconds"], arrays["results"], arrays["ep_lengths"],
                arrays["successes"], strict=True,
            )
        ]  # fmt: skip


def worker_trial_command(
    config_path: Path,
    env_id: str,
    *,
    workers: int,
    n_timesteps: int,
    n_evaluations: int,
    eval_episodes: int,
    seed: int,
    log_folder: Path,
    vec_env: str = "dummy",
    device: str = "auto",
    verbose: int = 0,
    num_threads: int | None = None,
    oversubscribe: bool = False,
) -> list[str]:
    """The ``her-wrap train`` command of a worker trial (``n_timesteps``: each worker's, as ``-n`` counts)."""
    return [
        sys.executable, "-m", "her_wrap.runs.cli", "train", "--env", env_id, "-c", str(config_path),
        "--seed", str(seed), "-n", str(n_timesteps), "--workers", str(workers),
        "--eval-freq", str(max(n_timesteps // n_evaluations, 1)), "--eval-episodes", str(eval_episodes),
        "--vec-env", vec_env, "--device", device, "--verbose", str(verbose), "--no-progress",
        *(["--num-threads", str(num_threads)] if num_threads is not None else []),
        *(["--oversubscribe"] if oversubscribe else []), "-f", str(log_folder),
    ]  # fmt: skip


def train_trial_in_workers(
    config: RunConfig,
    *,
    workers: int,
    folder: Path,
    n_timesteps: int,
    n_evaluations: int,
    eval_episodes: int,
    seed: int,
    report: Callable[[TrialEvaluation], bool],
    vec_env: str = "dummy",
    device: str = "auto",
    verbose: int = 0,
    num_threads: int | None = None,
    oversubscribe: bool = False,
    max_train_seconds: float | None = None,
) -> list[TrialEvaluation]:
    """Train one trial's agent on ``workers`` worker processes, as :func:`train_trial` does in this one.

    Runs ``her-wrap train --workers`` (:func:`worker_trial_command`) with the trial's entry written to
    ``folder/config.yml`` and its run folder under ``folder``, and reports each evaluation the run writes;
    ``report`` returning ``False`` stops the run (SIGTERM: the workers stop at one step and exit). Env
    steps count every worker's. ``max_train_seconds`` is checked against the wall time since the run
    printed that it starts training, less what its evaluations took up to the last one; the evaluation
    it makes as it stops closes the curve. ``folder`` is removed once the run ended well, and
    kept, with the run's output in ``folder/train.log``, when it failed.

    :param n_timesteps: env steps of each worker (``-n`` of ``her-wrap train --workers``)
    :raises UsageError: when the run refused its settings (exit status 2), with the end of its output
    :raises RunError: when the run failed otherwise
    """
    shutil.rmtree(folder, ignore_errors=True)  # a failed trial's of an earlier study of the same name
    folder.mkdir(parents=True)
    config_path = folder / "config.yml"
    write_yaml_file(config_path, {config.env_id: config.to_entry()})
    command = worker_trial_command(
        config_path, config.env_id, workers=workers, n_timesteps=n_timesteps, n_evaluations=n_evaluations,
        eval_episodes=eval_episodes, seed=seed, log_folder=folder, vec_env=vec_env, device=device,
        verbose=verbose, num_threads=num_threads, oversubscribe=oversubscribe,
    )  # fmt: skip
    evaluations_path = folder / ALGO_FOLDER / f"{folder_name(config.env_id)}_1" / "evaluations.npz"
    log_path = folder / "train.log"
    done: list[TrialEvaluation] = []
    stopped_by_report = stopping = False
    with log_path.open("wb") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    started: float | None = None  # when the run printed that it starts training
    outside_training = 0.0
    try:
        seen = 0
        while True:
            running = process.poll() is None
            if started is None and TRAINING_STARTS in log_path.read_bytes():
                started = time.monotonic()
            rows = _evaluation_rows(evaluations_path)
            for steps, seconds, result in rows[seen:]:
                seen += 1
                if stopped_by_report:
                    continue  # the evaluation the run made as it stopped: the trial had ended
                outside_training = time.monotonic() - (started or time.monotonic()) - seconds
                done.append(TrialEvaluation(len(done), steps * workers, seconds, result))
                if not report(done[-1]):
                    stopped_by_report = True
            trained = None if started is None else time.monotonic() - started - outside_training
            over_budget = (
                max_train_seconds is not None and trained is not None and trained >= max_train_seconds
            )
            if running and not stopping and (stopped_by_report or over_budget):
                process.send_signal(signal.SIGTERM)
                stopping = True
            if not running:
                break
            time.sleep(POLL_SECONDS)
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(STOP_GRACE_SECONDS)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
    # Stopped, the run exits with SIGTERM's status once saved, or dies of it when it came as the run ended.
    expected = {0, signal_status(signal.SIGTERM), -signal.SIGTERM} if stopping else {0}
    if process.returncode not in expected:
        tail = log_path.read_text(errors="replace").strip().splitlines()[-15:]
        problem = (
            f"a trial's run on {workers} workers failed with status {process.returncode} (output: {log_path}):\n"
            + "\n".join(tail)
        )
        # A setting the learner refuses fails this trial alone, as it does in one process.
        raise UsageError(problem) if process.returncode == EXIT_USAGE else RunError(problem)
    shutil.rmtree(folder, ignore_errors=True)
    return done


def check_worker_trials(args: argparse.Namespace, workers: int) -> None:
    """Refuse, before any trial, trials on ``workers`` workers that ``her-wrap train --workers`` would refuse
    (more workers than cores, a GPU device, a ``train_freq`` in episodes), or ``--n-jobs`` of them at once
    on fewer cores than they take together.

    :raises UsageError: naming the problem and the fix
    """
    from her_wrap.runs import launcher

    cores = launcher.available_cores()
    if args.n_jobs > 1 and args.n_jobs * workers > cores and not args.oversubscribe:
        raise UsageError(
            f"--n-jobs {args.n_jobs} trials at once on {workers} workers each take {args.n_jobs * workers} CPU "
            f"cores, more than the {cores} here: lower --n-jobs or --workers, or pass --oversubscribe"
        )
    launch = {
        **vars(args),
        "workers": workers,
        "pin_workers": None,
        "rendezvous_port": None,
        "max_restarts": 0,
        "worker_timeout": launcher.DEFAULT_TIMEOUT_S,
        "trained_agent": None,
    }
    launcher.check_launch(argparse.Namespace(**launch))


def train_trial_with(
    args: argparse.Namespace,
    config: RunConfig,
    n_timesteps: int,
    seed: int,
    report: Callable[[TrialEvaluation], bool],
    *,
    workers: int = 1,
    folder: Path | None = None,
    **options: Any,
) -> list[TrialEvaluation]:
    """:func:`train_trial` with the command's options: ``--n-evaluations``, ``--eval-episodes``,
    ``--vec-env``, ``--device`` and ``--verbose`` (one level quieter inside a trial); ``options`` go
    through as they are. With ``workers`` above 1, :func:`train_trial_in_workers` in ``folder``."""
    if workers > 1:
        if folder is None:
            raise ValueError("a trial on several workers needs a folder for its run")
        return train_trial_in_workers(
            config,
            workers=workers,
            folder=folder,
            n_timesteps=n_timesteps,
            n_evaluations=args.n_evaluations,
            eval_episodes=args.eval_episodes,
            seed=seed,
            report=report,
            vec_env=args.vec_env,
            device=args.device,
            verbose=max(args.verbose - 1, 0),
            num_threads=args.num_threads,
            oversubscribe=bool(getattr(args, "oversubscribe", False)),
            **options,
        )
    return train_trial(
        config,
        n_timesteps=n_timesteps,
        n_evaluations=args.n_evaluations,
        eval_episodes=args.eval_episodes,
        seed=seed,
        report=report,
        vec_env=args.vec_env,
        device=args.device,
        verbose=max(args.verbose - 1, 0),
        **options,
    )


def trial_value(success_rates: list[float], score_last: int | None = None) -> float:
    """A trial's value: the mean of its evaluations' success rates, or of the last ``score_last`` of them."""
    scored = success_rates if score_last is None else success_rates[-score_last:]
    return sum(scored) / max(len(scored), 1)


def minutes_value(
    reached_minutes: float | None, best_success: float, target: float, budget_minutes: float
) -> float:
    """A trial's value under ``--minutes-to``: the minutes it trained to reach ``target``, when it did.

    A trial that did not reach it scores ``budget_minutes * (2 - best_success / target)``: more than the
    budget (which any trial that reached the target trained within), and less the closer it came.
    ``budget_minutes`` is ``--max-minutes``, or the minutes the trial trained when there is none.
    """
    if reached_minutes is not None:
        return reached_minutes
    return budget_minutes * (2.0 - min(best_success / target, 1.0))


def best_reached_minutes(study: Any) -> float | None:
    """The fewest minutes any completed trial of ``study`` took to reach its target, or None."""
    import optuna

    values = [
        trial.value
        for trial in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
        if trial.user_attrs.get("reached") and trial.value is not None
    ]
    return min(values, default=None)


def minutes_trial(
    trial: Any,
    config: RunConfig,
    args: argparse.Namespace,
    n_timesteps: int,
    seed: int,
    *,
    workers: int = 1,
    folder: Path | None = None,
) -> float:
    """Train one ``--minutes-to`` trial until it reaches the target, can no longer win, or runs out."""
    target = float(args.minutes_to)
    incumbent = best_reached_minutes(trial.study)

    def report(evaluation: TrialEvaluation) -> bool:
        if evaluation.result.success_rate >= target:
            return False
        return incumbent is None or evaluation.train_seconds / 60.0 < incumbent

    evaluations = train_trial_with(
        args,
        config,
        n_timesteps,
        seed,
        report,
        workers=workers,
        folder=folder,
        max_train_seconds=None if args.max_minutes is None else args.max_minutes * 60.0,
    )
    best_success = max((evaluation.result.success_rate for evaluation in evaluations), default=0.0)
    reaching = [evaluation for evaluation in evaluations if evaluation.result.success_rate >= target]
    reached = bool(reaching)
    scored = reaching[0] if reaching else (evaluations[-1] if evaluations else None)
    minutes, steps = (scored.train_seconds / 60.0, scored.env_steps) if scored is not None else (0.0, 0)
    budget = args.max_minutes if args.max_minutes is not None else minutes
    trial.set_user_attr("reached", reached)
    trial.set_user_attr("best_success", best_success)
    trial.set_user_attr("train_minutes", round(minutes, 3))
    trial.set_user_attr("env_steps", int(steps))
    return minutes_value(minutes if reached else None, best_success, target, budget)
