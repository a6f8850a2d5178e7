"""A result sealed with this machine's HMAC key cannot be rewritten and re-sealed with a plain SHA-256 digest
and still promote: a plain seal is evidence only as the cluster's record (pulled from the benchmark Job's
ConfigMap and unchanged since) or on an explicit, logged `--accept-unkeyed-seal`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from kubernetes import client

from sglab.cli import main
from sglab.promotion.promote import PromotionRefused, promote
from sglab.results import integrity
from sglab.results.pull import PROVENANCE_FILE, group_parts, parse_result, store_pulled
from sglab.schema.result import RunResult
from sglab.results.sink import INDEX, PART, PART_ANNOTATION, PAYLOAD_KEY, RESULT_LABEL, encode_result, part_names
from sglab.results.store import load_result, write_json_atomic

from .test_promote import bench, point_cli_at, root  # noqa: F401  (the fixture)

STACK = "eagle-nccl-ll"
PRODUCTION = "Pulumi.production.yaml"


def downgrade(run_dir: Path, change=lambda d: None) -> None:
    """Rewrite result.json and re-seal it with a plain SHA-256, as anyone who can write results/ can."""
    path = run_dir / "result.json"
    data = json.loads(path.read_text())
    change(data)
    data = integrity.seal(RunResult.model_validate(data), key=None).model_dump(mode="json")
    write_json_atomic(path, data, overwrite=True)


def refusal(root: Path, **kw) -> PromotionRefused:  # noqa: F811
    before = (root / "stacks" / PRODUCTION).read_bytes()
    with pytest.raises(PromotionRefused) as info:
        promote(STACK, root=root, **kw)
    assert (root / "stacks" / PRODUCTION).read_bytes() == before
    assert not (root / "stacks" / "promotions.jsonl").exists()
    return info.value


def raise_gain(data: dict) -> None:
    """A self-consistent edit: every decode rate of the candidate arm up 1% (rounds and samples alike)."""
    for level in data["levels"]:
        for rnd in level["rounds"]:
            if rnd["arm"] == "candidate":
                rnd["decode_tok_per_s_mean"] *= 1.01


def test_a_hmac_result_resealed_with_sha256_is_refused_naming_file_reason_and_fix(root: Path) -> None:  # noqa: F811
    run_dir = bench(root, STACK)
    assert load_result(run_dir).integrity.algorithm == "hmac-sha256"
    downgrade(run_dir, raise_gain)
    assert integrity.verify(load_result(run_dir)) is None  # the plain digest itself holds
    found = refusal(root)
    assert str(run_dir / "result.json") in found.why
    assert "plain SHA-256" in found.why and "HMAC" in found.why
    assert "--accept-unkeyed-seal" in found.fix and f"sglab bench --stack {STACK}" in found.fix
    assert "sglab results pull" in found.fix
    with pytest.raises(PromotionRefused):
        promote(STACK, root=root, dry_run=True)


def test_the_cli_refuses_with_exit_2_and_the_opt_in_is_printed_and_logged(root: Path, capsys,  # noqa: F811
                                                                          monkeypatch) -> None:
    run_dir = bench(root, STACK)
    downgrade(run_dir)
    point_cli_at(monkeypatch, root)
    assert main(["promote", "--stack", STACK]) == 2
    err = capsys.readouterr().err
    assert err.startswith("refused: ") and "result.json" in err and "fix:" in err and "Traceback" not in err
    digest = load_result(run_dir).integrity.digest
    assert main(["promote", "--stack", STACK, "--accept-unkeyed-seal"]) == 0
    out = capsys.readouterr().out
    assert "--accept-unkeyed-seal" in out and digest in out
    (entry,) = [json.loads(line) for line in (root / "stacks" / "promotions.jsonl").read_text().splitlines()]
    assert entry["integrity"]["algorithm"] == "sha256" and entry["integrity"]["digest"] == digest
    assert entry["seal"]["accepted"] == "unkeyed-opt-in"


def test_a_legit_hmac_result_still_promotes_and_logs_how_its_seal_was_accepted(root: Path) -> None:  # noqa: F811
    bench(root, STACK)
    done = promote(STACK, root=root)
    assert done.written and done.log_entry["seal"]["accepted"] == "hmac"


def configmaps(name: str, result_json: str) -> list[client.V1ConfigMap]:
    """What the benchmark Job leaves: the index ConfigMap and its parts."""
    encoded = encode_result(result_json)
    labels = {"sglab/stack": STACK}
    return [client.V1ConfigMap(
        metadata=client.V1ObjectMeta(name=part, labels={**labels, RESULT_LABEL: INDEX if i == 0 else PART},
                                     annotations={**encoded.annotations, PART_ANNOTATION: str(i)}),
        binary_data={PAYLOAD_KEY: encoded.parts[i]}) for i, part in enumerate(part_names(name, len(encoded.parts)))]


def _pull(root: Path, run_dir: Path) -> Path:  # noqa: F811
    """Seal the run as the Job's keyless pod does, store it in ConfigMaps, and pull it into a fresh results/."""
    data = json.loads((run_dir / "result.json").read_text())
    text = integrity.seal(RunResult.model_validate(data), key=None).model_dump_json()
    (parts,) = group_parts(configmaps("sglab-result-1", text))
    pulled = root / "pulled"
    report = store_pulled([parse_result(parts, STACK)], STACK, pulled, namespace="sglab-test")
    (written,) = report.written
    return written.parent


def test_a_result_pulled_from_the_cluster_record_promotes_and_logs_its_configmap(root: Path) -> None:  # noqa: F811
    pulled_dir = _pull(root, bench(root, STACK))
    assert (pulled_dir / PROVENANCE_FILE).is_file()
    done = promote(STACK, root=root, result_path=pulled_dir)
    seal = done.log_entry["seal"]
    assert seal["accepted"] == "cluster-record"
    assert seal["configmap"] == "sglab-result-1" and seal["namespace"] == "sglab-test"


def test_a_pulled_result_rewritten_after_the_pull_is_refused(root: Path) -> None:  # noqa: F811
    pulled_dir = _pull(root, bench(root, STACK))
    downgrade(pulled_dir, raise_gain)
    found = refusal(root, result_path=pulled_dir)
    assert "changed since it was pulled" in found.why and "sglab-result-1" in found.why


def test_a_forged_pull_record_is_refused(root: Path) -> None:  # noqa: F811
    pulled_dir = _pull(root, bench(root, STACK))
    downgrade(pulled_dir, raise_gain)
    record = json.loads((pulled_dir / PROVENANCE_FILE).read_text())
    result_bytes = (pulled_dir / "result.json").read_bytes()
    import hashlib

    record["result_sha256"] = hashlib.sha256(result_bytes).hexdigest()
    record["digest"] = load_result(pulled_dir).integrity.digest
    (pulled_dir / PROVENANCE_FILE).write_text(json.dumps(record))
    found = refusal(root, result_path=pulled_dir)
    assert PROVENANCE_FILE in found.why and "not signed" in found.why
