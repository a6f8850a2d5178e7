"""Window accept length from /metrics counters (exact, no /flush_cache), the fallback, and chat's own stats."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from sglab.load.targets import AcceptWindow, accept_method
from sglab.sglang.client import counter_totals

from .conftest import ROOT, bench, child_env, load, run_dirs

pytestmark = pytest.mark.slow


def test_counter_totals_sums_label_sets_and_ignores_lookalikes() -> None:
    text = ('# TYPE sglang:generation_tokens_total counter\n'
            'sglang:generation_tokens_total{model_name="m",dp_rank="0"} 100.0\n'
            'sglang:generation_tokens_total{model_name="m",dp_rank="1"} 50\n'
            'sglang:generation_tokens_totalx 5\nsglang:spec_verify_calls_total 60\n')
    totals = counter_totals(text, ("sglang:generation_tokens_total", "sglang:spec_verify_calls_total"))
    assert totals == {"sglang:generation_tokens_total": 150.0, "sglang:spec_verify_calls_total": 60.0}


class _OldServer(BaseHTTPRequestHandler):
    """A server without the counters: /metrics 404, /flush_cache and avg_spec_accept_length as before."""

    flushes = 0

    def do_GET(self):  # noqa: N802
        if self.path == "/get_server_info":
            body = json.dumps({"avg_spec_accept_length": 2.5}).encode()
            self.send_response(200)
            self.end_headers()
            self.wfile.write(body)
        else:
            self.send_response(404)
            self.end_headers()

    def do_POST(self):  # noqa: N802
        type(self).flushes += 1
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args):
        pass


def test_without_counters_the_flush_cache_method_is_used() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _OldServer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        method = accept_method({"candidate": url}, {"candidate": True})
        assert method == "flush_cache"
        window = AcceptWindow(url, method, speculative=True)
        assert _OldServer.flushes == 1 and window.close() == 2.5
    finally:
        server.shutdown()


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> dict:
    out = tmp_path_factory.mktemp("results")
    bench(["--stack", "eagle-nccl-ll", "--prompts", "random", "--concurrency", "1,4", "--rounds", "3",
           "--ungated-rounds", "3",
           "--round-requests", "4", "--warmup-requests", "1", "--max-new-tokens", "24", "--time-scale", "5"], out)
    (run_dir,) = run_dirs(out, "eagle-nccl-ll")
    return load(run_dir)


def test_the_simulator_window_accept_length_comes_from_the_counters_exactly(run: dict) -> None:
    checked = 0
    for level in run["levels"]:
        for r in level["rounds"]:
            if r["arm"] != "candidate":
                assert r["server_accept_length"] is None
                continue
            assert r["accept_length_method"] == "metrics"
            mine = [s for s in level["requests"] if s["arm"] == "candidate" and s["round_index"] == r["round_index"]
                    and s["warmup"] == r["warmup"]]
            tokens, verifies = sum(s["output_tokens"] for s in mine), sum(s["spec_verify_ct"] for s in mine)
            assert r["server_accept_length"] == pytest.approx(tokens / verifies, rel=1e-9)
            checked += 1
        assert level["arms"]["candidate"]["accept_length"]["server_method"] == "metrics"
    assert checked >= 2 * 4


def test_chat_requests_get_a_client_side_accept_length(tmp_path: Path) -> None:
    stack = (Path(__file__).resolve().parents[2] / "stacks" / "Pulumi.eagle-nccl-ll.yaml").read_text()
    stack = stack.split("  sglab:load:")[0]
    (tmp_path / "stacks").mkdir()
    path = tmp_path / "stacks" / "Pulumi.chat.yaml"
    section = "  sglab:load:\n    endpoint: chat\n    prompts:\n      source: random\n"  # what it was written for
    path.write_text(stack.replace("config:\n", "config:\n" + section, 1))
    out = tmp_path / "results"
    cmd = [sys.executable, "-m", "sglab.cli", "bench", "--stack", "chat", "--target", "sim", "--out", str(out),
           "--no-progress", "--concurrency", "1", "--rounds", "3", "--round-requests", "3", "--warmup-requests", "0",
           "--max-new-tokens", "24", "--time-scale", "5"]
    proc = subprocess.run(cmd, cwd=ROOT, env=child_env({"SGLAB_STACKS_DIR": str(tmp_path / "stacks")}),
                          capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-2000:]
    (run_dir,) = run_dirs(out, "chat")
    result = load(run_dir)
    candidate = [s for lv in result["levels"] for s in lv["requests"] if s["arm"] == "candidate"]
    assert candidate and all(s["spec_verify_ct"] and 1.0 <= s["accept_length"] <= 3.0 for s in candidate)
    assert all(s["accept_length"] == pytest.approx(s["output_tokens"] / s["spec_verify_ct"]) for s in candidate)
