"""`sglab bench --sim-env` takes only knobs the simulator declares (sglab/sglang/sim_knobs.py)."""

from __future__ import annotations

import pytest

from sglab.cli import UsageError
from sglab.cli.bench import _sim_env


def test_a_declared_knob_is_passed_through():
    assert _sim_env(["SGLAB_SIM_ERROR_RATE=0.2"], None) == {"SGLAB_SIM_ERROR_RATE": "0.2"}


def test_an_unknown_knob_is_refused_with_a_guess():
    with pytest.raises(UsageError, match="SGLAB_SIM_EROR_RATE.*SGLAB_SIM_ERROR_RATE"):
        _sim_env(["SGLAB_SIM_EROR_RATE=0.2"], None)


def test_a_value_with_a_control_character_is_refused_before_anything_starts():
    with pytest.raises(UsageError, match=r"--sim-env SGLAB_SIM_NODE: .*control"):
        _sim_env(["SGLAB_SIM_NODE=n\x1b[31mX"], None)
