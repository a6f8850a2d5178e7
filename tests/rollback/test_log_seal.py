"""The promotion log is evidence a rollback writes from and the canary reads: each line is sealed, every read
verifies it, a rollback writes only the keys promotion owns, and values read from it are checked."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sglab.cli import main
from sglab.core.errors import ConfigError
from sglab.promotion.log import LogEntry, break_even, read_log, sealed
from sglab.promotion.promote import PromotionRefused, promote, rollback

from tests.promote.test_promote import point_cli_at
from tests.rollback.test_rollback import _result_key, bench, root  # noqa: F401  (fixtures)


def _lines(checkout: Path) -> list[dict]:
    return [json.loads(line) for line in (checkout / "stacks" / "promotions.jsonl").read_text().splitlines()]


def _write(checkout: Path, lines: list[dict]) -> None:
    (checkout / "stacks" / "promotions.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))


def test_every_line_is_sealed_and_verifies(root: Path) -> None:  # noqa: F811
    bench(root, "eagle-nccl-ll")
    promote("eagle-nccl-ll", root=root)
    (line,) = _lines(root)
    assert line["log_seal"]["algorithm"] == "hmac-sha256" and len(line["log_seal"]["digest"]) == 64
    assert [e.run_id for e in read_log(root / "stacks" / "promotions.jsonl")] == ["20260101T000000Z-aaaaaa"]


def test_an_edited_line_is_refused_and_the_target_is_untouched(root: Path, capsys, monkeypatch) -> None:  # noqa: F811
    """Another image and PYTHONPATH in the config a rollback would restore, without a new seal."""
    bench(root, "eagle-nccl-ll")
    promote("eagle-nccl-ll", root=root)
    target = root / "stacks" / "Pulumi.production.yaml"
    before = target.read_bytes()
    (line,) = _lines(root)
    line["previous"]["image"] = "registry.example/evil:latest"
    line["previous"]["env"] = {**(line["previous"].get("env") or {}), "PYTHONPATH": "/tmp/evil"}
    _write(root, [line])
    point_cli_at(monkeypatch, root)
    assert main(["rollback", "--stack", "production"]) == 2
    err = capsys.readouterr().err
    assert "line 1" in err and "seal does not match" in err and "fix:" in err and "Traceback" not in err
    assert target.read_bytes() == before


def test_an_unsealed_line_is_refused(root: Path) -> None:  # noqa: F811
    bench(root, "eagle-nccl-ll")
    promote("eagle-nccl-ll", root=root)
    (line,) = _lines(root)
    del line["log_seal"]
    _write(root, [line])
    with pytest.raises(ConfigError, match="carries no seal"):
        rollback("production", root=root)


def test_a_sealed_line_with_keys_no_promotion_owns_is_refused(root: Path) -> None:  # noqa: F811
    bench(root, "eagle-nccl-ll")
    promote("eagle-nccl-ll", root=root)
    target = root / "stacks" / "Pulumi.production.yaml"
    before = target.read_bytes()
    (line,) = _lines(root)
    line["previous"]["canary"] = {"enabled": False}
    _write(root, [sealed(line)])
    with pytest.raises(PromotionRefused, match="keys no promotion owns \\(canary\\)"):
        rollback("production", root=root)
    assert target.read_bytes() == before


@pytest.mark.parametrize("value", [0, -1, True, 1e-300, 1.0, float("inf"), "2.0"])
def test_a_break_even_that_is_no_accept_length_is_refused(value) -> None:
    entry = LogEntry(3, {"run_id": "r", "levels": [{"gating": True, "concurrency": 1,
                                                     "break_even_accept_length": value}]})
    with pytest.raises(ConfigError, match="line 3 levels\\[0\\].break_even_accept_length"):
        break_even(entry)


def test_a_break_even_accept_length_is_read() -> None:
    entry = LogEntry(1, {"run_id": "r", "levels": [{"gating": True, "concurrency": 4, "break_even_accept_length": 1.8},
                                                   {"gating": True, "concurrency": 1, "break_even_accept_length": 1.6},
                                                   {"gating": False, "break_even_accept_length": 1.1}]})
    value, source = break_even(entry)
    assert value == 1.6 and "level 1" in source
