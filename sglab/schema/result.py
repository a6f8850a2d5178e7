"""The result document: one schema-versioned JSON per benchmark run (results/<stack>/<run-id>/result.json).

Written by the load stage (bench runner, web UI download, in-cluster Job), read by analysis,
promotion and reports. docs/results-schema.md documents every field; bump SCHEMA_VERSION on any
incompatible change.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import (BaseModel, ConfigDict, Field, PrivateAttr, SerializerFunctionWrapHandler, field_validator,
                      model_serializer, model_validator)

from sglab.schema.records import (MULTILINE, VERBATIM, Confound, PlainText, RecordedLint, RecordedLoadPlan,
                                  RecordedPolicy)
from sglab.schema.verdict import RecordedVerdict
from sglab.core.untrusted import is_control

SCHEMA_VERSION = 1
# run_id and stack name a result's directories (results/<stack>/<run-id>/) and are printed everywhere: no
# separators, no controls, nothing a terminal or a path could read as more than a name.
SAFE_NAME = re.compile(r"\A[A-Za-z0-9][A-Za-z0-9._-]{0,127}\Z")


def safe_name(value: str) -> str:
    """`value` when SAFE_NAME allows it as a directory name; ValueError otherwise."""
    if not SAFE_NAME.match(value) or ".." in value:
        raise ValueError(f"{value[:60]!r} is not a safe directory name (up to 128 letters, digits, '.', '_', '-')")
    return value


RunKind = Literal["ab", "aa", "attribute", "interactive", "sweep"]
TargetKind = Literal["sim", "urls", "in-cluster", "interactive"]
UrlsSource = Literal["sglab", "locust", "form"]


class Schema(PlainText):
    model_config = ConfigDict(extra="forbid")


class Percentiles(Schema):
    p50: float | None = None
    p90: float | None = None
    p99: float | None = None
    mean: float | None = None


class AcceptLength(Schema):
    client_mean: float | None = Field(None, description="mean over requests of completion_tokens / spec_verify_ct")
    server_mean: float | None = Field(None, description="mean over rounds of the server-side accept length of "
                                       "each segment (RoundSample.accept_length_method says how)")
    server_method: str | None = Field(None, description="'metrics' or 'flush_cache' (RoundSample."
                                      "accept_length_method of the measured rounds)")


class ArmLevelSummary(Schema):
    """One arm at one concurrency level, measured rounds only (warm-up excluded)."""

    requests: int
    errors: int
    output_tokens: int
    duration_s: float
    output_tok_per_s: float | None = Field(None, description="aggregate: output tokens / measured wall time")
    decode_tok_per_s: Percentiles = Field(default_factory=Percentiles, description="per request: p50, mean")
    ttft_ms: Percentiles = Field(default_factory=Percentiles)
    itl_ms: Percentiles = Field(default_factory=Percentiles)
    e2e_ms: Percentiles = Field(default_factory=Percentiles)
    accept_length: AcceptLength | None = None
    metrics: dict[str, float] = Field(default_factory=dict, description="mean over measured rounds of each "
                                      "registry metric stored in RoundSample.metrics (sglab/metrics)")


class RoundSample(Schema):
    """One arm's share of one round at one level."""

    level: int
    round_index: int = Field(description="0-based; -1 is the discarded warm-up")
    position: int = Field(description="0-based order of this arm inside the round (randomised per round)")
    arm: str
    warmup: bool = False
    started_at_s: float = Field(description="seconds since the run started")
    duration_s: float
    requests: int
    errors: int
    output_tokens: int
    output_tok_per_s: float | None = None
    decode_tok_per_s_mean: float | None = None
    decode_tok_per_s_p50: float | None = None
    ttft_ms_p50: float | None = None
    itl_ms_p50: float | None = None
    itl_ms_p99: float | None = None
    client_accept_length: float | None = None
    server_accept_length: float | None = None
    accept_length_method: str | None = Field(None, description="how server_accept_length was measured: "
                                             "'metrics' (Δ generation tokens / Δ verify calls of /metrics over the "
                                             "segment) or 'flush_cache' (/flush_cache before, avg_spec_accept_length "
                                             "after); None: not measured")
    complete: bool = Field(True, description="False for a segment cut short by an interrupt")
    window_s: float | None = Field(None, description="duration rounds: the segment's time window (start -> gate "
                                   "closed); output_tok_per_s counts the tokens that arrived inside it")
    window_output_tokens: int | None = Field(None, description="tokens of successful requests that arrived "
                                             "inside window_s")
    metrics: dict[str, float] = Field(default_factory=dict, description="per-round values of registry metrics "
                                      "without a field of their own (sglab/metrics)")
    node: str | None = Field(None, description="the node that served this arm in this round (None: not known)")
    period: int | None = Field(None, description="the design's period this round belongs to, from 1: a crossover's "
                               "arms swap nodes between periods, a switchback's take turns; None: parallel")


