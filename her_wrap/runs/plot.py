"""``her-wrap plot``: success rate and return against env steps or wall-clock minutes, from run folders,
as a PNG.

Two sources:

- ``eval`` (default): the greedy evaluations in ``evaluations.npz`` (what HER papers report);
- ``train``: the training episodes in the monitor CSVs, averaged over a sliding window of episodes
  (exploration included, so lower than ``eval``).

Runs of the same env id (several seeds) are drawn as their mean, with a band of one standard deviation
across runs; each env id gets its own colour. A resumed run's monitor starts at the step its agent had
reached (``initial_timesteps`` in ``args.yml``).

``--x-axis minutes`` puts wall-clock minutes on the x axis: for ``eval``, the training time at each
evaluation (``train_seconds`` in ``evaluations.npz``, evaluations left out); for ``train``, the monitor's
episode end times (evaluations included).
"""

from __future__ import annotations

import argparse
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from her_wrap.runs import arguments
from her_wrap.runs.errors import UsageError
from her_wrap.runs.run_layout import ALGO_FOLDER, RunLayout, find_run, folder_name, layout_of, run_numbers
from her_wrap.runs.yaml_io import load_yaml_file

#: What the x axis can show, and its label.
X_AXES = ("steps", "minutes")
X_LABELS = {"steps": "env steps", "minutes": "wall-clock minutes of training"}

#: Most points on the common x grid of a group of runs.
MAX_GRID_POINTS = 300

Array = npt.NDArray[np.float64]


@dataclass(frozen=True)
class Curve:
    """One run's learning curve.

    :param x: env steps, or minutes (``--x-axis minutes``), ascending
    :param success_rate: success rate at each point
    :param returns: mean episode return at each point
    """

    x: Array
    success_rate: Array
    returns: Array


@dataclass(frozen=True)
class Band:
    """Several runs on a common grid: mean and standard deviation across runs (NaN where none has data)."""

    x: Array
    success_mean: Array
    success_std: Array
    return_mean: Array
    return_std: Array
    n_runs: int


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "runs", nargs="*", type=Path, metavar="RUN_DIR", help="run folders (logs/her/ENV_ID_N)"
    )
    parser.add_argument(
        "--env", nargs="+", default=[], metavar="ENV_ID", help="plot every run of these env ids"
    )
    arguments.add_log_folder_argument(parser)
    parser.add_argument(
        "--source", choices=("eval", "train"), default="eval", help="eval (default) or train episodes"
    )
    parser.add_argument(
        "-x",
        "--x-axis",
        choices=X_AXES,
        default="steps",
        help="steps (default) or minutes: wall-clock minutes of training",
    )
    parser.add_argument(
        "--window",
        type=arguments.positive_int,
        default=100,
        help="episodes averaged for --source train (default: 100)",
    )
    parser.add_argument(
        "-o", "--output", type=Path, default=None, help="PNG to write (default: in LOG_FOLDER/her)"
    )
    parser.add_argument("--title", default=None, help="figure title")


def read_evaluations(run_dir: Path, x_axis: str = "steps") -> Curve | None:
    """The curve in ``evaluations.npz``, or ``None`` when the run has none.

    :param x_axis: ``steps``, or ``minutes`` (the training wall time at each evaluation)
    :raises UsageError: for ``minutes`` when the file records no training time
    """
    path = Path(run_dir) / "evaluations.npz"
    if not path.is_file():
        return None
    with np.load(path) as data:
        timesteps = np.asarray(data["timesteps"], dtype=np.float64)
        returns = np.asarray(data["results"], dtype=np.float64).reshape(len(timesteps), -1).mean(axis=1)
        if "successes" in data:
            success = np.asarray(data["successes"], dtype=np.float64).reshape(len(timesteps), -1).mean(axis=1)
        else:
            success = np.full(len(timesteps), np.nan)
        if x_axis == "steps":
            return Curve(timesteps, success, returns)
        if "train_seconds" not in data:
            raise UsageError(
                f"{path} records no training time (train_seconds: written by her-wrap train since it times "
                "evaluations); plot it with --x-axis steps"
            )
        return Curve(np.asarray(data["train_seconds"], dtype=np.float64) / 60, success, returns)


