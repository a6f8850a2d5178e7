"""The A/B flow over Locust's REST API: `sglab ui --target sim`, POST /swarm, the A/B stats, the result download."""

from __future__ import annotations

import json
import signal

import httpx
import pytest

from sglab.analysis.verdict import judge
from sglab.cli import main
from sglab.results.store import list_runs, load_result
from .harness import REST_HEADERS, STACK, ab_rows, sglab_ui, wait_until

pytestmark = pytest.mark.slow


def _stats(url: str) -> dict:
    response = httpx.get(url + "/stats/requests", timeout=10)
    response.raise_for_status()
    return response.json()


def test_swarm_stats_and_result_download(tmp_path):
    with sglab_ui(tmp_path, "--target", "sim", stop_signal=signal.SIGINT) as ui:  # Ctrl-C
        assert set(ui.arm_urls) == {"baseline", "candidate"}, ui.log()
        page = httpx.get(ui.url + "/", timeout=10).text
        for expected in ('"extended_tabs"', '"sglab-ab"', '"baseline_url"', '"candidate_url"',
                         ui.arm_urls["baseline"], ui.arm_urls["candidate"]):
            assert expected in page, f"{expected} missing from the UI's template args"

        # before any test: the tab is empty and there is nothing to download
        assert ab_rows(_stats(ui.url)) == {}
        assert httpx.get(ui.url + "/sglab/result.json", timeout=10).status_code == 404

        started = httpx.post(ui.url + "/swarm", data={"user_count": 2, "spawn_rate": 2}, headers=REST_HEADERS,
                             timeout=10).json()
        assert started["success"], started

        def enough_rounds():
            rows = ab_rows(_stats(ui.url))
            gain = rows.get("candidate vs baseline")
            return rows if gain and "[n/a" not in (gain["decode_tok_s"] or "[n/a") else None

        rows = wait_until(enough_rounds, 90, "a decode gain with a confidence interval in the A/B tab", 1.0)
        baseline, candidate, gain = rows["baseline"], rows["candidate"], rows["candidate vs baseline"]
        for row in (baseline, candidate):
            assert row["requests"] > 0 and row["errors"] == 0
            assert row["decode_tok_s"] > 0 and row["output_tok_s"] > 0
            assert 0 < row["ttft_p50"] <= row["ttft_p99"]
            assert 0 < row["itl_p50"] <= row["itl_p99"]
        assert baseline["accept_client"] is None and baseline["accept_server"] is None
        assert candidate["accept_client"] > 1.0 and candidate["accept_server"] > 1.0
        assert gain["verdict"].split(":")[0] in ("promote", "reject", "inconclusive"), gain["verdict"]
        assert "%" in gain["decode_tok_s"] and "%" in gain["output_tok_s"]

        running = httpx.get(ui.url + "/sglab/result.json", timeout=10)
        assert running.status_code == 200
        assert running.json()["complete"] is False, "a run exported mid-test must be marked incomplete"

        assert httpx.post(ui.url + "/stop", headers=REST_HEADERS, timeout=10).json()["success"]
        download = httpx.get(ui.url + "/sglab/result.json", timeout=10)
        assert download.status_code == 200
        assert "attachment" in download.headers["content-disposition"]
        saved = tmp_path / "downloaded.json"
        saved.write_text(download.text)

        result = load_result(saved)
        assert result.kind == "interactive" and result.complete and result.stack == STACK
        assert result.target.kind == "sim"
        assert [a.name for a in result.arms] == ["baseline", "candidate"]
        assert all(a.live_flags_checked and not a.live_mismatches for a in result.arms)
        level = result.level(1)
        assert level is not None and set(level.arms) == {"baseline", "candidate"}
        assert len({r.round_index for r in level.rounds}) >= 2
        assert all(r.round_index >= 0 for r in level.rounds)
        assert any(r.warmup for r in level.requests), "the first requests are warm-up, as in sglab bench"
        assert level.arms["candidate"].accept_length.server_mean > 1.0
        assert level.arms["baseline"].accept_length is None
        # sglab compare and sglab report take it like any other result
        assert main(["compare", str(saved)]) == 0
        assert main(["report", str(saved), "--out", str(tmp_path / "report")]) == 0
        assert (tmp_path / "report" / "report.html").is_file()
        verdict = judge(result)
        assert verdict.outcome in ("promote", "reject", "inconclusive")
        assert result.verdict is not None and result.verdict.outcome == verdict.outcome

        # the stopped test was also saved under results/<stack>/<run-id>/, never overwritten
        runs = wait_until(lambda: list_runs(STACK, ui.results_dir), 10, "the saved interactive run")
        stored = load_result(runs[-1])
        assert stored.run_id == result.run_id and stored.kind == "interactive"
        assert json.loads(saved.read_text())["run_id"] == stored.run_id

    # Ctrl-C: the launcher stopped both simulators on exit
    assert ui.process.returncode is not None
    for url in ui.arm_urls.values():
        with pytest.raises(httpx.HTTPError):
            httpx.get(url + "/health", timeout=2)


