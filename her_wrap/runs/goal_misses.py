"""Where an agent's object ends against its goal: ``her-wrap enjoy --goal-misses``.

A success rate says how often the object ends within the env's ``distance_threshold`` of the goal; this
says where it ends when it does not. Episodes are split into quarters by how far the goal was from the
object's start (success often falls with it), and each miss is measured along the line from the start to
the goal (short of the goal, or past it) and across it (to its side).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from her_wrap.core.replay import HindsightReplay
from her_wrap.sb3.evaluation import EpisodeGoals


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
