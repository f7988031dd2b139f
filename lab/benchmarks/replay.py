"""Benchmark hindsight replay buffers on Fetch-like shapes: her_wrap against SB3 (and cpprb).

Shapes: observation 25 float32, achieved and desired goal 3 float32, action 4 float32, episodes of 50
steps, strategy ``future`` with k = 4 relabeled goals per real one, batches of 256.

Two parts, each at every ``--capacities`` value, side by side in one run:

1. The SB3-facing path, what SB3 users get: SB3's ``HerReplayBuffer`` against her_wrap's drop-in
   ``her_wrap.sb3.HerReplayBuffer``, both built with ``buffer_size = capacity`` and a DummyVecEnv, filled
   with ``capacity`` transitions through ``add(obs, next_obs, action, reward, done, infos)`` one step per
   call (as SB3's learners call it), then sampled with ``sample(256, env=None)``: torch tensors, rewards
   of relabeled goals computed.
2. The numpy cores (numpy batches, no torch): her_wrap's ``HindsightReplay`` and cpprb's
   ``HindsightReplayBuffer`` (cpprb stores k + 1 rows per real transition, so it gets ``capacity * (k + 1)``
   rows), filled one step per call.

Measured per implementation, each in its own subprocess so allocations do not pollute each other, by this
process's CPU time (on a shared machine other processes inflate wall-clock time unevenly):

- add throughput: transitions per second while filling (cpprb and her_wrap's cpprb-compatible buffer
  also pay their ``on_episode_end`` inside it);
- sample throughput: batches per second at full capacity, median over timing blocks;
- bytes per stored transition: peak resident memory (VmHWM, reset before construction) minus the
  resident memory before construction, divided by the transitions the buffer holds at the end. RSS, not
  tracemalloc: cpprb allocates in C++, which tracemalloc does not see.

Usage::

    python scripts/bench_replay.py               # 1e5 and 1e6, writes docs/bench_replay.md (a few minutes)
    python scripts/bench_replay.py --quick       # tiny smoke run (about 30 s), writes nothing
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from lab import bench
from lab.doc_sections import machine_note

#: This module, as each measurement's fresh interpreter runs it (``python -m``).
WORKER_MODULE = "lab.benchmarks.replay"

OBS_DIM, GOAL_DIM, ACTION_DIM = 25, 3, 4
STATE_DIM = OBS_DIM + GOAL_DIM  # cpprb-style state: the observation with the achieved goal appended
EPISODE_LEN = 50
K = 4
DISTANCE_THRESHOLD = 0.05
POOL_EPISODES = 64  # distinct pre-generated episodes cycled through while filling

IMPLEMENTATIONS = {
    "sb3": "SB3 HerReplayBuffer",
    "her_wrap_sb3": "her_wrap.sb3.HerReplayBuffer (drop-in)",
    "her_wrap_core": "her_wrap HindsightReplay (online, infos not stored)",
    "her_wrap_core_infos": "her_wrap HindsightReplay (online, infos stored)",
    "cpprb": "cpprb HindsightReplayBuffer",
    "cpprb_per": "cpprb HindsightReplayBuffer (prioritized)",
    "her_wrap_standalone": "her_wrap HindsightReplayBuffer",
    "her_wrap_standalone_per": "her_wrap HindsightReplayBuffer (prioritized)",
}


@dataclass
class Result:
    """What one worker measured.

    :param name: implementation key
    :param real_transitions: real transitions stored after the fill
    :param stored_rows: rows the implementation stores (k + 1 per real transition for cpprb)
    :param fill_seconds: wall time of construction + fill
    :param fill_cpu_seconds: CPU time of this process during construction + fill
    :param add_per_second: real transitions added per second (wall time)
    :param batches_per_second: median over timing blocks of sampled batches per second (wall time)
    :param cpu_batches_per_second: the same with this process's CPU time, less disturbed by other load
    :param memory_bytes: peak RSS during construction + fill minus RSS before
    """

    name: str
    real_transitions: int
    stored_rows: int
    fill_seconds: float
    fill_cpu_seconds: float
    add_per_second: float
    batches_per_second: float
    cpu_batches_per_second: float
    memory_bytes: int

    @property
    def bytes_per_transition(self) -> float:
        return self.memory_bytes / self.real_transitions

    @property
    def cpu_add_per_second(self) -> float:
        return self.real_transitions / self.fill_cpu_seconds


# ---------------------------------------------------------------------------------------- memory
def _status_kib(field: str) -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"/proc/self/status has no {field}")


def reset_peak_rss() -> None:
    """Make VmHWM (peak RSS) start again from the current RSS (Linux >= 4.0)."""
    with open("/proc/self/clear_refs", "w") as clear_refs:
        clear_refs.write("5")


# ---------------------------------------------------------------------------------------- data
def reward_from_goals(achieved: np.ndarray, desired: np.ndarray) -> np.ndarray:
    """Sparse Fetch reward: 0 within DISTANCE_THRESHOLD of the goal, else -1; vectorized."""
    return -(np.linalg.norm(achieved - desired, axis=-1) > DISTANCE_THRESHOLD).astype(np.float32)


@dataclass
class Pool:
    """Pre-generated episodes, so the fill loop times the buffer rather than the random generator."""

    states: np.ndarray  # (POOL_EPISODES, EPISODE_LEN + 1, STATE_DIM)
    actions: np.ndarray  # (POOL_EPISODES, EPISODE_LEN, ACTION_DIM)
    goals: np.ndarray  # (POOL_EPISODES, GOAL_DIM)
    dict_steps: list[list[DictStep]]  # the same episodes as SB3-style per-step arguments


def make_pool(seed: int = 0) -> Pool:
    rng = np.random.default_rng(seed)
    states = rng.random((POOL_EPISODES, EPISODE_LEN + 1, STATE_DIM), dtype=np.float32)
    # Achieved goals drift slowly, so some relabeled goals are reached and some are not.
    states[..., OBS_DIM:] = np.cumsum(rng.normal(0, 0.02, (POOL_EPISODES, EPISODE_LEN + 1, GOAL_DIM)), axis=1)
    actions = rng.uniform(-1, 1, (POOL_EPISODES, EPISODE_LEN, ACTION_DIM)).astype(np.float32)
    goals = rng.normal(0, 0.1, (POOL_EPISODES, GOAL_DIM)).astype(np.float32)
    return Pool(states, actions, goals, dict_steps(states, actions, goals))


@dataclass
class DictStep:
    """One step as a gymnasium GoalEnv + VecEnv (n_envs = 1) hands it to an SB3 buffer."""

    observation: dict[str, np.ndarray]
    next_observation: dict[str, np.ndarray]
    action: np.ndarray
    reward: np.ndarray
    done: np.ndarray


def dict_steps(all_states: np.ndarray, all_actions: np.ndarray, goals: np.ndarray) -> list[list[DictStep]]:
    """Per-step arguments of every pool episode, built once so the fill loop times only the buffer."""
    episodes = []
    for states, actions, goal in zip(all_states, all_actions, goals, strict=True):
        desired = goal[None]
        rewards = reward_from_goals(states[1:, OBS_DIM:], desired)
        steps = []
        for t in range(EPISODE_LEN):
            observation, next_observation = (
                {"observation": states[i : i + 1, :OBS_DIM], "achieved_goal": states[i : i + 1, OBS_DIM:]}
                for i in (t, t + 1)
            )
            observation["desired_goal"] = next_observation["desired_goal"] = desired
            done = np.array([t == EPISODE_LEN - 1])
            steps.append(
                DictStep(observation, next_observation, actions[t : t + 1], rewards[t : t + 1], done)
            )
        episodes.append(steps)
    return episodes


def step_infos(step: DictStep) -> list[dict[str, Any]]:
    """A fresh info dict per step, as an env returns (a buffer that stores infos keeps them alive)."""
    return [{"is_success": float(step.reward[0] == 0), "TimeLimit.truncated": bool(step.done[0])}]


# ---------------------------------------------------------------------------------------- workers
# Each builder returns (add_episode, sample, real_transitions, stored_rows): add_episode(pool, e) stores
# pool episode e one step per call; sample(batch_size) draws one batch.


def build_her_wrap_core(capacity: int, *, store_infos: bool) -> tuple:
    from her_wrap.core.goal_selection import GoalSelectionStrategy
    from her_wrap.core.replay import HindsightReplay
    from her_wrap.core.settings import HindsightSettings
    from her_wrap.core.storage import FieldSpec

    n_episodes = math.ceil(capacity / EPISODE_LEN)
    replay = HindsightReplay(
        n_episodes * (EPISODE_LEN + 1),  # T + 1 rows per episode of T steps
        observation_fields={
            "observation": FieldSpec((OBS_DIM,)),
            "achieved_goal": FieldSpec((GOAL_DIM,)),
            "desired_goal": FieldSpec((GOAL_DIM,)),
        },
        step_fields={
            "action": FieldSpec((ACTION_DIM,)),
            "reward": FieldSpec(()),
            "terminated": FieldSpec((), np.dtype(np.bool_)),
            "truncated": FieldSpec((), np.dtype(np.bool_)),
        },
        settings=HindsightSettings(n_sampled_goal=K, goal_selection_strategy=GoalSelectionStrategy.FUTURE),
        reward_fn=lambda achieved, desired, infos: reward_from_goals(achieved, desired),
        store_infos=store_infos,
        seed=0,
    )
    not_done = np.array([False])

    def add_episode(pool: Pool, e: int) -> None:
        for step in pool.dict_steps[e]:
            fields = {
                "action": step.action,
                "reward": step.reward,
                "terminated": not_done,
                "truncated": step.done,
            }
            replay.add(step.observation, step.next_observation, fields, step.done, step_infos(step))

    return add_episode, replay.sample, lambda: len(replay), lambda: replay.storage.n_rows


def fetch_like_env_class() -> type:
    """A goal env with the Fetch tasks' spaces and a vectorized compute_reward; never stepped here."""
    import gymnasium as gym
    from gymnasium import spaces

    class FetchLikeGoalEnv(gym.Env):
        observation_space = spaces.Dict(
            {
                "observation": spaces.Box(-np.inf, np.inf, (OBS_DIM,), np.float32),
                "achieved_goal": spaces.Box(-np.inf, np.inf, (GOAL_DIM,), np.float32),
                "desired_goal": spaces.Box(-np.inf, np.inf, (GOAL_DIM,), np.float32),
            }
        )
        action_space = spaces.Box(-1.0, 1.0, (ACTION_DIM,), np.float32)

        def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
            return self.observation_space.sample(), {}

        def step(self, action: np.ndarray) -> tuple:
            return self.observation_space.sample(), -1.0, False, False, {}

        def compute_reward(
            self, achieved_goal: np.ndarray, desired_goal: np.ndarray, info: Any
        ) -> np.ndarray:
            return reward_from_goals(achieved_goal, desired_goal)

    return FetchLikeGoalEnv


