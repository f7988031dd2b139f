"""``her-wrap enjoy``: load a trained agent, run episodes, print its success rate.

The agent is a run's final model by default (its latest checkpoint when training did not finish),
``--load-best`` its best evaluation, ``--load-checkpoint N`` / ``--load-last-checkpoint`` a checkpoint, or
``-i PATH`` any saved agent. The run's ``config.yml`` gives the env's kwargs; the agent's zip holds its
normalization statistics.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from her_wrap.runs import arguments
from her_wrap.runs.checkpoints import (
    SavedAgent,
    checkpoint_model_path,
    checkpoint_paths,
    checkpoint_timesteps,
    latest_saved_agent,
    resolve_saved_agent,
)
from her_wrap.runs.config import RunConfig, load_run_config
from her_wrap.runs.env_factory import check_env_id, ensure_registered, make_vec_goal_env
from her_wrap.runs.errors import UsageError
from her_wrap.runs.goal_misses import goal_misses_report
from her_wrap.runs.run_layout import RunLayout, find_run
from her_wrap.sb3.evaluation import EvaluationResult, evaluate_agent

#: Seed of the episodes when ``--seed`` is not given (different from training's evaluation episodes).
DEFAULT_ENJOY_SEED = 20_000


def add_arguments(parser: argparse.ArgumentParser) -> None:
    arguments.add_env_argument(parser)
    arguments.add_log_folder_argument(parser)
    parser.add_argument("--exp-id", type=int, default=0, help="run N of ENV_ID_N; 0 = the latest (default)")
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--load-best", action="store_true", help="load best_model.zip")
    which.add_argument("--load-checkpoint", type=int, metavar="STEPS", help="load rl_model_STEPS_steps.zip")
    which.add_argument("--load-last-checkpoint", action="store_true", help="load the latest checkpoint")
    which.add_argument("-i", "--trained-agent", type=Path, metavar="PATH", help="load this saved agent")
    parser.add_argument(
        "-n", "--n-episodes", type=arguments.positive_int, default=10, help="episodes to run (default: 10)"
    )
    parser.add_argument("--stochastic", action="store_true", help="sample actions instead of greedy ones")
    parser.add_argument("--render", action="store_true", help="render the episodes (render_mode='human')")
    parser.add_argument(
        "-c",
        "--conf",
        type=Path,
        default=None,
        help="config for an agent outside a run folder (default: configs/her.yml)",
    )
    parser.add_argument(
        "--seed",
        type=int,
        default=DEFAULT_ENJOY_SEED,
        help=f"seed of the episodes (default: {DEFAULT_ENJOY_SEED})",
    )
    parser.add_argument("--device", default="auto", help="torch device (default: auto)")
    parser.add_argument(
        "--goal-misses",
        action="store_true",
        help="also report where the object ends against its goal: success by the goal's distance, and each "
        "miss short of, past or beside the goal (envs with a distance_threshold: Fetch, Panda)",
    )


def select_saved_agent(args: argparse.Namespace) -> SavedAgent:
    """The saved agent the options ask for.

    :raises UsageError: when the run or the requested file does not exist
    """
    if args.trained_agent is not None:
        return resolve_saved_agent(args.trained_agent)
    run = find_run(args.log_folder, args.env, args.exp_id)
    if args.load_best:
        if not run.best_model_path.is_file():
            raise UsageError(f"{run.run_dir} has no best_model.zip (was evaluation disabled?)")
        return resolve_saved_agent(run.best_model_path)
    if args.load_checkpoint is not None:
        return resolve_saved_agent(checkpoint_model_path(run.run_dir, args.load_checkpoint))
    timesteps = checkpoint_timesteps(run.run_dir)
    if args.load_last_checkpoint:
        if not timesteps:
            raise UsageError(f"{run.run_dir} has no checkpoints (train with --save-freq)")
        return resolve_saved_agent(checkpoint_paths(run.run_dir, timesteps[-1])[0])
    saved = latest_saved_agent(run)
    if saved is None:
        raise UsageError(f"{run.run_dir} holds no saved agent yet")
    if saved.model != run.final_model_path:
        print(f"Note: {run.run_dir} has no final model (training did not finish); using {saved.model.name}")
    return saved


def _run_config(args: argparse.Namespace, run: RunLayout | None) -> RunConfig:
    source = run.config_path if run is not None else (args.conf or arguments.default_config_path())
    return load_run_config(source, args.env)


def enjoy(args: argparse.Namespace) -> EvaluationResult:
    """Run ``her-wrap enjoy`` with parsed arguments; return the episodes' result."""
    from her_wrap import HER

    ensure_registered(args.env)
    saved = select_saved_agent(args)
    config = _run_config(args, saved.run)
    env_kwargs = {**config.env_kwargs, **({"render_mode": "human"} if args.render else {})}
    check_env_id(config.env_id, env_kwargs)
    env = make_vec_goal_env(config.env_id, env_kwargs, 1, args.seed)
    threshold = _distance_threshold(env, config.env_id) if args.goal_misses else None
    print(f"Loading {saved.model}", flush=True)
    agent = HER.load(str(saved.model), env=env, device=args.device)
    result = evaluate_agent(
        agent, env, args.n_episodes, deterministic=not args.stochastic, record_goals=args.goal_misses
    )
    env.close()
    print(f"{config.env_id}: {result.summary()}", flush=True)
    if threshold is not None:
        print(f"\n{goal_misses_report(result.goals, threshold)}", flush=True)
    return result


def _distance_threshold(env: Any, env_id: str) -> float:
    """The env's ``distance_threshold``, which ``--goal-misses`` measures the misses against.

    :raises UsageError: for an env without one
    """
    try:
        threshold = env.get_attr("distance_threshold")[0]
    except AttributeError:
        env.close()
        raise UsageError(
            f"--goal-misses needs an env whose goals are positions reached within a distance_threshold "
            f"(Fetch, Panda); {env_id} has none: leave --goal-misses out"
        ) from None
    return float(threshold)


def run(args: argparse.Namespace) -> int:
    enjoy(args)
    return 0
