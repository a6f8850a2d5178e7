"""Stack config: pydantic models (the single source of truth), the loader and the effective arms."""

from sglab.config.arms import ArmSpec, Confound, attribution_arms, baseline_arm, candidate_arm, confounds
from sglab.config.loader import ConfigError, LoadedStack, list_stacks, load_stack, project_root, stack_path
from sglab.config.models import StackConfig

__all__ = [
    "ArmSpec", "Confound", "ConfigError", "LoadedStack", "StackConfig", "attribution_arms", "baseline_arm",
    "candidate_arm", "confounds", "list_stacks", "load_stack", "project_root", "stack_path",
]
