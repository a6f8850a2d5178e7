"""The Job's store step and the pull: through the real kubernetes client against a loopback ConfigMap API."""

from __future__ import annotations

import json

from deploy_extras.fake_api import FakeConfigMapApi

from sglab.config.loader import load_stack
from sglab.probe.job import probe_plan
from sglab.deploy.pull import pull_report
from sglab.probe.result import load_probe, to_json
from sglab.probe.store import PROBE_RESULT_PARTS, fitting_json, list_probes, pull_probe_results, store_to_configmap

from .helpers import probe_result, size, variant

STACK = "eagle-nccl-ll"
NAMESPACE = "sglab-eagle-nccl-ll"


def _result():
    return probe_result([variant("nccl-default", {}, [size(14336, 20.0, 0.5)]),
                         variant("arms", {"NCCL_PROTO": "LL"}, [size(14336, 15.0, 0.5)])])


def test_store_then_pull_round_trip_and_the_run_result_pull_passes_probes_by(tmp_path):
    result = _result()
    source = tmp_path / "probe.json"
    source.write_text(to_json(result))
    plan = probe_plan(load_stack(STACK).config, STACK)
    with FakeConfigMapApi() as api:
        for manifest in plan.access.result_configmaps:  # what the program pre-creates
            api.add(NAMESPACE, manifest)
        namespace = store_to_configmap(source, plan.names.result_configmap, NAMESPACE, core_api=api.core_api())
        assert namespace == NAMESPACE
        written = api.configmaps[(NAMESPACE, plan.names.result_configmap)]
        assert written["metadata"]["labels"]["sglab/result"] == "nccl-probe"  # the label survives the update
        assert not [m for m, _, _ in api.requests if m == "POST"]  # only get + update, as the Role allows
        base = tmp_path / "results"
        kubeconfig = str(api.kubeconfig(tmp_path / "kubeconfig"))
        report = pull_probe_results(STACK, kubeconfig=kubeconfig, base=base)
        again = pull_probe_results(STACK, kubeconfig=kubeconfig, base=base)
        runs = pull_report(STACK, kubeconfig=kubeconfig, base=base)
    (path,) = report.written
    assert path == base / STACK / result.run_id / "probe.json"
    assert load_probe(path) == result and list_probes(STACK, base) == [path.parent]
    assert again.written == [] and again.unchanged == [path]
    assert runs.rejected == [] and runs.written == []  # `sglab results pull`'s RunResult reader leaves it alone


def test_a_probe_of_another_stack_or_a_broken_payload_is_rejected(tmp_path):
    other = _result().model_copy(update={"stack": "eagle-default"})
    plan = probe_plan(load_stack(STACK).config, STACK)
    with FakeConfigMapApi() as api:
        for manifest in plan.access.result_configmaps:
            api.add(NAMESPACE, manifest)
        source = tmp_path / "probe.json"
        source.write_text(to_json(other))
        store_to_configmap(source, plan.names.result_configmap, NAMESPACE, core_api=api.core_api())
        report = pull_probe_results(STACK, kubeconfig=str(api.kubeconfig(tmp_path / "k")), base=tmp_path / "r")
    assert report.written == [] and "not 'eagle-nccl-ll'" in report.rejected[0]


def test_a_result_too_big_for_the_configmaps_drops_its_raw_samples():
    big = probe_result([variant("nccl-default", {}, [size(2 ** i, 20.0, 0.5) for i in range(4, 40)])])
    import random

    rng = random.Random(1)
    for s in big.variants[0].sizes:
        s.times_us = [rng.random() for _ in range(20000)]
    text = fitting_json(big)
    document = json.loads(text)
    assert all(s["times_us"] == [] for s in document["variants"][0]["sizes"])
    assert document["variants"][0]["sizes"][0]["median_us"] == 20.0
    from sglab.results.sink import encode_result

    assert len(encode_result(text).parts) <= PROBE_RESULT_PARTS
    small = _result()
    assert json.loads(fitting_json(small)) == json.loads(to_json(small))


def test_sglab_results_pull_brings_probe_results_too(tmp_path, capsys):
    from sglab.cli import main as sglab

    result = _result()
    source = tmp_path / "probe.json"
    source.write_text(to_json(result))
    plan = probe_plan(load_stack(STACK).config, STACK)
    out = tmp_path / "r"
    with FakeConfigMapApi() as api:
        for manifest in plan.access.result_configmaps:
            api.add(NAMESPACE, manifest)
        kubeconfig = str(api.kubeconfig(tmp_path / "kubeconfig"))
        argv = ["results", "pull", "--stack", STACK, "--kubeconfig", kubeconfig, "--out", str(out)]
        assert sglab(argv) == 0  # the Job has not written yet: nothing to pull
        assert "nothing new to pull" in capsys.readouterr().out
        store_to_configmap(source, plan.names.result_configmap, NAMESPACE, core_api=api.core_api())
        assert sglab(argv) == 0
        first = capsys.readouterr().out
        assert sglab(argv) == 0
        second = capsys.readouterr().out
    target = out / STACK / result.run_id / "probe.json"
    assert f"pulled probe: {target}" in first and "nothing new" not in first
    assert load_probe(target) == result
    assert "nothing new to pull" in second and "pulled" not in second