def build_sb3_facing(capacity: int, *, ours: bool) -> tuple:
    """SB3's HerReplayBuffer or her_wrap's drop-in, built as an SB3 learner builds its buffer."""
    from stable_baselines3.common.vec_env import DummyVecEnv

    if ours:
        from her_wrap.sb3 import HerReplayBuffer
    else:
        from stable_baselines3 import HerReplayBuffer  # type: ignore[assignment]

    env_class = fetch_like_env_class()
    env = DummyVecEnv([env_class])
    extra = {"seed": 0} if ours else {}
    buffer = HerReplayBuffer(
        capacity,
        env_class.observation_space,
        env.action_space,
        env=env,
        device="cpu",
        n_sampled_goal=K,
        goal_selection_strategy="future",
        **extra,
    )

    def add_episode(pool: Pool, e: int) -> None:
        for step in pool.dict_steps[e]:
            buffer.add(
                step.observation, step.next_observation, step.action, step.reward, step.done, step_infos(step)
            )

    def stored() -> int:
        if ours:
            return int(buffer.size())
        return int(buffer.buffer_size if buffer.full else buffer.pos)

    def sample(batch_size: int) -> Any:
        return buffer.sample(batch_size, env=None)

    return add_episode, sample, stored, lambda: capacity


def cpprb_style_add_episode(buffer: Any) -> Callable[[Pool, int], None]:
    def add_episode(pool: Pool, e: int) -> None:
        states, actions = pool.states[e], pool.actions[e]
        for t in range(EPISODE_LEN):
            buffer.add(obs=states[t], act=actions[t], next_obs=states[t + 1])
        buffer.on_episode_end(pool.goals[e])

    return add_episode


