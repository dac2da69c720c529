"""rdmaforge.output_files: a file written under a temporary name beside it, then renamed over it. Review round 34a:
a failure named that temporary name, a random file that never existed ('.results.json.27gs1m0q.json: Is a
directory'), not the file the user has to look at."""

from __future__ import annotations

from pathlib import Path

import pytest

from rdmaforge import output_files


def test_a_directory_in_the_files_place_is_named_as_the_file(tmp_path: Path) -> None:
    target = tmp_path / "results.json"
    target.mkdir()
    with pytest.raises(OSError) as raised:
        output_files.write_text(target, "{}")
    assert raised.value.filename == str(target) and "Is a directory" in str(raised.value), raised.value
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results.json"]  # no temporary file left


def test_a_directory_that_is_not_there_is_named_with_the_file(tmp_path: Path) -> None:
    target = tmp_path / "gone" / "results.json"
    with pytest.raises(OSError) as raised:
        output_files.write_text(target, "{}")
    assert raised.value.filename == str(target), raised.value
    assert "cannot write it here" in str(raised.value)


def test_a_file_is_written_and_replaced(tmp_path: Path) -> None:
    target = tmp_path / "results.json"
    output_files.write_text(target, "one")
    output_files.write_text(target, "two")
    assert target.read_text() == "two" and sorted(p.name for p in tmp_path.iterdir()) == ["results.json"]


def test_a_write_that_fails_naming_no_file_names_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A full disk: the write's OSError carries no file name, and the message named none (review round 35)."""
    import errno

    def full(self: Path, *_args: object, **_kwargs: object) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(Path, "write_text", full)
    target = tmp_path / "results.json"
    with pytest.raises(OSError) as raised:
        output_files.write_text(target, "{}")
    assert raised.value.filename == str(target) and raised.value.errno == errno.ENOSPC
