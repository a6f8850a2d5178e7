"""Every promotion test seals and verifies results with a test key, never the machine's own."""

from __future__ import annotations

from pathlib import Path

import pytest

from sglab.results.integrity import KEY_ENV


@pytest.fixture(autouse=True)
def _result_key(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv(KEY_ENV, "sglab-test-result-key")
