"""Session-wide checks of the whole suite."""

from process_guard import pytest_sessionfinish, pytest_sessionstart  # noqa: F401 (pytest hooks)
