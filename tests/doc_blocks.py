"""The fenced blocks of README.md and the docs pages, and the markers that say how a test runs them.

A marker is an HTML comment on the line right before a fence (several markers take several lines). It
shows neither on GitHub nor in the site:

- ``<!-- docs-test: skip REASON -->``: the block is not run; REASON says why (an install, a server).
- ``<!-- docs-test: replace OLD => NEW -->``: the block runs with OLD replaced by NEW, to shrink a
  budget (``50_000 => 300``) or point at a file the page made earlier. OLD must occur in the block.
- ``<!-- docs-test: file NAME -->``: the block is written to NAME in the page's folder (a module the
  next blocks import, a config they read) and not run itself.

A marker that is malformed, or not followed by a fence, is an error: a stale marker fails the test that
reads it.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

#: Every page whose blocks are run: the README and the site's pages (the API pages hold no examples, and
#: the research log in ``docs/research/`` keeps the commands of their time as a record).
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]

#: Pages of the research log besides ``docs/research/``: the benchmark pages their scripts write.
MEASUREMENT_PAGES = {"benchmarks.md", *(page.name for page in (REPO / "docs").glob("bench_*.md"))}

#: The pages a user acts on: the site's pages outside the research log and the API reference, the
#: README and the changelog.
USER_PAGES = [
    REPO / "README.md",
    REPO / "CHANGELOG.md",
    *(page for page in sorted((REPO / "docs").glob("*.md")) if page.name not in MEASUREMENT_PAGES),
]

#: Languages of blocks that are commands for a shell; a fence without a language counts as one.
SHELL_LANGUAGES = {"", "bash", "sh", "shell", "console"}

MARKER = re.compile(r"^<!-- docs-test: (?P<verb>\w+)(?: (?P<argument>.*?))? -->\s*$")
FENCE = re.compile(r"^```(?P<language>[\w-]*)\s*$")


@dataclass
class Block:
    """One fenced block of a page, with what its markers ask.

    :param page: the file it is in
    :param line: the line of its opening fence (1-based)
    :param language: the fence's language, ``""`` when it names none
    :param code: its text, replacements applied
    :param skip: why it is not run, or ``None``
    :param file: the name it is written to instead of being run, or ``None``
    """

    page: Path
    line: int
    language: str
    code: str
    skip: str | None = None
    file: str | None = None
    replacements: list[tuple[str, str]] = field(default_factory=list)

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(REPO)}:{self.line}"


def _apply_marker(block: Block, verb: str, argument: str, where: str) -> None:
    if verb == "skip":
        if not argument:
            raise ValueError(f"{where}: a skip marker needs a reason: <!-- docs-test: skip REASON -->")
        block.skip = argument
    elif verb == "file":
        if not re.fullmatch(r"[\w.-]+(/[\w.-]+)*", argument):
            raise ValueError(f"{where}: file marker needs a relative file name, got {argument!r}")
        block.file = argument
    elif verb == "replace":
        old, separator, new = argument.partition(" => ")
        if not separator or not old:
            raise ValueError(f"{where}: write a replacement as <!-- docs-test: replace OLD => NEW -->")
        if old not in block.code:
            raise ValueError(f"{where}: replacement {old!r} does not occur in the block below it")
        block.code = block.code.replace(old, new)
        block.replacements.append((old, new))
    else:
        raise ValueError(f"{where}: unknown docs-test marker {verb!r} (skip, replace, file)")


def fenced_blocks(page: Path) -> list[Block]:
    """The fenced blocks of ``page`` in order, markers applied.

    :raises ValueError: a marker is malformed, names a replacement its block lacks, or precedes no fence
    """
    lines = page.read_text(encoding="utf-8").splitlines()
    blocks: list[Block] = []
    pending: list[tuple[str, str, int]] = []
    index = 0
    while index < len(lines):
        line = lines[index]
        marker, fence = MARKER.match(line), FENCE.match(line)
        if marker:
            pending.append((marker["verb"], marker["argument"] or "", index + 1))
        elif fence:
            end = index + 1
            while end < len(lines) and not lines[end].startswith("```"):
                end += 1
            block = Block(page, index + 1, fence["language"], "\n".join(lines[index + 1 : end]) + "\n")
            for verb, argument, marker_line in pending:
                _apply_marker(block, verb, argument, f"{page.name}:{marker_line}")
            blocks.append(block)
            pending = []
            index = end
        elif pending:
            raise ValueError(f"{page.name}:{pending[0][2]}: a docs-test marker must sit right before a fence")
        index += 1
    if pending:
        raise ValueError(f"{page.name}:{pending[0][2]}: a docs-test marker must sit right before a fence")
    return blocks


def shell_commands(code: str) -> list[tuple[str, list[str]]]:
    """The commands of a shell block, as ``(line, argv)``: continuation lines joined, comments dropped."""
    joined = re.sub(r"\\\n", " ", code)
    commands = []
    for line in joined.splitlines():
        argv = shlex.split(line, comments=True)
        if argv:
            commands.append((line.strip(), argv))
    return commands


INLINE_CODE = re.compile(r"(?<!`)`([^`\n]+)`(?!`)")
#: An inline span that names the subcommands rather than running one: ``her-wrap train | enjoy``.
SUBCOMMAND_LIST = re.compile(r"\s[|/]\s")


def inline_commands(page: Path) -> list[tuple[str, list[str]]]:
    """The ``her-wrap ...`` commands of ``page``'s inline code spans, fenced blocks left out, as
    ``(where, argv)``; a span that lists subcommands (``her-wrap train | enjoy``) is no command."""
    text = page.read_text(encoding="utf-8")
    commands = []
    in_fence = False
    for number, line in enumerate(text.splitlines(), start=1):
        if line.startswith("```"):
            in_fence = not in_fence
            continue
        if in_fence:
            continue
        for span in INLINE_CODE.findall(line):
            if span.startswith("her-wrap ") and not SUBCOMMAND_LIST.search(span):
                commands.append((f"{page.name}:{number}", shlex.split(span)))
    return commands
