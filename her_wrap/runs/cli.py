"""The ``her-wrap`` command: ``train``, ``enjoy``, ``plot`` and ``optimize`` (see ``her-wrap SUBCOMMAND -h``).

What goes wrong ends in one line on stderr, ``her-wrap SUBCOMMAND: error: ...``, never a traceback, and
an exit status that says what kind of thing it was:

- 2: bad input (an unknown env id, a config problem, an unreachable storage, ...);
- 3: a run that cannot go on (a corrupt saved agent, a full disk, NaN from the env, a diverged learner);
- 130 / 143: stopped by SIGINT / SIGTERM (``her-wrap train`` saves the agent first; see its ``--help``).
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Sequence

from her_wrap.runs import enjoy, optimize, plot, train
from her_wrap.runs.errors import EXIT_RUN_FAILED, EXIT_USAGE, RunError, StoppedBySignal, UsageError

SUBCOMMANDS = {
    "train": (train, "train an agent from a config entry into logs/her/ENV_ID_N"),
    "enjoy": (enjoy, "run a trained agent and print its success rate"),
    "plot": (plot, "plot success rate and return against env steps"),
    "optimize": (optimize, "tune hyperparameters with Optuna (SQLite or a shared PostgreSQL study)"),
}

EXIT_INTERRUPTED = 130


def help_text(docstring: str | None) -> str:
    """A module docstring as ``--help`` text: reStructuredText roles and literals made plain."""
    text = re.sub(r":\w+:`~?([^`]+)`", r"\1", docstring or "")
    return text.replace("``", "").strip()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="her-wrap",
        description="Zoo-style runs of Hindsight Experience Replay agents.",
        epilog="Example: her-wrap train --env BitFlipping-v0 && her-wrap enjoy --env BitFlipping-v0",
    )
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="SUBCOMMAND")
    for name, (module, summary) in SUBCOMMANDS.items():
        subparser = subparsers.add_parser(
            name,
            help=summary,
            description=help_text(module.__doc__) or summary,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        module.add_arguments(subparser)
        subparser.set_defaults(run=module.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``her-wrap``; returns the exit status.

    :param argv: arguments after the program name (default: ``sys.argv[1:]``)
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.run(args))
    except UsageError as error:
        print(f"her-wrap {args.command}: error: {error}", file=sys.stderr, flush=True)
        return EXIT_USAGE
    except RunError as error:
        print(f"her-wrap {args.command}: error: {error}", file=sys.stderr, flush=True)
        return EXIT_RUN_FAILED
    except StoppedBySignal as stop:
        return stop.status  # the run printed where it saved the agent
    except KeyboardInterrupt:
        print(f"her-wrap {args.command}: interrupted", file=sys.stderr, flush=True)
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
