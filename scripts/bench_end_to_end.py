"""End-to-end benchmark on FetchReach-v4: HER(SAC) against SB3's SAC + ``HerReplayBuffer``.

Both learners get rl-baselines3-zoo's FetchReach SAC hyperparameters (``hyperparams/sac.yml``): the
``MultiInputPolicy`` with two hidden layers of 64, buffer 1e6, batch 256, learning rate 1e-3, gamma 0.95,
entropy coefficient ``auto``, 1,000 random steps first, one gradient step per env step, ``future``
relabeling with k = 4, and ``normalize: True``, which the zoo turns into ``VecNormalize`` with its default
clipping (10) and reward normalization at the learner's gamma. The same seed goes to both.

They train in alternating chunks (``--chunk`` env steps each, ``learn(..., reset_num_timesteps=False)``)
so that whatever else runs on the machine slows both alike; the wall time and this process's CPU time
of every chunk are summed per learner. After training, greedy success on the same 100 fresh episodes.
Then, apart from the timed run (profiling slows Python code more than torch code), each learner trains
``--profile-steps`` more steps under cProfile, and the page gets where the time goes per env step:
gradient steps (sampling aside), replay sampling, replay storing, env stepping, action prediction.

Usage::

    python scripts/bench_end_to_end.py                    # 20k steps each, writes docs/bench_end_to_end.md
    python scripts/bench_end_to_end.py --steps 3000 --out /tmp/bench.md   # a quick check
"""

from __future__ import annotations

import argparse
import cProfile
import os
import platform
import pstats
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch as th
from stable_baselines3 import SAC, HerReplayBuffer
from stable_baselines3.common.monitor import Monitor
from stable_baselines3.common.vec_env import DummyVecEnv, VecNormalize

from her_wrap import HER
from her_wrap.envs.registry import make_goal_env
from her_wrap.sb3.evaluation import success_rate

ENV_ID = "FetchReach-v4"
ROOT = Path(__file__).resolve().parent.parent

# rl-baselines3-zoo, hyperparams/sac.yml, FetchReach: the learner's keyword arguments.
ZOO_SAC_FETCH_REACH: dict[str, Any] = {
    "buffer_size": 1_000_000,
    "batch_size": 256,
    "learning_rate": 1e-3,
    "gamma": 0.95,
    "ent_coef": "auto",
    "learning_starts": 1_000,
    "train_freq": 1,
    "gradient_steps": 1,
}
ZOO_POLICY_KWARGS: dict[str, Any] = {"net_arch": [64, 64]}
ZOO_HER: dict[str, Any] = {"n_sampled_goal": 4, "goal_selection_strategy": "future"}
# normalize: True in the zoo: VecNormalize's defaults, with the learner's gamma for the return statistics.
ZOO_NORMALIZE: dict[str, Any] = {"norm_obs": True, "norm_reward": True, "clip_obs": 10.0, "gamma": 0.95}


class SB3Agent:
    """SB3's SAC + ``HerReplayBuffer`` on a normalized dict VecEnv, with the zoo's settings."""

    name = "SB3 SAC + HerReplayBuffer"

    def __init__(self, seed: int) -> None:
        venv = DummyVecEnv([lambda: Monitor(make_goal_env(ENV_ID))])
        self.env = VecNormalize(venv, **ZOO_NORMALIZE)
        self.model = SAC(
            "MultiInputPolicy",
            self.env,
            replay_buffer_class=HerReplayBuffer,
            replay_buffer_kwargs=dict(ZOO_HER),
            policy_kwargs=dict(ZOO_POLICY_KWARGS),
            seed=seed,
            **ZOO_SAC_FETCH_REACH,
        )

    def learn(self, steps: int) -> None:
        self.model.learn(steps, reset_num_timesteps=False)

    def predict(self, observation: dict[str, np.ndarray], deterministic: bool = True) -> Any:
        """Action for a raw dict observation (normalized here, as the training env did)."""
        return self.model.predict(self.env.normalize_obs(observation), deterministic=deterministic)


