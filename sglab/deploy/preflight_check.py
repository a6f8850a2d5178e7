"""The preflight, as it runs inside the server image: stdlib + that image's own `sglang`, no GPU, no sglab.

The preflight Job (sglab/deploy/preflight.py) ships this file and a spec in a ConfigMap and runs
`python3 preflight_check.py --spec spec.json` in the servers' image before any GPU-holding object changes:

1. every arm's exact launch args through SGLang's own argument parser (`ServerArgs.add_cli_args` on an argparse
   parser, what `python -m sglang.launch_server` builds), so a flag this SGLang does not know, or a value it
   refuses, stops `pulumi up` before a server is replaced; `$(LWS_...)` rank wiring is expanded as Kubernetes
   would (rank 0); then through its value checks (`ServerArgs.resolve_once` with `--device cuda`, as on the GPU
   node: what needs the GPU itself takes its no-GPU defaults, as in tests/sglang_contract/);
2. the model and draft paths exist on the mounted volume and hold a config.json;
3. their config.json `architectures` are ones this SGLang registers: the registry (sglang/srt/models/registry.py)
   collects every `EntryClass` of the modules in sglang/srt/models (or SGLANG_EXTERNAL_MODEL_PACKAGE's), less
   SGLANG_DISABLED_MODEL_ARCHS; they are read from the sources here, so the check needs none of the CUDA
   libraries that importing the model modules loads (checked against SGLang 0.5.23: 290 classes, Kimi-K2.5's
   KimiK25ForConditionalGeneration and its EAGLE-3 draft's Eagle3DeepseekV2ForCausalLM among them).

On failure it writes the problems and their fixes to the container's termination message (what `pulumi up`
prints for a failed Job) and exits 1. Keep it importable without sglang: the tests run its checks on their own.
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import json
import os
import re
import sys
from pathlib import Path

TERMINATION_LOG = "/dev/termination-log"
MAX_MESSAGE = 4000  # Kubernetes keeps at most 4096 bytes of a termination message
_K8S_VAR = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)")
RANK_DEFAULTS = {"LWS_WORKER_INDEX": "0", "LWS_LEADER_ADDRESS": "127.0.0.1", "LWS_GROUP_SIZE": "1"}


class ParseError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    """argparse that raises instead of exiting, so every arm is checked and reported."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise ParseError(message)


def expand(args: list[str], env: dict[str, str]) -> list[str]:
    """$(NAME) as Kubernetes expands it in container args (unknown names stay as written)."""
    return [_K8S_VAR.sub(lambda m: env.get(m.group(1), m.group(0)), a) for a in args]


def parse_with_sglang(args: list[str]) -> str | None:
    """The problem SGLang's parser finds in `args`, or None. Raises ImportError when there is no sglang."""
    from sglang.srt.server_args import ServerArgs  # the image's own SGLang

    parser = _Parser(prog="sglang.launch_server")
    ServerArgs.add_cli_args(parser)
    try:
        parser.parse_args(args)
    except ParseError as exc:
        return str(exc)
    return None


def registered_architectures(models_dir: Path, disabled: tuple[str, ...] = ()) -> set[str]:
    """The class names the model registry collects: every `EntryClass = X` / `EntryClass = [X, Y]` of the modules
    in models/, but those SGLANG_DISABLED_MODEL_ARCHS names (module names, as the registry skips them)."""
    names: set[str] = set()
    for path in sorted(models_dir.glob("*.py")):
        if path.stem in disabled:
            continue
        try:
            tree = ast.parse(path.read_text(encoding="utf-8", errors="replace"), filename=str(path))
        except SyntaxError:
            continue
        for node in tree.body:
            targets = node.targets if isinstance(node, ast.Assign) else (
                [node.target] if isinstance(node, ast.AnnAssign) and node.value is not None else [])
            if not any(isinstance(t, ast.Name) and t.id == "EntryClass" for t in targets):
                continue
            value = node.value
            items = value.elts if isinstance(value, (ast.List, ast.Tuple)) else [value]
            for item in items:
                if isinstance(item, ast.Name):
                    names.add(item.id)
                elif isinstance(item, ast.Attribute):
                    names.add(item.attr)
    return names


def package_dir(package: str) -> Path | None:
    """Where a package's modules are, without importing it (importing sglang's model modules loads CUDA)."""
    top, _, rest = package.partition(".")
    spec = importlib.util.find_spec(top)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0]).joinpath(*[p for p in rest.split(".") if p])


def registry(env: dict[str, str]) -> set[str] | None:
    """What this SGLang's ModelRegistry holds for an arm's env: sglang.srt.models, or the package
    SGLANG_EXTERNAL_MODEL_PACKAGE names instead (both as the registry reads them); None when not found."""
    external = env.get("SGLANG_EXTERNAL_MODEL_PACKAGE", "").strip()
    disabled = tuple(s.strip() for s in env.get("SGLANG_DISABLED_MODEL_ARCHS", "").split(",") if s.strip())
    where = package_dir(external) if external else package_dir("sglang.srt.models")
    if where is None or not where.is_dir():
        return None
    return registered_architectures(where, disabled)