def _initial_timesteps(run_dir: Path) -> int:
    candidates = [path for path in Path(run_dir).glob("*/args.yml")]
    for path in candidates:
        args = load_yaml_file(path)
        if isinstance(args, dict):
            return int(args.get("initial_timesteps") or 0)
    return 0


def read_monitors(run_dir: Path, window: int, x_axis: str = "steps") -> Curve | None:
    """The training episodes of a run's monitor CSVs (all envs, in time order), window-averaged.

    :param x_axis: ``steps``, or ``minutes`` (each episode's end, since the monitor started)
    """
    import pandas as pd
    from stable_baselines3.common.monitor import get_monitor_files, load_results

    if not get_monitor_files(str(run_dir)):
        return None
    episodes = load_results(str(run_dir))
    if episodes.empty:
        return None
    if x_axis == "steps":
        x = _initial_timesteps(run_dir) + np.cumsum(episodes["l"].to_numpy(dtype=np.float64))
    else:
        x = episodes["t"].to_numpy(dtype=np.float64) / 60
    success = (
        episodes["is_success"].astype(float)
        if "is_success" in episodes
        else pd.Series(np.nan, index=episodes.index)
    )
    rolling = {"window": window, "min_periods": 1}
    return Curve(
        x,
        success.rolling(**rolling).mean().to_numpy(dtype=np.float64),
        episodes["r"].rolling(**rolling).mean().to_numpy(dtype=np.float64),
    )


def _on_grid(grid: Array, x: Array, values: Array) -> Array:
    known = ~np.isnan(values)
    if not known.any():
        return np.full(len(grid), np.nan)
    return np.interp(grid, x[known], values[known], left=np.nan, right=np.nan)


def aggregate(curves: list[Curve]) -> Band:
    """Mean and standard deviation of several curves on a common grid of x values.

    The grid is the union of the curves' steps (at most :data:`MAX_GRID_POINTS`, evenly spaced beyond
    that); each curve is interpolated linearly inside its own range and missing outside it.
    """
    if not curves:
        raise ValueError("aggregate needs at least one curve")
    grid = np.unique(np.concatenate([curve.x for curve in curves]))
    if len(grid) > MAX_GRID_POINTS:
        grid = np.linspace(grid[0], grid[-1], MAX_GRID_POINTS)
    success = np.array([_on_grid(grid, curve.x, curve.success_rate) for curve in curves])
    returns = np.array([_on_grid(grid, curve.x, curve.returns) for curve in curves])

    def stats(values: Array) -> tuple[Array, Array]:
        counts = (~np.isnan(values)).sum(axis=0)
        total = np.where(np.isnan(values), 0.0, values).sum(axis=0)
        mean = np.divide(total, counts, out=np.full(len(grid), np.nan), where=counts > 0)
        squares = np.where(np.isnan(values), 0.0, (values - mean) ** 2).sum(axis=0)
        std = np.sqrt(np.divide(squares, counts, out=np.full(len(grid), np.nan), where=counts > 0))
        return mean, std

    success_mean, success_std = stats(success)
    return_mean, return_std = stats(returns)
    return Band(grid, success_mean, success_std, return_mean, return_std, len(curves))


