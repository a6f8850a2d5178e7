"""Output formats (`--output NAME` on compare and report): one file each, registered on import."""

from sglab.report.outputs import console, csv, html, json, plots  # noqa: F401  (each registers itself)
from sglab.report.outputs.registry import (OutputContext, OutputFormat, get, names, register, registered, render,
                                           unregister)

__all__ = ["OutputContext", "OutputFormat", "get", "names", "register", "registered", "render", "unregister"]
