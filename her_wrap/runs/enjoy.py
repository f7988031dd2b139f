"""``her-wrap enjoy``: load a trained agent, run episodes, print its success rate.

The agent is a run's final model by default (its latest checkpoint when training did not finish),
``--load-best`` its best evaluation, ``--load-checkpoint N`` / ``--load-last-checkpoint`` a checkpoint, or
``-i PATH`` any saved agent. The run's ``config.yml`` gives the env's kwargs; the agent's zip holds its
normalization statistics.

A success rate says how often the object ends within the env's ``distance_threshold`` of the goal;
``--goal-misses`` also says where it ends when it does not (:func:`goal_misses_report`). Episodes are
split into quarters by how far the goal was from the object's start (success often falls with it), and
each miss is measured along the line from the start to the goal (short of the goal, or past it) and
across it (to its side).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from her_wrap.core.replay import HindsightReplay
from her_wrap.runs import arguments
from her_wrap.runs.checkpoints import (
    SavedAgent,
    checkpoint_model_path,
    checkpoint_paths,
    checkpoint_timesteps,
    latest_saved_agent,
    resolve_saved_agent,
)
from her_wrap.runs.config import load_run_config
from her_wrap.runs.env_factory import check_env_id, ensure_registered, make_vec_goal_env
from her_wrap.runs.errors import UsageError
from her_wrap.runs.run_config import RunConfig
from her_wrap.runs.run_layout import RunLayout, find_run
from her_wrap.sb3.evaluation import EpisodeGoals, EvaluationResult, evaluate_agent

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


# --------------------------------------------------------------------------- where misses end


@dataclass(frozen=True)
class Miss:
    """Where an episode's object ended against its goal, in the env's units (metres for Fetch and Panda).

    :param distance: from the end to the goal
    :param along: along the line from the start to the goal, the end's position minus the goal's: negative
        short of the goal, positive past it (0 when the goal was at the start)
    :param side: across that line, how far the end is from it (the whole distance when the goal was at the
        start)
    """

    distance: float
    along: float
    side: float


def miss_of(episode: EpisodeGoals) -> Miss:
    """The :class:`Miss` of one episode."""
    start, goal, end = (
        np.asarray(point, dtype=np.float64) for point in (episode.start, episode.goal, episode.end)
    )
    distance = float(np.linalg.norm(end - goal))
    line = goal - start
    length = float(np.linalg.norm(line))
    if length == 0.0:
        return Miss(distance, 0.0, distance)
    direction = line / length
    travelled = end - start
    along = float(travelled @ direction) - length
    side = float(np.linalg.norm(travelled - (travelled @ direction) * direction))
    return Miss(distance, along, side)


def goal_misses_report(episodes: Sequence[EpisodeGoals], threshold: float) -> str:
    """A Markdown report of ``episodes``: success by quarter of the goal's distance, then the misses.

    :param episodes: the episodes of one evaluation (``evaluate_agent(..., record_goals=True).goals``)
    :param threshold: the env's ``distance_threshold``: an episode whose object ends nearer its goal is a
        success
    :raises ValueError: for no episodes or a threshold that is not positive
    """
    if not episodes:
        raise ValueError("no episodes to report on: evaluate with record_goals=True")
    if threshold <= 0:
        raise ValueError(f"threshold must be positive, got {threshold}")
    misses = [miss_of(episode) for episode in episodes]
    initial = np.array([np.linalg.norm(np.subtract(episode.goal, episode.start)) for episode in episodes])
    reached = np.array([miss.distance < threshold for miss in misses])
    moved = np.array([np.linalg.norm(np.subtract(episode.end, episode.start)) for episode in episodes])
    lines = [
        f"Goals reached (within {threshold:g} of the goal): {int(reached.sum())} of {len(episodes)} "
        f"({reached.mean():.2f})",
        f"The goals lay {_quartiles(initial)} from the object's start; the object ended {_quartiles(moved)} "
        "from it (median, quartiles)",
        "",
        "| goals by distance from the object's start | episodes | reached |",
        "|---|---:|---:|",
    ]
    order = np.argsort(initial, kind="stable")
    for number, quarter in enumerate(np.array_split(order, 4), start=1):
        if len(quarter) == 0:
            continue
        low, high = initial[quarter].min(), initial[quarter].max()
        lines.append(
            f"| quarter {number}: {low:.3f}-{high:.3f} | {len(quarter)} | {reached[quarter].mean():.2f} |"
        )
    missed = [miss for miss, hit in zip(misses, reached, strict=True) if not hit]
    lines.append("")
    if not missed:
        lines.append("No misses.")
        return "\n".join(lines)
    along = np.array([miss.along for miss in missed])
    side = np.array([miss.side for miss in missed])
    distance = np.array([miss.distance for miss in missed])
    lines += [
        f"Misses: {len(missed)}; median distance to the goal {np.median(distance):.3f} "
        f"(within twice the threshold: {int((distance < 2 * threshold).sum())})",
        "",
        "| the object ended | misses |",
        "|---|---:|",
        f"| short of the goal by more than {threshold:g} | {int((along < -threshold).sum())} |",
        f"| past the goal by more than {threshold:g} | {int((along > threshold).sum())} |",
        f"| to the side of the line from its start by more than {threshold:g} | {int((side > threshold).sum())} |",
        f"| within {threshold:g} both along and across (but off the goal) | "
        f"{int(((np.abs(along) <= threshold) & (side <= threshold)).sum())} |",
        "",
        "(A miss both short and to the side counts in both rows.)",
    ]
    return "\n".join(lines)


def _quartiles(values: np.ndarray) -> str:
    low, median, high = np.quantile(values, [0.25, 0.5, 0.75])
    return f"{median:.3f} ({low:.3f}-{high:.3f})"


def stored_episode_goals(replay: HindsightReplay) -> list[EpisodeGoals]:
    """The :class:`EpisodeGoals` of every ended episode a replay buffer holds, oldest first: where its object
    started and ended (its first and final observations' achieved goals) and the goal it was given (its first
    step's desired goal).

    :param replay: the buffer's :class:`~her_wrap.core.replay.HindsightReplay`: ``replay`` of her_wrap's SB3
        buffers and of the numpy core's ``HindsightReplayBuffer``
    """
    storage = replay.storage
    rings, columns = np.nonzero((storage.step_index == 0) & (storage.episode_length > 0))
    order = np.lexsort((columns, storage.absolute_rows(rings, columns)))  # by when written, then column
    rings, columns = rings[order], columns[order]
    ends = (rings + storage.episode_length[rings, columns]) % storage.n_rows  # the final observation's row
    starts = replay.read_achieved_goals(rings, columns)
    finals = replay.read_achieved_goals(ends, columns)
    goals = storage.read_field(replay.desired_goal_key, rings, columns)
    return [
        EpisodeGoals(np.array(start), np.array(goal), np.array(final))
        for start, goal, final in zip(starts, goals, finals, strict=True)
    ]
