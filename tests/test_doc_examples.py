"""Every fenced command and Python example of README.md and the docs pages runs, on tiny budgets.

Each page runs top to bottom in a fresh folder (its Python blocks share one namespace, so a block may
use what an earlier one made). Markers before a block (see ``doc_blocks``) skip it with a reason, shrink
its budget, or write it to a file. Besides the markers, commands are run this way:

- ``her-wrap SUBCOMMAND ...`` runs in this process with tiny budgets appended (the last value of an
  option wins): ``train`` and ``optimize`` for 200 env steps with one-episode evaluations, ``enjoy`` for
  one episode; a ``train -i`` that resumes a run goes on to 400 env steps.
- ``make TARGET``: TARGET must be a target of the Makefile (they set up a virtualenv and run for minutes).
- ``python scripts/NAME.py ...`` reproduces a published measurement (minutes to hours): the script must
  exist and define every ``--option`` the command gives; a ``robotics_results.py ... TASK --variant V``
  must name known variants whose changes build TASK's entry.
- ``pip install`` must carry a skip marker: the tests run offline in the installed environment.
- Anything else (``python -m rl_zoo3.train ...``, ``mkdir ...``) runs in a shell.

The commands a user copies without running them here are checked as far as they can be without running:
``her-wrap`` commands of skipped blocks and of inline code spans of the user pages (those naming
``--env``) must parse, name an entry of ``configs/her.yml`` and give a valid config for the learner they
name; ``pip install`` names extras of ``pyproject.toml`` and torch at the version ``constraints.txt`` pins.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import io
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from doc_blocks import (
    PAGES,
    REPO,
    SHELL_LANGUAGES,
    USER_PAGES,
    Block,
    fenced_blocks,
    inline_commands,
    shell_commands,
)

from her_wrap.runs.cli import build_parser
from her_wrap.runs.config import load_run_config, read_entries
from her_wrap.runs.errors import UsageError

SHIPPED_CONFIG = REPO / "configs" / "her.yml"

TINY_BUDGETS = {
    "train": ["-n", "200", "--eval-freq", "100", "--eval-episodes", "1"],
    "optimize": ["-n", "200", "--n-trials", "1", "--n-evaluations", "1", "--eval-episodes", "1"],
    "enjoy": ["-n", "1"],
}
RESUMED_STEPS = "400"


def run_her_wrap(argv: list[str], where: str) -> None:
    from her_wrap.runs.cli import main

    budget = TINY_BUDGETS.get(argv[1], [])
    if argv[1] == "train" and {"-i", "--trained-agent"} & set(argv):
        budget = [*budget, "-n", RESUMED_STEPS]  # a resumed run trains on past what it has done
    full = [*argv[1:], *budget]
    output = io.StringIO()
    with contextlib.redirect_stdout(output), contextlib.redirect_stderr(output):
        try:
            status = main(full)
        except SystemExit as exit_:  # argparse: an unknown option or subcommand
            status = exit_.code
    assert status == 0, f"{where}: her-wrap {' '.join(full)} exited {status}:\n{output.getvalue()[-3000:]}"


def check_make_target(target: str, where: str) -> None:
    targets = re.findall(r"^([\w-]+):", (REPO / "Makefile").read_text(), flags=re.MULTILINE)
    assert target in targets, f"{where}: 'make {target}' is not a target of the Makefile"


@functools.cache
def script_usage(script: str) -> str:
    """What ``python SCRIPT --help`` prints: the options of a script whose parser lives in ``lab/``."""
    completed = subprocess.run(
        [sys.executable, script, "--help"], capture_output=True, text=True, cwd=REPO, timeout=300, check=False
    )
    return completed.stdout


def check_script_options(argv: list[str], where: str) -> None:
    script = REPO / argv[1]
    assert script.is_file(), f"{where}: {argv[1]} does not exist"
    source = script.read_text()
    # A subcommand's options are in the script's source, not in its top-level --help.
    missing = [option for option in argv[2:] if option.startswith("--") and f'"{option}"' not in source]
    if missing:
        usage = script_usage(argv[1])
        missing = [option for option in missing if not re.search(rf"{re.escape(option)}(?![\w-])", usage)]
    assert missing == [], f"{where}: {argv[1]} defines no option {missing}"
    if argv[1] == "scripts/robotics_results.py" and "--variant" in argv:
        check_variant(argv[3], argv[argv.index("--variant") + 1], where)


def check_variant(task_name: str, variant: str, where: str) -> None:
    """A ``robotics_results.py SUBCOMMAND TASK --variant V`` names known variants that apply to TASK's entry."""
    from lab import experiments

    task = experiments.ENTRY_TASKS.get(task_name)
    try:
        experiments.variant_argument(variant)  # the script's own check of --variant
        if task is not None:
            load_run_config(task.config_path(), task.env_id, overrides=experiments.variant_overrides(variant))
    except (argparse.ArgumentTypeError, UsageError) as error:
        raise AssertionError(f"{where}: --variant {variant}: {error}") from None


