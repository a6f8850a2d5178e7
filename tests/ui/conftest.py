"""Fixtures of the UI tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from .harness import OUTPUT_DIR


@pytest.fixture
def output_dir() -> Path:
    OUTPUT_DIR.mkdir(parents=True, exist_ok=True)
    return OUTPUT_DIR
