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

import cProfile
import pstats
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
from lab import bench
from lab.doc_sections import machine_note

ENV_ID = "FetchReach-v4"

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


class Agent:
    """A learner trained in chunks that continue one run."""

    name: str
    model: Any

    def learn(self, steps: int) -> None:
        self.model.learn(steps, reset_num_timesteps=False)

    def policy_input(self, observation: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """What the learner's policy takes for a raw dict observation of the env."""
        return observation

    def predict(
        self,
        observation: dict[str, np.ndarray],
        state: Any = None,
        episode_start: Any = None,
        deterministic: bool = True,
    ) -> Any:
        """The learner's action for a raw dict observation; SB3's ``evaluate_policy`` also passes
        ``state`` and ``episode_start``, which a feed-forward policy has no use for."""
        return self.model.predict(self.policy_input(observation), deterministic=deterministic)


class SB3Agent(Agent):
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

    def policy_input(self, observation: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        return self.env.normalize_obs(observation)  # as the training env normalized it


class HerWrapAgent(Agent):
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


def train_interleaved(agents: list[Agent], steps: int, chunk: int) -> dict[str, bench.Stopwatch]:
    timings = {agent.name: bench.Stopwatch() for agent in agents}
    done = 0
    while done < steps:
        size = min(chunk, steps - done)
        for agent in agents:
            with timings[agent.name]:
                agent.learn(size)
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
    parser = bench.parser(__doc__, seed=True)
    parser.add_argument("--steps", type=int, default=20_000, help="env steps of each learner")
    parser.add_argument("--chunk", type=int, default=2_000, help="env steps per turn of each learner")
    parser.add_argument("--eval-episodes", type=int, default=100)
    parser.add_argument(
        "--mlp", action="store_true", help="also run her_wrap with MlpPolicy (a third learner)"
    )
    parser.add_argument(
        "--profile-steps", type=int, default=2_000, help="steps profiled after the timed run (0: none)"
    )
    parser.add_argument("--out", type=Path, default=bench.ROOT / "docs" / "bench_end_to_end.md")
    args = parser.parse_args()

    agents: list[Agent] = [SB3Agent(args.seed), HerWrapAgent(args.seed)]
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
            f"{bench.ratio(timing.wall, reference.wall)} | {bench.ratio(timing.cpu, reference.cpu)} | "
            f"{successes[agent.name]:.2f} |"
        )
    ours = timings[HerWrapAgent.name]
    wall_ratio = ours.wall / reference.wall
    ours_success, sb3_success = successes[HerWrapAgent.name], successes[SB3Agent.name]
    targets = [
        (
            "wall time <= 0.85x SB3's",
            f"{bench.ratio(ours.wall, reference.wall)} (CPU time {bench.ratio(ours.cpu, reference.cpu)})",
            wall_ratio <= 0.85,
        ),
        ("final success >= SB3's", f"{ours_success:.2f} vs {sb3_success:.2f}", ours_success >= sb3_success),
    ]
    command = (
        f"python scripts/bench_end_to_end.py --steps {args.steps} --seed {args.seed}"
        + (" --mlp" if args.mlp else "")
        + (f" --profile-steps {args.profile_steps}" if args.profile_steps != 2_000 else "")
    )
    body = [
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
        *bench.targets_table(targets),
    ]
    if args.profile_steps > 0:
        body += ["", *profile_table(agents, args.profile_steps)]
    title = "End-to-end benchmark: HER(SAC) against SB3's SAC + HerReplayBuffer on FetchReach-v4"
    machine = machine_note(
        ("torch", "stable_baselines3"),
        threads="torch on 1 thread (the alternating chunks share the machine's slowdowns between both "
        "learners; CPU time is this process's own)",
    )
    text = bench.page(title, command, body, machine)
    print(text)
    bench.write_page(args.out, text)


if __name__ == "__main__":
    main()