def test_existing_urls_mode_uses_given_servers(tmp_path):
    """--baseline-url/--candidate-url: no simulators of its own; the form carries the given URLs."""
    from sglab.config import load_stack
    from sglab.config.arms import baseline_arm, candidate_arm
    from sglab.load.targets import start_sims

    config = load_stack(STACK).config
    with start_sims([baseline_arm(config), candidate_arm(config)], log_dir=tmp_path) as targets:
        urls = targets.urls
        with sglab_ui(tmp_path, "--baseline-url", urls["baseline"], "--candidate-url", urls["candidate"]) as ui:
            assert ui.arm_urls == urls and "starting simulators" not in ui.log(), ui.log()
            page = httpx.get(ui.url + "/", timeout=10).text
            assert urls["baseline"] in page and urls["candidate"] in page
            assert httpx.post(ui.url + "/swarm", data={"user_count": 2, "spawn_rate": 2}, headers=REST_HEADERS,
                              timeout=10).json()["success"]
            rows = wait_until(lambda: (r := ab_rows(_stats(ui.url))).get("candidate") and r, 60,
                              "candidate samples", 1.0)
            assert rows["candidate"]["decode_tok_s"] > 0
            before = httpx.get(ui.url + "/sglab/result.json", timeout=10).json()["run_id"]
            # Locust's RESET button
            assert httpx.post(ui.url + "/stats/reset", headers=REST_HEADERS, timeout=10).status_code == 200
            after = httpx.get(ui.url + "/sglab/result.json", timeout=10).json()
            assert after["run_id"] != before and sum(len(lv["requests"]) for lv in after["levels"]) <= 2
        for url in urls.values():  # still ours, still up
            assert httpx.get(url + "/health", timeout=5).status_code == 200


def test_master_tab_collects_worker_samples(tmp_path):
    """Distributed mode (the cluster chart): users run on a worker, the master's A/B tab sees their samples."""
    from sglab.config import load_stack
    from sglab.config.arms import baseline_arm, candidate_arm
    from sglab.load.targets import start_sims

    from .harness import free_port, locust_worker, plain_locust

    config = load_stack(STACK).config
    master_port = free_port()
    with start_sims([baseline_arm(config), candidate_arm(config)], log_dir=tmp_path) as targets:
        urls = targets.urls
        with plain_locust(tmp_path, "--master", "--master-bind-host", "127.0.0.1", "--master-bind-port",
                          str(master_port), "--baseline-url", urls["baseline"], "--candidate-url", urls["candidate"],
                          "--stack", STACK) as master:
            with locust_worker(tmp_path, master_port):
                wait_until(lambda: _stats(master.url).get("worker_count") == 1, 60, "the worker to connect")
                assert httpx.post(master.url + "/swarm", data={"user_count": 2, "spawn_rate": 2},
                                  headers=REST_HEADERS, timeout=10).json()["success"]
                rows = wait_until(lambda: (r := ab_rows(_stats(master.url))).get("baseline")
                                  and r.get("candidate") and r, 60, "worker samples in the master's tab", 1.0)
                assert rows["baseline"]["decode_tok_s"] > 0 and rows["candidate"]["decode_tok_s"] > 0
                assert rows["baseline"]["users"] == 1 and rows["candidate"]["users"] == 1
                assert rows["candidate"]["accept_client"] > 1.0 and rows["baseline"]["accept_client"] is None


def test_category_tab_over_http_with_suite_prompts(tmp_path):
    """A stack on the bundled suite (two categories): /stats/requests carries the per-category table, each
    category with its gain interval and the candidate's accept length, as the downloaded result's verdict says."""
    from ruamel.yaml import YAML

    from sglab.core.paths import project_root

    yaml = YAML()
    doc = yaml.load((project_root() / "stacks" / f"Pulumi.{STACK}.yaml").read_text())
    doc["config"]["sglab:load"] = {"prompts": {"source": "suite", "categories": "code,chat"}}
    (tmp_path / "stacks").mkdir()
    with open(tmp_path / "stacks" / "Pulumi.ui-suite.yaml", "w") as fh:
        yaml.dump(doc, fh)
    env = {"SGLAB_STACKS_DIR": str(tmp_path / "stacks")}
    with sglab_ui(tmp_path, "--target", "sim", "--stack", "ui-suite", env=env) as ui:
        started = httpx.post(ui.url + "/swarm", data={"user_count": 4, "spawn_rate": 4}, headers=REST_HEADERS,
                             timeout=10).json()
        assert started["success"], started

        def both_categories_with_intervals():
            tables = {e["key"]: e["data"] for e in _stats(ui.url).get("extended_stats", [])}
            rows = {r["category"]: r for r in tables.get("sglab-ab-categories", [])}
            ready = set(rows) == {"chat", "code"} and all(r["rounds"] >= 2 for r in rows.values())
            return rows if ready else None

        rows = wait_until(both_categories_with_intervals, 120, "per-category gains with intervals", 1.0)
        for row in rows.values():
            assert "[" in row["gain"] and "n/a" not in row["gain"] and row["accept_length"] is not None
            assert float(row["accept_length"].split()[0]) > 1.0
            baseline, candidate = (int(n) for n in row["requests"].split(" / "))
            assert baseline > 0 and candidate > 0
        assert httpx.post(ui.url + "/stop", headers=REST_HEADERS, timeout=10).json()["success"]
        result = load_result_text(httpx.get(ui.url + "/sglab/result.json", timeout=10).text, tmp_path)
        categories = {c.category for c in judge(result).categories}
        assert categories == {"chat", "code"}
        assert {s.category for s in result.level(result.levels[0].concurrency).requests} == {"chat", "code"}


def load_result_text(text: str, tmp_path):
    path = tmp_path / "downloaded.json"
    path.write_text(text)
    return load_result(path)
