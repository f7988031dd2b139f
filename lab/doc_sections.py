"""Generated parts of markdown pages: sections between two marker comments, and the machine a figure is from.

A page keeps its prose by hand and lets a script own a table between two markers::

    <!-- results table: start -->
    | ... written by the script ... |
    <!-- results table: end -->

:func:`replace_section` swaps what lies between the markers and keeps both markers and everything else.
"""

from __future__ import annotations

import importlib
import os
import platform
from collections.abc import Sequence
from pathlib import Path


def replace_section(text: str, start: str, end: str, body: str) -> str:
    """``text`` with what lies between the markers ``start`` and ``end`` replaced by ``body``.

    The markers stay; ``body`` goes on lines of its own between them.

    :raises ValueError: when ``text`` lacks either marker (or has ``end`` before ``start``), naming it
    """
    before, found, rest = text.partition(start)
    if not found:
        raise ValueError(f"the page has no {start!r} marker; add it (and {end!r}) where the section goes")
    _, found, after = rest.partition(end)
    if not found:
        raise ValueError(f"the page has {start!r} but no {end!r} after it; add the end marker")
    return f"{before}{start}\n{body.strip(chr(10))}\n{end}{after}"


def write_section(path: Path, start: str, end: str, body: str, *, new_page: str = "") -> None:
    """Replace a section of the page at ``path``; a page or section that does not exist yet is added.

    :param new_page: the text of the page when ``path`` does not exist yet (its markers may be absent: the
        section then goes at its end)
    """
    text = path.read_text() if path.exists() else new_page
    if start not in text:
        text = (text.rstrip() + "\n\n" if text.strip() else "") + f"{start}\n{end}\n"
    path.write_text(replace_section(text, start, end, body))


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo`` on Linux), else what :mod:`platform` knows."""
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            return next(line.split(":", 1)[1].strip() for line in cpuinfo if line.startswith("model name"))
    except (OSError, StopIteration):
        return platform.processor() or platform.machine()


def load_average() -> str:
    """The 1, 5 and 15 minute load averages, ``"1.7 / 1.6 / 1.5"``."""
    return " / ".join(f"{value:.1f}" for value in os.getloadavg())


def machine_note(libraries: Sequence[str] = ("numpy",), *, threads: str = "") -> str:
    """One sentence on where figures were measured: CPU, cores, load at the end, Python and libraries.

    :param libraries: importable names whose ``__version__`` to state (``("torch", "numpy")``)
    :param threads: how many threads a run used, as a phrase (``"one torch thread per run"``), or ``""``
    """
    versions = [f"Python {platform.python_version()}"]
    for name in libraries:
        version = getattr(importlib.import_module(name), "__version__", "?")
        versions.append(f"{name} {version}")
    return (
        f"Machine: {cpu_model()}, {os.cpu_count()} CPUs shared with other jobs (load average "
        f"{load_average()} at the end of the run){', ' + threads if threads else ''}; {', '.join(versions)}."
    )


def command_lines(command: str) -> list[str]:
    """The lines of a fenced block holding the command that wrote a page, a blank line either side."""
    return ["", "```", command, "```", ""]
