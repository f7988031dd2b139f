"""The README is a front page: short, its commands real, and no paragraph of it repeated in the docs.

Its examples run in ``test_doc_examples.py`` with every other page's.
"""

from __future__ import annotations

import difflib
import re

from doc_blocks import REPO

README = REPO / "README.md"
MAX_README_CHARACTERS = 10_000
#: Shorter paragraphs (a heading, a one-line summary, a link line) may say the same in two places.
MIN_PARAGRAPH_CHARACTERS = 120
SIMILAR = 0.8


def paragraphs(text: str) -> list[str]:
    """Prose paragraphs of a Markdown text: fenced blocks, tables, headings and HTML comments left out."""
    text = re.sub(r"^```.*?^```", "", text, flags=re.DOTALL | re.MULTILINE)
    text = re.sub(r"<!--.*?-->", "", text, flags=re.DOTALL)
    chunks = [" ".join(chunk.split()) for chunk in re.split(r"\n\s*\n", text)]
    return [
        chunk
        for chunk in chunks
        if len(chunk) >= MIN_PARAGRAPH_CHARACTERS and not chunk.startswith(("|", "#", "!["))
    ]


def shared_paragraphs(first: str, second: str) -> list[tuple[str, str]]:
    pairs = []
    for ours in paragraphs(first):
        for theirs in paragraphs(second):
            matcher = difflib.SequenceMatcher(None, ours, theirs, autojunk=False)
            if (
                matcher.real_quick_ratio() >= SIMILAR
                and matcher.quick_ratio() >= SIMILAR
                and matcher.ratio() >= SIMILAR
            ):
                pairs.append((ours[:80], theirs[:80]))
    return pairs


def test_readme_is_a_front_page_of_at_most_10k_characters() -> None:
    assert len(README.read_text(encoding="utf-8")) <= MAX_README_CHARACTERS


def test_no_readme_paragraph_is_repeated_in_a_docs_page() -> None:
    readme = README.read_text(encoding="utf-8")
    repeated = {
        page.name: shared_paragraphs(readme, page.read_text(encoding="utf-8"))
        for page in sorted((REPO / "docs").glob("*.md"))
    }
    assert {name: pairs for name, pairs in repeated.items() if pairs} == {}, "link to the page instead"


def test_a_paragraph_copied_into_a_page_is_found() -> None:
    (paragraph,) = paragraphs(README.read_text(encoding="utf-8"))[:1]
    assert shared_paragraphs(paragraph, f"Intro.\n\n{paragraph.replace('the', 'a')}\n") != []


def test_readme_commands_are_makefile_targets() -> None:
    makefile = (REPO / "Makefile").read_text()
    commands = set(re.findall(r"^make ([a-z-]+)", README.read_text(), flags=re.MULTILINE))
    targets = set(re.findall(r"^([a-z-]+):", makefile, flags=re.MULTILINE))
    assert {"demo", "test"} <= commands and commands <= targets


def test_readme_links_point_at_files_of_the_repository() -> None:
    links = re.findall(r"\]\(((?!https?:)[^)#]+)", README.read_text(encoding="utf-8"))
    assert [link for link in links if not (REPO / link).exists()] == []
