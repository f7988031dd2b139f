"""Cost of one gradient step of HER's learners, JAX (SBX, jit-compiled) against PyTorch (SB3), side by side.

For each learner the script builds ``HER`` twice with the same env, network and batch, once over the
PyTorch learner and once over its SBX twin, fills both replay buffers with the same random steps, and
then times ``model.train(gradient_steps=G, batch_size=B)`` of the two in alternation (so that both see
the same load of a shared machine). One call is what one training round costs: sampling and
relabeling ``G * B`` rows, then ``G`` updates (SBX: one jit-compiled scan over them). The per-update
cost is the call's time over ``G`` (4 for the continuous learners, the HER paper's 40 for DQN), in CPU
time of the process (what the update costs, whatever else runs on the machine) and in wall time; the
first call of each learner (JIT compilation) is not timed.

Shapes: the manipulation recipe's (3 x 256, batch 2048, flat observations of ``--env``) for DDPG, TD3,
SAC and TQC, SBX's CrossQ alongside; the HER paper's bit-flipping DQN (one layer of 256, batch 128, 15
bits). Achieved GFLOPS divide the PyTorch update's floating-point work (``torch.utils.flop_counter``:
matrix products, forward and backward, target networks) by the time of each; the peak is a single
thread's fp32 matrix product measured in the same run (CPU time). Both frameworks run on one thread
(``torch.set_num_threads``; XLA's ``intra_op_parallelism_threads=1``, CPU only).

Usage::

    nice -n 10 python scripts/bench_jax.py                     # prints a Markdown table
    nice -n 10 python scripts/bench_jax.py --quick --learners sac dqn
"""

from __future__ import annotations

import os

# Before JAX is imported: CPU only, one thread, as torch below.
os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1")

import argparse
import statistics
from dataclasses import dataclass
from typing import Any

import torch as th

from her_wrap import HER, BitFlippingEnv
from her_wrap.envs.registry import make_goal_env
from lab import bench
from lab.doc_sections import machine_note


@dataclass(frozen=True)
class Case:
    """One learner at one set of shapes."""

    name: str
    torch_name: str | None  # None: no PyTorch twin (CrossQ)
    jax_name: str
    net_arch: tuple[int, ...]
    batch_size: int
    gradient_steps: int  # per timed train() call: what one training round of the recipe does, or fewer
    discrete: bool


CASES = {
    "ddpg": Case("DDPG", "ddpg", "sbx.ddpg", (256, 256, 256), 2048, 4, discrete=False),
    "td3": Case("TD3", "td3", "sbx.td3", (256, 256, 256), 2048, 4, discrete=False),
    "sac": Case("SAC", "sac", "sbx.sac", (256, 256, 256), 2048, 4, discrete=False),
    "tqc": Case("TQC", "tqc", "sbx.tqc", (256, 256, 256), 2048, 4, discrete=False),
    "crossq": Case("CrossQ", None, "sbx.crossq", (256, 256, 256), 2048, 4, discrete=False),
    "dqn": Case("DQN (bit flipping, 15 bits)", "dqn", "sbx.dqn", (256,), 128, 40, discrete=True),
}


def make_env(case: Case, env_id: str) -> Any:
    if case.discrete:
        return BitFlippingEnv(n_bits=15)
    return make_goal_env(env_id)


def build(case: Case, model_class: str, env_id: str, fill_steps: int, seed: int) -> HER:
    """HER over one learner with its buffer filled by ``fill_steps`` random steps (no training)."""
    model = HER(
        "MlpPolicy",
        make_env(case, env_id),
        model_class,
        seed=seed,
        buffer_size=max(fill_steps * 2, 10_000),
        batch_size=case.batch_size,
        learning_starts=10**9,  # never train while filling
        policy_kwargs={"net_arch": list(case.net_arch)},
    )
    return model.learn(fill_steps)


def train_call(model: HER, case: Case, gradient_steps: int) -> None:
    # Keywords: SBX's DQN takes train(batch_size, gradient_steps), the others the reverse.
    model.model.train(gradient_steps=gradient_steps, batch_size=case.batch_size)


