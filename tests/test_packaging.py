"""her_wrap installed like any package: the wheel's contents, and ``her-wrap train`` with no ``-c`` from a
fresh virtualenv in another folder, reading the ``configs/her.yml`` shipped inside the package.

Nothing is downloaded: the wheel is built without build isolation, and the fresh virtualenv reaches the
dependencies already installed next to this interpreter through a ``.pth`` file.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from her_wrap.runs.arguments import default_config_path
from her_wrap.runs.errors import UsageError
from her_wrap.runs.yaml_io import load_yaml_file

REPO = Path(__file__).resolve().parent.parent
SHIPPED_CONFIG = REPO / "configs" / "her.yml"
# What a wheel is built from (pyproject.toml names README.md as the long description).
# lab/ is copied too: the wheel built from these sources must leave it out.
SOURCES = ["pyproject.toml", "README.md", "her_wrap", "configs", "lab"]


def report(completed: subprocess.CompletedProcess[str]) -> str:
    return f"exit {completed.returncode}\nstdout:\n{completed.stdout[-3000:]}\nstderr:\n{completed.stderr[-3000:]}"


def run(command: list[str], cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "PYTHONHOME")}
    completed = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert completed.returncode == 0, report(completed)
    return completed


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the sources, so that building writes nothing into the checkout."""
    copy = tmp_path_factory.mktemp("source")
    for name in SOURCES:
        if (REPO / name).is_dir():
            shutil.copytree(REPO / name, copy / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(REPO / name, copy / name)
    return copy


def build_wheel(target: Path, dist: Path) -> Path:
    """``pip wheel`` of a source folder or an sdist, offline."""
    run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-q",
         "-w", str(dist), str(target)],
        cwd=dist,
    )  # fmt: skip
    (built,) = dist.glob("her_wrap-*.whl")
    return built


