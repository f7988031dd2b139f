"""Where a run keeps its files: rl-baselines3-zoo's ``logs/ALGO/ENV_ID_N/`` layout, with ALGO = ``her``.

::

    logs/her/BitFlipping-v0_1/
        0.monitor.csv                   one row per training episode: r, l, t, is_success (one file per env)
        evaluations.npz                 timesteps, results, ep_lengths, successes (as SB3's EvalCallback),
                                        train_seconds (training wall time at each evaluation)
        best_model.zip                  the agent of the best evaluation (success rate, then return)
        BitFlipping-v0.zip              the agent at the end of training
        replay_buffer.pkl               its replay buffer (--save-replay-buffer)
        rl_model_5000_steps.zip         checkpoints (--save-freq), each with
        rl_model_replay_buffer_5000_steps.pkl   its replay buffer (the latest checkpoint's only)
        BitFlipping-v0/
            config.yml                  the resolved config entry: `-c` this file to repeat the run
            args.yml                    the command-line arguments, with the seed actually used
            vecnormalize.pkl            normalization statistics of the final agent (when normalizing)

Every agent zip holds its own normalization statistics (HER's ``normalize``); ``vecnormalize.pkl`` is a
copy of the final agent's, as a ``VecNormalize`` pickle, for tools that expect the zoo's layout.

``N`` counts runs of the same env id in the same log folder, from 1.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from her_wrap.runs.errors import UsageError

ALGO_FOLDER = "her"


def folder_name(env_id: str) -> str:
    """The env id as a folder name (gymnasium namespaces ``ns/Env-v0`` become ``ns-Env-v0``)."""
    return env_id.replace("/", "-")


@dataclass(frozen=True)
class RunLayout:
    """The paths of one run's files."""

    run_dir: Path
    env_id: str

    @property
    def params_dir(self) -> Path:
        return self.run_dir / folder_name(self.env_id)

    @property
    def config_path(self) -> Path:
        return self.params_dir / "config.yml"

    @property
    def args_path(self) -> Path:
        return self.params_dir / "args.yml"

    @property
    def vecnormalize_path(self) -> Path:
        return self.params_dir / "vecnormalize.pkl"

    @property
    def final_model_path(self) -> Path:
        return self.run_dir / f"{folder_name(self.env_id)}.zip"

    @property
    def replay_buffer_path(self) -> Path:
        return self.run_dir / "replay_buffer.pkl"

    @property
    def best_model_path(self) -> Path:
        return self.run_dir / "best_model.zip"

    @property
    def evaluations_path(self) -> Path:
        return self.run_dir / "evaluations.npz"


def _run_pattern(env_id: str) -> re.Pattern[str]:
    return re.compile(rf"^{re.escape(folder_name(env_id))}_(\d+)$")


def run_numbers(algo_dir: Path, env_id: str) -> list[int]:
    """The ``N`` of every ``ENV_ID_N`` folder under ``algo_dir``, ascending."""
    pattern = _run_pattern(env_id)
    if not algo_dir.is_dir():
        return []
    numbers = [int(match.group(1)) for path in algo_dir.iterdir() if (match := pattern.match(path.name))]
    return sorted(numbers)


def new_run(log_folder: Path, env_id: str) -> RunLayout:
    """Create the next ``log_folder/her/ENV_ID_N`` folder (N one more than the highest present)."""
    algo_dir = Path(log_folder) / ALGO_FOLDER
    algo_dir.mkdir(parents=True, exist_ok=True)
    number = (run_numbers(algo_dir, env_id) or [0])[-1] + 1
    while True:
        run_dir = algo_dir / f"{folder_name(env_id)}_{number}"
        try:
            run_dir.mkdir()  # atomic claim: two runs started at once get different folders
        except FileExistsError:
            number += 1
            continue
        layout = RunLayout(run_dir, env_id)
        layout.params_dir.mkdir()
        return layout


def find_run(log_folder: Path, env_id: str, exp_id: int = 0) -> RunLayout:
    """An existing run: ``exp_id`` N means ``ENV_ID_N``; 0 means the latest.

    :raises UsageError: when there is no such run, listing the runs there are
    """
    algo_dir = Path(log_folder) / ALGO_FOLDER
    numbers = run_numbers(algo_dir, env_id)
    if not numbers:
        raise UsageError(f"no runs of {env_id} in {algo_dir}; train one with: her-wrap train --env {env_id}")
    number = numbers[-1] if exp_id == 0 else exp_id
    if number not in numbers:
        raise UsageError(
            f"no run {folder_name(env_id)}_{number} in {algo_dir}; there are: {', '.join(map(str, numbers))}"
        )
    return RunLayout(algo_dir / f"{folder_name(env_id)}_{number}", env_id)


def layout_of(path: Path) -> RunLayout | None:
    """The run a file or folder belongs to, recognized by its ``ENV_ID/config.yml``; ``None`` if none."""
    path = Path(path).resolve()
    for candidate in (path, *path.parents):
        if not candidate.is_dir():
            continue
        match = re.match(r"^(.+)_(\d+)$", candidate.name)
        if match and (candidate / match.group(1) / "config.yml").is_file():
            return RunLayout(candidate, _env_id_from_folder(candidate, match.group(1)))
    return None


def _env_id_from_folder(run_dir: Path, name: str) -> str:
    # args.yml holds the exact id (a namespaced id's "/" became "-" in the folder name).
    from her_wrap.runs.yaml_io import load_yaml_file

    args_path = run_dir / name / "args.yml"
    if args_path.is_file():
        args = load_yaml_file(args_path)
        if isinstance(args, dict) and isinstance(args.get("env"), str):
            return args["env"]
    return name