class RequestSample(Schema):
    """One request, measured client-side from the stream."""

    arm: str
    level: int
    round_index: int
    warmup: bool = False
    start_s: float = Field(description="seconds since the run started")
    prompt_index: int | None = None
    prompt_tokens: int | None = None
    output_tokens: int = 0
    expected_output_tokens: int | None = None
    ttft_ms: float | None = None
    e2e_ms: float | None = None
    itl_ms: list[float] = Field(default_factory=list, description="one entry per token after the first")
    decode_tok_per_s: float | None = Field(None, description="(output_tokens - 1) / (e2e - ttft)")
    spec_verify_ct: int | None = None
    spec_correct_drafts: int | None = Field(None, description="accepted draft tokens over the request "
                                            "(sglext.spec_tokens_details); 1 + this / spec_verify_ct is the "
                                            "per-cycle accept length without the prefill's token")
    accept_length: float | None = None
    category: str | None = Field(None, description="the prompt's category (datasets with labels; None: unlabelled)")
    temperature: float | None = Field(None, description="the sampling temperature the request asked for")
    output_sha256: str | None = Field(None, description="sha256 of the output text (RunResult.output_texts holds "
                                      "the text); None: not recorded or the request failed")
    error: Annotated[str | None, MULTILINE] = Field(None, description="why the request failed: the server's error "
                                                   "body (several lines, made printable where it was read) or "
                                                   "the exception")
    metrics: dict[str, float] = Field(default_factory=dict, description="per-request values of registry metrics "
                                      "without a field of their own (sglab/metrics)")

    @field_validator("category")
    @classmethod
    def _label(cls, value: str | None) -> str | None:
        """A category is a row of every table: a line break or control in one would add or hide a line."""
        if value is not None and (len(value) > 64 or any(is_control(ch) for ch in value)):
            raise ValueError("is not a category label (at most 64 characters, no control characters)")
        return value


class LevelResult(Schema):
    concurrency: int
    arms: dict[str, ArmLevelSummary] = Field(default_factory=dict)
    rounds: list[RoundSample] = Field(default_factory=list)
    requests: list[RequestSample] = Field(default_factory=list)


ProducerKind = Literal["simulator", "sglang"]


class ArmMachine(Schema):
    """What served one arm: as the server described itself (/get_server_info) and, in the cluster, as the
    Kubernetes API saw its pod and node (sglab/load/targets.py). None: not known to the run."""

    producer: ProducerKind | None = Field(None, description="'simulator' when the server's info carries the "
                                          "simulator's sglab_sim block (or sglab started it), else 'sglang'")
    server_version: str | None = Field(None, description="the `version` of the server's /get_server_info")
    time_scale: float | None = Field(None, description="the simulator's time scale as it reported it")
    image: str | None = Field(None, description="the image: the pod's (in the cluster), else the stack's")
    image_digest: str | None = Field(None, description="'sha256:...': the pod's imageID, or the image's @digest")
    image_source: Literal["pod", "stack"] | None = Field(None, description="where `image` was read")
    pod: str | None = Field(None, description="the pod that served the arm (in the cluster)")
    node_name: str | None = Field(None, description="the node of that pod")
    node_labels: dict[str, str] = Field(default_factory=dict, description="the node's GPU Feature Discovery and "
                                        "accelerator labels (nvidia.com/gpu.product, nvidia.com/cuda.driver.*, "
                                        "nvidia.com/cuda.runtime.*, cloud.google.com/gke-accelerator, ...)")
    notes: list[str] = Field(default_factory=list, description="what could not be read, and why")


