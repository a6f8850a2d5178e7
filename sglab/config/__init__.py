"""Stack config: pydantic models (the single source of truth), the loader and the effective arms."""

from sglab.config.arms import ArmSpec, Confound, attribution_arms, baseline_arm, candidate_arm, confounds
from sglab.config.loader import LoadedStack, load_stack
from sglab.config.stack import StackConfig

__all__ = [
    "ArmSpec", "Confound", "LoadedStack", "StackConfig", "attribution_arms", "baseline_arm", "candidate_arm",
    "confounds", "load_stack",
]
