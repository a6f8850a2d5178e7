"""The verdict document: what sglab.analysis computes from a RunResult (promote, reject or inconclusive)
with every number it rests on. `sglab compare --output json` prints it; `RunResult.verdict` keeps a
snapshot of it, which is never trusted (compare and promote recompute it from the samples).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import ConfigDict, Discriminator, Field, Tag

from sglab.schema.records import PlainText

Outcome = Literal["promote", "reject", "inconclusive"]
LevelOutcome = Literal["win", "lose", "undecided", "no-data"]


class Part(PlainText):
    """A part of the verdict document. Unknown keys are refused: a stored snapshot (`RunResult.verdict`) with a key
    this sglab does not know is not a verdict it wrote."""

    model_config = ConfigDict(extra="forbid")


def pct(x: float | None) -> str:
    """A relative change as every verdict text writes it (+4.2%; n/a when unknown)."""
    return "n/a" if x is None else f"{x:+.1%}"


class Gain(Part):
    """Candidate over baseline for one metric at one level (geometric mean of per-round ratios);
    positive = better, whatever the metric's direction."""

    metric: str
    rounds: int
    baseline_mean: float | None = None
    candidate_mean: float | None = None
    estimate: float | None = None
    low: float | None = None
    high: float | None = None
    mean_log: float | None = None
    sd_log: float | None = None
    earlier_rounds: int = Field(0, description="rounds of earlier runs of the same sequence included "
                                "(sglab/analysis/accumulate.py)")
    held: str | None = Field(None, description="sequential: the check that keeps a clearing lower bound from "
                             "promoting (rounds, dependence, drift)")
    notes: list[str] = Field(default_factory=list, description="sequential: what the checks did, in words")


class LatencyDelta(Part):
    baseline_p99_ms: float | None = None
    candidate_p99_ms: float | None = None
    increase: float | None = None  # candidate / baseline - 1
    low: float | None = Field(None, description="interval of the increase: round-level bootstrap of the p99 ratio "
                              "(sglab/analysis/checks.py)")
    high: float | None = None
    confidence: float | None = None


class Economics(Part):
    concurrency: int
    baseline_step_ms: float | None = None
    candidate_itl_ms: float | None = None
    accept_length: float | None = None
    accept_length_source: str | None = None
    verify_cycle_ms: float | None = None
    break_even_accept_length: float | None = None
    accept_margin: float | None = None  # accept_length / break-even - 1: > 0 means speculation pays


class Crossover(Part):
    """Where the candidate stops winning (gain reaches 0), interpolated in log2(concurrency)."""

    concurrency: float | None = None
    status: str = "unknown"  # "between" | "beyond" | "below" | "unknown"
    note: str = ""


class Component(Part):
    key: str  # total | confounds | speculation | interaction
    label: str
    estimate: float
    low: float | None = None
    high: float | None = None


class LevelAttribution(Part):
    concurrency: int
    rounds: int
    components: list[Component]

    def component(self, key: str) -> Component:
        return next(c for c in self.components if c.key == key)


class Attribution(Part):
    metric: str
    confidence: float
    confounds_label: str
    levels: list[LevelAttribution]


class Check(Part):
    """A guard (fails -> reject) or a blocker (present -> never promote)."""

    name: str
    ok: bool
    detail: str
    fix: str | None = None


LOSS_PREFIX = "The candidate loses "  # how loss_text starts


class OperatingPoint(Part):
    """Where the gate was evaluated and where the candidate loses (sglab/analysis/operating_point.py)."""

    level_label: str = "concurrency"  # what a level is (the load profile's)
    gated_by: str = "policy.levels"  # or "traffic" (sglab:traffic declared)
    gated: list[int] = Field(default_factory=list)
    ungated: list[int] = Field(default_factory=list, description="measured but not gated")
    losing: list[int] = Field(default_factory=list, description="measured levels where the gate metric's "
                              "estimate is below zero")
    slower: list[int] = Field(default_factory=list, description="losing levels whose interval lies below no change")
    loss_text: str | None = None  # "loses -18.8% decode tok/s at concurrency 16 (...): do not serve ..."
    not_gated_text: str | None = None
    weighted_gain: float | None = Field(None, description="traffic-weighted gain over the gated levels "
                                        "(geometric, traffic.weights)")


