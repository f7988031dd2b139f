"""The env phase of a training step (env step, exploration action): the stock path against HER's.

Two measurements, each alternating the two paths in one process:

**The env step.** ``env.step(action)`` of the env ``gymnasium.make`` builds against the one
:func:`~her_wrap.envs.make_goal_env` builds (what ``HER("FetchPush-v4", ...)`` and ``her-wrap train``
step), which reads the robot's joints by addresses found once (:mod:`her_wrap.envs.robot_envs`;
the same observations). Random actions, a reset at each episode's end, the same seeds on both.

**The exploration action.** At every env step SB3's ``collect_rollouts`` asks the learner for one exploration action per env through
``learner._sample_action``: the policy's prediction, then scaling, noise and clipping. For DDPG and TD3 the
learner ``HER`` trains predicts through the lean forward of :mod:`her_wrap.sb3.exploration` (the same
actions, bit for bit); for other learners it keeps SB3's path. For each learner this script builds one
``HER`` model on the env (``MultiInputPolicy``, HER's normalization, 3 x 256 networks, Gaussian action
noise), then times, on the same learner and the same observation, alternating rounds of

- SB3's path: the stock class's own ``_sample_action`` (``DDPG._sample_action(learner, ...)``), which
  predicts through ``policy.predict``, as a plain SB3 learner does;
- HER's path: ``learner._sample_action(...)``, what ``her-wrap train`` calls;

and prints the median time of each per call and per env step, and their ratio. Both run on one torch
thread (HER's exploration does; SB3's is given the same).

Usage::

    python scripts/bench_env_phase.py                          # FetchPush-v4, 2 envs (the entry's)
    python scripts/bench_env_phase.py --n-envs 1 --learners ddpg --out /tmp/e.md
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gymnasium
import numpy as np
import torch as th
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.noise import NormalActionNoise

from her_wrap import HER
from her_wrap.envs.registry import make_goal_env
from her_wrap.envs.robot_envs import RobotJointReader
from her_wrap.sb3.exploration import actor_plan
from her_wrap.sb3.learners import learner_class
from lab import bench
from lab.doc_sections import machine_note


def measure_env_step(env_id: str, seconds: float, rounds: int, seed: int) -> dict[str, Any]:
    her = make_goal_env(env_id)  # registers the id for gymnasium.make too
    steppers = {
        "stock": bench.random_stepper(gymnasium.make(env_id), seed),
        "her": bench.random_stepper(her, seed),
    }
    medians = bench.alternated_medians(steppers, seconds, rounds)
    return {
        "reader": isinstance(getattr(her.unwrapped, "_utils", None), RobotJointReader),
        "stock_us": medians["stock"],
        "her_us": medians["her"],
    }


def env_table(env_id: str, r: dict[str, Any]) -> list[str]:
    how = "joints by address" if r["reader"] else "as gymnasium's (not covered)"
    return [
        "| env | HER's env | `gymnasium.make`, us per step | `make_goal_env`, us per step | stock / HER |",
        "|---|---|---:|---:|---:|",
        f"| {env_id} | {how} | {r['stock_us']:.0f} | {r['her_us']:.0f} | {bench.ratio(r['stock_us'], r['her_us'])} |",
    ]


def measure(name: str, env_id: str, n_envs: int, seconds: float, rounds: int, seed: int) -> dict[str, Any]:
    env = make_vec_env(lambda: make_goal_env(env_id), n_envs=n_envs, seed=seed)
    actions = env.action_space.shape[0]
    model = HER(
        "MultiInputPolicy",
        env,
        name,
        normalize=True,
        seed=seed,
        learning_starts=0,
        action_noise=NormalActionNoise(np.zeros(actions), 0.2 * np.ones(actions)),
        policy_kwargs={"net_arch": [256, 256, 256]},
    )
    learner = model.model
    learner._last_obs = model.get_env().reset()  # type: ignore[union-attr]
    stock = learner_class(name)

    def sb3() -> None:
        stock._sample_action(learner, 0, learner.action_noise, n_envs)

    def her() -> None:
        learner._sample_action(0, learner.action_noise, n_envs)

    medians = bench.alternated_medians({"sb3": sb3, "her": her}, seconds, rounds, warmup=20)
    return {
        "lean": actor_plan(learner.policy) is not None,
        "sb3_us": medians["sb3"],
        "her_us": medians["her"],
    }


def table(rows: list[tuple[str, dict[str, Any]]], n_envs: int) -> list[str]:
    lines = [
        "| learner | HER's prediction | SB3's path, us per call | HER's path, us per call | "
        f"us per env step ({n_envs} envs): SB3 / HER | SB3 / HER |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for name, r in rows:
        how = "lean forward" if r["lean"] else "policy.predict (as SB3)"
        lines.append(
            f"| {name} | {how} | {r['sb3_us']:.0f} | {r['her_us']:.0f} | "
            f"{r['sb3_us'] / n_envs:.0f} / {r['her_us'] / n_envs:.0f} | {bench.ratio(r['sb3_us'], r['her_us'])} |"
        )
    return lines


def main() -> None:
    parser = bench.parser(__doc__, env="FetchPush-v4", seed=True)
    parser.add_argument("--learners", nargs="+", default=["ddpg", "td3", "sac"])
    parser.add_argument("--n-envs", type=int, default=2, help="envs per exploration call (the entry runs 2)")
    parser.add_argument("--seconds", type=float, default=4.0, help="timed seconds per learner and path")
    parser.add_argument("--rounds", type=int, default=8, help="alternating rounds; medians are reported")
    parser.add_argument("--out", type=Path, default=bench.ROOT / "docs" / "bench_env_phase.md")
    args = parser.parse_args()
    if args.n_envs < 1 or args.rounds < 1 or args.seconds <= 0:
        parser.error("--n-envs and --rounds must be at least 1 and --seconds positive")
    th.set_num_threads(1)
    env_result = measure_env_step(args.env, 2 * args.seconds, args.rounds, args.seed)
    print("\n".join(env_table(args.env, env_result)[2:]), flush=True)
    rows = []
    for name in args.learners:
        rows.append((name, measure(name, args.env, args.n_envs, 2 * args.seconds, args.rounds, args.seed)))
        print("\n".join(table(rows[-1:], args.n_envs)[2:]), flush=True)
    command = (
        f"python scripts/bench_env_phase.py --env {args.env} --n-envs {args.n_envs} "
        f"--learners {' '.join(args.learners)} --seconds {args.seconds:g} --rounds {args.rounds}"
    )
    body = [
        "## The env step",
        "",
        f"`env.step` of {args.env} as `gymnasium.make` builds it and as `make_goal_env` (HER, `her-wrap "
        "train`) builds it: the same observations; random actions, resets at episodes' ends. Medians of "
        "alternating rounds.",
        "",
        *env_table(args.env, env_result),
        "",
        "## The exploration action",
        "",
        f"{args.env}, {args.n_envs} envs, `MultiInputPolicy`, HER's normalization, 3 x 256 networks, Gaussian "
        "action noise 0.2, one torch thread. Each call is one exploration step of every env, as "
        "`collect_rollouts` asks for it (`_sample_action`: prediction, scaling, noise, clipping). SB3's path "
        "is the learner class's own `_sample_action` through `policy.predict`; HER's is the learner `HER` "
        "trains. Medians of alternating rounds on the same learner and observation.",
        "",
        *table(rows, args.n_envs),
    ]
    title = "The env phase of a training step: the stock path against HER's"
    machine = machine_note(("torch", "stable_baselines3", "gymnasium"), threads="one torch thread")
    bench.write_page(args.out, bench.page(title, command, body, machine))


if __name__ == "__main__":
    main()