def check_path(entry: dict, registered: set[str] | None, model_impl: str) -> list[str]:
    """Problems with one model path (model or draft): missing, no config.json, an unregistered architecture."""
    key, path = entry["key"], Path(entry["path"])
    if not path.is_dir():
        return [f"{key}: {path} does not exist on the model volume (or is not a directory); copy the weights "
                f"there, or fix {key} / model.volume"]
    config = path / "config.json"
    if not config.is_file():
        return [f"{key}: {path} holds no config.json, so it is not a Hugging Face checkpoint directory; point "
                f"{key} at the directory that holds config.json"]
    try:
        architectures = json.loads(config.read_text(encoding="utf-8")).get("architectures") or []
    except (ValueError, AttributeError) as exc:
        return [f"{key}: {config} is not readable JSON ({exc}); fix or replace the checkpoint's config.json"]
    if registered is None or model_impl == "transformers":
        return []
    if not any(a in registered for a in architectures):
        return [f"{key}: config.json architectures {architectures} are not registered by this image's SGLang "
                f"(its models/ register {len(registered)} classes); use a server image whose SGLang serves them "
                "(sglab:image), or run the model through the Transformers backend (--model-impl transformers in "
                "server.extra-args)"]
    return []


def _model_impl(args: list[str]) -> str:
    for i, arg in enumerate(args):
        if arg == "--model-impl" and i + 1 < len(args):
            return args[i + 1]
        if arg.startswith("--model-impl="):
            return arg.split("=", 1)[1]
    return "auto"


def _flag_value(args: list[str], flag: str) -> str | None:
    for i, token in enumerate(args[:-1]):
        if token == flag:
            return args[i + 1]
    return None


def resolve_with_sglang(args: list[str], env: dict[str, str]) -> str | None:
    """The problem SGLang's own value checks find in args its parser took, or None: `ServerArgs.resolve_once`
    (the post-init checks: speculative handlers per algorithm, adaptive tiers, draft and target config reads), run
    with `--device cuda` as on the GPU node, the arm's env set. An SGLang without resolve_once: None (not checked)."""
    from sglang.srt.server_args import prepare_server_args

    saved = dict(os.environ)
    os.environ.update(env)
    try:
        try:
            server_args = prepare_server_args([*args, "--device", "cuda"])
        except SystemExit:  # the parser already passed these args; a flag that reads a file may still exit
            return "SGLang's argument preparation exited"
        resolve = getattr(server_args, "resolve_once", None)
        if resolve is None:
            return None
        try:
            resolve()
        except Exception as exc:  # SGLang's checks raise ValueError, AssertionError, NotImplementedError, ...
            return f"{type(exc).__name__}: {exc}"
        return None
    finally:
        os.environ.clear()
        os.environ.update(saved)


def run(spec: dict, env: dict[str, str]) -> tuple[list[str], list[str]]:
    """(problems, notes) for the whole spec: every arm's args, then every model path."""
    problems: list[str] = []
    notes: list[str] = []
    values = {**RANK_DEFAULTS, **env}
    try:
        for arm in spec["arms"]:
            args = expand(list(arm["args"]), values)
            problem = parse_with_sglang(args)
            if problem is not None:
                problems.append(f"arm {arm['name']}: SGLang's launch_server parser refuses the launch command: "
                                f"{problem}; fix the stack key behind that flag (sglab validate --stack "
                                f"{spec['stack']} shows the command), or use an image whose SGLang accepts it")
                continue
            model = _flag_value(args, "--model-path")
            if model is None or not model.startswith("/"):  # a hub id: resolution would download its config
                skipped = f"arm {arm['name']}: SGLang's value checks skipped (the model is not a mounted path)"
                notes.append(skipped)
                continue
            problem = resolve_with_sglang(args, {**values, **arm.get("env", {})})
            if problem is not None:
                problems.append(f"arm {arm['name']}: SGLang's own value checks (ServerArgs resolution) refuse the "
                                f"launch command: {problem}; fix the stack key behind it (sglab validate --stack "
                                f"{spec['stack']} shows the command), or use an image whose SGLang accepts it")
    except ImportError as exc:
        problems.append(f"the server image {spec['image']} has no importable sglang ({exc}); set sglab:image to an "
                        "SGLang server image")
        return problems, notes
    first = spec["arms"][0] if spec["arms"] else {"args": [], "env": {}}
    registered = registry({**env, **first.get("env", {})})
    if registered is None:
        notes.append("the model registry's package was not found: the architecture check was skipped")
    impl = _model_impl(list(first["args"]))
    for entry in spec["paths"]:
        problems += check_path(entry, registered, impl)
    return problems, notes


def report(problems: list[str], notes: list[str], termination_log: str) -> str:
    lines = [f"preflight failed ({len(problems)} problem{'s' if len(problems) != 1 else ''}):"] if problems else [
        "preflight passed"]
    lines += [f"- {p}" for p in problems] + [f"note: {n}" for n in notes]
    text = "\n".join(lines)
    if problems:
        try:
            with open(termination_log, "w", encoding="utf-8") as handle:
                handle.write(text[:MAX_MESSAGE])
        except OSError:
            pass
    return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spec", required=True)
    parser.add_argument("--termination-log", default=TERMINATION_LOG)
    args = parser.parse_args(argv)
    spec = json.loads(Path(args.spec).read_text(encoding="utf-8"))
    problems, notes = run(spec, dict(os.environ))
    print(report(problems, notes, args.termination_log), file=sys.stderr if problems else sys.stdout)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
