"""Analysis: per-round samples -> gains with confidence intervals -> verdict, economics, attribution."""

from sglab.analysis.verdict import Verdict, judge

__all__ = ["Verdict", "format_table", "judge"]


def __getattr__(name: str):
    if name == "format_table":  # the console table is in sglab.report.table
        from sglab.report.table import format_table

        return format_table
    raise AttributeError(name)