CPPRB_ENV_DICT = {"obs": {"shape": STATE_DIM}, "act": {"shape": ACTION_DIM}, "next_obs": {"shape": STATE_DIM}}


def cpprb_reward(next_state: np.ndarray, action: np.ndarray, goal: np.ndarray) -> np.ndarray:
    return reward_from_goals(next_state[:, OBS_DIM:], goal)


def achieved_goal_of(states: np.ndarray) -> np.ndarray:
    return states[:, OBS_DIM:]


def cpprb_api_buffer(buffer_class: type, size: int, *, prioritized: bool, **extra: Any) -> Any:
    """A buffer of cpprb's HindsightReplayBuffer API (cpprb's own or her_wrap's) for this benchmark's task."""
    return buffer_class(
        size,
        CPPRB_ENV_DICT,
        EPISODE_LEN,
        cpprb_reward,
        goal_func=achieved_goal_of,
        goal_shape=GOAL_DIM,
        strategy="future",
        additional_goals=K,
        prioritized=prioritized,
        **extra,
    )


def build_cpprb(capacity: int, *, prioritized: bool) -> tuple:
    from cpprb import HindsightReplayBuffer

    # cpprb's size counts rows: the real transition plus its k relabeled copies.
    buffer = cpprb_api_buffer(HindsightReplayBuffer, capacity * (K + 1), prioritized=prioritized)
    return (
        cpprb_style_add_episode(buffer),
        buffer.sample,
        lambda: buffer.get_stored_size() // (K + 1),
        buffer.get_stored_size,
    )


