"""Lints travel with the evidence: every bench result records its arms' lints, and `sglab compare` shows them."""

from __future__ import annotations

import json
import subprocess
import sys

from sglab.analysis.synthetic import synthetic_result
from sglab.cli import main
from sglab.schema.result import RunResult
from sglab.results.store import write_result

STACK = "eagle-nccl-ll"


_BUILD = """
import copy, json, sys
from sglab.config.loader import load_mapping, load_stack, stack_path
from sglab.load.request import BenchRequest
from sglab.load.runner import BenchRun
from sglab.load.targets import Targets

stack, changes = sys.argv[1], json.loads(sys.argv[2])
loaded = load_stack(stack)
raw = copy.deepcopy({k: v for k, v in loaded.raw.items() if k != "__lines__"})
for path, value in changes.items():
    *parents, last = path.split(".")
    node = raw
    for part in parents:
        node = node.setdefault(part, {})
    node[last] = value
loaded = load_mapping(stack, stack_path(stack), raw)
run = BenchRun(BenchRequest(loaded=loaded, plan=loaded.config.load), Targets(urls={}))
print(run.build_result([], []).model_dump_json())
"""


def _bench_result(changes: dict) -> RunResult:
    """What the bench runner records, built in a child process: the runner imports Locust, whose gevent
    monkey-patching would break the Pulumi mocks of the other probe tests in this process."""
    proc = subprocess.run([sys.executable, "-c", _BUILD, STACK, json.dumps(changes)], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return RunResult.model_validate_json(proc.stdout.strip().splitlines()[-1])


def test_the_bench_result_records_the_lints_of_its_arms():
    result = _bench_result({"server.disable-custom-all-reduce": False})
    (lint,) = result.lints
    assert lint.code == "custom-all-reduce-shadows-nccl" and lint.severity == "warning"
    assert lint.arms == ["baseline", "candidate"] and lint.key == "server.disable-custom-all-reduce"
    assert "8 MiB" in lint.message and lint.fix
    again = RunResult.model_validate_json(result.model_dump_json())
    assert again.lints == result.lints and again.model_dump(mode="json")["lints"][0]["code"] == lint.code
    accepted = _bench_result({"nccl.NCCL_PROTO": "LL128", "accept-lints": ["nccl-proto-ll128"]})
    assert [(x.code, x.severity) for x in accepted.lints] == [("nccl-proto-ll128", "note")]
    assert _bench_result({}).lints == []  # the shipped stack lints clean


def test_a_result_without_lints_still_loads():
    document = synthetic_result(stack=STACK, run_id="20260101T000000Z-aaaaaa", rounds=3).model_dump(mode="json")
    document.pop("lints", None)
    assert RunResult.model_validate(document).lints == []


def test_compare_shows_the_recorded_lints_under_the_table(tmp_path, capsys):
    result = synthetic_result(stack=STACK, run_id="20260101T000000Z-bbbbbb", rounds=4)
    clean = tmp_path / "clean"
    write_result(result, clean)
    assert main(["compare", str(clean)]) == 0
    assert "lint" not in capsys.readouterr().out
    result.lints = _bench_result({"server.disable-custom-all-reduce": False}).lints
    linted = tmp_path / "linted"
    write_result(result, linted)
    assert main(["compare", str(linted)]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    (line,) = [x for x in lines if "custom-all-reduce-shadows-nccl" in x]
    assert line.startswith("lint at bench time: warning [custom-all-reduce-shadows-nccl] (baseline, candidate)")
    assert lines.index(line) > next(i for i, x in enumerate(lines) if x.startswith("-----"))  # under the table
    assert lines[-1].startswith("verdict: ")  # still the grep-able last line


def test_the_record_mirrors_the_lint_field_for_field():
    from sglab.config.lints import Lint
    from sglab.schema.records import RecordedLint

    lint = Lint("nccl-proto-ll128", "error", ("baseline",), "nccl.NCCL_PROTO", "m", "f")
    assert list(RecordedLint.model_fields) == list(lint.as_dict())
    assert RecordedLint.model_validate(lint.as_dict()).describe() == lint.describe()
