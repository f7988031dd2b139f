"""The documentation site (mkdocs.yml, docs/) builds in strict mode, documents every public name, and its
examples run as printed."""

from __future__ import annotations

import argparse
import importlib
import os
import pickle
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import her_wrap
import her_wrap.sb3
from her_wrap.runs.cli import build_parser
from her_wrap.runs.config import HER_SETTINGS, validate_file

REPO = Path(__file__).resolve().parent.parent
DOCS = REPO / "docs"


def report(completed: subprocess.CompletedProcess[str]) -> str:
    return f"exit {completed.returncode}\nstdout:\n{completed.stdout[-3000:]}\nstderr:\n{completed.stderr[-3000:]}"


def blocks(page: str, language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", (DOCS / page).read_text(), flags=re.DOTALL)


# --------------------------------------------------------------------------- the build


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``mkdocs build --strict`` into a temporary folder: any warning (a broken link, an unknown name in
    a docstring's parameters, a page missing from the nav that it links) fails it."""
    pytest.importorskip("mkdocs", reason="the docs extra (pip install -e '.[docs]')")
    site_dir = tmp_path_factory.mktemp("site")
    completed = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site_dir)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert completed.returncode == 0, report(completed)
    return site_dir


def test_site_builds_in_strict_mode(site: Path) -> None:
    assert (site / "index.html").is_file()


def test_api_pages_show_no_restructuredtext_markup(site: Path) -> None:
    markup = re.compile(r":(class|meth|func|attr|data|mod):`|\.\. note::|::</p>")
    pages = {str(page.relative_to(site)): page.read_text() for page in (site / "api").rglob("*.html")}
    assert [name for name, text in pages.items() if markup.search(text)] == []


# --------------------------------------------------------------------------- the API reference


def resolve(path: str) -> Any:
    """The object a ``::: dotted.path`` directive documents."""
    parts = path.split(".")
    for split in range(len(parts), 0, -1):
        try:
            target = importlib.import_module(".".join(parts[:split]))
        except ModuleNotFoundError:
            continue
        for name in parts[split:]:
            target = getattr(target, name)
        return target
    raise ModuleNotFoundError(path)


def documented_objects() -> list[Any]:
    paths = re.findall(r"^::: ([\w.]+)", "".join(p.read_text() for p in (DOCS / "api").glob("*.md")), re.M)
    return [resolve(path) for path in paths]


PUBLIC = sorted(
    {(module.__name__, name) for module in (her_wrap, her_wrap.sb3) for name in module.__all__},
)


@pytest.mark.parametrize(("module", "name"), PUBLIC, ids=[f"{m}.{n}" for m, n in PUBLIC])
def test_public_name_has_an_api_reference_entry(module: str, name: str) -> None:
    public = getattr(importlib.import_module(module), name)
    assert any(obj is public for obj in documented_objects()), (
        f"add '::: <defining module>.{name}' to a page of docs/api/"
    )


# --------------------------------------------------------------------------- the command-line page

SUBCOMMANDS = next(
    action for action in build_parser()._actions if isinstance(action, argparse._SubParsersAction)
).choices


@pytest.mark.parametrize("command", sorted(SUBCOMMANDS))
def test_every_option_is_on_the_cli_page(command: str) -> None:
    text = (DOCS / "cli.md").read_text()
    missing = [
        action.option_strings
        for action in SUBCOMMANDS[command]._actions
        if action.option_strings
        and action.help != argparse.SUPPRESS
        and "-h" not in action.option_strings
        and not any(
            re.search(rf"(?<![\w-]){re.escape(option)}(?![\w-])", text) for option in action.option_strings
        )
    ]
    assert missing == [], f"her-wrap {command} options missing from docs/cli.md"


def test_every_her_setting_of_a_config_is_on_the_cli_page() -> None:
    text = (DOCS / "cli.md").read_text()
    assert [key for key in HER_SETTINGS if not re.search(rf"\b{key}\b", text)] == []


def test_cli_page_config_example_is_a_valid_config(tmp_path: Path) -> None:
    text = (DOCS / "cli.md").read_text()
    (example,) = re.findall(r"```yaml\n(.*?)```", text[text.index("## Configs") :], flags=re.DOTALL)[:1]
    (tmp_path / "her.yml").write_text(example)
    assert [config.env_id for config in validate_file(tmp_path / "her.yml")] == ["FetchReach-v4"]


# --------------------------------------------------------------------------- examples run as printed


def test_numpy_core_page_examples_run() -> None:
    namespace: dict[str, Any] = {}
    for block in blocks("numpy-core.md", "python"):
        exec(compile(block, "docs/numpy-core.md", "exec"), namespace)
    assert namespace["small"]["weights"].shape == (32,) and len(namespace["batch"]["rew"]) == 32


def test_laber_page_functor_example_runs() -> None:
    (block,) = [block for block in blocks("laber-per.md", "python") if "LaBERmean(" in block]
    namespace: dict[str, Any] = {}
    exec(compile(block, "docs/laber-per.md", "exec"), namespace)
    assert np.all(namespace["batch"]["indexes"] < 128)


def test_zoo_page_trains_her_wraps_buffer_with_the_zoos_script(tmp_path: Path) -> None:
    pytest.importorskip("rl_zoo3", reason="the zoo extra (pip install -e '.[zoo]')")
    (config,) = blocks("zoo.md", "yaml")
    (command,) = [
        line for block in blocks("zoo.md", "bash") for line in block.splitlines() if "rl_zoo3.train" in line
    ]
    (tmp_path / "dqn.yml").write_text(config)
    argv = shlex.split(command)
    assert argv[0] == "python"
    completed = subprocess.run(
        [sys.executable, *argv[1:], "--save-replay-buffer", "--num-threads", "1", "--verbose", "0"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert completed.returncode == 0, report(completed)
    with open(tmp_path / "logs" / "dqn" / "BitFlipping-v0_1" / "replay_buffer.pkl", "rb") as file:
        assert isinstance(pickle.load(file), her_wrap.sb3.HerReplayBuffer)