def build_her_wrap_standalone(capacity: int, *, prioritized: bool) -> tuple:
    from her_wrap.core.hindsight_replay_buffer import HindsightReplayBuffer

    buffer = cpprb_api_buffer(HindsightReplayBuffer, capacity, prioritized=prioritized, seed=0)
    return (
        cpprb_style_add_episode(buffer),
        buffer.sample,
        buffer.get_stored_size,
        lambda: buffer.replay.storage.n_rows,
    )


BUILDERS: dict[str, Callable[[int], tuple]] = {
    "sb3": lambda capacity: build_sb3_facing(capacity, ours=False),
    "her_wrap_sb3": lambda capacity: build_sb3_facing(capacity, ours=True),
    "her_wrap_core": lambda capacity: build_her_wrap_core(capacity, store_infos=False),
    "her_wrap_core_infos": lambda capacity: build_her_wrap_core(capacity, store_infos=True),
    "cpprb": lambda capacity: build_cpprb(capacity, prioritized=False),
    "cpprb_per": lambda capacity: build_cpprb(capacity, prioritized=True),
    "her_wrap_standalone": lambda capacity: build_her_wrap_standalone(capacity, prioritized=False),
    "her_wrap_standalone_per": lambda capacity: build_her_wrap_standalone(capacity, prioritized=True),
}


