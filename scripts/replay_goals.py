"""Where the training episodes of a saved replay buffer took their object, against their goals.

The same report as ``her-wrap enjoy --goal-misses`` (:mod:`her_wrap.runs.enjoy`), over the episodes
the buffer holds: how far their goals lay from the object's start and how far the object went, and which
goals training reached, by quarter of distance. These are exploring episodes (action noise, random
actions), not the greedy agent's: set beside ``--goal-misses``, they say whether the agent's misses are
goals it never reached in training, or goals it reached only while exploring.

Usage::

    python scripts/replay_goals.py logs/her/FetchSlide-v4_1/rl_model_replay_buffer_1500000_steps.pkl
    python scripts/replay_goals.py BUFFER.pkl --last 2000 --threshold 0.05
"""

from __future__ import annotations

import argparse
import pickle
import sys
from pathlib import Path

from her_wrap.core.replay import HindsightReplay
from her_wrap.runs.enjoy import goal_misses_report, stored_episode_goals


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "buffer", type=Path, help="a replay buffer saved by her-wrap train or HER.save_replay_buffer"
    )
    parser.add_argument(
        "--threshold",
        type=float,
        default=0.05,
        help="distance within which a goal counts as reached (default: 0.05, Fetch's and Panda's)",
    )
    parser.add_argument(
        "--last", type=int, default=None, metavar="N", help="only the newest N ended episodes"
    )
    args = parser.parse_args(argv)
    if args.last is not None and args.last < 1:
        parser.error(f"--last must be at least 1, got {args.last}")
    if not args.buffer.is_file():
        parser.error(f"{args.buffer} is not a file: give the path of a saved replay buffer (.pkl)")
    with args.buffer.open("rb") as file:
        buffer = pickle.load(file)
    replay = getattr(buffer, "replay", None)
    if not isinstance(replay, HindsightReplay):
        parser.error(f"{args.buffer} holds a {type(buffer).__name__}, not one of her_wrap's replay buffers")
    episodes = stored_episode_goals(replay)
    if not episodes:
        parser.error(f"{args.buffer} holds no ended episode")
    if args.last is not None:
        episodes = episodes[-args.last :]
    print(f"{len(episodes)} episodes of {args.buffer}\n")
    print(goal_misses_report(episodes, args.threshold))
    return 0


if __name__ == "__main__":
    sys.exit(main())
