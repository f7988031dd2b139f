"""Command-line options that several ``her-wrap`` subcommands share, and their defaults."""

from __future__ import annotations

import argparse
import importlib.resources
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from her_wrap.runs.errors import UsageError

if TYPE_CHECKING:
    from her_wrap.runs.run_config import RunConfig

DEFAULT_CONFIG = Path("configs") / "her.yml"


def default_config_path() -> Path:
    """The config read when ``-c/--conf`` is not given.

    ``configs/her.yml`` of the current folder when there is one (a copy users edit, as in the zoo), else
    the one shipped with her_wrap: the package ``her_wrap.configs``, which is the checkout's ``configs/``
    folder in an editable install and a copy inside the installed package otherwise.
    """
    local = Path.cwd() / DEFAULT_CONFIG
    if local.is_file():
        return local
    try:
        shipped = Path(str(importlib.resources.files("her_wrap.configs").joinpath(DEFAULT_CONFIG.name)))
    except ModuleNotFoundError:
        # An editable install made before configs/ became the package her_wrap.configs.
        raise UsageError(
            f"no {DEFAULT_CONFIG} here and none installed with her_wrap (reinstall it: pip install -e .); "
            "pass one with -c/--conf"
        ) from None
    if not shipped.is_file():
        raise UsageError(f"no {DEFAULT_CONFIG} here and no {shipped}; pass one with -c/--conf")
    return shipped


def command_config(
    args: argparse.Namespace, config_source: Path | None = None, notes: list[str] | None = None
) -> RunConfig:
    """The run's config entry as a command reads it: ``config_source`` (default: ``-c``, else
    :func:`default_config_path`) with the command line's ``--algo``, ``-params``, ``-n``, ``--n-envs``
    and, for ``train``, its workers (``--workers``, or the count of a ``torchrun`` launch).

    :param notes: when given, the lines saying what the command line changed beyond the entry's keys are
        appended to it (see :attr:`her_wrap.runs.config.ConfigEntry.notes`)
    """
    from her_wrap.runs.config import load_run_config

    if config_source is None:
        config_source = args.conf if args.conf is not None else default_config_path()
    return load_run_config(
        config_source,
        args.env,
        algo=args.algo,
        overrides=args.hyperparams,
        n_timesteps=args.n_timesteps,
        n_envs=args.n_envs,
        workers=command_workers(args),
        notes=notes,
    )


def command_workers(args: argparse.Namespace) -> int | None:
    """The worker processes a command trains on when the command line sets them: ``--workers``, else the
    ``WORLD_SIZE`` of a ``torchrun`` launch; ``None`` when neither does (the entry's own count holds)."""
    workers = getattr(args, "workers", None)
    if workers is not None:
        return int(workers)
    if "WORLD_SIZE" in os.environ and hasattr(args, "workers"):
        return int(os.environ["WORLD_SIZE"])
    return None


def shipped_configs() -> dict[str, Path]:
    """The hyperparameter files installed with her_wrap (``her.yml``, ``her_jax.yml``), by file name."""
    folder = importlib.resources.files("her_wrap.configs")
    return {
        entry.name: Path(str(entry)) for entry in folder.iterdir() if entry.name.endswith((".yml", ".yaml"))
    }


def config_path(text: str) -> Path:
    """The argparse type of ``-c/--conf``: a file, or the name of a file shipped with her_wrap
    (``-c her_jax.yml``, the SBX entries) when no such file is here.

    :raises argparse.ArgumentTypeError: when it is neither, naming the shipped files
    """
    conf = Path(text)
    if conf.is_file() or conf.parent != Path("."):
        return conf
    shipped = shipped_configs()
    for name in (conf.name, f"{conf.name}.yml"):
        if name in shipped:
            return shipped[name]
    raise argparse.ArgumentTypeError(
        f"no hyperparameter file {conf}: pass a path, or one of the files shipped with her_wrap: "
        f"{', '.join(sorted(shipped))}"
    )


def draw_seed() -> int:
    """A fresh seed from the OS, recorded in ``args.yml`` so the run can be repeated."""
    return int(np.random.SeedSequence().generate_state(1)[0] % (2**31 - 1))


def progress_bar_enabled(requested: bool | None) -> bool:
    """``--progress``/``--no-progress`` when given, else on only when stdout is a terminal."""
    return sys.stdout.isatty() if requested is None else requested


