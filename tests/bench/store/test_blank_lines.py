"""A trailing blank line in results.jsonl (an editor's extra newline) is tolerated."""
from __future__ import annotations

import pytest

from zoo.bench.store.records import CorruptRecordsError, append_record, read_records


def test_trailing_blank_lines_are_tolerated_and_appending_goes_on(tmp_path):
    path = tmp_path / "results.jsonl"
    append_record(path, {"id": "a"})
    with open(path, "a") as fh:
        fh.write("\n  \n")
    assert [r["id"] for r in read_records(path)] == ["a"]
    append_record(path, {"id": "b"})  # lands right after "a": no empty line inside the file
    assert path.read_text() == '{"id": "a"}\n{"id": "b"}\n'
    assert [r["id"] for r in read_records(path)] == ["a", "b"]


def test_an_empty_line_inside_the_file_is_still_an_error(tmp_path):
    path = tmp_path / "results.jsonl"
    path.write_text('{"id": "a"}\n\n{"id": "b"}\n')
    with pytest.raises(CorruptRecordsError, match=":2: empty line"):
        read_records(path)