class CategoryGain(Part):
    """One prompt category at one level: the gain on the gate metric and the arms' accept lengths."""

    level: int
    category: str
    gain: Gain
    baseline_requests: int = 0
    candidate_requests: int = 0
    accept_length: float | None = None  # candidate: mean over rounds of 1 + correct drafts / verify passes
    accept_low: float | None = None
    accept_high: float | None = None
    confidence: float | None = Field(None, description="of each interval: the policy's, Bonferroni-corrected over "
                                     "the level's categories (1 - alpha / k)")


class NodeEffect(Part):
    """A crossover's node effect (sglab/analysis/nodes.py): how much faster `node` ran than `other` on the gated
    metric, whichever arm it served, with its interval over the pairs of periods (reported, never gated)."""

    node: str
    other: str
    estimate: float
    low: float | None = None
    high: float | None = None
    pairs: int
    confidence: float

    def sentence(self) -> str:
        band = "" if self.low is None or self.high is None else f" [{pct(self.low)}, {pct(self.high)}]"
        return f"node {self.node} is {pct(self.estimate)}{band} {'faster' if self.estimate >= 0 else 'slower'} " \
               f"than node {self.other}"


class LevelVerdict(Part):
    concurrency: int
    gating: bool
    outcome: LevelOutcome
    decode: Gain
    output: Gain
    ttft_p99: LatencyDelta
    itl_p99: LatencyDelta
    baseline_requests: int
    candidate_requests: int
    baseline_error_rate: float
    candidate_error_rate: float
    economics: Economics
    more_rounds: int | None = None
    extra_gains: dict[str, Gain] = Field(default_factory=dict,
                                         description="gains of the registry's other metrics (sglab.metrics)")
    non_inferiority_margin: float | None = Field(None, description="traffic.non-inferiority at this level: "
                                                 "a win means the gain's low end is >= -margin")
    design: str = Field("parallel", description="how the rounds were laid out (sglab/analysis/nodes.py): what one "
                        "of the gain's rounds is (parallel: a round; crossover: a pair of periods' rounds; "
                        "switchback: an ABBA block)")
    node_effect: NodeEffect | None = Field(None, description="crossover: the node difference, apart from the gain")
    design_pending: str | None = Field(None, description="what the design cannot estimate yet (a crossover's "
                                       "period 1 alone)")
    design_problems: list[str] = Field(default_factory=list, description="rounds that do not follow the design")

    def gain(self, metric: str) -> Gain:
        if metric == "decode_tok_per_s":
            return self.decode
        if metric == "output_tok_per_s":
            return self.output
        return self.extra_gains[metric]

    def gains(self) -> dict[str, Gain]:
        """Every metric's gain by name, built-in metrics first."""
        return {"decode_tok_per_s": self.decode, "output_tok_per_s": self.output, **self.extra_gains}


class ParityCount(Part):
    """Pairs of temperature-0 answers to the same request, and how many are the same text
    (sglab/analysis/provenance.py)."""

    pairs: int = 0
    equal: int = 0
    first_difference_chars_mean: float | None = Field(None, description="over the pairs that differ: the mean "
                                                      "character position of the first difference (0-based)")

    @property
    def share(self) -> float | None:
        return self.equal / self.pairs if self.pairs else None


class LevelParity(Part):
    concurrency: int
    candidate: ParityCount
    aa: ParityCount


class OutputParity(Part):
    """The candidate's answers against the baseline's, and the baseline's against its own in other rounds (A/A)."""

    candidate: ParityCount
    aa: ParityCount
    levels: list[LevelParity] = Field(default_factory=list)


