"""`sglab:sweep`: a grid of speculative candidates measured against one baseline (`sglab sweep`, docs/sweep.md).

The grid is declared here; its expansion into arms (SGLang's rules applied, invalid combinations
listed and skipped, never adjusted) is sglab/sweep/grid.py.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import Field, field_validator, model_validator

from sglab.config.base import KeyedValueError, Model
from sglab.config.loadplan import MAX_ROUNDS
from sglab.config.nccl import NcclEnv
from sglab.config.server import SpeculativeAlgorithm
from sglab.sglang import rules

_NODE_NAME = r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$"  # a Kubernetes node name (DNS subdomain)
_RUN_ID = r"^[A-Za-z0-9][-A-Za-z0-9_.]{0,99}$"
_VARIANT_NAME = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9.]{0,30}[A-Za-z0-9])?$")
DEFAULT_VARIANT = "default"  # the stack's own NCCL settings (sglab:nccl), the baseline's
STEPS_PLUS_ONE = "steps+1"
SWEEPABLE_FAMILIES = ("eagle", "ngram")  # the algorithms whose shape is the grid's factors


class SweepSpec(Model):
    """The grid (every list's product), the run's bounds, and a --quick subset for 2-core simulator runs."""

    num_steps: list[Annotated[int, Field(ge=1)]] = Field(default_factory=list)  # empty: the candidate's
    eagle_topk: list[Annotated[int, Field(ge=1)]] = Field(default_factory=list)  # empty: the candidate's
    # A list of values, or "steps+1" (one value per num-steps: what SGLang runs with eagle-topk 1).
    num_draft_tokens: list[Annotated[int, Field(ge=1)]] | Literal["steps+1"] = Field(default_factory=list)
    speculative_adaptive: list[bool] = Field(default_factory=lambda: [False])
    # The algorithm as a factor (empty: the candidate's). Each takes the shape factors SGLang reads for it
    # (sglab/sweep/grid.py); one that loads its own draft needs its path in draft-model-path.
    speculative_algorithm: list[SpeculativeAlgorithm] = Field(default_factory=list)
    draft_model_path: dict[SpeculativeAlgorithm, str] = Field(default_factory=dict)
    # Named NCCL settings for the candidates only (the baseline keeps sglab:nccl); "default" = sglab:nccl.
    nccl_variants: dict[str, NcclEnv] = Field(default_factory=dict)
    # Candidate deployments at once on a cluster (the rest in later waves); simulators: processes at once.
    parallel_arms: Annotated[int, Field(ge=1, le=64)] = 4
    # Cluster: the wave of arms `pulumi up` deploys (docs/sweep.md, "On a cluster"); unset: the stack's own A/B
    # pair; 0: the calibration step (the baseline's config in every slot). Its upper bound (the number of waves)
    # depends on the expanded grid: sglab/sweep/arms.py.
    wave: Annotated[int, Field(ge=0)] | None = None
    # Cluster, wave 2 on: the previous wave's leader (its `sweep_leader` output), measured again in this wave.
    carry_arm: str | None = None
    max_rounds: Annotated[int, Field(ge=2, le=MAX_ROUNDS)] = 32
    # The confirmation's looks at its sequence (None: load.rounds): a crossover runs two rounds a look, a
    # switchback four periods (sglab/sweep/confirm.py).
    confirm_rounds: Annotated[int, Field(ge=2, le=MAX_ROUNDS)] | None = None
    # Simulated slot nodes (--target sim with two or more sim.nodes): rounds of the baseline config on every slot
    # node beside the baseline before each gated level's race, which then compares arms net of their node's offset
    # (sglab/sweep/race.py); 0: no calibration (node differences stay inside every gap, and the sweep says so).
    calibration_rounds: Annotated[int, Field(ge=0, le=MAX_ROUNDS)] = 8
    # Cluster, written by `sglab sweep --next` from the calibration step's sealed result: the node each slot ran on
    # (slot 1 first), which waves pin their slots to, and that step's run id (its rounds correct every wave's race).
    slot_nodes: Annotated[list[Annotated[str, Field(pattern=_NODE_NAME)]], Field(max_length=64)] = Field(
        default_factory=list)
    calibration_run: Annotated[str, Field(pattern=_RUN_ID)] | None = None
    # and its result ConfigMap, which each wave's Job reads (get, by name) to race net of the slot nodes
    calibration_configmap: Annotated[str, Field(pattern=_NODE_NAME)] | None = None
    # `sglab sweep --quick`: these arm names only (after expansion); empty: the whole grid.
    quick_arms: list[str] = Field(default_factory=list)

    @field_validator("num_draft_tokens", mode="before")
    @classmethod
    def _draft(cls, value: object) -> object:
        if isinstance(value, str) and value != STEPS_PLUS_ONE:
            raise ValueError(f"is {value!r}: give a list of integers, or {STEPS_PLUS_ONE!r} (one value per "
                             "num-steps, what SGLang runs with eagle-topk 1)")
        return value

    @field_validator("nccl_variants")
    @classmethod
    def _names(cls, variants: dict[str, NcclEnv]) -> dict[str, NcclEnv]:
        for name in variants:
            if not _VARIANT_NAME.match(name):
                raise KeyedValueError((name,), f"variant name {name!r} must be 1-32 letters, digits, '-' or '.' "
                                      "(it becomes part of the arm names)")
            if name == DEFAULT_VARIANT and variants[name].as_env():
                raise KeyedValueError((name,), f"'{DEFAULT_VARIANT}' is the stack's own sglab:nccl; give it no "
                                      "settings (write `default: {}`) or rename the variant")
        return variants

    @model_validator(mode="after")
    def _distinct(self) -> "SweepSpec":
        for key in ("num_steps", "eagle_topk", "speculative_adaptive", "speculative_algorithm"):
            values = getattr(self, key)
            if len(set(values)) != len(values):
                raise KeyedValueError(key.replace("_", "-"), f"{key.replace('_', '-')} lists a value twice: "
                                      f"{values}; list each value once")
        if isinstance(self.num_draft_tokens, list) and len(set(self.num_draft_tokens)) != len(self.num_draft_tokens):
            raise KeyedValueError("num-draft-tokens", f"num-draft-tokens lists a value twice: {self.num_draft_tokens}")
        for name in self.speculative_algorithm:
            if rules.family(name) not in SWEEPABLE_FAMILIES:
                raise KeyedValueError("speculative-algorithm", f"{name} cannot be a sweep factor: its shape is not "
                                      "num-steps/eagle-topk/num-draft-tokens (sweep it as its own stack); use "
                                      + ", ".join(a for a in rules.SPECULATIVE_ALGORITHMS
                                                  if rules.family(a) in SWEEPABLE_FAMILIES))
        for name in self.draft_model_path:
            if not rules.takes_draft_model(name):
                raise KeyedValueError(("draft-model-path", name), f"algorithm {name} uses no draft model; remove it")
        return self

    def variants(self) -> dict[str, dict[str, str]]:
        """Variant name -> the NCCL_* env it adds to the candidate ("default" adds nothing)."""
        if not self.nccl_variants:
            return {DEFAULT_VARIANT: {}}
        return {name: env.as_env() for name, env in self.nccl_variants.items()}
