"""Promotion checks what produced its evidence: simulator evidence never changes a GPU stack, real-server evidence
never a simulator stack, the whole launch must match, and the evidence is the stack's own and the target another
file."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from sglab.analysis.provenance import producer_of
from sglab.promotion.promote import PromotionRefused, promote
from sglab.core.paths import project_root
from sglab.results.store import load_result, write_result

from tests.promote.test_promote import bench, root  # noqa: F401  (fixture)

STACK = "eagle-nccl-ll"


def production(root: Path) -> Path:  # noqa: F811
    return root / "stacks" / "Pulumi.production.yaml"


def refused(root: Path, stack: str = STACK, **kw) -> PromotionRefused:  # noqa: F811
    target = kw.get("target", "production")
    path = root / "stacks" / f"Pulumi.{target}.yaml"
    before = path.read_bytes() if path.exists() else None
    with pytest.raises(PromotionRefused) as info:
        promote(stack, root=root, **kw)
    assert (path.read_bytes() if path.exists() else None) == before
    assert not (root / "stacks" / "promotions.jsonl").exists()
    return info.value


def sim_stacks(root: Path, *, gpus: int = 0) -> None:  # noqa: F811
    """The shipped `sim` stack and a simulator 'production' of it (same launch, its own namespace)."""
    shutil.copy(project_root() / "stacks" / "Pulumi.sim.yaml", root / "stacks")
    text = (root / "stacks" / "Pulumi.sim.yaml").read_text().replace("sglab:namespace: sglab-sim",
                                                                    "sglab:namespace: sglab-sim-prod")
    text = text.replace("num-steps: 2", "num-steps: 3").replace("num-draft-tokens: 3", "num-draft-tokens: 4")
    (root / "stacks" / "Pulumi.sim-prod.yaml").write_text(text.replace("gpus-per-node: 0", f"gpus-per-node: {gpus}"))


def test_simulator_evidence_never_changes_a_gpu_stack(root: Path) -> None:  # noqa: F811
    bench(root, STACK, producer="simulator")
    why = refused(root)
    assert "comes from simulators" in why.why and "the production stack runs SGLang on GPUs" in why.why
    assert "pulumi up --stack eagle-nccl-ll" in why.fix and "sglab results pull --stack eagle-nccl-ll" in why.fix
    assert "--baseline-url" in why.fix


def test_a_dry_run_refuses_it_too(root: Path) -> None:  # noqa: F811
    bench(root, STACK, producer="simulator")
    assert "comes from simulators" in refused(root, dry_run=True).why


def test_real_server_evidence_promotes_and_the_log_says_what_produced_it(root: Path) -> None:  # noqa: F811
    bench(root, STACK)
    done = promote(STACK, root=root)
    assert done.written and done.log_entry["producer"]["kind"] == "sglang"
    entry = json.loads(done.log_path.read_text().splitlines()[-1])
    assert entry["producer"] == {"kind": "sglang", "time_scale": None, "versions": ["synthetic"],
                                 "why": "as their /get_server_info says"}


@pytest.mark.parametrize("producer", ["simulator", "sglang"])
def test_backend_sim_in_the_target_lets_nothing_through(root: Path, producer: str) -> None:  # noqa: F811
    """The issue's hole: `sglab:backend: sim` in production made it run `sglab sim` after a promotion."""
    path = production(root)
    path.write_text(path.read_text().replace("  sglab:namespace: sglab-production\n",
                                             "  sglab:namespace: sglab-production\n  sglab:backend: sim\n"))
    bench(root, STACK, producer=producer)
    why = refused(root)
    assert "backend sim" in why.why and "backend sglang" in why.why and "sglab:backend" in why.fix


def test_simulator_evidence_promotes_into_a_simulator_stack(root: Path) -> None:  # noqa: F811
    sim_stacks(root)
    bench(root, "sim")
    done = promote("sim", target="sim-prod", root=root)
    assert done.written and done.log_entry["producer"]["kind"] == "simulator"
    assert done.log_entry["producer"]["time_scale"] == 1.0


def test_a_simulator_stack_that_requests_gpus_is_a_gpu_config(root: Path) -> None:  # noqa: F811
    sim_stacks(root, gpus=8)
    bench(root, "sim")
    why = refused(root, "sim", target="sim-prod")
    assert "requests 8 GPUs per node" in why.why and "GPU config" in why.why and "pulumi up --stack sim" in why.fix