def run_shell(line: str, cwd: Path, where: str) -> None:
    bin_dir = str(Path(sys.executable).parent)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "PYTHONPATH": str(REPO)}
    completed = subprocess.run(
        ["bash", "-c", line], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )
    assert completed.returncode == 0, (
        f"{where}: {line}\nexit {completed.returncode}\n{completed.stdout[-2000:]}\n{completed.stderr[-2000:]}"
    )


def run_shell_block(block: Block, cwd: Path) -> None:
    for line, argv in shell_commands(block.code):
        where = f"{block.where}: {line}"
        if argv[0] == "her-wrap":
            run_her_wrap(argv, where)
        elif argv[0] == "make":
            check_make_target(argv[1], where)
        elif argv[0] == "python" and len(argv) > 1 and argv[1].startswith("scripts/"):
            check_script_options(argv, where)
        elif argv[0] == "pip" or argv[1:2] == ["-m", "pip"]:
            pytest.fail(f"{where}: installs packages; mark the block <!-- docs-test: skip REASON -->")
        else:
            run_shell(line, cwd, where)


MAX_LEARN_STEPS = 1_000


def check_budget(block: Block) -> None:
    """A ``learn(N)`` call of a Python block runs at most a tiny budget (a replace marker shrinks it)."""
    budgets = [int(steps.replace("_", "")) for steps in re.findall(r"\.learn\((\d[\d_]*)", block.code)]
    assert all(steps <= MAX_LEARN_STEPS for steps in budgets), (
        f"{block.where}: learn({max(budgets)}) is no tiny budget; shrink it with "
        "<!-- docs-test: replace 50_000 => 150 -->"
    )


def run_page(page: Path, cwd: Path) -> None:
    namespace: dict[str, Any] = {"__name__": "__doc_example__"}
    for block in fenced_blocks(page):
        if block.skip is not None:
            continue
        if block.file is not None:
            (cwd / block.file).parent.mkdir(parents=True, exist_ok=True)
            (cwd / block.file).write_text(block.code, encoding="utf-8")
        elif block.language == "python":
            check_budget(block)
            exec(compile(block.code, block.where, "exec"), namespace)
        elif block.language in SHELL_LANGUAGES:
            run_shell_block(block, cwd)


@pytest.fixture
def page_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A fresh folder to run a page in, importable, with ``zoo/`` holding the installed rl-zoo3's files."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    with contextlib.suppress(ImportError):
        import rl_zoo3

        (tmp_path / "zoo").symlink_to(Path(rl_zoo3.__file__).parent)
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as her-wrap runs: small networks are fastest on one thread
    yield tmp_path
    torch.set_num_threads(threads)


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(REPO)))
def test_page_examples_run(page: Path, page_folder: Path) -> None:
    run_page(page, page_folder)


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(REPO)))
def test_every_skipped_block_says_why(page: Path) -> None:
    assert [
        block.where for block in fenced_blocks(page) if block.skip is not None and len(block.skip) < 10
    ] == []