class ArmInfo(Schema):
    name: str
    role: Literal["baseline", "candidate"]
    speculative: bool
    url: str | None = None
    config_hash: str
    launch_command: str
    live_flags_checked: bool = False
    live_mismatches: list[str] = Field(default_factory=list)
    unverified: list[str] = Field(default_factory=list, description="declared settings the server does not report, "
                                  "so the live check could not compare them (NCCL_*: SGLang does not report its "
                                  "environment); the stack's values are trusted")
    machine: ArmMachine | None = Field(None, description="what served the arm (None in files written before it "
                                       "was recorded: promotion then treats the producer as unknown)")


class Target(Schema):
    kind: TargetKind
    urls: dict[str, str] = Field(default_factory=dict)
    sim_env: dict[str, str] = Field(default_factory=dict, description="extra SGLAB_SIM_* knobs given to simulators")
    time_scale: float | None = Field(None, description="simulator time scale (tok/s are scaled when != 1)")
    urls_source: UrlsSource | None = Field(
        None, description="where the arm URLs came from: 'sglab' (started or given to sglab ui, fixed for the run), "
                          "'locust' (plain Locust's command line or environment), 'form' (changed in the web-UI "
                          "form); None in files written before it was recorded")


Design = Literal["parallel", "crossover", "switchback"]


class DesignRecord(Schema):
    """How the arms were placed on machines, as carried out (sglab:policy.design says what was asked)."""

    design: Design = Field(description="parallel: both arms at once on their own node (the gain includes any "
                           "difference between the nodes); crossover: the arms swap nodes between periods; "
                           "switchback: one node, the arms take turns")
    nodes: dict[str, list[str | None]] = Field(default_factory=dict, description="arm -> the node that served it "
                                               "in each period, in order")
    restarts: int = Field(0, description="server restarts the design cost (each arm moved to another node)")
    restart_s: float = Field(0.0, description="seconds spent restarting servers and waiting for them to be ready")
    measuring_s: float = Field(0.0, description="seconds spent measuring rounds")
    notes: list[str] = Field(default_factory=list, description="why a design could not be carried out as asked")
    joined_run: str | None = Field(None, description="a crossover across two runs of servers given by URL: the run "
                                   "whose rounds are period 1 (the machines swapped between the runs)")
    joined_digest: str | None = Field(None, description="that run's seal digest when it was joined")


class LoadGen(Schema):
    """What generated the load, and (a bench run) the process writing the result, so a run left `running` by a
    process that is gone can be told apart (sglab/load/owner.py)."""

    tool: str = "locust"
    locust_version: str | None = None
    user_class: str | None = None
    workers: int = Field(0, ge=0, description="Locust worker processes (0: one local process)")
    endpoint: str | None = None
    profile: str | None = Field(None, description="the load profile (sglab/load/profiles.py)")
    pid: int | None = Field(None, ge=1, description="the bench process that wrote the run")
    host: str | None = None
    process_started: str | None = Field(None, description="its start time in clock ticks (Linux), to tell a "
                                        "reused pid")
    level_label: str | None = Field(None, description="open-loop web-UI runs: what a level is")
    users: int | None = Field(None, ge=0, description="open-loop web-UI runs: the users the load ran with")
    users_from: str | None = None
    late_threshold_ms: float | None = None
    arrivals: dict[str, dict[str, Any]] = Field(default_factory=dict, description="open-loop runs: per level, "
                                                "how faithful the arrivals were (sglab/ui/live.py)")


Algorithm = Literal["sha256", "hmac-sha256"]


class IntegrityRecord(PlainText):
    """The seal over a result (`RunResult.integrity`), written and checked by sglab/results/integrity.py."""

    model_config = ConfigDict(extra="forbid")

    algorithm: Algorithm
    digest: str
    key_id: str | None = Field(None, description="sha256 of the HMAC key, first 16 hex digits (hmac-sha256 only)")
    covers: str = Field("the whole result document except `integrity` and `verdict`, as canonical JSON")
    schedule: dict[int, int] | None = Field(None, description="what the run planned to measure: level -> rounds "
                                            "(bench runs; interactive runs have none)")


