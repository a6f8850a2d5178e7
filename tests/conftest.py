"""Session-wide checks of the whole suite."""

from process_guard import pytest_sessionfinish, pytest_sessionstart  # noqa: F401 (pytest hooks)
from slow_guard import pytest_runtest_call  # noqa: F401 (pytest hook)