def test_real_server_evidence_does_not_promote_into_a_simulator_stack(root: Path) -> None:  # noqa: F811
    sim_stacks(root)
    bench(root, "sim", producer="sglang")
    assert "sglab:backend: sim" in refused(root, "sim", target="sim-prod").why


def _rewrite(run_dir: Path, change) -> None:
    """Edit a stored result and seal it again under the (test) key, as someone who holds it could."""
    result = load_result(run_dir)
    change(result)
    write_result(result, run_dir, overwrite=True)  # sealed again on save


# (1e300 and NaN do not get this far: the result reader refuses numbers beyond +-2**53 and non-finite ones.)
@pytest.mark.parametrize("scale, words", [(50.0, "0.25 to 10"), (10.5, "0.25 to 10"), (0.01, "0.25 to 10"),
                                          (5.0, "16 concurrent streams")])
def test_a_time_scale_the_simulator_does_not_model_faithfully_is_refused(root: Path, scale: float,  # noqa: F811
                                                                         words: str) -> None:
    """5x is in the range, but not for 16 closed-loop streams (80 > 48)."""
    sim_stacks(root)
    run_dir = bench(root, "sim")

    def fast(result):
        result.target.time_scale = scale
        result.levels[-1].concurrency = 16
    _rewrite(run_dir, fast)
    why = refused(root, "sim", target="sim-prod")
    assert "time scale" in why.why and words in why.why and "within that range" in why.fix


def test_an_old_result_without_a_producer_is_refused_for_a_gpu_stack(root: Path) -> None:  # noqa: F811
    """Files written before the machine was recorded: against URLs the producer is unknown, and unknown is not
    real SGLang."""
    run_dir = bench(root, STACK)

    def old(result):
        for info in result.arms:
            info.machine = None
    _rewrite(run_dir, old)
    assert producer_of(load_result(run_dir)).kind == "unknown"
    why = refused(root)
    assert "does not record what served it" in why.why and "pulumi up --stack eagle-nccl-ll" in why.fix


def test_the_targets_hf_token_is_part_of_the_launch(root: Path) -> None:  # noqa: F811
    source = root / "stacks" / f"Pulumi.{STACK}.yaml"
    source.write_text(source.read_text().replace("  sglab:env:\n", "  sglab:hf-token:\n    secure: v1:abc\n"
                                                 "  sglab:env:\n", 1))
    bench(root, STACK)
    why = refused(root)
    assert "secret references" in why.why and "['HF_TOKEN']" in why.why and "sglab:hf-token" in why.fix
    target = production(root)
    target.write_text(target.read_text().replace("  sglab:env:\n", "  sglab:hf-token:\n    secure: v1:def\n"
                                                 "  sglab:env:\n", 1))
    assert promote(STACK, root=root).written


def test_without_result_a_run_copied_from_another_stack_is_refused(root: Path) -> None:  # noqa: F811
    """Same stack file under another name: its run, copied into eagle-nccl-ll's results/, is still its run."""
    shutil.copy(root / "stacks" / f"Pulumi.{STACK}.yaml", root / "stacks" / "Pulumi.twin.yaml")
    run_dir = bench(root, "twin")
    copied = root / "results" / STACK / run_dir.name
    shutil.copytree(run_dir, copied)
    why = refused(root)
    assert "a result of stack 'twin', not 'eagle-nccl-ll'" in why.why and str(copied) in why.why
    assert "promote --stack twin" in why.fix


@pytest.mark.parametrize("alias", ["symlink", "hardlink"])
def test_the_target_may_not_be_an_alias_of_the_source(root: Path, alias: str) -> None:  # noqa: F811
    bench(root, STACK)
    source = root / "stacks" / f"Pulumi.{STACK}.yaml"
    link = root / "stacks" / "Pulumi.prod2.yaml"
    if alias == "symlink":
        link.symlink_to(source.name)
    else:
        os.link(source, link)
    before = source.read_bytes()
    with pytest.raises(PromotionRefused) as info:
        promote(STACK, target="prod2", root=root)
    assert "is the stack being promoted" in info.value.why and "Pulumi.prod2.yaml is Pulumi.eagle-nccl-ll.yaml" in \
        info.value.why
    assert source.read_bytes() == before