def torch_threads(requested: int | None, entry: int | None) -> int:
    """Torch threads of a run: ``--num-threads`` when given, else the entry's ``num_threads``, else 1."""
    if requested is not None:
        return requested
    return entry if entry is not None else 1


def set_torch_threads(num_threads: int) -> None:
    """Set torch's intra-op threads."""
    import torch

    torch.set_num_threads(num_threads)


#: The ``--vec-env`` choices: how a run's env copies step (:func:`her_wrap.runs.env_factory.make_vec_goal_env`).
VEC_ENVS = ("dummy", "subproc", "thread")


def positive_int(text: str) -> int:
    """An argparse type for counts: ``20000``, ``2e4`` and ``20_000`` all read as 20000."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if not value.is_integer() or value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return int(value)


def positive_float(text: str) -> float:
    """An argparse type for durations and budgets: a finite number above 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}") from None
    if not 0.0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}")
    return value


def unit_fraction(text: str) -> float:
    """An argparse type for success rates: a number in (0, 1]."""
    value = positive_float(text)
    if value > 1.0:
        raise argparse.ArgumentTypeError(f"expected a success rate in (0, 1], got {text!r}")
    return value


def add_env_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--env", required=True, metavar="ENV_ID", help="gymnasium env id, e.g. BitFlipping-v0"
    )


def add_log_folder_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-f",
        "--log-folder",
        "--folder",
        dest="log_folder",
        type=Path,
        default=Path("logs"),
        help="log folder; runs go to LOG_FOLDER/her/ENV_ID_N (default: logs)",
    )


def add_config_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-c",
        "--conf",
        "--conf-file",
        dest="conf",
        type=config_path,
        default=None,
        help="hyperparameter YAML, her_wrap's or rl-baselines3-zoo's, or the name of one shipped with her_wrap "
        "(her.yml, her_jax.yml: SBX's JAX learners) (default: configs/her.yml)",
    )
    parser.add_argument(
        "--algo",
        default=None,
        help="learner (dqn, qrdqn, sac, td3, ddpg, tqc; with the jax extra sbx.sac, sbx.crossq, ...) when "
        "the entry has no model_class, "
        "or to replace it (default: the entry's, else the zoo file's name)",
    )
    parser.add_argument(
        "-params",
        "--hyperparams",
        dest="hyperparams",
        nargs="+",
        default=[],
        metavar="KEY:VALUE",
        help="override hyperparameters, e.g. -params learning_rate:1e-3 her.n_sampled_goal:2 "
        "policy_kwargs:'dict(net_arch=[64, 64])'",
    )
    parser.add_argument(
        "-n", "--n-timesteps", dest="n_timesteps", type=positive_int, default=None, help="replace n_timesteps"
    )


def add_runtime_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--seed", type=int, default=None, help="random seed (default: drawn and recorded)")
    parser.add_argument("--device", default="auto", help="torch device: auto, cpu, cuda (default: auto)")
    parser.add_argument(
        "--num-threads",
        type=positive_int,
        default=None,
        help="torch CPU threads (default: the entry's num_threads, else 1: the fastest for small networks, "
        "and far faster than torch's default on a busy CPU; the manipulation entries use 2)",
    )
    parser.add_argument(
        "--verbose", type=int, default=1, choices=(0, 1, 2), help="0 quiet, 1 info (default), 2 debug"
    )


def add_training_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of every command that trains: how envs run and how evaluations are sized."""
    parser.add_argument(
        "--vec-env",
        choices=VEC_ENVS,
        default="dummy",
        help="how envs run: in turn (dummy, the default), in processes (subproc) or in threads (thread: MuJoCo "
        "envs step their physics at once)",
    )
    parser.add_argument("--n-envs", type=positive_int, default=None, help="replace the entry's n_envs")
    parser.add_argument(
        "--eval-episodes", type=positive_int, default=10, help="episodes per evaluation (default: 10)"
    )


def plain_arguments(args: argparse.Namespace) -> dict[str, Any]:
    """The parsed arguments as YAML-ready data (paths as strings, the dispatch function left out)."""
    plain: dict[str, Any] = {}
    for key, value in vars(args).items():
        if callable(value):
            continue
        plain[key] = str(value) if isinstance(value, Path) else value
    return plain


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of every command that trains an entry: env, config file, log folder, runtime, training."""
    add_env_argument(parser)
    add_config_arguments(parser)
    add_log_folder_argument(parser)
    add_runtime_arguments(parser)
    add_training_arguments(parser)
