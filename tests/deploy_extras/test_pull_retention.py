"""Results retention: `sglab results pull` moves runs out of the cluster, keeping the newest
`benchmark-job.keep-results` there; a run is deleted from the cluster only once it is on disk as pulled."""

from __future__ import annotations

import json

from sglab.cli import main as sglab
from sglab.config.loader import load_stack

from .fake_api import FakeConfigMapApi
from .results_fixtures import judged_result
from .test_pull import configmaps, manifest

STACK = "eagle-nccl-ll"
NS = "sglab-eagle-nccl-ll"


def seed(api: FakeConfigMapApi, count: int) -> list:
    runs = [judged_result(run_id=f"20260101T00000{i}Z-aaaaa{i}", seed=i) for i in range(count)]
    for i, run in enumerate(runs):
        for cm in configmaps(f"sglab-result-{i}", run.model_dump_json()):
            document = manifest(cm)
            document["metadata"]["creationTimestamp"] = f"2026-01-01T00:00:0{i}Z"  # oldest first
            api.add(NS, document)
    return runs


def result_names(api: FakeConfigMapApi) -> list[str]:
    return sorted(name for (_, name), cm in api.configmaps.items() if "sglab/result" in cm["metadata"]["labels"])


def test_pull_moves_all_but_the_newest_runs_out_of_the_cluster(tmp_path, capsys):
    assert load_stack(STACK).config.benchmark_job.keep_results == 10
    with FakeConfigMapApi() as api:
        runs = seed(api, 4)
        kubeconfig = str(api.kubeconfig(tmp_path / "kubeconfig"))
        out = tmp_path / "results"
        argv = ["results", "pull", "--stack", STACK, "--kubeconfig", kubeconfig, "--out", str(out), "--keep", "2"]
        assert sglab(argv) == 0
        left = result_names(api)
    printed = capsys.readouterr().out
    assert left == ["sglab-result-2", "sglab-result-3"]  # the newest two stay (the outputs read them back)
    for run in runs:  # every run is home, the moved ones included
        assert json.loads((out / STACK / run.run_id / "result.json").read_text()) == run.model_dump(mode="json")
    assert f"moved out of the cluster: {runs[0].run_id}" in printed and runs[3].run_id not in printed.split(
        "moved out")[-1]


def test_a_run_that_is_not_home_is_never_deleted(tmp_path, capsys):
    with FakeConfigMapApi() as api:
        runs = seed(api, 3)
        kubeconfig = str(api.kubeconfig(tmp_path / "kubeconfig"))
        out = tmp_path / "results"
        clash = out / STACK / runs[0].run_id / "result.json"  # another file with that run id: a conflict
        clash.parent.mkdir(parents=True)
        clash.write_text(judged_result(run_id=runs[0].run_id, seed=9).model_dump_json())
        assert sglab(["results", "pull", "--stack", STACK, "--kubeconfig", kubeconfig, "--out", str(out),
                      "--keep", "1"]) == 0
        left = result_names(api)
    assert left == ["sglab-result-0", "sglab-result-2"]
    assert f"left in the cluster: {runs[0].run_id}" in capsys.readouterr().out


def test_keep_all_deletes_nothing(tmp_path):
    with FakeConfigMapApi() as api:
        seed(api, 3)
        kubeconfig = str(api.kubeconfig(tmp_path / "kubeconfig"))
        assert sglab(["results", "pull", "--stack", STACK, "--kubeconfig", kubeconfig, "--out", str(tmp_path / "r"),
                      "--keep", "all"]) == 0
        assert len(result_names(api)) == 3
        assert [m for m, *_ in api.requests] == ["GET"] * len(api.requests)


def test_a_sweeps_calibration_step_is_never_moved_out_while_its_waves_read_it(tmp_path):
    """A cluster sweep's waves read the calibration step's result ConfigMaps (docs/sweep.md, "The slot nodes,
    calibrated"): retention spares the run the stack names in sweep.calibration-run, however old."""
    from sglab.deploy.pull import prune_results, pull_report

    with FakeConfigMapApi() as api:
        runs = seed(api, 4)
        out = tmp_path / "results"
        report = pull_report(STACK, namespace=NS, base=out, core_api=api.core_api())
        pruned = prune_results(STACK, 1, report=report, namespace=NS, base=out, core_api=api.core_api(),
                               spare={runs[0].run_id})
        left = result_names(api)
    assert left == ["sglab-result-0", "sglab-result-3"]
    assert runs[0].run_id in pruned.kept and [r for r, _ in pruned.deleted] == [runs[2].run_id, runs[1].run_id]