class Verdict(Part):
    run_id: str
    stack: str
    kind: str
    outcome: Outcome
    statistical_outcome: Outcome  # what the numbers alone say, before blockers
    sentence: str
    baseline_arm: str
    candidate_arm: str
    metric: str
    min_gain: float
    confidence: float
    method: str
    gating_levels: list[int]
    levels: list[LevelVerdict]
    guards: list[Check]
    blockers: list[Check]
    reasons: list[str]
    crossover: Crossover
    more_rounds: int | None = None
    attribution: Attribution | None = None
    operating_point: OperatingPoint | None = None
    categories: list[CategoryGain] = Field(default_factory=list, description="per prompt category, where "
                                           "requests carry one")
    sequence: dict[str, Any] | None = Field(None, description="the sequence this verdict judged: earlier runs of "
                                            "the same pair it continues (sglab/analysis/accumulate.py)")
    output_parity: OutputParity | None = Field(None, description="temperature-0 answers: candidate vs baseline, "
                                               "and A/A; None when the run recorded no output text")
    design: str = Field("parallel", description="the gated levels' design as their rounds are laid out")
    design_note: str | None = Field(None, description="what the gain includes besides the config (parallel: any "
                                    "difference between the two nodes)")
    policy: dict[str, Any]  # the policy applied, as the stack spells it (kebab-case keys)
    computed_at: str
    # A sweep's confirmation run: the directory its promotion must name (`--result`; it is never the newest run)
    promote_result: str | None = None

    def level(self, concurrency: int) -> LevelVerdict | None:
        return next((lv for lv in self.levels if lv.concurrency == concurrency), None)


# A sweep's status, as its state (sweep.json, sglab.sweep.run.SweepState) and its verdict's outcome record it
SweepStatus = Literal["running", "interrupted", "swept", "no-winner", "confirming", "confirmed", "not-confirmed",
                      "calibrated"]  # calibrated: a cluster sweep's calibration step (sglab/sweep/run.py)


class RankedArm(Part):
    """One arm of a sweep at one gated level, as its race left it (sglab.sweep.outputs.ranking_rows)."""

    level: int
    rank: int = Field(description="1 = the pick")
    arm: str
    status: str = Field(description="selected, picked, leader, survivor or eliminated "
                        "(sglab.schema.result.RaceArmStatus)")
    rounds: int
    baseline_rounds: int | None = None
    gain: float | None = None
    low: float | None = None
    high: float | None = None
    eliminated_at: int | None = None
    reason: str | None = Field(None, description="why it was eliminated: below-min or not-best")
    node: str | None = None
    gap_to_pick: float | None = None
    p_beats_pick: float | None = None
    p_correct: float | None = Field(None, description="the pick's estimated P(correct selection); None for others")


class SweepVerdict(Part):
    """A sweep run's verdict (sglab.sweep.outputs.sweep_verdict): the pick and its P(correct selection), a candidate
    for the confirmation A/B, never a promotion."""

    kind: Literal["sweep"]
    outcome: SweepStatus
    sentence: str
    metric: str
    winner: str | None = None
    winner_config_hash: str | None = None
    winner_cleared_min: bool = False
    p_correct: float | None = None
    p_correct_guaranteed: bool = False
    p_clears_min: float | None = None
    arms: list[str] = Field(default_factory=list)
    ranking: list[RankedArm] = Field(default_factory=list)


def _verdict_kind(value: Any) -> str:
    kind = value.get("kind") if isinstance(value, dict) else getattr(value, "kind", None)
    return "SweepVerdict" if kind == "sweep" else "Verdict"


# `RunResult.verdict`: an A/B's Verdict, or a sweep's SweepVerdict (told apart by their `kind`)
RecordedVerdict = Annotated[Union[Annotated[Verdict, Tag("Verdict")], Annotated[SweepVerdict, Tag("SweepVerdict")]],
                            Discriminator(_verdict_kind)]
