"""One atomic writer for every file sglab keeps (results, sweep state, promoted stacks, a written stack): a reader
sees the old file or the new one, a file that must not be overwritten is not, and nothing half-written is left."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from sglab.core.paths import write_atomic


def test_a_replaced_file_keeps_its_permissions_and_leaves_no_temporary(tmp_path: Path) -> None:
    path = tmp_path / "Pulumi.production.yaml"
    path.write_text("old\n")
    os.chmod(path, 0o640)
    write_atomic(path, "new\n")
    assert path.read_text() == "new\n" and path.stat().st_mode & 0o777 == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["Pulumi.production.yaml"]


def test_without_overwrite_an_existing_file_is_refused_and_kept(tmp_path: Path) -> None:
    path = tmp_path / "result.json"
    path.write_text("{}\n")
    with pytest.raises(FileExistsError):
        write_atomic(path, '{"x": 1}\n', overwrite=False)
    assert path.read_text() == "{}\n" and len(list(tmp_path.iterdir())) == 1
    fresh = write_atomic(tmp_path / "runs" / "new.json", "{}\n", overwrite=False)
    assert fresh.read_text() == "{}\n"


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path: Path) -> None:
    path = tmp_path / "sweep.json"
    path.write_text("kept\n")
    with pytest.raises(UnicodeEncodeError):
        write_atomic(path, "\ud800")  # a lone surrogate cannot be written as UTF-8
    assert path.read_text() == "kept\n" and sorted(p.name for p in tmp_path.iterdir()) == ["sweep.json"]
