"""Where a training step's time goes on a CPU, and how close each recipe's update comes to the matmul peak.

For each recipe (FetchPush-v4 by default, ``MultiInputPolicy``, HER's normalization) the script fills the
replay buffer with random steps, then measures:

- the floating-point work of one gradient step, counted by ``torch.utils.flop_counter.FlopCounterMode``
  (matrix products of the forward and backward passes, target networks included);
- the wall time of one gradient step (``model.train(1, batch_size)``: replay sampling, relabeling,
  forward, backward, Adam, target update), with 1 and with 2 torch threads; the achieved GFLOPS and their
  share of the CPU's fp32 peak (``--peak-gflops``, about 75 per core on this kind of machine);
- the replay sample alone (what the update spends outside torch), the env step and the action prediction,
  in ms;
- from those, the cost of one env step at the recipe's updates per env step, and hours per million env
  steps on one core.

Usage::

    python scripts/bench_updates.py                        # writes docs/bench_updates.md
    python scripts/bench_updates.py --quick --out /tmp/u.md  # a few seconds per recipe
    python scripts/bench_updates.py --only manipulation      # two recipes, printed only
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import torch as th

from her_wrap import HER
from her_wrap.envs.registry import make_goal_env
from lab import bench
from lab.doc_sections import machine_note


@dataclass(frozen=True)
class Recipe:
    """A learner's settings and how many gradient steps it takes per env step."""

    name: str
    model_class: str
    batch_size: int
    net_arch: list[int]
    updates_per_env_step: float
    extra: dict[str, Any] = field(default_factory=dict)

    def her(self, env_id: str, seed: int) -> HER:
        return HER(
            "MultiInputPolicy",
            make_goal_env(env_id),
            self.model_class,
            normalize=True,
            seed=seed,
            buffer_size=200_000,
            learning_starts=10**9,  # never train during the buffer fill
            batch_size=self.batch_size,
            gamma=0.95,
            policy_kwargs={"net_arch": list(self.net_arch), **self.extra.get("policy_kwargs", {})},
            **{key: value for key, value in self.extra.items() if key != "policy_kwargs"},
        )


#: The manipulation entry's update (FetchPush's networks without its LayerNorm).
MANIPULATION = Recipe(
    "configs/her.yml manipulation DDPG (3 x 256, batch 2048, 20 updates per 500 steps)",
    "ddpg",
    2048,
    [256, 256, 256],
    0.04,
)

#: One worker of FetchPush's entry: 20 updates of 512 rows per 250 of its env steps.
FETCH_PUSH = Recipe(
    "FetchPush entry worker DDPG (2 x 256, LayerNorm, batch 512, 20 updates per 250 steps)",
    "ddpg",
    512,
    [256, 256],
    0.08,
    {"policy_kwargs": {"layer_norm": True}},
)

#: The manipulation entry's update with FetchPush's and FetchSlide's LayerNorm (FetchSlide's update).
MANIPULATION_LAYER_NORM = replace(
    MANIPULATION,
    name=MANIPULATION.name.replace("DDPG", "DDPG, LayerNorm"),
    extra={"policy_kwargs": {"layer_norm": True}},
)


def with_bfloat16_hidden_layers(recipe: Recipe) -> Recipe:
    """``recipe`` with ``policy_kwargs.hidden_dtype: bfloat16``, named after its LayerNorm."""
    policy_kwargs = {**recipe.extra.get("policy_kwargs", {}), "hidden_dtype": "bfloat16"}
    return replace(
        recipe,
        name=recipe.name.replace("LayerNorm", "LayerNorm, bfloat16 hidden layers"),
        extra={**recipe.extra, "policy_kwargs": policy_kwargs},
    )


RECIPES = [
    Recipe(
        "zoo TQC (3 x 512, 2 critics, batch 2048, 1 update per step)",
        "tqc",
        2048,
        [512, 512, 512],
        1.0,
        {"policy_kwargs": {"n_critics": 2}, "tau": 0.05},
    ),
    Recipe("SAC (3 x 256, batch 256, 1 update per step)", "sac", 256, [256, 256, 256], 1.0),
    Recipe("TD3 (3 x 256, batch 256, 1 update per step)", "td3", 256, [256, 256, 256], 1.0),
    Recipe(
        "HER paper DDPG (3 x 256, batch 256, 40 updates per 100 steps)", "ddpg", 256, [256, 256, 256], 0.4
    ),
    Recipe("DDPG (3 x 256, batch 1024, 10 updates per 100 steps)", "ddpg", 1024, [256, 256, 256], 0.1),
    MANIPULATION,
    MANIPULATION_LAYER_NORM,
    with_bfloat16_hidden_layers(MANIPULATION_LAYER_NORM),
    Recipe("FetchReach SAC preset (2 x 256, batch 256, 1 update per step)", "sac", 256, [256, 256], 1.0),
    FETCH_PUSH,
    with_bfloat16_hidden_layers(FETCH_PUSH),
]