def collect_runs(args: argparse.Namespace) -> dict[str, list[Path]]:
    """Run folders to plot, grouped by env id.

    :raises UsageError: when neither run folders nor ``--env`` are given, or a path is not a run folder
    """
    groups: dict[str, list[Path]] = defaultdict(list)
    for run_dir in args.runs:
        layout = layout_of(run_dir)
        if layout is None:
            raise UsageError(f"{run_dir} is not a run folder (logs/her/ENV_ID_N with ENV_ID/config.yml)")
        groups[layout.env_id].append(layout.run_dir)
    for env_id in args.env:
        find_run(args.log_folder, env_id)  # raises when there is none
        algo_dir = Path(args.log_folder) / ALGO_FOLDER
        for number in run_numbers(algo_dir, env_id):
            groups[env_id].append(RunLayout(algo_dir / f"{folder_name(env_id)}_{number}", env_id).run_dir)
    if not groups:
        raise UsageError("nothing to plot: give run folders or --env ENV_ID")
    return dict(groups)


def draw(
    bands: dict[str, Band], output: Path, *, source: str, title: str | None = None, x_axis: str = "steps"
) -> None:
    """Write a PNG with two panels, success rate and return against env steps (or minutes), one colour per
    group."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(11, 4.2), layout="constrained")
    FigureCanvasAgg(figure)
    success_axes, return_axes = figure.subplots(1, 2)
    kind = "greedy evaluation" if source == "eval" else "training episodes"
    for index, (label, band) in enumerate(bands.items()):
        colour = f"C{index}"
        name = f"{label} ({band.n_runs} run{'s' if band.n_runs != 1 else ''})"
        for axes, mean, std in (
            (success_axes, band.success_mean, band.success_std),
            (return_axes, band.return_mean, band.return_std),
        ):
            axes.plot(band.x, mean, color=colour, label=name)
            if band.n_runs > 1:
                axes.fill_between(band.x, mean - std, mean + std, color=colour, alpha=0.25, linewidth=0)
    success_axes.set_ylim(-0.02, 1.02)
    success_axes.set_ylabel(f"success rate ({kind})")
    return_axes.set_ylabel(f"episode return ({kind})")
    for axes in (success_axes, return_axes):
        axes.set_xlabel(X_LABELS[x_axis])
        axes.grid(alpha=0.3)
    success_axes.legend(loc="lower right", fontsize="small")
    figure.suptitle(title or f"HER: {', '.join(bands)} (mean ± std across runs)")
    output.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(output, dpi=110)


def plot(args: argparse.Namespace) -> Path:
    """Run ``her-wrap plot`` with parsed arguments; return the PNG's path."""
    groups = collect_runs(args)
    bands: dict[str, Band] = {}
    for env_id, run_dirs in groups.items():
        curves = [
            curve
            for run_dir in run_dirs
            if (
                curve := read_evaluations(run_dir, args.x_axis)
                if args.source == "eval"
                else read_monitors(run_dir, args.window, args.x_axis)
            )
            is not None
        ]
        if not curves:
            what = "evaluations.npz" if args.source == "eval" else "monitor CSVs"
            raise UsageError(
                f"no {what} in the runs of {env_id}: {', '.join(str(path) for path in run_dirs)}"
            )
        bands[env_id] = aggregate(curves)
    output = (
        args.output
        or Path(args.log_folder)
        / ALGO_FOLDER
        / f"{'+'.join(map(folder_name, bands))}_{args.source}"
        f"{'_minutes' if args.x_axis == 'minutes' else ''}.png"
    )
    draw(bands, output, source=args.source, title=args.title, x_axis=args.x_axis)
    for env_id, band in bands.items():
        last = np.flatnonzero(~np.isnan(band.success_mean))
        if len(last):
            at = last[-1]
            where = f"{band.x[at]:.0f} steps" if args.x_axis == "steps" else f"{band.x[at]:.1f} minutes"
            final = f"{band.success_mean[at]:.3f} ± {band.success_std[at]:.3f} at {where}"
        else:
            final = "not recorded"
        print(f"{env_id}: {band.n_runs} run(s), final success rate {final}")
    print(f"Saved {output}")
    return output


def run(args: argparse.Namespace) -> int:
    plot(args)
    return 0
