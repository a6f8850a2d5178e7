"""`sglab canary` / `sglab watch` on bad input, the Prometheus client against a real Prometheus, the spec's trip
into the cluster, and which configs a rehearsal compares by default."""

from __future__ import annotations

import json
import shutil
import time

import pytest

from sglab.serving.prometheus import Prometheus, PrometheusError, PrometheusServer, prometheus_binary, selector
from sglab.serving.rehearsal import default_revisions
from sglab.serving.spec import SPEC_ENV, spec_from_env, stack_judge_spec
from sglab.cli import main
from sglab.config import candidate_arm, load_stack
from sglab.core.errors import ConfigError
from sglab.core.children import free_port
from sglab.core.paths import stacks_dir


@pytest.fixture(scope="module")
def prometheus():
    prometheus_binary()
    with PrometheusServer([], interval_s=1.0) as server:
        yield server


def test_the_client_reads_a_real_prometheus_and_names_its_refusals(prometheus):
    with Prometheus(prometheus.url) as prom:
        (series,) = prom.query("vector(1) * 3", time.time())
        assert series.samples[0][1] == 3.0
        ranged = prom.query_range("vector(2)", time.time() - 10, time.time(), 5)
        assert len(ranged[0].samples) >= 2
        assert prom.query(f"sglang:num_requests_total{selector({'namespace': 'x'})}", time.time()) == []
        with pytest.raises(PrometheusError, match="refused the query") as info:
            prom.query("sum(", time.time())
        assert "bad_data" in str(info.value)


def test_an_unreachable_prometheus_is_exit_2_with_the_fix(capsys):
    url = f"http://127.0.0.1:{free_port()}"
    assert main(["canary", "--stack", "production", "--prometheus-url", url, "--once"]) == 2
    err = capsys.readouterr().err
    assert "cannot reach Prometheus" in err and "port-forward" in err
    assert main(["watch", "--stack", "production", "--prometheus-url", url]) == 2


def test_a_stack_without_serving_is_refused(capsys):
    assert main(["canary", "--stack", "eagle-nccl-ll", "--once"]) == 2
    assert "no serving section" in capsys.readouterr().err


def test_the_spec_travels_as_json_and_a_bad_one_is_named():
    spec = stack_judge_spec(load_stack("production"))
    assert spec_from_env({SPEC_ENV: spec.to_env()}) == spec
    with pytest.raises(ConfigError, match="not set"):
        spec_from_env({})
    with pytest.raises(ConfigError, match="not a judge spec"):
        spec_from_env({SPEC_ENV: json.dumps({"stack": "x"})})
    assert main(["canary", "--from-env", "--once"]) == 2


def test_the_rehearsal_compares_the_config_before_the_newest_promotion(tmp_path, monkeypatch):
    from sglab.results.integrity import KEY_ENV
    from rollback.test_rollback import bench

    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv(KEY_ENV, "sglab-test-result-key")
    (tmp_path / "stacks").mkdir()
    for name in ("eagle-nccl-ll", "production"):
        shutil.copy(stacks_dir() / f"Pulumi.{name}.yaml", tmp_path / "stacks")
    before = load_stack("production", tmp_path)
    stable, canary = default_revisions(before, tmp_path)  # nothing promoted yet: the stack's own baseline
    assert stable.source == "production:baseline" and not stable.arm.speculative
    from sglab.promotion.promote import promote

    bench(tmp_path, "eagle-nccl-ll")
    promote("eagle-nccl-ll", root=tmp_path)
    after = load_stack("production", tmp_path)
    stable, canary = default_revisions(after, tmp_path)
    assert stable.arm.args == candidate_arm(before.config).args
    assert canary.arm.args == candidate_arm(load_stack("eagle-nccl-ll", tmp_path).config).args
    spec = stack_judge_spec(after)
    assert spec.break_even_accept_length is not None and "20260101T000000Z-aaaaaa" in spec.break_even_source


def test_bad_rehearsal_options(capsys):
    assert main(["canary", "--stack", "production", "--target", "sim", "--weight", "100"]) == 2
    assert "--weight" in capsys.readouterr().err
    assert main(["canary", "--stack", "production", "--target", "sim", "--stable", "production:nope"]) == 2
    assert "not an arm" in capsys.readouterr().err
    assert main(["canary", "--stack", "production", "--target", "sim", "--window-s", "0"]) == 2  # one line, exit 2
    assert "--window-s" in capsys.readouterr().err
    assert main(["watch", "--stack", "production", "--target", "sim", "--shift-to", "code", "--shift-share", "2"]) == 2
    assert "--shift-share" in capsys.readouterr().err
