"""Settings that make a real SGLang server fake its acceptance or accept drafts it would have rejected.

One function, `faked_acceptance(env, args)`, used by config validation (the stack's env and
extra-args, sglab/config) and by the verdict on a result's recorded launch commands
(sglab/analysis/provenance.py), so what validates and what promotes are judged by the same rule.

- SGLang's "Runtime simulations" (srt/environ.py): SGLANG_SIMULATE_ACC_LEN / _METHOD / _TOKEN_MODE /
  _GREEDY force the accept length (drafts are committed whatever the target says), and
  SGLANG_SIMULATE_*_EXPERTS fake the MoE routing. Every member of the family is refused, whatever its
  value (`-1` turns ACC_LEN off today; a line that only looks like a faked win is still refused).
  Spellings: environ.py rewrites the legacy `SGL_` prefix to `SGLANG_`; older releases read a bare
  `SIMULATE_ACC_*`; case, surrounding whitespace and '-' for '_' are normalised away, so a name a
  shell or another tool might pass on is not a way around the rule.
- Lossy verification: SGLang accepts a draft token when `coin <= prob_acc / threshold_acc` or
  `p_target >= threshold_single`; both default to 1 (exact rejection sampling). Below 1 it accepts
  drafts the target would have rejected: faster by changing the answers. Flags are read as SGLang's
  parser reads them (aliases, unique prefixes, `--flag=value`: sglab/sglang/flags.py).
"""

from __future__ import annotations

import math
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from sglab.sglang import flags

SGLANG_PREFIXES = ("SGLANG_", "SGL_")
SIMULATION_FAMILY = "SIMULATE_"  # after an SGLang prefix: srt/environ.py's "Runtime simulations"
BARE_ACCEPT_FAMILY = "SIMULATE_ACC"  # read without a prefix by SGLang before environ.py
LOSSLESS_THRESHOLD = 1.0
THRESHOLD_FLAGS = ("--speculative-accept-threshold-single", "--speculative-accept-threshold-acc")


@dataclass(frozen=True)
class Faking:
    """One setting that fakes or loosens acceptance: `key` as a confound would name it, and why."""

    key: str
    detail: str

    def describe(self) -> str:
        return f"{self.key}: {self.detail}"


def _normal_env_name(name: str) -> str:
    return str(name).strip().upper().replace("-", "_")


def faked_env(name: str) -> str | None:
    """Why an environment variable of this name makes SGLang simulate instead of serve, or None."""
    normal = _normal_env_name(name)
    family = next((normal.removeprefix(p) for p in SGLANG_PREFIXES if normal.startswith(p + SIMULATION_FAMILY)),
                  normal if normal.startswith(BARE_ACCEPT_FAMILY) else None)
    if family is None:
        return None
    canonical = f"SGLANG_{family}"
    spelled = "" if name == canonical else f" (a spelling of {canonical})"
    what = ("forces the accept length instead of verifying drafts against the target model"
            if family.startswith(BARE_ACCEPT_FAMILY) else "replaces part of the model with a simulation")
    return f"{name}{spelled} is SGLang's runtime simulation: it {what}, so a real server would fake its speed"


def _threshold(value: flags.FlagValue) -> float | None:
    text = value[-1] if isinstance(value, tuple) and value else value
    try:
        return float(str(text))
    except ValueError:
        return None


def lossy_args(args: Sequence[str]) -> list[Faking]:
    """Accept thresholds below 1 (by any spelling SGLang's parser accepts); raises flags.FlagError on an
    ambiguous abbreviation (nobody can say which flag it means)."""
    decoded = flags.decode(tuple(args))
    found = []
    for name in THRESHOLD_FLAGS:
        if name not in decoded:
            continue
        value = _threshold(decoded[name])
        if value is not None and math.isfinite(value) and value >= LOSSLESS_THRESHOLD:
            continue
        shown = flags.flag_text(decoded[name])
        found.append(Faking(f"server {name}", f"{name} {shown} makes verification lossy: below "
                            f"{LOSSLESS_THRESHOLD:g} SGLang accepts draft tokens the target model would have "
                            "rejected, so the candidate is faster by changing its answers"))
    return found


def faked_acceptance(env: Mapping[str, str], args: Sequence[str]) -> list[Faking]:
    """Every env variable and launch flag of one server that fakes or loosens acceptance (empty: honest)."""
    found = [Faking(f"env {name}", why) for name in env if (why := faked_env(name)) is not None]
    return found + lossy_args(args)


def refusal(found: Sequence[Faking], where: str) -> str:
    """'problem; fix' for a validation message naming the first finding and where it was set."""
    first = found[0]
    name = first.key.split(" ", 1)[1]
    return (f"{first.detail}; remove {name} from {where}: sglab measures real acceptance only (the simulator "
            "models acceptance with its own sglab:sim knobs)")


def launch_env_and_args(command: str) -> tuple[dict[str, str], list[str]]:
    """A recorded launch command (`NAME=value ... program --flags`, as a shell runs it) read back as the
    env it sets and the arguments from its first --flag (raises ValueError on broken shell syntax)."""
    words = shlex.split(command)
    env: dict[str, str] = {}
    while words and "=" in words[0] and not words[0].startswith("-") and words[0].split("=", 1)[0].isidentifier():
        key, _, value = words.pop(0).partition("=")
        env[key] = value
    start = next((i for i, w in enumerate(words) if w.startswith("--")), len(words))
    return env, words[start:]
