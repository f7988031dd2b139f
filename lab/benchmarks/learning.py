"""Benchmark learning on bit flipping: HER(DQN) against SB3's DQN + ``HerReplayBuffer``.

Comparison (the default): for every ``n`` in ``--bits`` and every seed, both implementations train on
``BitFlippingEnv(n_bits=n)`` (a random goal every episode) for the same ``--timesteps`` with identical
hyperparameters (the ``--preset`` from :mod:`her_wrap.runs.presets`, the HER paper's setup by default),
the same ``MultiInputPolicy`` network, the same seed, ``future`` goals with ``k = 4``. Measured per run:

- wall-clock and CPU seconds of ``learn`` per 10k env steps (CPU time of this process: on a shared
  machine other processes inflate wall-clock figures unevenly, so the ratio target is judged on CPU time);
- CPU time of the learner's ``train()`` per gradient step and of the replay buffer's ``sample`` per batch
  (the two implementations run the same SB3 DQN update; only the buffer differs);
- greedy success on ``--eval-episodes`` fresh episodes (the same episodes for both) after the budget.

Every run is its own subprocess, one at a time, with ``torch.set_num_threads(1)``.

Headline (``--headline``): HER(DQN) alone at ``n = 50`` with ``BIT_FLIPPING_DQN_LARGE`` (``--n-envs``
envs collecting in lockstep), greedy success on 100 fresh episodes every 50k env steps, and the env steps
it takes to reach 0.9 (the HER paper's bit-flipping headline) within a 1M-step budget.

Usage::

    python scripts/bench_learning.py                      # n = 20 30 40 50, 100k steps, seed 0
    python scripts/bench_learning.py --seeds 0 1 2        # more seeds
    python scripts/bench_learning.py --bits 40 50 --timesteps 300000 --preset BIT_FLIPPING_DQN_LARGE
                                                          # both with the headline settings (4 envs)
    python scripts/bench_learning.py --headline           # n = 50 with BIT_FLIPPING_DQN_LARGE
    python scripts/bench_learning.py --quick              # about a minute, writes nothing
    python scripts/bench_learning.py --headline --quick   # the headline path on 10 bits, writes nothing

Both modes rewrite their own section of ``docs/bench_learning.md`` (the others are kept); the comparison
also writes ``docs/bench_learning.png`` (success vs n), or ``docs/bench_learning_<preset>.png`` and a
section of its own for another preset. A preset's ``<NAME>_N_ENVS`` (when presets.py has one) sets how
many envs step in lockstep, for both implementations alike (``--n-envs`` overrides it).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from lab import bench
from lab.doc_sections import command_lines
from lab.doc_sections import machine_note as machine_note_of
from lab.doc_sections import write_section as write_doc_section

#: This module, as each measurement's fresh interpreter runs it (``python -m``).
WORKER_MODULE = "lab.benchmarks.learning"

EVAL_SEED = (
    10_000  # evaluation episodes start from EVAL_SEED + seed: the same episodes for both implementations
)
IMPLEMENTATIONS = {"her_wrap": "her_wrap HER(DQN)", "sb3": "SB3 DQN + HerReplayBuffer"}
SECTIONS = ("comparison", "headline")
HEADLINE_TARGET = 0.9
WALL_RATIO_TARGET = 0.8


# ---------------------------------------------------------------------------------------- workers
def _learner_kwargs(preset: str) -> dict[str, Any]:
    import copy

    from her_wrap.runs import presets

    return copy.deepcopy(getattr(presets, preset))


def _make_env(n_bits: int, n_envs: int = 1) -> Any:
    from her_wrap import BitFlippingEnv

    if n_envs == 1:
        return BitFlippingEnv(n_bits=n_bits)
    from stable_baselines3.common.vec_env import DummyVecEnv

    return DummyVecEnv([lambda: BitFlippingEnv(n_bits=n_bits) for _ in range(n_envs)])


def build_model(implementation: str, n_bits: int, seed: int, preset: str, n_envs: int = 1) -> tuple[Any, Any]:
    """(the model to predict with, the SB3 learner inside it) for one implementation."""
    from stable_baselines3 import DQN, HerReplayBuffer

    from her_wrap import HER

    kwargs = _learner_kwargs(preset)
    env = _make_env(n_bits, n_envs)
    if implementation == "her_wrap":
        model = HER(
            "MultiInputPolicy",
            env,
            DQN,
            n_sampled_goal=4,
            goal_selection_strategy="future",
            seed=seed,
            **kwargs,
        )
        return model, model.model
    learner = DQN(
        "MultiInputPolicy",
        env,
        replay_buffer_class=HerReplayBuffer,
        replay_buffer_kwargs={"n_sampled_goal": 4, "goal_selection_strategy": "future"},
        seed=seed,
        **kwargs,
    )
    return learner, learner


def _time_calls(owner: Any, name: str, totals: dict[str, float]) -> None:
    """Replace ``owner.name`` by a wrapper that adds its CPU time to ``totals[name]``."""
    original = getattr(owner, name)
    totals[name] = 0.0

    def timed(*args: Any, **kwargs: Any) -> Any:
        start = time.process_time()
        try:
            return original(*args, **kwargs)
        finally:
            totals[name] += time.process_time() - start

    setattr(owner, name, timed)


def run_comparison_worker(
    implementation: str, n_bits: int, timesteps: int, seed: int, preset: str, eval_episodes: int, n_envs: int
) -> dict[str, Any]:
    import torch

    torch.set_num_threads(1)
    from her_wrap import BitFlippingEnv
    from her_wrap.sb3.evaluation import success_rate

    with bench.Stopwatch() as setup:
        model, learner = build_model(implementation, n_bits, seed, preset, n_envs)
    totals: dict[str, float] = {}
    _time_calls(learner, "train", totals)
    _time_calls(learner.replay_buffer, "sample", totals)
    with bench.Stopwatch() as learning:
        model.learn(timesteps)
    success = success_rate(model, BitFlippingEnv(n_bits=n_bits), eval_episodes, seed=EVAL_SEED + seed)
    return {
        "implementation": implementation,
        "n_bits": n_bits,
        "seed": seed,
        "n_envs": n_envs,
        "timesteps": int(learner.num_timesteps),
        "episodes": int(learner._episode_num),
        "gradient_steps": int(learner._n_updates),
        "setup_seconds": setup.wall,
        "learn_seconds": learning.wall,
        "learn_cpu_seconds": learning.cpu,
        "train_cpu_seconds": totals["train"],
        "sample_cpu_seconds": totals["sample"],
        "success": success,
    }


def run_headline_worker(
    n_bits: int,
    timesteps: int,
    seed: int,
    preset: str,
    n_envs: int,
    eval_every: int,
    eval_episodes: int,
    full_budget: bool,
) -> dict[str, Any]:
    import torch

    torch.set_num_threads(1)
    from her_wrap import BitFlippingEnv
    from her_wrap.runs.callbacks import SuccessEvalCallback
    from her_wrap.sb3.evaluation import success_rate

    model, learner = build_model("her_wrap", n_bits, seed, preset, n_envs)
    eval_env = BitFlippingEnv(n_bits=n_bits)
    eval_env.reset(seed=EVAL_SEED)
    curve: list[dict[str, float]] = []
    wall, cpu = time.perf_counter(), time.process_time()

    def record_point(result: Any) -> bool:
        steps, _, seconds = evaluation.curve()
        curve.append(
            {
                "timesteps": steps[-1],
                "success": result.success_rate,
                "seconds": seconds[-1],
                "cpu_seconds": time.process_time() - cpu,
            }
        )
        print(
            f"  {steps[-1]:>9,} steps: greedy success {result.success_rate:.2f} ({seconds[-1]:.0f} s training)",
            file=sys.stderr,
            flush=True,
        )
        return full_budget or result.success_rate < HEADLINE_TARGET

    evaluation = SuccessEvalCallback(
        model,
        eval_env,
        eval_freq=eval_every,
        n_eval_episodes=eval_episodes,
        after_evaluation=record_point,
        verbose=0,
    )
    model.learn(timesteps, callback=evaluation)
    seconds = time.perf_counter() - wall - evaluation.evaluation_seconds
    reached = next((point for point in curve if point["success"] >= HEADLINE_TARGET), None)
    final = success_rate(model, eval_env, 200, seed=EVAL_SEED + 1)
    return {
        "n_bits": n_bits,
        "seed": seed,
        "preset": preset,
        "learner_kwargs": _learner_kwargs(preset),
        "n_envs": n_envs,
        "timesteps": int(learner.num_timesteps),
        "gradient_steps": int(learner._n_updates),
        "seconds": seconds,
        "cpu_seconds": time.process_time() - cpu,
        "curve": curve,
        "steps_to_target": None if reached is None else reached["timesteps"],
        "seconds_to_target": None if reached is None else reached["seconds"],
        "final_success": final,
    }


# ---------------------------------------------------------------------------------------- reports
def machine_note() -> str:
    return machine_note_of(("torch", "stable_baselines3", "numpy"), threads="one torch thread per run")


def _mean(values: list[float]) -> float:
    return sum(values) / len(values)


def _per_10k(result: dict[str, Any], key: str) -> float:
    return result[key] / result["timesteps"] * 10_000


def _by(results: list[dict[str, Any]], implementation: str, n_bits: int) -> list[dict[str, Any]]:
    return [r for r in results if r["implementation"] == implementation and r["n_bits"] == n_bits]


def comparison_tables(results: list[dict[str, Any]], bits: list[int]) -> list[str]:
    lines = [
        "| n | implementation | greedy success (per seed) | wall s / 10k steps | CPU s / 10k steps "
        "| gradient steps | train() CPU ms / gradient step | sample CPU ms / batch |",
        "|---:|---|---:|---:|---:|---:|---:|---:|",
    ]
    for n_bits in bits:
        for implementation, label in IMPLEMENTATIONS.items():
            runs = _by(results, implementation, n_bits)
            if not runs:
                continue
            per_seed = ", ".join(f"{r['success']:.3f}" for r in runs)
            success = f"{_mean([r['success'] for r in runs]):.3f}" + (
                f" ({per_seed})" if len(runs) > 1 else ""
            )
            steps = _mean([r["gradient_steps"] for r in runs])
            lines.append(
                f"| {n_bits} | {label} | {success} | {_mean([_per_10k(r, 'learn_seconds') for r in runs]):.2f} "
                f"| {_mean([_per_10k(r, 'learn_cpu_seconds') for r in runs]):.2f} | {steps:,.0f} "
                f"| {1000 * _mean([r['train_cpu_seconds'] / max(r['gradient_steps'], 1) for r in runs]):.2f} "
                f"| {1000 * _mean([r['sample_cpu_seconds'] / max(r['gradient_steps'], 1) for r in runs]):.3f} |"
            )
    lines += [
        "",
        "| n | wall / 10k steps, her_wrap / SB3 | CPU / 10k steps | train() CPU / gradient step "
        "| sample CPU / batch | success her_wrap - SB3 |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for n_bits, ratios in _ratios(results, bits).items():
        lines.append(
            f"| {n_bits} | {ratios['wall']:.2f}x | {ratios['cpu']:.2f}x | {ratios['train']:.2f}x "
            f"| {ratios['sample']:.2f}x | {ratios['success']:+.3f} |"
        )
    return lines


def _ratios(results: list[dict[str, Any]], bits: list[int]) -> dict[int, dict[str, float]]:
    ratios = {}
    for n_bits in bits:
        ours, theirs = _by(results, "her_wrap", n_bits), _by(results, "sb3", n_bits)
        if not ours or not theirs:
            continue

        def ratio(
            value: Any, ours: list[dict[str, Any]] = ours, theirs: list[dict[str, Any]] = theirs
        ) -> float:
            return _mean([value(r) for r in ours]) / _mean([value(r) for r in theirs])

        ratios[n_bits] = {
            "wall": ratio(lambda r: _per_10k(r, "learn_seconds")),
            "cpu": ratio(lambda r: _per_10k(r, "learn_cpu_seconds")),
            "train": ratio(lambda r: r["train_cpu_seconds"] / max(r["gradient_steps"], 1)),
            "sample": ratio(lambda r: r["sample_cpu_seconds"] / max(r["gradient_steps"], 1)),
            "success": _mean([r["success"] for r in ours]) - _mean([r["success"] for r in theirs]),
        }
    return ratios


def targets_table(results: list[dict[str, Any]], bits: list[int]) -> list[str]:
    ratios = _ratios(results, bits)
    if not ratios:
        return []
    cpu = _mean([r["cpu"] for r in ratios.values()])
    wall = _mean([r["wall"] for r in ratios.values()])
    success_ok = all(r["success"] >= 0 for r in ratios.values())
    successes = ", ".join(f"n={n}: {r['success']:+.3f}" for n, r in ratios.items())
    return bench.targets_table(
        [
            (
                f"time per env step <= {WALL_RATIO_TARGET}x SB3 (CPU time, mean over n)",
                f"{cpu:.2f}x (wall {wall:.2f}x)",
                cpu <= WALL_RATIO_TARGET,
            ),
            ("greedy success >= SB3's at every n", successes, success_ok),
        ]
    )


def write_plot(results: list[dict[str, Any]], bits: list[int], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(6, 4))
    for (implementation, label), marker in zip(IMPLEMENTATIONS.items(), ("o", "s"), strict=True):
        xs = [n for n in bits if _by(results, implementation, n)]
        means = [_mean([r["success"] for r in _by(results, implementation, n)]) for n in xs]
        (line,) = axis.plot(xs, means, marker=marker, label=label)
        for n_bits in xs:
            runs = _by(results, implementation, n_bits)
            if len(runs) > 1:
                axis.scatter(
                    [n_bits] * len(runs), [r["success"] for r in runs], color=line.get_color(), alpha=0.3
                )
    axis.set_xlabel("n (bits)")
    axis.set_ylabel("greedy success (fresh episodes)")
    axis.set_ylim(-0.02, 1.02)
    axis.set_xticks(bits)
    axis.set_title(title, fontsize=9)
    axis.grid(alpha=0.3)
    axis.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


def headline_lines(result: dict[str, Any], budget: int) -> list[str]:
    kwargs = ", ".join(f"{key}={value!r}" for key, value in result["learner_kwargs"].items())
    reached = result["steps_to_target"]
    lines = [
        f"HER(DQN), `MultiInputPolicy`, future k=4, `{result['preset']}` ({kwargs}), "
        f"{result['n_envs']} env(s), seed {result['seed']}, budget {budget:,} env steps.",
        "",
        (
            f"**{result['n_bits']} bits: greedy success >= {HEADLINE_TARGET} after {reached:,} env steps** "
            f"({result['seconds_to_target'] / 60:.1f} min of training wall time); "
            if reached is not None
            else f"**{result['n_bits']} bits: greedy success did not reach {HEADLINE_TARGET} "
            f"within {result['timesteps']:,} env steps**; "
        )
        + f"greedy success on 200 other fresh episodes at the end: {result['final_success']:.3f} "
        f"({result['timesteps']:,} env steps, {result['gradient_steps']:,} gradient steps, "
        f"{result['seconds'] / 60:.1f} min wall, {result['cpu_seconds'] / 60:.1f} min CPU).",
        "",
        "| env steps | greedy success (100 fresh episodes) | training wall s | CPU s |",
        "|---:|---:|---:|---:|",
    ]
    lines += [
        f"| {p['timesteps']:,} | {p['success']:.2f} | {p['seconds']:.0f} | {p['cpu_seconds']:.0f} |"
        for p in result["curve"]
    ]
    return lines


def write_section(path: Path, section: str, body: list[str]) -> None:
    """Replace one section of the markdown page (between its markers), keeping the others; a section the
    page does not have yet goes at its end."""
    new_page = "\n".join(
        [
            "# Learning benchmark: bit flipping",
            "",
            "Written by `scripts/bench_learning.py` (see its docstring for what is measured); rerun it to "
            "refresh a section.",
            "",
            *(f"<!-- {name}: begin -->\n<!-- {name}: end -->\n" for name in SECTIONS),
        ]
    )
    begin, end = f"<!-- {section}: begin -->", f"<!-- {section}: end -->"
    write_doc_section(path, begin, end, "\n".join(body), new_page=new_page)


# ---------------------------------------------------------------------------------------- modes
def comparison(args: argparse.Namespace, command: str) -> None:
    results = []
    for n_bits in args.bits:
        for index, seed in enumerate(args.seeds):
            # Alternate which implementation runs first, so slow drifts of the machine's load even out.
            order = list(IMPLEMENTATIONS) if index % 2 == 0 else list(IMPLEMENTATIONS)[::-1]
            for implementation in order:
                result = bench.run_worker(
                    WORKER_MODULE,
                    [
                        "comparison",
                        implementation,
                        str(n_bits),
                        str(args.timesteps),
                        str(seed),
                        args.preset,
                        str(args.eval_episodes),
                        str(args.n_envs),
                    ],
                )
                if result is None:
                    continue
                results.append(result)
                print(
                    f"n={n_bits} seed={seed} {IMPLEMENTATIONS[implementation]}: success {result['success']:.3f}, "
                    f"{_per_10k(result, 'learn_seconds'):.2f} s wall ({_per_10k(result, 'learn_cpu_seconds'):.2f}"
                    f" s CPU) per 10k steps, {result['gradient_steps']:,} gradient steps",
                    flush=True,
                )
    tables = comparison_tables(results, args.bits)
    targets = targets_table(results, args.bits)
    print("\n".join(["", *tables, "", *targets]))
    for n_bits, ratios in _ratios(results, args.bits).items():
        print(
            f"n={n_bits}: her_wrap / SB3 time per env step {ratios['cpu']:.2f}x CPU ({ratios['wall']:.2f}x wall), "
            f"success her_wrap - SB3 {ratios['success']:+.3f}"
        )
    if args.out is None:
        return
    args.out.mkdir(parents=True, exist_ok=True)
    default_setup = args.preset == "BIT_FLIPPING_DQN" and args.n_envs == 1
    section = "comparison" if default_setup else f"comparison {args.preset} {args.n_envs} envs"
    plot = "bench_learning.png" if default_setup else f"bench_learning_{args.preset.lower()}.png"
    title = (
        f"Bit flipping, random goals: greedy success after {args.timesteps:,} env steps\n"
        f"{args.preset}, MultiInputPolicy, future k=4, seeds {' '.join(map(str, args.seeds))}"
    )
    write_plot(results, args.bits, args.out / plot, title)
    kwargs = ", ".join(f"{key}={value!r}" for key, value in _learner_kwargs(args.preset).items())
    body = [
        "## HER(DQN) vs SB3's DQN + HerReplayBuffer"
        + ("" if default_setup else f": {args.preset}, {args.n_envs} envs"),
        *command_lines(command),
        f'Both: `DQN("MultiInputPolicy", ...)` with `{args.preset}` ({kwargs}); `future` goals, k=4; '
        f"`BitFlippingEnv(n_bits=n)` with a random goal every episode, {args.n_envs} env(s) (a `DummyVecEnv` when more than one); {args.timesteps:,} env steps; seeds "
        f"{', '.join(map(str, args.seeds))}; greedy success on {args.eval_episodes} fresh episodes (the same "
        "for both). SB3's path: `DQN(..., replay_buffer_class=HerReplayBuffer, replay_buffer_kwargs="
        'dict(n_sampled_goal=4, goal_selection_strategy="future"))`.',
        "",
        *tables,
        "",
        *targets,
        "",
        f"![greedy success vs n]({plot})",
        "",
        "Gradient steps differ between the two because `train_freq` counts episodes and an episode ends at "
        "success: the implementation that learns faster has shorter episodes, so it takes more gradient "
        "steps per env step. The per-gradient-step and per-batch columns compare the same work: "
        "`train()` includes the buffer's `sample`; the rest of an env step (the policy's forward pass for "
        "the action, the env, SB3's `_store_transition` with its deepcopy of the infos, the buffer's `add`) "
        "is SB3 code common to both, which bounds the per-env-step ratio where gradient steps are few "
        "(large n).",
        "",
        "Differences in what is learned, at identical hyperparameters: her_wrap recomputes `terminated` of a "
        "relabeled transition for its new goal (`BitFlippingEnv.compute_terminated`), where SB3's "
        "`HerReplayBuffer` copies the original goal's `done` (SB3 issue #627), so SB3 bootstraps past "
        "relabeled successes; her_wrap can also sample episodes still in progress.",
        "",
        machine_note(),
    ]
    write_section(args.out / "bench_learning.md", section, body)
    print(f"wrote {args.out / 'bench_learning.md'} and {args.out / plot}")


def headline(args: argparse.Namespace, command: str) -> None:
    result = bench.run_worker(
        WORKER_MODULE,
        [
            "headline",
            str(args.headline_bits),
            str(args.headline_timesteps),
            str(args.seeds[0]),
            args.headline_preset,
            str(args.n_envs),
            str(args.eval_every),
            str(args.headline_eval_episodes),
            str(int(args.full_budget)),
        ],
    )
    if result is None:
        sys.exit(1)
    lines = headline_lines(result, args.headline_timesteps)
    print("\n".join(lines))
    if args.out is None:
        return
    args.out.mkdir(parents=True, exist_ok=True)
    body = [
        f"## Headline: HER(DQN) on {args.headline_bits} bits",
        *command_lines(command),
        *lines,
        "",
        machine_note(),
    ]
    write_section(args.out / "bench_learning.md", "headline", body)
    print(f"wrote {args.out / 'bench_learning.md'}")


def main(argv: list[str] | None = None) -> None:
    raw = sys.argv[1:] if argv is None else argv
    if raw[:1] == ["--worker"]:
        worker(raw[1:])
        return
    parser = bench.parser(__doc__, quick="smoke run of about a minute; writes nothing")
    parser.add_argument("--bits", type=int, nargs="+", default=[20, 30, 40, 50], help="values of n")
    parser.add_argument("--timesteps", type=int, default=100_000, help="env steps per run (comparison)")
    parser.add_argument(
        "--seeds", type=int, nargs="+", default=[0], help="seeds (the headline uses the first)"
    )
    parser.add_argument(
        "--preset", default="BIT_FLIPPING_DQN", help="learner kwargs from her_wrap.runs.presets"
    )
    parser.add_argument(
        "--eval-episodes", type=int, default=200, help="fresh episodes of the final evaluation"
    )
    parser.add_argument("--out", type=Path, default=None, help="folder of the page and plot (default: docs/)")
    parser.add_argument("--headline", action="store_true", help="HER(DQN) alone at n=50: env steps to 0.9")
    parser.add_argument("--headline-bits", type=int, default=50)
    parser.add_argument("--headline-timesteps", type=int, default=1_000_000, help="headline budget")
    parser.add_argument("--headline-preset", default="BIT_FLIPPING_DQN_LARGE")
    parser.add_argument(
        "--n-envs",
        type=int,
        default=None,
        help="envs stepping in lockstep (default: the preset's _N_ENVS, else 1)",
    )
    parser.add_argument("--eval-every", type=int, default=50_000, help="headline evaluation interval")
    parser.add_argument("--headline-eval-episodes", type=int, default=100)
    parser.add_argument(
        "--full-budget", action="store_true", help="headline: go on after reaching 0.9 (default: stop there)"
    )
    args = parser.parse_args(raw)
    if args.n_envs is None:
        from her_wrap.runs import presets

        preset = args.headline_preset if args.headline else args.preset
        args.n_envs = getattr(presets, preset + "_N_ENVS", 1)
    if args.quick:
        args.bits, args.timesteps, args.eval_episodes = [6, 8], min(args.timesteps, 3_000), 50
        args.headline_bits, args.headline_timesteps = 10, min(args.headline_timesteps, 20_000)
        args.eval_every, args.headline_eval_episodes = 5_000, 50
    elif args.out is None:
        args.out = Path("docs")
    command = " ".join(["python scripts/bench_learning.py", *raw])
    (headline if args.headline else comparison)(args, command)


def worker(arguments: list[str]) -> None:
    mode, *values = arguments
    if mode == "comparison":
        implementation, n_bits, timesteps, seed, preset, eval_episodes, n_envs = values
        result = run_comparison_worker(
            implementation, int(n_bits), int(timesteps), int(seed), preset, int(eval_episodes), int(n_envs)
        )
    else:
        n_bits, timesteps, seed, preset, n_envs, eval_every, eval_episodes, full_budget = values
        result = run_headline_worker(
            int(n_bits),
            int(timesteps),
            int(seed),
            preset,
            int(n_envs),
            int(eval_every),
            int(eval_episodes),
            bool(int(full_budget)),
        )
    bench.report_to_parent(result)


if __name__ == "__main__":
    main()
