"""Generated sections of markdown pages and the machine note (:mod:`lab.doc_sections`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from lab.doc_sections import machine_note, replace_section, write_section

START, END = "<!-- table: start -->", "<!-- table: end -->"


def test_a_section_is_replaced_and_the_prose_around_it_kept() -> None:
    page = f"intro\n{START}\nold row\n{END}\nafter\n"
    assert replace_section(page, START, END, "new row") == f"intro\n{START}\nnew row\n{END}\nafter\n"


def test_a_page_without_the_marker_is_an_error_naming_it() -> None:
    with pytest.raises(ValueError, match="no '<!-- table: start -->' marker"):
        replace_section("intro\n", START, END, "row")
    with pytest.raises(ValueError, match="no '<!-- table: end -->' after it"):
        replace_section(f"{START}\nrow\n", START, END, "row")


def test_write_section_adds_a_missing_section_at_the_end_of_the_page(tmp_path: Path) -> None:
    path = tmp_path / "page.md"
    path.write_text("# Title\n")
    write_section(path, START, END, "row 1")
    write_section(path, START, END, "row 2")
    assert path.read_text() == f"# Title\n\n{START}\nrow 2\n{END}\n"


def test_write_section_starts_a_new_page_from_its_template(tmp_path: Path) -> None:
    path = tmp_path / "new.md"
    write_section(path, START, END, "row", new_page=f"# New\n\n{START}\n{END}\n")
    assert path.read_text() == f"# New\n\n{START}\nrow\n{END}\n"


def test_the_machine_note_names_the_cpu_count_and_each_library_version() -> None:
    import numpy

    note = machine_note(("numpy",), threads="one thread per run")
    assert note.startswith("Machine: ")
    assert f"numpy {numpy.__version__}" in note and "one thread per run" in note
