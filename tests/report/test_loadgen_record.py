"""A result's load-generator record is typed: the bench's process (pid, host, start), the tool, the workers and the
profile are fields read as such, and a record that is not one (a pid that is not a number, an unknown key) is
refused when the result is read, naming the key, instead of being parsed defensively where it is used."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from sglab.analysis.operating_point import level_label
from sglab.analysis.synthetic import synthetic_result
from sglab.core.errors import ConfigError
from sglab.load.owner import owner_alive, this_process
from sglab.results.store import load_result, write_result
from sglab.schema.result import LoadGen, RunResult


def _written(tmp_path: Path, **loadgen) -> Path:
    result = synthetic_result(levels=(1,), rounds=2)
    result.loadgen = LoadGen.model_validate(loadgen)
    return write_result(result, tmp_path / result.run_id)


def test_the_record_reads_back_as_fields(tmp_path: Path) -> None:
    path = _written(tmp_path, tool="locust", workers=2, profile="rate", **this_process())
    result = load_result(path)
    assert isinstance(result.loadgen, LoadGen)
    assert result.loadgen.workers == 2 and result.loadgen.pid == os.getpid()
    assert owner_alive(result.loadgen) is True
    assert level_label(result.model_copy(update={"load_plan": None})) == "rate"


@pytest.mark.parametrize("loadgen, key", [
    ({"pid": "1234; rm -rf /"}, "pid"),
    ({"workers": -1}, "workers"),
    ({"surplus": 1}, "surplus"),
])
def test_a_record_that_is_not_one_is_refused_where_the_result_is_read(tmp_path: Path, loadgen: dict,
                                                                       key: str) -> None:
    path = _written(tmp_path)
    document = json.loads(path.read_text())
    document["loadgen"] = {**document["loadgen"], **loadgen}
    path.write_text(json.dumps(document))
    with pytest.raises(ConfigError) as info:
        load_result(path)
    assert key in str(info.value)


def test_a_result_without_a_record_has_the_defaults() -> None:
    data = synthetic_result(levels=(1,), rounds=2).model_dump(mode="json")
    del data["loadgen"]
    result = RunResult.model_validate(data)
    assert result.loadgen.workers == 0 and result.loadgen.pid is None and owner_alive(result.loadgen) is None
