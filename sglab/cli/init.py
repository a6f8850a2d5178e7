"""`sglab init --baseline-url B --candidate-url C --out FILE`: a stack file written from two running servers.

What each server reports (/get_server_info: the arguments it runs with) fills the stack keys sglab renders those
flags from (sglab/sglang/flags.py, `managed_by`): the model, the server flags both arms share (the baseline's
values), the candidate's speculative block, and, where the candidate runs another value of a flag the stack lets it
change, a declared confound (`candidate.confounds.server`). A difference the stack cannot express (another model,
tp-size, trust-remote-code) is refused, naming the flag. Before the file is written, each arm of the new stack is
checked against its server exactly as `sglab bench` checks it (the live-flag check); the file is written only when
neither differs. NCCL settings are not reported by SGLang: the file says to declare them.
"""

from __future__ import annotations

import argparse
import io
import sys
import tempfile
from pathlib import Path
from typing import Any

from sglab.cli import UsageError
from sglab.core.errors import USAGE, ConfigError
from sglab.core.paths import write_atomic
from sglab.core.untrusted import printable

SERVER_PREFIX, SPEC_PREFIX = "server.", "candidate.speculative."
NOT_FROM_SERVERS = ("server.port",)  # sglab sets the port per target; the servers' own ports are not the stack's


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("init", help="write a stack file from two running servers (what /get_server_info reports)")
    p.add_argument("--baseline-url", required=True, help="the baseline server, e.g. http://B:30000")
    p.add_argument("--candidate-url", required=True, help="the candidate server (speculative decoding on)")
    p.add_argument("--out", required=True, help="the stack file to write (refused if it exists), e.g. my-stack.yaml")
    p.set_defaults(func=run)


def _value(info: Any, flag: Any) -> Any:
    """The value a server runs a speculative flag with, or None where it runs the default (or does not report it)."""
    value = info.args.get(flag.dest)
    if value is None or value == flag.default or (flag.is_switch and value is False):
        return None
    return value


def _spec_keys(info: Any) -> dict[str, Any]:
    """The candidate's speculative block from what it reports (the flags whose stack key is one key of it)."""
    from sglab.sglang.flags import FLAGS

    out: dict[str, Any] = {}
    for flag in FLAGS:
        key = (flag.managed_by or "")[len(SPEC_PREFIX):] if (flag.managed_by or "").startswith(SPEC_PREFIX) else ""
        if key and "." not in key and (value := _value(info, flag)) is not None:
            out[key] = value
    return out


def stack_from(baseline: Any, candidate: Any) -> dict[str, Any]:
    """The `config:` mapping of a stack whose arms are these two servers; UsageError for what it cannot express."""
    from sglab.config.server import ServerOverrides
    from sglab.sglang.flags import FLAGS

    overridable = {name.replace("_", "-") for name in ServerOverrides.model_fields}
    server: dict[str, Any] = {}
    confounds: dict[str, Any] = {}
    for flag in FLAGS:
        managed = flag.managed_by or ""
        if not managed.startswith(SERVER_PREFIX) or managed in NOT_FROM_SERVERS:
            continue
        key = managed[len(SERVER_PREFIX):]
        base, cand = baseline.args.get(flag.dest), candidate.args.get(flag.dest)
        if base is not None:  # every value it reports, defaults included: the stack's defaults are not SGLang's
            server[key] = base
        if base != cand:
            if key not in overridable:
                raise UsageError(f"the servers differ in {flag.name} ({base!r} on the baseline, {cand!r} on the "
                                 "candidate), which a stack runs the same on both arms; launch them alike but for "
                                 "speculative decoding (and the flags a candidate may change: "
                                 f"{', '.join(sorted(overridable - {'extra-args'}))})")
            confounds[key] = cand
    model = {"path": baseline.args.get("model_path")}
    other = candidate.args.get("model_path")
    if other != model["path"]:
        raise UsageError(f"the servers serve other models ({model['path']!r} and {other!r}): an A/B compares one "
                         "model with and without speculative decoding")
    name = baseline.args.get("served_model_name")
    if name and name != model["path"]:
        model["served-model-name"] = name
    config_extra: dict[str, Any] = {}
    path = str(model["path"] or "")
    if path.startswith("/"):  # in a cluster the weights come from the node (assumed: at the same path there)
        from sglab.config.base import DEFAULT_HOST_PATH_PREFIXES, is_under

        folder = str(Path(path).parent)
        volume: dict[str, Any] = {"kind": "hostPath", "host-path": folder, "mount-path": folder}
        if not any(is_under(folder, prefix) for prefix in DEFAULT_HOST_PATH_PREFIXES):
            volume["host-path-prefixes"] = [folder]
        model["volume"] = volume
    else:  # a Hugging Face Hub id: in a cluster the servers download it into a shared cache
        config_extra["sglab:hf-cache"] = {"size": "2Ti"}
    speculative = _spec_keys(candidate)
    if _spec_keys(baseline).get("algorithm"):
        swapped = "" if speculative.get("algorithm") else " (the two URLs look swapped)"
        raise UsageError(f"{baseline.url} runs speculative decoding too: the baseline is the server without it"
                         f"{swapped}")
    if not speculative.get("algorithm"):
        raise UsageError(f"{candidate.url} runs no speculative decoding (speculative_algorithm is not set): give the "
                         "server that does as --candidate-url")
    config: dict[str, Any] = {"sglab:model": model, **config_extra, "sglab:server": server,
                              "sglab:candidate": {"speculative": speculative}}
    declared: dict[str, Any] = {"server": confounds} if confounds else {}
    nccl = baseline.nccl_env  # the simulator reports its NCCL env; SGLang does not (then the file says to add it)
    if nccl:
        config["sglab:nccl"] = dict(sorted(nccl.items()))
    if (candidate.nccl_env or {}) != (nccl or {}):
        declared["nccl"] = dict(sorted((candidate.nccl_env or {}).items()))
    if declared:
        config["sglab:candidate"]["confounds"] = declared
    return config


