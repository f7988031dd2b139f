"""One trial of ``her-wrap optimize``: train an agent, evaluate it on the way, and score it.

Two scores: the mean success of the evaluations (:func:`trial_value`, maximized), or the training minutes
until an evaluation reached a success rate (:func:`minutes_trial`, ``--minutes-to``, minimized).
"""

from __future__ import annotations

import argparse
import gc
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from her_wrap.runs.env_factory import make_training_envs
from her_wrap.runs.run_config import RunConfig
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
    :param max_train_seconds: stop training after this much wall time, evaluations left out
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
            max_train_seconds=max_train_seconds,
            verbose=verbose,
        )
        agent.learn(n_timesteps, callback=evaluation, progress_bar=False)
        return done
    finally:
        envs.close()
        gc.collect()


def train_trial_with(
    args: argparse.Namespace,
    config: RunConfig,
    n_timesteps: int,
    seed: int,
    report: Callable[[TrialEvaluation], bool],
    **options: Any,
) -> list[TrialEvaluation]:
    """:func:`train_trial` with the command's options: ``--n-evaluations``, ``--eval-episodes``,
    ``--vec-env``, ``--device`` and ``--verbose`` (one level quieter inside a trial); ``options`` go
    through as they are."""
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
    trial: Any, config: RunConfig, args: argparse.Namespace, n_timesteps: int, seed: int
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