def measure(case: Case, args: argparse.Namespace) -> dict[str, Any]:
    gradient_steps = args.gradient_steps or case.gradient_steps
    """Median ms per update of each framework (alternating calls; CPU time, and wall time under
    ``wall_``), and the PyTorch update's GFLOP."""
    models = {"jax": build(case, case.jax_name, args.env, args.fill_steps, args.seed)}
    if case.torch_name is not None:
        models["torch"] = build(case, case.torch_name, args.env, args.fill_steps, args.seed)
    result: dict[str, Any] = {"gflop": None}
    if "torch" in models:
        result["gflop"] = bench.torch_flops(lambda: train_call(models["torch"], case, 1)) / 1e9
    for model in models.values():  # JIT compilation (SBX), first-call allocations (both)
        train_call(model, case, gradient_steps)
    clocks = {name: [bench.Stopwatch() for _ in range(args.repeats)] for name in models}
    for repeat in range(args.repeats):
        for name, model in models.items():
            with clocks[name][repeat]:
                train_call(model, case, gradient_steps)
    for name, calls in clocks.items():
        result[name] = statistics.median(call.cpu for call in calls) / gradient_steps * 1e3
        result[f"wall_{name}"] = statistics.median(call.wall for call in calls) / gradient_steps * 1e3
    return result


def row(case: Case, result: dict[str, Any], peak: float) -> str:
    def cell(name: str) -> str:
        if name not in result:
            return "—"
        milliseconds = result[name]
        if result["gflop"] is None:
            return f"{milliseconds:.1f}"
        gflops = result["gflop"] / (milliseconds / 1e3)
        return f"{milliseconds:.1f} ({gflops:.1f}, {100 * gflops / peak:.0f}%)"

    def ratio(prefix: str) -> str:
        if "torch" not in result:
            return "—"
        return bench.ratio(result[prefix + "torch"], result[prefix + "jax"])

    gflop = "—" if result["gflop"] is None else f"{result['gflop']:.2f}"
    arch = " x ".join(str(width) for width in case.net_arch)
    return (
        f"| {case.name} | {arch}, {case.batch_size} | {gflop} | {cell('torch')} | {cell('jax')} | "
        f"{ratio('')} | {ratio('wall_')} |"
    )


def main() -> None:
    parser = bench.parser(__doc__, env="FetchPush-v4", seed=True, quick="2 updates per call, 3 calls")
    parser.add_argument("--learners", nargs="+", choices=list(CASES), default=list(CASES))
    parser.add_argument(
        "--gradient-steps", type=int, default=None, help="updates per timed call (default: 4; DQN: 40)"
    )
    parser.add_argument("--repeats", type=int, default=5, help="timed calls per framework")
    parser.add_argument("--fill-steps", type=int, default=2_000, help="random env steps in each buffer")
    args = parser.parse_args()
    if args.quick:
        args.gradient_steps, args.repeats, args.fill_steps = 2, 3, 500
    th.set_num_threads(1)
    import jax  # after the flags above; the HER models import it anyway

    peak = bench.matmul_peak_gflops()
    print(
        f"Measured fp32 matmul peak of one thread: {peak:.1f} GFLOPS; "
        f"{args.gradient_steps or '4 (DQN: 40)'} updates per call, median of {args.repeats} calls; "
        f"continuous learners on {args.env}",
        flush=True,
    )
    print("\n| learner | network, batch | GFLOP / update | PyTorch CPU ms (GFLOPS, % of peak) | "
          "JAX CPU ms (GFLOPS, % of peak) | PyTorch / JAX, CPU time | PyTorch / JAX, wall time |")  # fmt: skip
    print("|---|---|---|---|---|---|---|", flush=True)
    for name in args.learners:
        case = CASES[name]
        print(row(case, measure(case, args), peak), flush=True)
    print(
        "\n" + machine_note(("torch", "jax"), threads=f"one thread each, jax on {jax.devices()[0].platform}")
    )


if __name__ == "__main__":
    main()
