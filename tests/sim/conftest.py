"""Simulator fixtures: real `sglab sim` subprocesses on free ports, run fast with a large time scale."""

from __future__ import annotations

import pytest

from sglab.sim.testing import running_sim

from .helpers import CHART_COMMON, EAGLE_2STEP, FAST, TUNED_NCCL


@pytest.fixture(scope="module")
def eagle_url():
    with running_sim(CHART_COMMON + EAGLE_2STEP, {**TUNED_NCCL, **FAST}) as url:
        yield url


@pytest.fixture(scope="module")
def baseline_url():
    with running_sim(CHART_COMMON, FAST) as url:
        yield url