def test_a_replacement_missing_from_its_block_is_an_error(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("<!-- docs-test: replace 50_000 => 300 -->\n```python\nmodel.learn(20_000)\n```\n")
    with pytest.raises(ValueError, match="does not occur in the block"):
        fenced_blocks(page)


def test_a_marker_away_from_a_fence_is_an_error(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("<!-- docs-test: skip needs a server -->\nSome text.\n\n```bash\nls\n```\n")
    with pytest.raises(ValueError, match="right before a fence"):
        fenced_blocks(page)


def test_a_renamed_her_wrap_option_is_caught() -> None:
    with pytest.raises(AssertionError, match="exited 2"):
        run_her_wrap(["her-wrap", "train", "--env", "BitFlipping-v0", "--no-such-option"], "here")


@pytest.mark.parametrize(
    ("variant", "problem"),
    [("updates-41", "unknown variant"), ("per+movement", "Choose one of movement_clip and prioritized")],
)
def test_a_variant_unknown_or_not_applying_to_the_task_is_caught(variant: str, problem: str) -> None:
    argv = [
        "python",
        "scripts/robotics_results.py",
        "run",
        "fetch-slide-ddpg",
        "--seeds",
        "0",
        "--variant",
        variant,
    ]
    with pytest.raises(AssertionError, match=problem):
        check_script_options(argv, "here")


def test_a_renamed_script_option_is_caught() -> None:
    with pytest.raises(AssertionError, match="defines no option"):
        check_script_options(["python", "scripts/bench_replay.py", "--no-such-option"], "here")


def test_an_option_a_script_takes_from_its_lab_module_is_found() -> None:
    check_script_options(["python", "scripts/bench_replay.py", "--capacities", "1000"], "here")


# --------------------------------------------------------------------------- commands checked, not run


def check_her_wrap_command(argv: list[str], where: str) -> None:
    """``her-wrap ...`` parses, and a ``train``, ``optimize`` or ``enjoy`` of an env id builds a valid config
    for the learner it names: from ``configs/her.yml`` when no ``-c`` names another file."""
    output = io.StringIO()
    with contextlib.redirect_stderr(output):
        try:
            args = build_parser().parse_args(argv[1:])
        except SystemExit:
            raise AssertionError(f"{where}: {' '.join(argv)} does not parse: {output.getvalue()}") from None
    env_id = getattr(args, "env", None)
    if args.command not in {"train", "optimize", "enjoy"} or not env_id or getattr(args, "conf", None):
        return
    env_id = env_id[0] if isinstance(env_id, list) else env_id
    assert env_id in read_entries(SHIPPED_CONFIG), f"{where}: configs/her.yml has no entry {env_id!r}"
    if args.command == "enjoy":
        return
    try:
        load_run_config(
            SHIPPED_CONFIG,
            env_id,
            algo=args.algo,
            overrides=args.hyperparams or (),
            n_timesteps=args.n_timesteps,
            n_envs=getattr(args, "n_envs", None),
        )
    except UsageError as error:
        raise AssertionError(f"{where}: {' '.join(argv)}: {error}") from None


def her_wrap_argv(argv: list[str]) -> list[str] | None:
    """The ``her-wrap`` command of a shell command: itself, or what ``-m her_wrap.runs.cli`` runs."""
    if argv[0] == "her-wrap":
        return argv
    if "her_wrap.runs.cli" in argv:
        return ["her-wrap", *argv[argv.index("her_wrap.runs.cli") + 1 :]]
    return None


def check_pip_install(argv: list[str], where: str) -> None:
    """Extras named in ``".[a,b]"`` are extras of pyproject.toml; ``torch==V`` is the version constraints pins."""
    pyproject = (REPO / "pyproject.toml").read_text()
    extras = set(re.findall(r"^(\w+) = \[", pyproject[pyproject.index("optional-dependencies") :], re.M))
    for argument in argv:
        for named in re.findall(r"\[([\w,]+)\]", argument):
            assert set(named.split(",")) <= extras, f"{where}: {argument} names an extra pyproject.toml lacks"
        if argument.startswith("torch=="):
            assert argument in (REPO / "constraints.txt").read_text().split(), (
                f"{where}: {argument} is not the pin"
            )


def unrun_commands() -> list[tuple[str, list[str]]]:
    """The shell commands of skipped blocks of every page whose blocks run, and the inline her-wrap
    commands of the user pages that name an env."""
    commands = [
        (f"{block.where}: {line}", argv)
        for page in PAGES
        for block in fenced_blocks(page)
        if block.skip is not None and block.language in SHELL_LANGUAGES
        for line, argv in shell_commands(block.code)
    ]
    inline = [(where, argv) for page in USER_PAGES for where, argv in inline_commands(page)]
    return commands + [(where, argv) for where, argv in inline if "--env" in argv]


@pytest.mark.parametrize(("where", "argv"), unrun_commands(), ids=lambda value: str(value)[:60])
def test_a_command_that_is_not_run_is_right_as_far_as_it_can_be_checked(where: str, argv: list[str]) -> None:
    if (command := her_wrap_argv(argv)) is not None:
        check_her_wrap_command(command, where)
    elif argv[0] == "pip" or argv[1:3] == ["-m", "pip"]:
        check_pip_install(argv, where)


def test_an_inline_command_with_an_unknown_option_is_caught() -> None:
    with pytest.raises(AssertionError, match="does not parse"):
        check_her_wrap_command(["her-wrap", "train", "--env", "FetchReach-v4", "--no-such-option"], "here")


def test_a_key_the_learner_lacks_given_on_the_command_line_is_caught() -> None:
    with pytest.raises(AssertionError, match="tau"):
        check_her_wrap_command(
            ["her-wrap", "train", "--env", "FetchReach-v4", "--algo", "sbx.crossq", "-params", "tau:0.01"],
            "here",
        )


def test_an_extra_missing_from_pyproject_is_caught() -> None:
    with pytest.raises(AssertionError, match="extra"):
        check_pip_install(["pip", "install", "-c", "constraints.txt", ".[robotics,nosuchextra]"], "here")


def test_an_inline_her_wrap_span_in_a_page_is_found(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "Run `her-wrap train --env FetchReach-v4` or `her-wrap train | enjoy`.\n```\n`her-wrap x`\n```\n"
    )
    assert [argv for _, argv in inline_commands(page)] == [["her-wrap", "train", "--env", "FetchReach-v4"]]
