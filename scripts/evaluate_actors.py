"""Greedy success of each actor a DDPG / TD3 checkpoint holds, on the same fresh episodes.

For each saved agent: its actor, its target actor and, when it keeps one, its running average of the
actor (``policy_kwargs actor_average``); then, with ``--average-last``, the mean of the last K agents'
actors (K = 2 .. all, read with the last agent's normalizer). Every set of weights plays the same
episodes (``--seed``), so the columns differ only by the weights. A DDPG agent's greedy success swings
from one checkpoint to the next; this says whether averaged weights hold the swings' top.

Usage::

    python scripts/evaluate_actors.py FetchSlide-v4 RUN_DIR/rl_model_1400000_steps.zip RUN_DIR/rl_model_1500000_steps.zip
    python scripts/evaluate_actors.py FetchSlide-v4 RUN_DIR/rl_model_1*_steps.zip -n 200 --average-last
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch as th

from her_wrap import HER
from her_wrap.runs.env_factory import ensure_registered, make_vec_goal_env
from her_wrap.sb3.evaluation import evaluate_agent
from her_wrap.sb3.policies import greedy_actor

#: The actors of a policy that this script evaluates, by the column they fill.
ACTORS = {"actor": "actor", "target actor": "actor_target", "actor average": "actor_average"}


def actor_states(agent: HER) -> dict[str, dict[str, th.Tensor]]:
    """A copy of the weights of each actor ``agent``'s policy holds, by :data:`ACTORS`' name."""
    policy = agent.model.policy
    states = {}
    for name, attribute in ACTORS.items():
        module = getattr(policy, attribute, None)
        if isinstance(module, th.nn.Module):
            states[name] = {key: value.detach().clone() for key, value in module.state_dict().items()}
    return states


@contextmanager
def greedy_weights(agent: HER, state: dict[str, th.Tensor]) -> Iterator[None]:
    """Within it, ``agent``'s greedy actions come from ``state`` (loaded into the actor greedy actions use)."""
    module = greedy_actor(agent.model.policy)
    kept = {key: value.detach().clone() for key, value in module.state_dict().items()}
    module.load_state_dict(state)
    try:
        yield
    finally:
        module.load_state_dict(kept)


def greedy_success(agent: HER, env_id: str, n_episodes: int, seed: int) -> float:
    """Greedy success rate over ``n_episodes`` episodes from the reset seeded ``seed``."""
    env = make_vec_goal_env(env_id, {}, 1, seed)
    try:
        return evaluate_agent(agent, env, n_episodes, seed=seed).success_rate
    finally:
        env.close()


def mean_state(states: Sequence[dict[str, th.Tensor]]) -> dict[str, th.Tensor]:
    """The element-wise mean of several state dicts of one network."""
    return {key: sum(state[key].double() for state in states).div(len(states)).float() for key in states[0]}


def load_agent(path: Path, env_id: str) -> HER:
    env = make_vec_goal_env(env_id, {}, 1, 0)
    agent = HER.load(str(path), env=env)
    if not hasattr(agent.model.policy, "actor_target"):
        raise SystemExit(f"{path}: {agent.model_class.__name__} has no deterministic actor (DDPG or TD3 has)")
    return agent


def close_env(agent: HER) -> None:
    """Close the env :func:`load_agent` built for ``agent``."""
    env = agent.get_env()
    if env is not None:
        env.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("env", help="the env id the agents were trained on")
    parser.add_argument("agents", type=Path, nargs="+", help="saved agents (.zip), oldest first")
    parser.add_argument("-n", "--n-episodes", type=int, default=100, help="episodes per set of weights")
    parser.add_argument("--seed", type=int, default=12345, help="seed of the episodes (the same for each)")
    parser.add_argument(
        "--average-last", action="store_true", help="also the mean of the last K agents' actors, K >= 2"
    )
    args = parser.parse_args(argv)
    missing = [str(path) for path in args.agents if not path.is_file()]
    if missing:
        parser.error(f"no such file: {', '.join(missing)}")
    ensure_registered(args.env)
    print(f"Greedy success on {args.n_episodes} episodes of {args.env} (seed {args.seed})\n")
    print(f"| agent | {' | '.join(ACTORS)} |")
    print(f"|---|{'---:|' * len(ACTORS)}")
    actors: list[dict[str, th.Tensor]] = []
    agent: Any = None
    for path in args.agents:
        if agent is not None:
            close_env(agent)
        agent = load_agent(path, args.env)
        states = actor_states(agent)
        actors.append(states["actor"])
        cells = []
        for name in ACTORS:
            if name not in states:
                cells.append("-")
                continue
            with greedy_weights(agent, states[name]):
                cells.append(f"{greedy_success(agent, args.env, args.n_episodes, args.seed):.3f}")
        print(f"| {path.name} | {' | '.join(cells)} |", flush=True)
    if args.average_last and len(actors) >= 2:
        print(f"\nMean of the last K actors, with {args.agents[-1].name}'s normalizer:\n")
        print("| K | greedy success |\n|---:|---:|")
        for k in range(2, len(actors) + 1):
            with greedy_weights(agent, mean_state(actors[-k:])):
                print(
                    f"| {k} | {greedy_success(agent, args.env, args.n_episodes, args.seed):.3f} |", flush=True
                )
    close_env(agent)
    return 0


if __name__ == "__main__":
    sys.exit(main())