def _yaml(config: dict[str, Any], baseline: Any, candidate: Any) -> str:
    from ruamel.yaml import YAML

    buffer = io.StringIO()
    nccl = ("# sglab:nccl is what the servers reported.\n" if "sglab:nccl" in config else
            "# SGLang does not report NCCL settings: add what the servers were launched with under sglab:nccl\n"
            "# (e.g. NCCL_PROTO: LL); the bench cannot check them on a real server.\n")
    buffer.write(f"# Written by `sglab init` from {baseline.url} (baseline) and {candidate.url} (candidate), as\n"
                 "# /get_server_info reported them.\n" + nccl +
                 "# For a cluster (pulumi up), model.volume assumes the weights sit at the same path on the GPU\n"
                 "# nodes, and sglab:image is the pinned SGLang release: check both (docs/deploy.md).\n")
    yaml = YAML()
    yaml.default_flow_style = False
    yaml.dump({"config": config}, buffer)
    return buffer.getvalue()


def run(args: argparse.Namespace) -> int:
    from sglab.config import baseline_arm, candidate_arm
    from sglab.config.loader import load_stack
    from sglab.load.targets import live_mismatches
    from sglab.sglang.client import ServerInfoError, get_server_info

    out = Path(args.out)
    if out.exists():
        raise UsageError(f"{out} exists; give another --out (sglab init never overwrites a stack file)")
    infos = []
    for role, url in (("baseline", args.baseline_url), ("candidate", args.candidate_url)):
        try:
            infos.append(get_server_info(url))
        except ServerInfoError as exc:
            raise UsageError(f"cannot read the {role} server's /get_server_info at {url}: {exc}") from None
    text = _yaml(stack_from(*infos), *infos)
    with tempfile.TemporaryDirectory() as tmp:  # the file as it will be, validated and checked before it is written
        draft = Path(tmp) / f"Pulumi.{out.stem.removeprefix('Pulumi.')}.yaml"
        draft.write_text(text, encoding="utf-8")
        try:
            stack = load_stack(draft.stem.removeprefix("Pulumi."), path=draft).config
        except ConfigError as exc:  # a value the servers report that no stack may hold (untrusted input)
            raise UsageError(f"the servers report {exc.key or 'a value'} as a stack refuses it: {exc.problem}; "
                             f"write {out} by hand from a shipped stack (stacks/)") from None
        differences = live_mismatches(baseline_arm(stack), infos[0]) + live_mismatches(candidate_arm(stack), infos[1])
    if differences:
        print("error: the stack written from the servers would not match them:\n" +
              "\n".join(f"  - {printable(d)}" for d in differences), file=sys.stderr)
        return USAGE
    try:
        write_atomic(out, text, overwrite=False)  # never over a file that appeared while the servers were read
    except FileExistsError:
        raise UsageError(f"{out} exists; sglab init never overwrites a file: give another --out") from None
    print(f"wrote {out}: both arms match their servers' live flags")
    print(printable(f"next: sglab validate --stack {out}; then sglab bench --stack {out} --baseline-url "
                    f"{args.baseline_url} --candidate-url {args.candidate_url}", limit=None))
    return 0
