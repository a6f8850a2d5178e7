"""One SGLang version, declared once (sglab/sglang/flags.py), named the same everywhere; flags checked against
the image's own release by `sglab validate`."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from sglab.config import load_stack
from sglab.core.errors import ConfigError
from sglab.config.stack import StackConfig
from sglab.core.paths import list_stacks, project_root
from sglab.sglang.flags import DEFAULT_IMAGE, SGLANG_VERSION, parse_image
from sglab.sim.profile import SimProfile

ROOT = project_root()
DIGEST = "sha256:" + "0123456789abcdef" * 4


def test_the_chart_the_config_default_the_simulator_and_the_stacks_name_the_pinned_version() -> None:
    yaml = YAML(typ="safe")
    chart = yaml.load((ROOT / "charts" / "sglang-server" / "Chart.yaml").read_text())
    values = yaml.load((ROOT / "charts" / "sglang-server" / "values.yaml").read_text())
    assert chart["appVersion"] == SGLANG_VERSION
    assert values["image"]["name"] == DEFAULT_IMAGE
    assert StackConfig.model_fields["image"].default == DEFAULT_IMAGE
    assert SimProfile().version == SGLANG_VERSION
    for name in list_stacks():
        config = load_stack(name).config
        if config.backend == "sglang":
            assert parse_image(config.image).version == SGLANG_VERSION, name


def test_no_current_file_names_another_sglang_release() -> None:
    """`0.5.3` (the image the stacks used to run) survives only as history, in sentences that say so."""
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    stale = []
    for rel in tracked.split():
        path = ROOT / rel
        if path.suffix not in (".py", ".md", ".yaml", ".yml", ".toml", ".txt", ".json", ".tpl", ".sh") or \
                not path.is_file():
            continue
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            if re.search(r"0\.5\.3(?!\d)", line) and not re.search(r"history|used to|older|old image|since|until|"
                                                                    r"wheel|OLDEST|oldest|v0\.5\.3-cu129|0\.5\.3\.post",
                                                                    line, re.IGNORECASE):
                stale.append(f"{rel}:{number}: {line.strip()}")
    assert not stale, "\n".join(stale)


@pytest.mark.parametrize("image, version", [
    ("lmsysorg/sglang:v0.5.23", "0.5.23"), (f"lmsysorg/sglang:v0.5.23@{DIGEST}", "0.5.23"),
    ("lmsysorg/sglang:v0.5.3-cu129", "0.5.3"), ("docker.io/lmsysorg/sglang:v0.5.3.post1-cu129-amd64", "0.5.3.post1"),
    (f"lmsysorg/sglang@{DIGEST}", None), ("lmsysorg/sglang:latest", None), ("registry.local/sglang:v0.5.23", None),
])
def test_an_image_reference_says_its_release_when_its_tag_does(image: str, version: str | None) -> None:
    assert parse_image(image).version == version


@pytest.mark.parametrize("image", ["lmsysorg/sglang:v0.5.23@sha256:abc", "LMSYS/sglang:v1", "a b", ""])
def test_a_malformed_image_is_refused(image: str) -> None:
    with pytest.raises(ValueError):
        parse_image(image)


def _stack(root: Path, image: str, extra_args: list[str] | None = None, confound_image: str | None = None) -> Path:
    yaml = YAML()
    doc = yaml.load((ROOT / "stacks" / "Pulumi.eagle-nccl-ll.yaml").read_text())
    doc["config"]["sglab:image"] = image
    if extra_args is not None:  # --speculative-* flags belong to the speculative block (sglab/config/server.py)
        doc["config"]["sglab:candidate"]["speculative"]["extra-args"] = extra_args
    if confound_image is not None:
        doc["config"]["sglab:candidate"]["confounds"] = {"image": confound_image}
    (root / "stacks").mkdir(exist_ok=True)
    with (root / "stacks" / "Pulumi.t.yaml").open("w") as handle:
        yaml.dump(doc, handle)
    (root / "Pulumi.yaml").write_text("name: sglab\nruntime: python\n")
    return root


def test_speculative_adaptive_on_an_image_older_than_its_release_fails_validate_naming_the_image(tmp_path) -> None:
    root = _stack(tmp_path, "lmsysorg/sglang:v0.5.3-cu129", ["--speculative-adaptive"])
    with pytest.raises(ConfigError) as err:
        load_stack("t", root)
    text = str(err.value)
    assert err.value.key == "sglab:image"
    assert "lmsysorg/sglang:v0.5.3-cu129 is SGLang 0.5.3" in text and "--speculative-adaptive (SGLang 0.5.11" in text
    assert DEFAULT_IMAGE in text  # the fix: the pinned image


def test_the_same_flag_on_an_image_of_its_release_validates(tmp_path) -> None:
    load_stack("t", _stack(tmp_path, "lmsysorg/sglang:v0.5.11-cu129", ["--speculative-adaptive-config", "/x"]))


def test_a_candidate_image_is_checked_with_the_candidates_own_flags(tmp_path) -> None:
    root = _stack(tmp_path, DEFAULT_IMAGE, confound_image="lmsysorg/sglang:v0.5.10")
    loaded = load_stack("t", root)  # EAGLE3 and the shape flags are older than 0.5.10: only a warning
    assert any("candidate.confounds.image lmsysorg/sglang:v0.5.10 is SGLang 0.5.10" in w for w in loaded.warnings)


def test_an_algorithm_newer_than_the_image_is_refused(tmp_path) -> None:
    yaml = YAML()
    root = _stack(tmp_path, "lmsysorg/sglang:v0.5.15")
    path = root / "stacks" / "Pulumi.t.yaml"
    doc = yaml.load(path.read_text())
    doc["config"]["sglab:candidate"]["speculative"] = {"algorithm": "DSPARK", "dspark-block-size": 7}
    with path.open("w") as handle:
        yaml.dump(doc, handle)
    with pytest.raises(ConfigError) as err:
        load_stack("t", root)
    assert "--speculative-algorithm DSPARK (SGLang 0.5.16 and later)" in str(err.value)


@pytest.mark.parametrize("image, words", [
    (f"lmsysorg/sglang@{DIGEST}", "names no SGLang release sglab can read"),
    ("my.registry/team/sglang:prod", "names no SGLang release sglab can read"),
    ("lmsysorg/sglang:v0.5.99", "newer than 0.5.23"),
    ("lmsysorg/sglang:v0.5.3-cu129", "sglab checked only for flags added after it"),
])
def test_an_image_sglab_cannot_check_fully_is_a_warning_naming_it(tmp_path, image: str, words: str) -> None:
    loaded = load_stack("t", _stack(tmp_path, image))
    assert [w for w in loaded.warnings if image in w and words in w], loaded.warnings


def test_the_pinned_image_with_a_digest_is_silent(tmp_path) -> None:
    loaded = load_stack("t", _stack(tmp_path, f"{DEFAULT_IMAGE}@{DIGEST}"))
    assert loaded.warnings == []