class HerWrapAgent:
    """her_wrap's HER(SAC) with the same settings; HER builds the normalized VecEnv itself."""

    name = "her_wrap HER(SAC)"

    def __init__(self, seed: int, policy: str = "MultiInputPolicy") -> None:
        if policy != "MultiInputPolicy":
            self.name = f"her_wrap HER(SAC), {policy}"
        self.model = HER(
            policy,
            ENV_ID,
            SAC,
            normalize={key: value for key, value in ZOO_NORMALIZE.items() if key != "gamma"},
            policy_kwargs=dict(ZOO_POLICY_KWARGS),
            seed=seed,
            **ZOO_HER,
            **ZOO_SAC_FETCH_REACH,
        )

    def learn(self, steps: int) -> None:
        self.model.learn(steps, reset_num_timesteps=False)

    def predict(self, observation: dict[str, np.ndarray], deterministic: bool = True) -> Any:
        return self.model.predict(observation, deterministic=deterministic)


@dataclass
class Timing:
    """Training time of one learner, summed over its chunks."""

    wall: float = 0.0
    cpu: float = 0.0
    chunks: list[float] = field(default_factory=list)


# Where the time of a training step goes: (bucket, functions as (file name end, function name)).
# Cumulative times; "gradient steps" is the learner's train() less the replay sampling inside it.
PROFILE_BUCKETS: list[tuple[str, list[tuple[str, str]]]] = [
    ("learner train() (all)", [("sac/sac.py", "train")]),
    ("replay sample", [("her/her_replay_buffer.py", "sample"), ("sb3/her_replay_buffer.py", "sample")]),
    (
        "replay add",
        [("her/her_replay_buffer.py", "add"), ("sb3/her_replay_buffer.py", "add")],
    ),
    ("env step (VecNormalize, Monitor, MuJoCo)", [("vec_env/base_vec_env.py", "step")]),
    ("action prediction", [("common/off_policy_algorithm.py", "_sample_action")]),
    ("everything (learn)", [("common/off_policy_algorithm.py", "learn")]),
]


def train_interleaved(agents: list[Any], steps: int, chunk: int) -> dict[str, Timing]:
    timings = {agent.name: Timing() for agent in agents}
    done = 0
    while done < steps:
        size = min(chunk, steps - done)
        for agent in agents:
            timing = timings[agent.name]
            wall, cpu = time.perf_counter(), time.process_time()
            agent.learn(size)
            timing.chunks.append(time.perf_counter() - wall)
            timing.wall += timing.chunks[-1]
            timing.cpu += time.process_time() - cpu
        done += size
        summary = ", ".join(f"{name}: {timing.wall:.0f} s" for name, timing in timings.items())
        print(f"{done:>6} steps each; wall so far {summary}", flush=True)
    return timings


def profile_buckets(agent: Any, steps: int) -> dict[str, float]:
    """Milliseconds per env step in each of :data:`PROFILE_BUCKETS`, over ``steps`` profiled steps."""
    profile = cProfile.Profile()
    profile.enable()
    agent.learn(steps)
    profile.disable()
    stats = pstats.Stats(profile).stats  # type: ignore[attr-defined]
    buckets = {}
    for bucket, functions in PROFILE_BUCKETS:
        seconds = sum(
            cumulative
            for (filename, _, name), (_, _, _, cumulative, _) in stats.items()
            if any(filename.endswith(end) and name == function for end, function in functions)
        )
        buckets[bucket] = 1000 * seconds / steps
    return buckets


def profile_table(agents: list[Any], steps: int) -> list[str]:
    rows = {agent.name: profile_buckets(agent, steps) for agent in agents}
    names = list(rows)
    lines = [
        f"## Where the time goes (cProfile, {steps:,} more steps each, ms per env step)",
        "",
        "Profiling inflates Python-heavy parts (the replay buffers) more than torch's C++ kernels: compare "
        "the rows between learners, not with the timed run above.",
        "",
        "| part | " + " | ".join(names) + " |",
        "|---|" + "---:|" * len(names),
    ]
    for bucket, _ in PROFILE_BUCKETS:
        cells = [f"{rows[name][bucket]:.2f}" for name in names]
        lines.append(f"| {bucket} | " + " | ".join(cells) + " |")
    gradient = [rows[name]["learner train() (all)"] - rows[name]["replay sample"] for name in names]
    lines.append(
        "| gradient steps (train() less replay sample) | " + " | ".join(f"{v:.2f}" for v in gradient) + " |"
    )
    reference, ours = rows[names[0]], rows[names[1]]
    ceiling = (ours["everything (learn)"] - ours["replay sample"]) / reference["everything (learn)"]
    lines += [
        "",
        f"Even a replay sampler that cost nothing would leave {names[1]} at {ceiling:.2f}x SB3's time per "
        "step in this profile: the learner's gradient steps, env stepping and action prediction, the same "
        "SB3 and MuJoCo code in both, take most of each step.",
    ]
    return lines


