"""Analysis: per-round samples -> gains with confidence intervals -> verdict, economics, attribution."""

from sglab.analysis.verdict import Verdict, format_table, judge

__all__ = ["Verdict", "format_table", "judge"]
