"""Nothing raw reaches a terminal. Escape sequences written into every source of untrusted
text (a stack's model path and env key, a prompt file's categories, a result's fields, a probe result, a
server's reply, a log record of the web UI) never reach stdout or stderr raw: a document sglab reads (a stack,
a result) is refused where it enters, naming the key; text from outside (a server's reply, a probe result, a log
record) is made printable (sglab.core.untrusted.printable) where it is read or printed."""

from __future__ import annotations

import http.server
import json
import logging
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import yaml

from sglab.cli import main
from sglab.core.errors import USAGE
from sglab.results.integrity import KEY_ENV

ROOT = Path(__file__).resolve().parents[2]
V1 = ROOT / "tests" / "data" / "results" / "v1-article-replay.json"
ESC = "\x1b[1A\x1b[2K"  # cursor up, erase the line: what would hide "HMAC does not match"
RAW = ("\x1b", "\x9b", "\u202e", "\x07", "\r")


def assert_clean(*texts: str) -> None:
    for text in texts:
        for raw in RAW:
            assert raw not in text, f"raw {raw!r} reached the terminal:\n{text!r}"


@pytest.fixture(autouse=True)
def _isolated(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv(KEY_ENV, "sglab-test-result-key")
    monkeypatch.setenv("SGLAB_RESULTS_DIR", str(tmp_path / "results"))


@pytest.fixture
def stack(tmp_path, monkeypatch):
    """Write stacks/Pulumi.lab.yaml: eagle-nccl-ll with `changes` applied (key -> value, None deletes)."""

    def write(changes: dict) -> str:
        doc = yaml.safe_load((ROOT / "stacks" / "Pulumi.eagle-nccl-ll.yaml").read_text())
        for key, value in changes.items():
            doc["config"][key] = value
        folder = tmp_path / "stacks"
        folder.mkdir(exist_ok=True)
        (folder / "Pulumi.lab.yaml").write_text(yaml.safe_dump(doc, sort_keys=False, allow_unicode=True))
        monkeypatch.setenv("SGLAB_STACKS_DIR", str(folder))
        return "lab"

    return write


def test_validate_and_render_print_no_raw_model_path_or_env_key(stack, capsys):
    model = {"path": f"/shared/kimi{ESC}ok", "volume": {"kind": "hostPath", "host-path": "/shared",
                                                         "mount-path": "/shared"}}
    name = stack({"sglab:model": model})
    for command in ("validate", "render"):
        main([command, "--stack", name])
        out = capsys.readouterr()
        assert_clean(out.out, out.err)
    name = stack({"sglab:env": {f"A{ESC}B": "1"}})
    assert main(["validate", "--stack", name]) == 2
    out = capsys.readouterr()
    assert_clean(out.out, out.err)
    assert "\\x1b" in out.err  # the key is shown, escaped


def _tampered_result(tmp_path: Path, *, mismatches: bool = True, **changes) -> Path:
    """The v1 run, sealed, then given escape sequences in free-text fields a table prints (its HMAC fails), or
    (`mismatches=False`) only `changes`."""
    from sglab.results.integrity import sealed_document
    from sglab.schema.result import RunResult

    document = sealed_document(RunResult.model_validate_json(V1.read_text()))
    if mismatches:
        document["live_mismatches"] = [f"model-path differs{ESC}"]
        document["arms"][1]["live_mismatches"] = [f"flag{ESC}\u202e"]
    document.update(changes)
    run = tmp_path / "results" / "article-replay" / "20261201T123502Z-670167"
    run.mkdir(parents=True)
    (run / "result.json").write_text(json.dumps(document))
    return run


def _assert_refused(argv: list[str], capsys, key: str) -> None:
    """The command stops with the usage status, one message naming the file and key, nothing raw, no traceback."""
    assert main(argv) == USAGE, argv
    out = capsys.readouterr()
    assert_clean(out.out, out.err)
    assert f"result.json: {key}: holds U+" in out.err and "control or invisible character" in out.err, out.err
    assert "Traceback" not in out.err


def test_a_result_holding_a_control_character_is_refused_where_it_is_read(tmp_path, capsys):
    """compare, report, results and promote read the file through its schema, which refuses the escape sequence
    at its key: nothing of it is printed, nothing is written."""
    run = _tampered_result(tmp_path)
    report = tmp_path / "report"
    for argv in (["compare", str(run)], ["report", str(run), "--output", "console", "--out", str(report)],
                 ["promote", "--stack", "article-replay", "--dry-run", "--result", str(run)],
                 ["results", "--stack", "article-replay"]):
        _assert_refused(argv, capsys, "arms.1.live_mismatches.0")
    assert not report.exists()


@pytest.mark.parametrize("field, value, key", [
    ("incomplete_reason", f"stopped{ESC}\r\x9b31m", "incomplete_reason"),
    ("invalid_reason", f"arm died{ESC}", "invalid_reason"),
    ("loadgen", {"host": "lab\u202eok"}, "loadgen.host"),
    ("target", {"kind": "urls", "urls": {f"candidate{ESC}": "http://x"}}, "target.urls.candidate\\x1b[1A\\x1b[2K"),
    ("policy", {"checks": "standard", "notes": [f"a{ESC}"]}, "policy.notes.0"),
])
def test_a_result_field_cannot_hide_a_line(tmp_path, capsys, field, value, key):
    """Any string of the document, at any depth (an unknown key a record keeps included), is refused with its
    key path; run_id and stack are refused as directory names."""
    run = _tampered_result(tmp_path, mismatches=False, **{field: value})
    for argv in (["compare", str(run)], ["promote", "--stack", "article-replay", "--dry-run", "--result", str(run)]):
        _assert_refused(argv, capsys, key)


@pytest.mark.parametrize("field, value", [("run_id", f"20261201T123502Z-670167{ESC}HMAC ok"),
                                          ("stack", f"article-replay{ESC}")])
def test_a_result_name_that_is_not_a_directory_name_is_refused(tmp_path, capsys, field, value):
    run = _tampered_result(tmp_path, **{field: value})
    assert main(["compare", str(run)]) == USAGE
    out = capsys.readouterr()
    assert_clean(out.out, out.err)
    assert f"{field}: " in out.err and "not a safe directory name" in out.err


def test_a_requests_error_keeps_its_lines_but_no_control_character(tmp_path):
    """A server's error body is several lines: a line break or a tab is kept, an escape sequence refused."""
    from pydantic import ValidationError

    from sglab.schema.result import RequestSample

    sample = {"arm": "baseline", "level": 1, "round_index": 0, "start_s": 0.0}
    assert RequestSample.model_validate({**sample, "error": "HTTP 500\n\tat line 2"}).error == "HTTP 500\n\tat line 2"
    with pytest.raises(ValidationError, match="error.*U\\+001B"):
        RequestSample.model_validate({**sample, "error": f"HTTP 500\n{ESC}"})


def test_a_valid_result_loads_as_stored_and_its_seal_holds(tmp_path):
    """Checking the text on load changes nothing of a valid document: what is read is what was sealed."""
    from sglab.results import integrity
    from sglab.results.integrity import sealed_document
    from sglab.results.store import load_result
    from sglab.schema.result import RunResult

    document = sealed_document(RunResult.model_validate_json(V1.read_text()))
    path = tmp_path / "result.json"
    path.write_text(json.dumps(document))
    result = load_result(path)
    assert integrity.verify(result) is None
    assert sealed_document(result) == document


def test_what_a_server_says_is_recorded_printable_so_its_result_is_built_and_read():
    """A server's version, node, flags, error body and a failed info read are made printable where sglab reads
    them: the records built from them hold no control character, and an error body keeps its lines."""
    from types import SimpleNamespace

    from sglab.config import baseline_arm, load_stack
    from sglab.load.targets import arm_machine, live_mismatches
    from sglab.load.users import _sample
    from sglab.schema.result import ArmMachine, RequestSample
    from sglab.sglang.client import ServerInfo

    arm = baseline_arm(load_stack("eagle-nccl-ll").config)
    info = ServerInfo("http://127.0.0.1:1", {"version": f"0.5{ESC}", "speculative_algorithm": f"EAGLE3{ESC}",
                                             "sglab_sim": {"simulator": True, "node": f"node{ESC}"}})
    machine = arm_machine(url=None, target_kind="urls", declared_image="img", info=info)
    unread = arm_machine(url=None, target_kind="urls", declared_image="img", info=None,
                         info_error=f"HTTP 500: {ESC}\u202e")
    found = live_mismatches(arm, info)
    assert any("EAGLE3\\x1b" in m for m in found)
    assert_clean(machine.server_version or "", machine.node_name or "", *found, *unread.notes)
    for record in (machine, unread):
        assert ArmMachine.model_validate_json(record.model_dump_json()) == record
    ticket = SimpleNamespace(arm="baseline", level=1, round_index=0, warmup=False, started_epoch=10.0)
    metrics = SimpleNamespace(prompt_tokens=1, output_tokens=0, ttft_s=None, e2e_s=None, itl_s=[],
                              decode_tok_per_s=None, spec_verify_ct=None, spec_correct_drafts=None, accept_length=None)
    sample = _sample(ticket, 0, metrics, 4, f"HTTP 502\n<h1>{ESC}bad</h1>", SimpleNamespace(run_started_epoch=0.0))
    assert sample.error == "HTTP 502\n<h1>\\x1b[1A\\x1b[2Kbad</h1>"
    assert RequestSample.model_validate_json(sample.model_dump_json()) == sample


def _probe_json(tmp_path: Path) -> Path:
    from sglab.probe.result import ProbeResult, SizeResult, VariantResult, to_json

    size = SizeResult(bytes=65536, decode=True, sources=["baseline decode c=1"], median_us=10.0, ci_low_us=9.0,
                      ci_high_us=11.0, ci_coverage=0.95, min_us=9.0, samples=100, correct=True, algbw_gb_s=1.0)
    variants = [VariantResult(name=f"default{ESC}", env={"NCCL_PROTO": f"LL{ESC}"}, status="ok", sizes=[size]),
                VariantResult(name="ll", env={"NCCL_PROTO": "LL"}, status="failed", sizes=[],
                              error=f"boom{ESC}\nsecond line")]
    result = ProbeResult(run_id="probe-20261201T000000Z-abcdef", stack="eagle-nccl-ll",
                         created_at="2026-12-01T00:00:00+00:00", complete=True, backend="nccl", mode="cuda-graph",
                         world_size=8, hidden_size=7168, hidden_size_source="test", dtype="bfloat16",
                         ops_per_graph=10, samples=100, warmup_replays=20, confidence=0.95, variants=variants)
    path = tmp_path / "probe.json"
    path.write_text(to_json(result))
    return path


def test_probe_show_prints_no_raw_variant_name_or_error(tmp_path, capsys):
    assert main(["probe", "show", str(_probe_json(tmp_path))]) == 0
    out = capsys.readouterr()
    assert_clean(out.out, out.err)
    assert "default\\x1b" in out.out


def test_a_result_holding_a_control_character_cannot_be_built(tmp_path):
    """What the bench prints (arm lints, live mismatches from the servers) comes from a result that could not
    have been built with an escape sequence in it."""
    from pydantic import ValidationError

    from sglab.schema.records import error_key
    from sglab.schema.result import RunResult

    document = json.loads(_tampered_result(tmp_path).joinpath("result.json").read_text())
    with pytest.raises(ValidationError, match="U\\+001B") as refused:
        RunResult.model_validate(document)
    assert error_key(refused.value.errors()[0]) == "arms.1.live_mismatches.0"


@pytest.mark.parametrize("category", [f"code{ESC}", "code\nverdict: promote", "x" * 65, "\u202ecode"])
def test_a_category_that_is_not_a_label_is_refused_where_it_enters(tmp_path, capsys, category):
    """From a prompt file or a trace, at its line; in a result, as a field of a damaged file: a line break in
    one would add a line to the tables, which printable keeps for the table's own rows."""
    from sglab.core.errors import ConfigError
    from sglab.load.datasets import CategorySource, load_openai_jsonl
    from sglab.load.profiles import read_trace

    logs = tmp_path / "logs.jsonl"
    logs.write_text(json.dumps({"messages": [{"role": "user", "content": "hi"}], "route": category}) + "\n")
    with pytest.raises(ConfigError, match=r"logs.jsonl:1: line 1.route: the category .* is not a label"):
        load_openai_jsonl(logs, categories=CategorySource(field="route"))
    trace = tmp_path / "trace.jsonl"
    trace.write_text(json.dumps({"timestamp_s": 0, "prompt": "hi", "output_tokens": 4, "category": category}) + "\n")
    with pytest.raises(ConfigError, match=r"trace.jsonl:1: load.trace.file:category: the category"):
        read_trace(trace)
    run = _tampered_result(tmp_path, mismatches=False)
    document = json.loads((run / "result.json").read_text())
    document["levels"][0]["requests"][0]["category"] = category
    (run / "result.json").write_text(json.dumps(document))
    assert main(["compare", str(run)]) == 2
    err = capsys.readouterr().err
    assert_clean(err)
    assert "category" in err and "not a category label" in err


def test_the_web_uis_log_records_reach_its_console_escaped(capsys):
    from sglab.core.untrusted import printable_logger

    logger = printable_logger("sglab.ui")
    handler = logging.StreamHandler(sys.stderr)
    logger.addHandler(handler)
    try:
        logger.error("sglab A/B tab: %s", f"server said {ESC}\u202eok")
    finally:
        logger.removeHandler(handler)
    err = capsys.readouterr().err
    assert_clean(err)
    assert "server said \\x1b[1A" in err


class _HostileServer(http.server.BaseHTTPRequestHandler):
    """Healthy, but its server info claims speculative decoding in a name that moves the cursor."""

    def do_GET(self) -> None:  # noqa: N802
        if self.path.startswith("/health"):
            body = b"ok"
        else:
            body = json.dumps({"model_path": "/shared/kimi-k2.5-int4", "speculative_algorithm": f"EAGLE3{ESC}",
                               "version": f"0.5{ESC}"}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:
        pass


def test_a_servers_reply_reaches_the_bench_output_escaped(tmp_path):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _HostileServer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        out = subprocess.run([sys.executable, "-m", "sglab.cli", "bench", "--stack", "eagle-nccl-ll", "--target",
                              "urls", "--baseline-url", url, "--candidate-url", url, "--quick", "--no-progress",
                              "--out", str(tmp_path / "results")], cwd=ROOT, capture_output=True, text=True,
                             timeout=120, env={"PATH": "/usr/bin:/bin", "XDG_DATA_HOME": str(tmp_path / "xdg")})
    finally:
        server.shutdown()
    assert out.returncode == 2, out
    assert "refusing to benchmark" in out.stderr and "EAGLE3\\x1b" in out.stderr, out.stderr
    assert_clean(out.stdout, out.stderr)