def run_worker(name: str, capacity: int, batch_size: int, samples: int, blocks: int) -> Result:
    """Construct, fill and sample one implementation in this process."""
    pool = make_pool()
    if name in ("sb3", "her_wrap_sb3"):
        import stable_baselines3  # noqa: F401  (imported before the baseline, like the other libraries)

        import her_wrap.sb3.her_replay_buffer
    elif name.startswith("cpprb"):
        import cpprb  # noqa: F401
    else:
        import her_wrap.core.replay  # noqa: F401
    baseline_kib = _status_kib("VmRSS")
    reset_peak_rss()
    with bench.Stopwatch() as fill:
        add_episode, sample, real_transitions, stored_rows = BUILDERS[name](capacity)
        for episode in range(math.ceil(capacity / EPISODE_LEN)):
            add_episode(pool, episode % POOL_EPISODES)
    memory_bytes = (_status_kib("VmHWM") - baseline_kib) * 1024
    n_real = real_transitions()

    for _ in range(max(1, samples // (10 * blocks))):  # warm-up
        sample(batch_size)
    per_block = max(1, samples // blocks)
    clocks = [bench.Stopwatch() for _ in range(blocks)]
    for clock in clocks:
        with clock:
            for _ in range(per_block):
                sample(batch_size)
    return Result(
        name=name,
        real_transitions=n_real,
        stored_rows=int(stored_rows()),
        fill_seconds=fill.wall,
        fill_cpu_seconds=fill.cpu,
        add_per_second=n_real / fill.wall,
        batches_per_second=statistics.median(per_block / clock.wall for clock in clocks),
        cpu_batches_per_second=statistics.median(per_block / max(clock.cpu, 1e-9) for clock in clocks),
        memory_bytes=memory_bytes,
    )


# ---------------------------------------------------------------------------------------- report
SB3_FACING = ("sb3", "her_wrap_sb3")
DEFAULT_IMPLEMENTATIONS = ["sb3", "her_wrap_sb3", "her_wrap_core", "cpprb"]

#: The targets for the SB3-facing path at the largest capacity, her_wrap's drop-in against SB3's buffer:
#: (label, measure, bound, at least).
TARGETS = (
    ("sample throughput >= 20x SB3's", "sample", 20.0, True),
    ("add throughput >= 1.5x SB3's", "add", 1.5, True),
    ("bytes per stored transition <= 0.35x SB3's", "memory", 0.35, False),
)


def ratios(ours: Result, theirs: Result) -> dict[str, float]:
    """her_wrap over the reference, by CPU time: sample and add throughput, bytes per stored transition."""
    return {
        "sample": ours.cpu_batches_per_second / theirs.cpu_batches_per_second,
        "add": ours.cpu_add_per_second / theirs.cpu_add_per_second,
        "memory": ours.bytes_per_transition / theirs.bytes_per_transition,
    }


def render_table(results: dict[tuple[int, str], Result], names: tuple[str, ...] | list[str]) -> list[str]:
    lines = [
        "| capacity | implementation | transitions held | add (transitions/s) | sample (batches/s) "
        "| ms / batch (wall ms) | bytes / transition |",
        "|---:|---|---:|---:|---:|---:|---:|",
    ]
    for (capacity, name), result in results.items():
        if name not in names:
            continue
        lines.append(
            f"| {capacity:,} | {IMPLEMENTATIONS[name]} | {result.real_transitions:,} "
            f"| {result.cpu_add_per_second:,.0f} | {result.cpu_batches_per_second:,.0f} "
            f"| {1000 / result.cpu_batches_per_second:.3f} ({1000 / result.batches_per_second:.3f}) "
            f"| {result.bytes_per_transition:.0f} |"
        )
    return lines


def render_ratios(results: dict[tuple[int, str], Result], ours: str, theirs: str, label: str) -> list[str]:
    lines = [
        f"| capacity | {label}: sample throughput | add throughput | bytes / transition |",
        "|---:|---:|---:|---:|",
    ]
    for capacity in sorted({capacity for capacity, _ in results}):
        if (capacity, ours) in results and (capacity, theirs) in results:
            r = ratios(results[capacity, ours], results[capacity, theirs])
            lines.append(f"| {capacity:,} | {r['sample']:.2f}x | {r['add']:.2f}x | {r['memory']:.2f}x |")
    return lines


def render_targets(results: dict[tuple[int, str], Result]) -> list[str]:
    capacities = [
        capacity for capacity, name in results if name == "her_wrap_sb3" and (capacity, "sb3") in results
    ]
    if not capacities:
        return []
    capacity = max(capacities)
    r = ratios(results[capacity, "her_wrap_sb3"], results[capacity, "sb3"])
    targets = [
        (label, f"{r[measure]:.2f}x", r[measure] >= bound if at_least else r[measure] <= bound)
        for label, measure, bound, at_least in TARGETS
    ]
    return bench.targets_table(targets, heading=f"target at {capacity:,} transitions (CPU time)")


def run_in_subprocess(name: str, capacity: int, args: argparse.Namespace) -> Result | None:
    arguments = [name, "--capacities", str(capacity), "--batch-size", str(args.batch_size)]
    arguments += ["--samples", str(args.samples), "--blocks", str(args.blocks)]
    result = bench.run_worker(WORKER_MODULE, arguments)
    return None if result is None else Result(**result)


def main(argv: list[str] | None = None) -> None:
    parser = bench.parser(__doc__, quick="tiny run: capacity 20,000 and 200 batches")
    parser.add_argument(
        "--capacities",
        type=int,
        nargs="+",
        default=[100_000, 1_000_000],
        help="transitions every buffer holds",
    )
    parser.add_argument(
        "--only",
        nargs="+",
        choices=list(IMPLEMENTATIONS),
        default=None,
        help="implementations (default: " + ", ".join(DEFAULT_IMPLEMENTATIONS) + "; cpprb when installed)",
    )
    parser.add_argument("--batch-size", type=int, default=256, help="transitions per sampled batch")
    parser.add_argument("--samples", type=int, default=2000, help="batches timed per implementation")
    parser.add_argument("--blocks", type=int, default=10, help="timing blocks (the median is reported)")
    parser.add_argument(
        "--output", type=Path, default=None, help="markdown file (default: docs/bench_replay.md)"
    )
    parser.add_argument("--worker", choices=list(IMPLEMENTATIONS), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.quick:
        args.capacities, args.samples = [20_000], min(args.samples, 200)
    if args.worker:
        result = run_worker(args.worker, args.capacities[0], args.batch_size, args.samples, args.blocks)
        bench.report_to_parent(asdict(result))
        return
    names = args.only
    if names is None:
        names = [name for name in DEFAULT_IMPLEMENTATIONS if not name.startswith("cpprb") or _has_cpprb()]
    # The SB3-facing path first: it is what the README reports.
    names = sorted(names, key=lambda name: name not in SB3_FACING)

    command = "python scripts/bench_replay.py " + " ".join(argv if argv is not None else sys.argv[1:])
    results: dict[tuple[int, str], Result] = {}
    for capacity in args.capacities:
        for name in names:
            result = run_in_subprocess(name, capacity, args)
            if result is not None:
                results[capacity, name] = result
                print(f"{IMPLEMENTATIONS[name]} at {capacity:,}: done", flush=True)

    header = [
        f"batch {args.batch_size}; observation {OBS_DIM} + goals {GOAL_DIM} + {GOAL_DIM} float32, action "
        f"{ACTION_DIM}; episodes of {EPISODE_LEN} steps; future, k={K}; CPU time of each worker process",
    ]
    core_names = [name for name in names if name not in SB3_FACING]
    tables = [
        "## SB3-facing path: `add` per step, `sample(256)` to torch tensors with rewards computed",
        "",
        *render_table(results, SB3_FACING),
        "",
        *render_ratios(results, "her_wrap_sb3", "sb3", "her_wrap drop-in / SB3"),
        "",
        *render_targets(results),
        "",
        "## Numpy cores: `add` per step, `sample(256)` to numpy arrays",
        "",
        *render_table(results, core_names),
        "",
        *render_ratios(results, "her_wrap_core", "cpprb", "her_wrap HindsightReplay / cpprb"),
    ]
    print("\n".join([*header, "", *tables]))
    output = args.output if args.output is not None or args.quick else Path("docs/bench_replay.md")
    if output is not None:
        bench.write_page(output, render_markdown(command.strip(), header, tables))


def _has_cpprb() -> bool:
    import importlib.util

    return importlib.util.find_spec("cpprb") is not None


def render_markdown(command: str, header: list[str], tables: list[str]) -> str:
    body = [
        *header,
        "",
        *tables,
        "",
        "How it is measured (see the script's docstring): each implementation and capacity runs in its own "
        "process. Add throughput is transitions per second of CPU time while filling one step per call; "
        "sample throughput is the median over timing blocks at full capacity, by the worker's CPU time (wall "
        "time in parentheses: on a shared machine other processes inflate it unevenly); memory is the peak "
        "resident set (VmHWM) during construction and fill minus the resident set before, divided by the "
        "transitions the buffer holds at the end. Both SB3-facing buffers get `buffer_size = capacity` and "
        "`capacity` transitions; her_wrap's stores each observation once, so an episode of T steps takes "
        "T + 1 rows and it holds T / (T + 1) of them. Infos: SB3's buffer keeps none "
        "(`copy_info_dict=False`); her_wrap's keeps none either, since this compute_reward never reads them. "
        "cpprb stores k + 1 rows per real transition, so it is built with capacity * (k + 1) rows.",
    ]
    return bench.page("Replay buffer benchmark", command, body, machine_note(("numpy",)))


if __name__ == "__main__":
    main()
