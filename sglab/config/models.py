"""The stack config models, re-exported from the modules that hold them (one per concern).

A stack file (`stacks/Pulumi.<stack>.yaml`) holds them under the `sglab:` namespace, one top-level
key per field of `StackConfig` (kebab-case, mirroring SGLang's flag names). The Pulumi program, the
CLI and the charts' values all derive from these models; no default lives anywhere else.
base: model helpers; server: server flags and the candidate; placement: where and how arms run;
jobs: the benchmark Job and Locust; loadplan: what is sent; policy: when to promote; sim: simulator
knobs; stack: StackConfig and its cross-section checks.
"""

from sglab.config.base import (_CPU, _DNS_LABEL, _DNS_SUBDOMAIN, _ENV_NAME, _LABEL_NAME, _LABEL_VALUE, _QUANTITY,
                               KeyedValueError, Model, SecretValue, _check_labels, _kebab)
from sglab.config.jobs import BenchmarkJob, LocustSpec, _PodRequests
from sglab.config.loadplan import LoadPlan, PromptSpec
from sglab.config.placement import (DisruptionBudget, NetworkPolicySpec, Placement, PodSecurity, Resources, Rollout,
                                    Toleration)
from sglab.config.policy import PromotionPolicy
from sglab.config.server import (DRAFT_MODEL_ALGORITHMS, FORCES_MAX_RUNNING, MANAGED_FLAGS,
                                 SGLANG_FORCED_MAX_RUNNING_REQUESTS, CandidateConfounds, CandidateSpec, ModelSpec,
                                 ModelVolume, ServerFlags, ServerOverrides, SpeculativeAlgorithm, SpeculativeSpec)
from sglab.config.sim import SimFaults, SimSpec
from sglab.config.stack import SECRET_FIELDS, StackConfig

__all__ = [
    "BenchmarkJob", "CandidateConfounds", "CandidateSpec", "DRAFT_MODEL_ALGORITHMS", "DisruptionBudget",
    "FORCES_MAX_RUNNING", "KeyedValueError", "LoadPlan", "LocustSpec", "MANAGED_FLAGS", "Model", "ModelSpec",
    "ModelVolume", "NetworkPolicySpec", "Placement", "PodSecurity", "PromotionPolicy", "PromptSpec", "Resources", "Rollout",
    "SECRET_FIELDS", "SGLANG_FORCED_MAX_RUNNING_REQUESTS", "SecretValue", "ServerFlags", "ServerOverrides",
    "SimFaults", "SimSpec", "SpeculativeAlgorithm", "SpeculativeSpec", "StackConfig", "Toleration",
    "_CPU", "_DNS_LABEL", "_DNS_SUBDOMAIN", "_ENV_NAME", "_LABEL_NAME", "_LABEL_VALUE", "_PodRequests", "_QUANTITY",
    "_check_labels", "_kebab",
]
