"""The search spaces of the lab's studies (``lab/spaces/*.yml``) load and name settings of their entries."""

from __future__ import annotations

import pathlib

import pytest

from her_wrap.runs.arguments import default_config_path
from her_wrap.runs.config import load_entry, load_run_config
from her_wrap.runs.search_spaces import entry_params, load_search_space

SPACES = sorted((pathlib.Path(__file__).resolve().parents[2] / "lab" / "spaces").glob("*.yml"))


def has_path(entry: dict, path: tuple[str, ...]) -> bool:
    for key in path[:-1]:
        entry = entry.get(key)
        if not isinstance(entry, dict):
            return False
    return path[-1] in entry


@pytest.mark.parametrize("space_file", SPACES, ids=lambda path: path.name)
def test_every_key_of_a_search_space_is_a_setting_of_its_entry(space_file: pathlib.Path) -> None:
    # Each file's name starts with its task's (fetch_push_...): FetchPush-v4.
    assert space_file.name.startswith("fetch_push_"), "a new space file needs its entry named here"
    entry = load_run_config(default_config_path(), "FetchPush-v4").to_entry()
    space = load_search_space(space_file)
    assert space
    unknown = [".".join(path) for path in space if not has_path(entry, path)]
    assert not unknown, f"{space_file.name}: not settings of FetchPush-v4's entry: {unknown}"


def test_the_spaces_are_found() -> None:
    assert {path.name for path in SPACES} >= {"fetch_push_minutes.yml", "fetch_push_minutes_workers.yml"}


def test_the_workers_search_starts_from_the_shipped_entry() -> None:
    # lab/spaces/fetch_push_minutes_workers.yml runs with --start-from-entry: each key lists the entry's value
    space_file = next(path for path in SPACES if path.name == "fetch_push_minutes_workers.yml")
    base = load_entry(default_config_path(), "FetchPush-v4")
    params = entry_params(base.entry, base.validate().model_class, space=load_search_space(space_file))
    assert set(params) == {".".join(path) for path in load_search_space(space_file)}
