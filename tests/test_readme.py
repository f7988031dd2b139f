"""The README's examples run as printed."""

from __future__ import annotations

import pathlib
import re

README = pathlib.Path(__file__).resolve().parents[1] / "README.md"


def _python_block_after(heading: str) -> str:
    text = README.read_text()
    section = text[text.index(heading) :]
    match = re.search(r"```python\n(.*?)```", section, flags=re.DOTALL)
    assert match is not None, f"no python block after {heading!r}"
    return match.group(1)


def test_standalone_buffer_example_samples_relabeled_batches() -> None:
    namespace: dict = {}
    exec(compile(_python_block_after("## Numpy core"), "README.md", "exec"), namespace)
    batch = namespace["batch"]
    expected = {"obs", "act", "next_obs", "goal", "rew", "weights", "indexes"}
    assert expected <= set(batch) and len(batch["rew"]) == 32


def test_readme_commands_are_makefile_targets() -> None:
    makefile = (README.parent / "Makefile").read_text()
    commands = set(re.findall(r"^make ([a-z-]+)", README.read_text(), flags=re.MULTILINE))
    targets = set(re.findall(r"^([a-z-]+):", makefile, flags=re.MULTILINE))
    assert {"demo", "test"} <= commands and commands <= targets