@pytest.fixture(scope="module")
def wheel(source: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel, built offline from the sources."""
    return build_wheel(source, tmp_path_factory.mktemp("dist"))


@pytest.fixture(scope="module")
def wheel_names(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as archive:
        return archive.namelist()


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtualenv with the wheel installed (no index, no dependencies): its ``bin`` folder."""
    venv = tmp_path_factory.mktemp("venv")
    run([sys.executable, "-m", "venv", "--without-pip", str(venv)], cwd=venv)
    fresh_site = Path(
        sysconfig.get_path("purelib", vars={"base": str(venv), "platbase": str(venv)}),
    )
    # A plain path line: the dependencies become importable, but the .pth files there (this checkout's
    # editable install among them) are not run, so her_wrap can come from the wheel only.
    (fresh_site / "dependencies.pth").write_text(sysconfig.get_path("purelib") + "\n")
    run(
        [sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install", "-q", "--no-deps",
         "--no-index", str(wheel)],
        cwd=venv,
    )  # fmt: skip
    return venv / "bin"


# --------------------------------------------------------------------------- the wheel's contents


def test_wheel_ships_the_config_users_edit(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        assert archive.read("her_wrap/configs/her.yml") == SHIPPED_CONFIG.read_bytes()
        assert (
            archive.read("her_wrap/configs/her_jax.yml")
            == SHIPPED_CONFIG.with_name("her_jax.yml").read_bytes()
        )


def test_wheel_holds_every_module_of_the_package(wheel_names: list[str]) -> None:
    modules = {str(path.relative_to(REPO)) for path in (REPO / "her_wrap").rglob("*.py")}
    missing = sorted(modules - set(wheel_names))
    assert missing == [], f"add their packages to [tool.setuptools] packages in pyproject.toml: {missing}"


def dist_info(wheel: Path) -> str:
    name, version = wheel.name.split("-")[:2]
    return f"{name}-{version}.dist-info"


def test_wheel_holds_no_tests_or_scripts(wheel: Path, wheel_names: list[str]) -> None:
    top_level = {name.split("/")[0] for name in wheel_names}
    assert top_level == {"her_wrap", dist_info(wheel)}


LAB_MODULES = ("experiments.py", "results.py", "row_renames.py", "doc_sections.py", "bench.py")


def test_wheel_holds_none_of_the_lab(wheel_names: list[str]) -> None:
    """The experiments, result records, tables, doc sections and benchmark harness of the project's own
    results (``lab/``, built from the same sources) stay out of what users install."""
    assert (REPO / "lab" / "experiments.py").is_file()
    assert [name for name in wheel_names if name.startswith("lab/") or name.endswith(LAB_MODULES)] == []


def test_wheel_declares_the_her_wrap_command(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        entry_points = archive.read(f"{dist_info(wheel)}/entry_points.txt").decode()
    assert "her-wrap = her_wrap.runs.cli:main" in entry_points.splitlines()


def test_wheel_built_from_the_sdist_has_the_same_files(
    source: Path, wheel_names: list[str], tmp_path: Path
) -> None:
    build = "import sys; from setuptools import build_meta; print(build_meta.build_sdist(sys.argv[1]))"
    sdist = tmp_path / run([sys.executable, "-c", build, str(tmp_path)], cwd=source).stdout.split()[-1]
    (tmp_path / "dist").mkdir()
    with zipfile.ZipFile(build_wheel(sdist, tmp_path / "dist")) as archive:
        assert sorted(archive.namelist()) == sorted(wheel_names)


# --------------------------------------------------------------------------- installed, run from elsewhere


def test_installed_package_is_imported_from_the_fresh_virtualenv(installed: Path, tmp_path: Path) -> None:
    completed = run(
        [str(installed / "python"), "-c", "import her_wrap; print(her_wrap.__file__)"], cwd=tmp_path
    )
    assert Path(completed.stdout.strip()).is_relative_to(installed.parent)


@pytest.fixture(scope="module")
def installed_run(installed: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``her-wrap train --env BitFlipping-v0`` with no ``-c``, from a folder with no configs/: the run folder."""
    workdir = tmp_path_factory.mktemp("elsewhere")
    run(
        [str(installed / "her-wrap"), "train", "--env", "BitFlipping-v0", "-n", "64", "--seed", "0",
         "--eval-episodes", "1", "--num-threads", "1", "--verbose", "0", "--no-progress"],
        cwd=workdir,
    )  # fmt: skip
    return workdir / "logs" / "her" / "BitFlipping-v0_1"


def test_installed_her_wrap_train_saves_the_agent(installed_run: Path) -> None:
    assert (installed_run / "BitFlipping-v0.zip").is_file()


def test_installed_her_wrap_train_reads_the_config_inside_the_package(
    installed: Path, installed_run: Path
) -> None:
    conf = Path(load_yaml_file(installed_run / "BitFlipping-v0" / "args.yml")["conf"])
    assert conf.relative_to(installed.parent).parts[-3:] == ("her_wrap", "configs", "her.yml")


def test_installed_her_wrap_train_runs_the_shipped_entry(installed_run: Path) -> None:
    recorded = load_yaml_file(installed_run / "BitFlipping-v0" / "config.yml")["BitFlipping-v0"]
    shipped = load_yaml_file(SHIPPED_CONFIG)["BitFlipping-v0"]
    assert (recorded["env_kwargs"], recorded["gamma"]) == (shipped["env_kwargs"], shipped["gamma"])


def test_installed_presets_read_the_config_inside_the_package(installed: Path, tmp_path: Path) -> None:
    probe = "from her_wrap.runs import presets; print(presets.shipped_config_path()); print(presets.BIT_FLIPPING_DQN)"
    path, preset = run([str(installed / "python"), "-c", probe], cwd=tmp_path).stdout.strip().splitlines()
    assert Path(path).relative_to(installed.parent).parts[-3:] == ("her_wrap", "configs", "her.yml")
    assert "'gradient_steps': 40" in preset


# --------------------------------------------------------------------------- the default config lookup


def test_default_config_is_the_current_folders_copy_when_there_is_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "her.yml").write_text("default: {}\n")
    monkeypatch.chdir(tmp_path)
    assert default_config_path() == tmp_path / "configs" / "her.yml"


def test_default_config_is_the_shipped_one_elsewhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert default_config_path().read_bytes() == SHIPPED_CONFIG.read_bytes()


def test_default_config_missing_names_the_fix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setitem(sys.modules, "her_wrap.configs", None)  # as a stale editable install would have it
    with pytest.raises(UsageError, match="-c/--conf"):
        default_config_path()


def test_the_version_is_one_in_the_package_the_metadata_and_the_changelog() -> None:
    import tomllib

    import her_wrap

    version = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]
    newest = re.search(r"^## (\S+) \(", (REPO / "CHANGELOG.md").read_text(encoding="utf-8"), re.M)
    assert her_wrap.__version__ == version
    assert newest is not None and newest.group(1) == version
