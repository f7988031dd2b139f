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
from doc_blocks import USER_PAGES

import her_wrap
import her_wrap.sb3
from her_wrap.runs.cli import build_parser
from her_wrap.runs.config import validate_file
from her_wrap.runs.zoo_translation import HER_SETTINGS

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


def test_every_her_setting_of_a_config_is_on_the_configs_page() -> None:
    text = (DOCS / "configs.md").read_text()
    assert [key for key in HER_SETTINGS if not re.search(rf"\b{key}\b", text)] == []


def test_configs_page_example_is_a_valid_config(tmp_path: Path) -> None:
    text = (DOCS / "configs.md").read_text()
    (example,) = re.findall(r"```yaml\n(.*?)```", text[text.index("## The format") :], flags=re.DOTALL)[:1]
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


# --------------------------------------------------------------------------- user pages and research log

MAX_USER_PAGE_CHARACTERS = 10_000
MAX_USER_PAGES_CHARACTERS = 60_000


@pytest.mark.parametrize("page", USER_PAGES, ids=lambda page: str(page.relative_to(REPO)))
def test_a_user_page_is_at_most_10k_characters(page: Path) -> None:
    assert len(page.read_text(encoding="utf-8")) <= MAX_USER_PAGE_CHARACTERS


def test_the_user_pages_are_at_most_60k_characters_in_all() -> None:
    site_pages = [page for page in USER_PAGES if page.parent == DOCS and page.name != "changelog.md"]
    pages = [*site_pages, REPO / "CHANGELOG.md"]
    assert sum(len(page.read_text(encoding="utf-8")) for page in pages) <= MAX_USER_PAGES_CHARACTERS


def test_every_research_log_page_says_it_is_history() -> None:
    pages = [*sorted((DOCS / "research").glob("*.md")), DOCS / "benchmarks.md"]
    assert [page.name for page in pages if '!!! note "History"' not in page.read_text()] == []


def test_every_page_of_the_docs_folder_is_in_the_nav() -> None:
    nav = (REPO / "mkdocs.yml").read_text()
    pages = [str(page.relative_to(DOCS)) for page in DOCS.rglob("*.md")]
    assert [page for page in pages if not re.search(rf":?\s{re.escape(page)}\s*$", nav, re.M)] == []


# --------------------------------------------------------------------------- figures that must agree

GENERATED = re.compile(r"<!-- (?P<name>[\w ]+): start -->\n(?P<body>.*?)<!-- (?P=name): end -->", re.S)


def generated_sections(path: Path) -> dict[str, str]:
    return {match["name"]: match["body"] for match in GENERATED.finditer(path.read_text(encoding="utf-8"))}


def shipped_budgets() -> dict[str, int]:
    """The env steps every entry of ``configs/her.yml`` trains for, all its workers' together (its
    ``n_timesteps`` counts one worker's), as the run config reads it."""
    return {
        config.env_id: int(config.n_timesteps) * (config.workers or 1)
        for config in validate_file(REPO / "configs" / "her.yml")
    }


def test_the_results_page_shows_the_readmes_generated_table() -> None:
    readme, results = generated_sections(REPO / "README.md"), generated_sections(DOCS / "results.md")
    assert results["robotics table"] == readme["robotics table"]


def test_a_results_table_row_that_misses_09_ran_its_entrys_budget() -> None:
    budgets = shipped_budgets()
    rows = [
        line.split(" | ") for line in generated_sections(REPO / "README.md")["robotics table"].splitlines()
    ]
    quoted = {
        (row[0].strip("| "), int(steps) * 1000)
        for row in rows
        for steps in re.findall(r"0\.9 not reached in (\d+)k", " | ".join(row))
    }
    assert {(env_id, steps) for env_id, steps in quoted if budgets[env_id] != steps} == set()


def test_the_budgets_on_the_configs_page_are_the_entries() -> None:
    text = (DOCS / "configs.md").read_text()
    table = text[text.index("## The shipped entries") :]
    quoted = {
        env_id: int(float(budget))
        for ids, budget in re.findall(r"^\| (`[^|]+) \| [^|]+ \| ([\d.e]+) \|$", table, flags=re.M)
        for env_id in re.findall(r"`([^`]+)`", ids)
    }
    budgets = shipped_budgets()
    assert quoted and {env_id: steps for env_id, steps in quoted.items() if budgets[env_id] != steps} == {}


def test_no_user_page_quotes_a_budget_other_than_its_entrys() -> None:
    """A sentence naming a shipped env id and a number of env steps names that entry's budget."""
    budgets = shipped_budgets()
    wrong = []
    for page in USER_PAGES:
        text = re.sub(r"<!-- ([\w ]+): start -->.*?<!-- \1: end -->", "", page.read_text(), flags=re.S)
        for sentence in re.split(r"(?<=[.;:])\s", text):
            for env_id in [env_id for env_id in budgets if env_id in sentence]:
                for number, unit in re.findall(r"(\d[\d.,]*)\s*([kM])? env steps", sentence):
                    steps = float(number.replace(",", "")) * {"k": 1e3, "M": 1e6, "": 1}[unit]
                    if steps != budgets[env_id]:
                        wrong.append(f"{page.name}: {env_id} with {number}{unit} env steps")
    assert wrong == []
