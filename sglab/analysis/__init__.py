"""Analysis: per-round samples -> gains with confidence intervals -> verdict, economics, attribution.

The console table of a verdict is sglab.report.console.format_table (analysis imports neither report nor sweep).
"""

from sglab.analysis.verdict import Verdict, judge

__all__ = ["Verdict", "judge"]