def measure(recipe: Recipe, env_id: str, seed: int, seconds: float, fill_steps: int) -> dict[str, float]:
    th.manual_seed(seed)
    model = recipe.her(env_id, seed)
    model.learn(fill_steps)  # random actions only: learning_starts is never reached
    flops = bench.torch_flops(lambda: model.model.train(1, recipe.batch_size))
    result: dict[str, float] = {"gflop": flops / 1e9}
    for threads in (1, 2):
        th.set_num_threads(threads)
        result[f"update_ms_{threads}"] = 1e3 * bench.seconds_per_call(
            lambda: model.model.train(1, recipe.batch_size), seconds
        )
    th.set_num_threads(1)
    result["sample_ms"] = 1e3 * bench.seconds_per_call(
        lambda: model.replay_buffer.sample(recipe.batch_size, model.model._vec_normalize_env), seconds / 2
    )
    obs = model.get_env().reset()  # type: ignore[union-attr]
    result["predict_ms"] = 1e3 * bench.seconds_per_call(
        lambda: model.model.predict(obs, deterministic=False), seconds / 2
    )
    result["env_ms"] = 1e3 * bench.seconds_per_call(
        bench.random_stepper(make_goal_env(env_id), seed), seconds / 2
    )
    return result


def table(results: list[tuple[Recipe, dict[str, float]]], peak: float, env_id: str) -> list[str]:
    lines = [
        "| recipe | GFLOP per update | ms per update, 1 thread | GFLOPS (share of peak) | ms, 2 threads "
        "(speed-up) | of which replay sample, ms | ms per env step: updates + env + predict | "
        "hours per 1M env steps |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for recipe, r in results:
        one, two = r["update_ms_1"], r["update_ms_2"]
        gflops = r["gflop"] / (one / 1e3)
        step_ms = recipe.updates_per_env_step * min(one, two) + r["env_ms"] + r["predict_ms"]
        lines.append(
            f"| {recipe.name} | {r['gflop']:.2f} | {one:.1f} | {gflops:.1f} ({100 * gflops / peak:.0f}%) | "
            f"{two:.1f} ({one / two:.2f}x) | {r['sample_ms']:.2f} | {step_ms:.1f} = "
            f"{recipe.updates_per_env_step:g} x {min(one, two):.1f} + {r['env_ms']:.1f} + {r['predict_ms']:.1f} | "
            f"{step_ms * 1e6 / 1e3 / 3600:.1f} |"
        )
    return lines


def main() -> None:
    parser = bench.parser(__doc__, env="FetchPush-v4", seed=True, quick="short timings, for a check")
    parser.add_argument(
        "--only",
        metavar="TEXT",
        help="time only the recipes whose name contains TEXT (e.g. 'manipulation': the entry's networks without and with LayerNorm)",
    )
    parser.add_argument("--seconds", type=float, default=6.0, help="minimum timed seconds per measurement")
    parser.add_argument("--fill", type=int, default=3000, help="random env steps stored before timing")
    parser.add_argument("--peak-gflops", type=float, default=75.0, help="fp32 matmul peak of one core")
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="where the page goes (default: docs/bench_updates.md; with --only, printed and written nowhere)",
    )
    args = parser.parse_args()
    seconds = 0.5 if args.quick else args.seconds
    fill_steps = 300 if args.quick else args.fill
    recipes = [recipe for recipe in RECIPES if args.only is None or args.only in recipe.name]
    if not recipes:
        parser.error(f"--only {args.only!r} matches no recipe; recipes: {'; '.join(r.name for r in RECIPES)}")
    out = args.out or (None if args.only else bench.ROOT / "docs" / "bench_updates.md")
    th.set_num_threads(1)
    results = []
    for recipe in recipes:
        print(f"{recipe.name} ...", flush=True)
        results.append((recipe, measure(recipe, args.env, args.seed, seconds, fill_steps)))
        print("\n".join(table(results[-1:], args.peak_gflops, args.env)[2:]), flush=True)
    if out is None:  # a subset of the recipes must not replace the page of all of them
        return
    command = f"python scripts/bench_updates.py --env {args.env} --seconds {args.seconds}" + (
        f" --only '{args.only}'" if args.only else ""
    )
    body = [
        f"{args.env}, `MultiInputPolicy`, HER's normalization, future k = 4, gamma 0.95. One gradient step is "
        "`model.train(1, batch_size)`: replay sample and relabeling, forward and backward of every network, "
        "Adam, target update. GFLOP counted by `torch.utils.flop_counter` (matrix products, forward and "
        f"backward). Share of peak against {args.peak_gflops:g} GFLOPS fp32 for one core. The env-step cost "
        "uses the faster of 1 and 2 torch threads.",
        "",
        *table(results, args.peak_gflops, args.env),
    ]
    title = "Learner updates on a CPU: time, floating-point work, and where an env step's time goes"
    machine = machine_note(
        ("torch", "stable_baselines3"),
        threads="1 and 2 torch threads (other jobs on the machine inflate the 2-thread figures most)",
    )
    bench.write_page(out, bench.page(title, command, body, machine))


if __name__ == "__main__":
    main()
