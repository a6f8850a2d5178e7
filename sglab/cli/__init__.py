"""`sglab` command line: one module per subcommand (or per pair of subcommands that belong together) under
sglab/cli/, registered below.

Every command turns bad input (ConfigError and friends) into one message on stderr and exit code 2.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from sglab.core.errors import BROKEN_PIPE, INTERRUPTED, USAGE, ConfigError
from sglab.core.paths import use_stack_file
from sglab.core.untrusted import printable

# subcommand -> the module under sglab.cli whose `register` adds it (with its sibling commands, if any); a module
# that is not there yet is skipped.
COMMANDS = {"init": "init", "render": "validate", "validate": "validate", "sim": "sim", "bench": "bench",
            "results": "results", "compare": "compare", "report": "compare", "promote": "promote",
            "rollback": "promote", "ui": "ui", "probe": "probe", "sweep": "sweep", "canary": "canary", "watch": "watch"}

# What `make install` leaves out and `make install-cluster` adds (pyproject.toml's `cluster` extra), by the name
# Python imports: the Pulumi program, the offline render, and the commands that speak to a cluster need them.
CLUSTER_MODULES = frozenset({"pulumi", "pulumi_kubernetes", "helm_python", "kubernetes", "kubernetes_validate"})


class UsageError(Exception):
    """Bad command-line input that is not a config problem; printed as-is, exit 2."""


class _Parser(argparse.ArgumentParser):
    """argparse whose errors (a bad option value, a missing one) are one UsageError line, like every other."""

    def error(self, message: str):  # type: ignore[override]
        raise UsageError(f"{self.prog}: {message} (see `{self.prog} --help`)")


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """All subcommands, or just `only` (so `sglab render` does not pay for scipy/pulumi imports)."""
    parser = _Parser(
        prog="sglab",
        description="Declarative, measured rollouts of SGLang speculative decoding on Kubernetes.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in dict.fromkeys(COMMANDS.values() if only is None else (COMMANDS[only],)):
        try:
            module = importlib.import_module(f"sglab.cli.{name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"sglab.cli.{name}":
                continue
            raise
        module.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        parser = build_parser(argv[0] if argv and argv[0] in COMMANDS else None)
        args = parser.parse_args(argv)
        if isinstance(getattr(args, "stack", None), str):  # `--stack` takes a name or a stack file's path
            args.stack = use_stack_file(args.stack)
        code = int(args.func(args) or 0)
        sys.stdout.flush()
        return code
    except (ConfigError, UsageError) as exc:
        print(f"error: {printable(exc, newlines=True, limit=4000)}", file=sys.stderr)
        return USAGE
    except ModuleNotFoundError as exc:
        if (exc.name or "").split(".")[0] not in CLUSTER_MODULES:
            raise
        print(f"error: sglab {printable(argv[0] if argv else '', limit=40)} needs the cluster tools ({exc.name} is "
              "not installed), which `make install` leaves out: run `make install-cluster` (or `pip install -e "
              "'.[cluster]'`)", file=sys.stderr)
        return USAGE
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return INTERRUPTED
    except BrokenPipeError:
        # The reader went away (`sglab validate | head -0`): stop quietly, as a shell tool does on SIGPIPE.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return BROKEN_PIPE


if __name__ == "__main__":
    sys.exit(main())