# The sequential record (`RunResult.sequential`): what sglab.analysis.sequential.sequential_test computed at every
# look of a sequentially run level, and the sequence of earlier runs it continued (sglab/analysis/accumulate.py).
# Never trusted: the verdict and the evidence checks recompute every look from the rounds.

Decision = Literal["promote", "reject", "futile", "continue", "inconclusive"]
ChecksName = Literal["standard", "strict"]  # policy.checks: sglab.analysis.sequential.CHECKS by name
# A level as a key of a JSON object: its concurrency (or rate) written as a string.
LEVEL_KEY = re.compile(r"\A[1-9][0-9]{0,8}\Z")
LevelKey = Annotated[str, Field(pattern=r"^[1-9][0-9]{0,8}$")]  # LEVEL_KEY in the dialect of pydantic's patterns
FiniteFloat = Annotated[float, Field(allow_inf_nan=False)]


class Look(Schema):
    """One look at the sequence, after `rounds` paired rounds (round_index = rounds - 1)."""

    round_index: int
    rounds: int
    mean_log: float
    lower_log: float | None = Field(description="None: unbounded")
    upper_log: float | None
    estimate: float = Field(description="exp(mean_log) - 1")
    low: float | None
    high: float | None
    decision: Decision
    held: str | None = Field(None, description="the check that keeps a clearing lower bound from promoting "
                             "(sglab.analysis.sequential.HELD_NAMES)")
    autocorrelation: float | None = Field(None, description="bias-corrected lag-1 (round_stats)")
    widen: float | None = None
    skewness: float | None = None
    trend_t: float | None = None


class SequentialRecord(Schema):
    """Every look of one sequential test, up to and including the one that decided."""

    method: str = Field(description="the rule (sglab.analysis.sequential.METHOD)")
    confidence: float
    min_gain: float
    threshold_log: float
    min_rounds: int
    max_rounds: int | None
    futility: bool = False
    checks: ChecksName = Field(description="the floor and holds it was judged with (policy.checks)")
    decision: Decision
    rounds: int
    looks: list[Look]
    earlier_rounds: int = Field(0, description="rounds of earlier runs this sequence continues "
                                "(sglab/analysis/accumulate.py)")
    notes: list[str] = Field(default_factory=list, description="what the checks did at the last look, in words")

    @property
    def last(self) -> Look | None:
        return self.looks[-1] if self.looks else None


class EarlierRun(Schema):
    """One earlier run a sequence continues, verified when the new run started (sglab/analysis/accumulate.py)."""

    run_id: str
    algorithm: Algorithm | None = Field(description="its seal's algorithm (None: it had no seal)")
    digest: str | None = Field(description="its seal's digest: promotion checks the run still has it")
    levels: dict[LevelKey, list[float]] = Field(description="level -> its per-round log-ratios, recomputed")

    @field_validator("run_id")
    @classmethod
    def _safe_run_id(cls, value: str) -> str:
        """The run is looked up as results/<stack>/<run_id>: a name, never a path."""
        return safe_name(value)


class SequenceRecord(Schema):
    """The sequence a run continues: the earlier runs of the same pair (sglab/analysis/accumulate.py)."""

    key: str = Field(description="the pair's sequence key (sglab.analysis.accumulate.key_of)")
    metric: str = Field(description="the metric whose log-ratios the earlier runs contribute")
    fresh: bool = Field(description="the run started a new sequence on purpose (`--fresh-sequence`)")
    reason: str | None = Field(None, description="why it started afresh")
    runs: list[EarlierRun] = Field(default_factory=list, description="the earlier runs, oldest first")


