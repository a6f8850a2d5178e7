"""Checks on what produced the evidence, recomputed from what the result recorded (never from its verdict).

- faked or lossy acceptance in either arm's recorded launch command (sglab/sglang/honesty.py): a blocker;
- the arms measured on different machines: GPU product, driver or CUDA runtime of their nodes, or a
  different server version (sglab/results/schema.py ArmMachine): a blocker, like any other confound;
- output parity below `policy.min-output-parity` (sglab/analysis/parity.py): a guard.
Registered in sglab/analysis/checks.py.
"""

from __future__ import annotations

from sglab.analysis.samples import comparison_arms
from sglab.results.schema import RunResult
from sglab.results.verdict import Check
from sglab.sglang.flags import FlagError
from sglab.sglang.honesty import faked_acceptance, launch_env_and_args


def faked_acceptance_check(result: RunResult) -> Check | None:
    """Either compared arm launched with a setting that fakes or loosens acceptance (both may carry it, so
    it is no confound: it is checked on each arm's own recorded command)."""
    try:
        names = comparison_arms(result)
    except ValueError:
        return None
    found: dict[str, list[str]] = {}
    for name in names:
        info = result.arm(name)
        try:
            env, args = launch_env_and_args(info.launch_command)
            fakes = faked_acceptance(env, args)
        except (ValueError, FlagError) as exc:  # unreadable: the confounds check says so too
            return Check(name="faked-acceptance", ok=False,
                         detail=f"the recorded launch command of {name} cannot be checked for faked acceptance "
                                f"({exc})", fix=f"re-run `sglab bench --stack {result.stack}`")
        for fake in fakes:
            found.setdefault(fake.key, []).append(name)
    if not found:
        return None
    keys = ", ".join(f"{key} ({' and '.join(arms)})" for key, arms in found.items())
    settings = ", ".join(key.split(" ", 1)[1] for key in found)
    return Check(name="faked-acceptance", ok=False,
                 detail=f"the servers ran with settings that fake or loosen speculative acceptance ({keys}), so "
                        "their speed is not what real verification gives",
                 fix=f"remove {settings} from the stack and re-run `sglab bench --stack {result.stack}`")


def provenance_blockers(result: RunResult) -> list[Check]:
    """The blockers of this module, in the order the verdict lists them."""
    return [check for check in (faked_acceptance_check(result),) if check is not None]