def main() -> None:
    th.set_num_threads(1)
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--steps", type=int, default=20_000, help="env steps of each learner")
    parser.add_argument("--chunk", type=int, default=2_000, help="env steps per turn of each learner")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--eval-episodes", type=int, default=100)
    parser.add_argument(
        "--mlp", action="store_true", help="also run her_wrap with MlpPolicy (a third learner)"
    )
    parser.add_argument(
        "--profile-steps", type=int, default=2_000, help="steps profiled after the timed run (0: none)"
    )
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "bench_end_to_end.md")
    args = parser.parse_args()

    agents: list[Any] = [SB3Agent(args.seed), HerWrapAgent(args.seed)]
    if args.mlp:
        agents.append(HerWrapAgent(args.seed, policy="MlpPolicy"))
    timings = train_interleaved(agents, args.steps, args.chunk)

    successes = {}
    for agent in agents:
        env: gym.Env = make_goal_env(ENV_ID)
        successes[agent.name] = success_rate(agent, env, args.eval_episodes, seed=12_345)
        print(f"{agent.name}: greedy success {successes[agent.name]:.2f}", flush=True)

    reference = timings[SB3Agent.name]
    rows = []
    for agent in agents:
        timing = timings[agent.name]
        rows.append(
            f"| {agent.name} | {timing.wall:.1f} | {args.steps / timing.wall:.0f} | {timing.cpu:.1f} | "
            f"{timing.wall / reference.wall:.2f} | {timing.cpu / reference.cpu:.2f} | "
            f"{successes[agent.name]:.2f} |"
        )
    ours = timings[HerWrapAgent.name]
    wall_ratio, cpu_ratio = ours.wall / reference.wall, ours.cpu / reference.cpu
    success_ok = successes[HerWrapAgent.name] >= successes[SB3Agent.name]
    load = " / ".join(f"{value:.1f}" for value in os.getloadavg())
    text = [
        "# End-to-end benchmark: HER(SAC) against SB3's SAC + HerReplayBuffer on FetchReach-v4",
        "",
        "Written by `scripts/bench_end_to_end.py`; rerun it to refresh this page:",
        "",
        "```",
        f"python scripts/bench_end_to_end.py --steps {args.steps} --seed {args.seed}"
        + (" --mlp" if args.mlp else "")
        + (f" --profile-steps {args.profile_steps}" if args.profile_steps != 2_000 else ""),
        "```",
        "",
        "Settings (rl-baselines3-zoo `hyperparams/sac.yml`, FetchReach): MultiInputPolicy, net_arch [64, 64], "
        "buffer 1e6, batch 256, lr 1e-3, gamma 0.95, ent_coef auto, learning_starts 1000, train_freq 1, "
        "gradient_steps 1, future with k = 4, normalize (VecNormalize: observations and rewards, clip 10, "
        f"gamma 0.95). Seed {args.seed} for both; {args.steps:,} env steps each, trained in alternating "
        f"chunks of {args.chunk:,} steps; greedy success on the same {args.eval_episodes} fresh episodes.",
        "",
        "| learner | training wall s | env steps/s | CPU s | wall ratio to SB3 | CPU ratio to SB3 | greedy success |",
        "|---|---:|---:|---:|---:|---:|---:|",
        *rows,
        "",
        "| target | measured | met |",
        "|---|---:|:---:|",
        f"| wall time <= 0.85x SB3's | {wall_ratio:.2f}x (CPU time {cpu_ratio:.2f}x) | "
        f"{'yes' if wall_ratio <= 0.85 else 'no'} |",
        f"| final success >= SB3's | {successes[HerWrapAgent.name]:.2f} vs {successes[SB3Agent.name]:.2f} | "
        f"{'yes' if success_ok else 'no'} |",
        "",
        f"Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, torch on 1 thread, "
        f"Python {platform.python_version()}; load average {load} at the end (a shared machine: the "
        "alternating chunks share its slowdowns between both learners; CPU time is this process's own).",
    ]
    if args.profile_steps > 0:
        text += ["", *profile_table(agents, args.profile_steps)]
    args.out.write_text("\n".join(text) + "\n")
    print("\n".join(text))


if __name__ == "__main__":
    main()