class SequentialRun(Schema):
    """`RunResult.sequential`: level (concurrency as a string) -> the record of that sequentially run level, beside
    the lines each level stopped against, its records against the target's other lines and the sequence it
    continued. The levels are the object's own keys (typed extras), as sglab/bench/sequential.py writes them."""

    model_config = ConfigDict(extra="allow")
    __pydantic_extra__: dict[str, SequentialRecord] = Field(init=False)

    stop_rule: dict[LevelKey, list[tuple[FiniteFloat, ChecksName]]] = Field(
        default_factory=dict, description="level -> the lines it ran until every one decided: [gain, checks] each "
                                          "(the stack's own and its promotion target's, sglab/bench/sequential.py)")
    others: dict[LevelKey, list[SequentialRecord]] = Field(
        default_factory=dict, description="level -> its records against the lines after the first")
    sequence: SequenceRecord | None = Field(None, description="the earlier runs of the pair it continues; "
                                            "written only when it continues or starts one")

    @model_validator(mode="before")
    @classmethod
    def _levels_and_known_keys(cls, data: Any) -> Any:
        """An extra key is a level's record: any other name is a key this sglab does not know."""
        if isinstance(data, dict):
            for key in data:
                if key not in cls.model_fields and not (isinstance(key, str) and LEVEL_KEY.match(key)):
                    raise ValueError(f"unknown key {str(key)[:60]!r}: its keys are the levels (concurrency as a "
                                     f"string) and {', '.join(cls.model_fields)}")
        return data

    @model_serializer(mode="wrap")
    def _sequence_when_recorded(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """A run that continues no sequence writes no `sequence` key (not null)."""
        data = handler(self)
        if self.sequence is None:
            data.pop("sequence", None)
        return data

    @property
    def levels(self) -> dict[int, SequentialRecord]:
        """level -> the record of its own line (the first), in level order."""
        return dict(sorted((int(k), v) for k, v in (self.__pydantic_extra__ or {}).items()))


# A sweep's records: the arm SweepArm.record() writes, each gated level's race and the slot nodes' calibration.
# The sweep's state (sweep.json, sglab.sweep.run.SweepState, not sealed) and a confirmation's result
# (`RunResult.sweep`) hold the same records, read through these models; names, texts and counts are bounded, as
# sweep.json is read from a file sglab may not have written.

MAX_ARM_COUNT = 4096  # a sweep arm's num_steps, eagle_topk and num_draft_tokens: far above any grid's
BoundedName = Annotated[str, Field(min_length=1, max_length=200)]
BoundedText = Annotated[str, Field(max_length=4000)]
ArmCount = Annotated[int, Field(ge=0, le=MAX_ARM_COUNT)]


class SweepArmRecord(Schema):
    """One sweep arm as sglab.sweep.grid.SweepArm.record() writes it, in sweep.json's arms and as the arm a
    confirmation confirms (`RunResult.sweep.arm`). Only compared with the grid's own arm of that name (a resume and
    promote rebuild the arm from the stack's grid), never run as it is."""

    name: BoundedName
    num_steps: ArmCount
    eagle_topk: ArmCount
    num_draft_tokens: ArmCount
    adaptive: bool
    variant: BoundedName
    nccl: Annotated[dict[BoundedName, BoundedText], Field(max_length=64)]
    config_hash: BoundedName
    algorithm: BoundedName | None = Field(None, description="a draft-model arm's algorithm; with "
                                          "draft_model_path, written only for such arms")
    draft_model_path: BoundedText | None = None

    @model_serializer(mode="wrap")
    def _draft_only_when_set(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """An arm without an algorithm of its own writes neither key, as SweepArm.record() does."""
        data = handler(self)
        if self.algorithm is None:
            data.pop("algorithm", None)
            data.pop("draft_model_path", None)
        return data


class NodeOffset(Schema):
    """One slot node against the baseline's: the baseline config on each, paired by round
    (sglab.sweep.race.node_offsets)."""

    node: str
    rounds: int
    mean_log: float | None  # mean of log(value on this node / value on the baseline's node), oriented
    halfwidth_log: float | None  # of its interval (None: unbounded, fewer than 2 rounds)
    estimate: float | None  # exp(mean_log) - 1: this node is that much faster (negative: slower)
    low: float | None
    high: float | None

    def describe(self, against: str) -> str:
        if self.estimate is None:
            return f"{self.node}: not measured"
        if self.low is None or self.high is None:
            return f"{self.node}: {self.estimate:+.1%} against {against} ({self.rounds} rounds, no interval yet)"
        return (f"{self.node}: {self.estimate:+.1%} [{self.low:+.1%}, {self.high:+.1%}] against {against} "
                f"({self.rounds} rounds)")


RaceReason = Literal["below-min", "not-best"]  # why an arm was eliminated
RaceArmStatus = Literal["selected", "picked", "leader", "survivor", "eliminated"]
RaceOutcome = Literal["selected", "picked", "leader", "no-winner", "continue"]


class RaceArm(Schema):
    """One arm at the race's last look, with its rank (1 = the pick)."""

    arm: str
    rank: int
    status: RaceArmStatus
    node: str | None = None  # the node it ran on (its values are corrected by that node's calibrated offset)
    rounds: int  # rounds this arm was measured in
    baseline_rounds: int = 0  # of those, the rounds the baseline ran too (what `estimate` is over)
    mean_log: float | None  # against the baseline, over the rounds both ran
    lower_log: float | None  # its confidence sequence at the arm level (None: unbounded)
    upper_log: float | None
    estimate: float | None
    low: float | None
    high: float | None
    eliminated_at: int | None = None  # the look (round count) that eliminated it
    reason: RaceReason | None = None
    gap_to_pick: float | None = None  # paired: exp(mean(g_arm - g_pick)) - 1 over the rounds both ran
    p_beats_pick: float | None = None  # estimated P(this arm is better than the pick); None: eliminated or the pick


class RaceLook(Schema):
    rounds: int
    planned: list[str]  # what the rule asked this round to run ("baseline" included)
    measured: list[str]  # what gave a value
    leader: str | None
    p_correct: float
    eliminated: dict[str, RaceReason] = Field(default_factory=dict)


class RaceRecord(Schema):
    """A gated level's best-arm race replayed from its rounds (sglab.sweep.race.race_record): every look, every
    elimination, the pick and its P(correct). In sweep.json's records and a confirmation's `selected_by`: shown,
    never evidence (a resume recomputes it from the sealed rounds)."""

    method: str = Field(description="the rule (sglab.sweep.race.RACE)")
    sequence: str = Field(description="the sequence it decides on (sglab.analysis.sequential.METHOD)")
    confidence: float  # familywise: the best arm is eliminated with probability <= 1 - confidence
    arm_confidence: float  # each sequence: 1 - (1 - confidence) / K
    min_gain: float
    threshold_log: float
    min_rounds: int
    max_rounds: int | None
    challengers: int
    outcome: RaceOutcome
    winner: str | None  # the pick once the race stopped (selected, picked, leader); never a promotion
    leader: str | None  # the pick so far (also while the race continues)
    p_correct: float | None  # estimated P(the pick is the best arm) among the arms not eliminated
    p_correct_guaranteed: bool  # every other arm eliminated: P(correct) >= confidence by construction
    p_clears_min: float | None  # estimated P(the pick beats the baseline by min-gain)
    winner_cleared_min: bool  # the pick's confidence sequence with the baseline clears log(1 + min-gain)
    rounds: int  # looks taken
    arm_rounds: int  # measured segments, baseline included (the cost in arm-rounds)
    next_round: list[str]  # while `continue`: the baseline (if needed) and the arms of the next round
    challengers_now: list[str]  # the arms most likely to beat the pick, at the last look
    off_plan: list[int] = Field(default_factory=list)  # rounds that measured other arms than the rule asked for
    baseline_node: str | None = None
    calibration: list[NodeOffset] = Field(default_factory=list)  # the slot nodes against the baseline's node
    calibration_rounds: int = 0  # rounds of the calibration block before the race
    arms: list[RaceArm]
    looks: list[RaceLook]

    @property
    def survivors(self) -> list[str]:
        """Arms not eliminated, the pick included."""
        return [a.arm for a in self.arms if a.status != "eliminated"]


# A sweep's confirmation A/B (`RunResult.sweep`, sglab/sweep/confirm.py).

class SweepConfirmation(Schema):
    """The sweep run and the arm a confirmation A/B confirms (sglab/sweep/confirm.py sweep_record): promote rebuilds
    the arm of that name from the stack's grid and compares it with this record."""

    sweep_run_id: str
    arm: SweepArmRecord
    selected_by: dict[LevelKey, RaceRecord] = Field(
        default_factory=dict, description="level -> the sweep's race record there: shown, never evidence")
    note: str = ""


class RunResult(Schema):
    # The JSON as read from disk (store.load_result): the seal covers the document as stored, so a newer
    # sglab whose models add optional fields still verifies an older file.
    _stored_document: dict | None = PrivateAttr(None)

    def __eq__(self, other: object) -> bool:
        """How a result was read (its stored JSON) is not part of what it is."""
        if not isinstance(other, BaseModel):
            return NotImplemented
        return (type(self) is type(other) and self.__dict__ == other.__dict__
                and self.__pydantic_extra__ == other.__pydantic_extra__)

    schema_version: int = SCHEMA_VERSION
    run_id: str
    stack: str
    kind: RunKind = "ab"
    started_at: str = Field(description="ISO 8601, UTC")
    finished_at: str | None = None
    complete: bool = False
    incomplete_reason: str | None = None
    invalid_reason: str | None = Field(None, description="set when an arm died or froze mid-run (the run is "
                                       "then incomplete too): which arm, what happened, at which level and round; "
                                       "the samples before it are kept, the run must never be judged")
    git_commit: str | None = None
    sglab_version: str | None = None
    target: Target
    arms: list[ArmInfo]
    config_hash: dict[str, str] = Field(description="arm name -> sha256 of its effective launch args + env")
    confounds: list[Confound] = Field(default_factory=list, description="declared differences")
    live_mismatches: list[str] = Field(default_factory=list, description="live server flags != stack")
    lints: list[RecordedLint] = Field(default_factory=list, description="the arms' lints at bench time "
                                      "(sglab/config/lints.py: NCCL settings that cannot work)")
    load_plan: RecordedLoadPlan | None = Field(None, description="the load plan the run sent")
    policy: RecordedPolicy | None = Field(None, description="the promotion policy at bench time")
    levels: list[LevelResult] = Field(default_factory=list)
    design: DesignRecord | None = Field(None, description="how the arms were placed on machines (None: parallel, "
                                        "written before the design was recorded)")
    loadgen: LoadGen = Field(default_factory=LoadGen, description="load generator: tool, version, user class, "
                             "workers, and the process that wrote the run")
    verdict: RecordedVerdict | None = Field(None, description="snapshot of the verdict when the run ended (an A/B's "
                                            "sglab.schema.verdict.Verdict, a sweep's SweepVerdict); never trusted "
                                            "(compare and promote recompute it)")
    sequential: SequentialRun | None = Field(None, description="policy.method sequential: concurrency (str) -> "
                                             "every look of its confidence sequence, the lines it stopped against, "
                                             "the sequence it continued")
    sweep: SweepConfirmation | None = Field(None, description="a sweep's confirmation A/B: the sweep run and the arm "
                                            "it confirms (sglab/sweep/confirm.py); promote rebuilds that arm from "
                                            "the stack")
    output_texts: Annotated[dict[str, str], VERBATIM] = Field(
        default_factory=dict, description="output_sha256 -> text of every distinct output of the request samples: "
        "output parity (sglab/analysis/provenance.py); a model's answers, kept byte for byte and never printed")
    integrity: IntegrityRecord | None = Field(None, description="digest (or HMAC) over the document and the "
                                              "planned schedule, set on every save (sglab/results/integrity.py)")

    @field_validator("run_id", "stack")
    @classmethod
    def _safe_name(cls, value: str) -> str:
        return safe_name(value)

    @field_validator("load_plan", "policy", mode="before")
    @classmethod
    def _empty_is_unrecorded(cls, value):
        """Files before typed records wrote {} for 'not recorded'."""
        return None if value == {} else value

    def level(self, concurrency: int) -> LevelResult | None:
        return next((lv for lv in self.levels if lv.concurrency == concurrency), None)

    def arm(self, name: str) -> ArmInfo | None:
        return next((a for a in self.arms if a.name == name), None)
