"""Runs inside .venv-sglang (the pinned SGLang from PyPI): parses and resolves launch commands with SGLang's own
ServerArgs, and describes its parser. Imports nothing from sglab; reads a JSON request on stdin, writes JSON.

Request: {"mode": "launch", "commands": [{"name", "args", "env"}], "device": "cuda"}
         -> [{"name", "parsed": bool, "resolved": bool, "error": str|None, "resolved_args": {...}}]
         {"mode": "parser"} -> {"version", "options": {option: {"dest", "nargs", "switch", "default", "choices",
                                                               "aliases"}}}
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import logging
import os
import sys
import warnings

warnings.filterwarnings("ignore")
BASE_ENV = dict(os.environ)
SPEC_KEYS = ("speculative_algorithm", "speculative_num_steps", "speculative_eagle_topk",
             "speculative_num_draft_tokens", "speculative_adaptive", "max_running_requests",
             "speculative_draft_model_path", "speculative_dflash_block_size", "speculative_dspark_block_size",
             "speculative_ngram_max_bfs_breadth", "tp_size", "device")


def _plain(value):
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return str(value)


def launch(command: dict, device: str | None) -> dict:
    from sglang.srt.server_args import prepare_server_args

    os.environ.clear()
    os.environ.update(BASE_ENV)
    os.environ.update(command.get("env") or {})
    argv = list(command["args"]) + (["--device", device] if device else [])
    out = {"name": command["name"], "parsed": False, "resolved": False, "error": None, "resolved_args": {}}
    stderr = io.StringIO()
    try:
        with contextlib.redirect_stderr(stderr):
            server_args = prepare_server_args(argv)
    except SystemExit:
        out["error"] = stderr.getvalue().strip().splitlines()[-1] if stderr.getvalue().strip() else "parse error"
        return out
    out["parsed"] = True
    try:
        server_args.resolve_once()
    except Exception as exc:  # SGLang's post-init checks raise ValueError, AssertionError, NotImplementedError...
        out["error"] = f"{type(exc).__name__}: {exc}"
        return out
    resolved = server_args.resolved_dict()
    out["resolved"] = True
    out["resolved_args"] = {k: _plain(resolved.get(k)) for k in SPEC_KEYS}
    return out


def parser_description() -> dict:
    from sglang.srt.server_args import ServerArgs
    from sglang.version import __version__

    parser = argparse.ArgumentParser()
    ServerArgs.add_cli_args(parser)
    options = {}
    for action in parser._actions:
        if not action.option_strings:
            continue
        for option in action.option_strings:
            options[option] = {
                "dest": action.dest, "nargs": action.nargs, "switch": action.nargs == 0,
                "default": _plain(action.default), "choices": _plain(list(action.choices)) if action.choices else None,
                "aliases": [o for o in action.option_strings if o != option],
            }
    return {"version": __version__, "options": options}


def main() -> None:
    request = json.load(sys.stdin)
    logging.disable(logging.CRITICAL)
    with contextlib.redirect_stdout(io.StringIO()):
        if request["mode"] == "parser":
            answer = parser_description()
        else:
            answer = [launch(c, request.get("device")) for c in request["commands"]]
            logging.disable(logging.NOTSET)
    sys.stdout.write(json.dumps(answer))


if __name__ == "__main__":
    main()
