"""Read `stacks/Pulumi.<stack>.yaml` into a `StackConfig`, turning every failure into one clear message, and check
what needs the whole validated stack and the SGLang contract (`check_contract`).

The message always names the file, the key path (as written in the file), the problem and the fix;
callers print it and exit 2. No traceback reaches a user for bad input.

The contract checks: each arm's flags against its image's release, --speculative-adaptive's rules, and what UNO
asks of the server. sglab's flag table is SGLang 0.5.23's (sglab/sglang/flags.py). An image that names another
release gets its flags checked against what sglab knows of that release: a flag or algorithm newer than it
(`since` in sglab/sglang/flags.py and rules.py) is refused with the image named. An image whose release sglab
cannot tell (a digest alone, `latest`, a custom tag) or does not know gets a warning that says so.
"""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError
from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError

from sglab.config.stack import SECRET_FIELDS, StackConfig
from sglab.config.base import KeyedValueError
from sglab.config.nccl import KNOWN_NCCL_KEYS, UnknownNcclKeyWarning
from sglab.core.errors import ConfigError, guess
from sglab.core.paths import list_stacks, project_root, stack_path, stacks_dir
from sglab.sglang.secret_names import has_url_credentials, is_secret_name
from sglab.core.untrusted import is_control
from sglab.sglang import flags, rules
from sglab.sglang.flags import DEFAULT_IMAGE, OLDEST_KNOWN, SGLANG_VERSION, at_least, parse_image, version_key


NAMESPACE = "sglab"
# Other namespaces a stack file may hold (provider settings); everything else is a typo.
FOREIGN_NAMESPACES = ("kubernetes", "pulumi")


@dataclass(frozen=True)
class LoadedStack:
    name: str
    path: Path
    config: StackConfig
    warnings: list[str] = field(default_factory=list)
    raw: dict[str, Any] = field(default_factory=dict)


# Pulumi's rule for stack names (letters, digits, '-', '_', '.'; at most 100 characters).
_STACK_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,100}$")


def load_stack(name: str, root: Path | None = None, *, path: Path | None = None) -> LoadedStack:
    """Load and validate a stack by name (or an explicit file path)."""
    if path is None and not _STACK_NAME.match(name):
        shown = name if len(name) <= 40 else name[:40] + "..."
        raise ConfigError(stacks_dir(root), None, f"{shown!r} ({len(name)} characters) is not a stack name",
                          "a stack name is 1 to 100 letters, digits, '-', '_' or '.' (the file is "
                          "stacks/Pulumi.<name>.yaml); see `sglab validate --help` or list stacks/")
    path = path or stack_path(name, root)
    try:
        exists = path.exists()
    except OSError as exc:
        raise ConfigError(path, None, f"cannot read the stack file: {exc.strerror}") from None
    if not exists:
        known = ", ".join(list_stacks(root)) or "none"
        if path.parent != stacks_dir(root):  # named by its path (`--stack ./my-stack.yaml`)
            raise ConfigError(path, None, "stack file not found", f"check the path; or name a stack: {known}")
        raise ConfigError(path, None, f"stack file not found (stack '{name}')", f"known stacks: {known}; "
                          f"or create {path.name} under stacks/")
    document = _read_yaml(path)
    namespaced = _sglab_keys(document, path)
    return load_mapping(name, path, namespaced)


def promotion_target_path(stack: StackConfig, stack_name: str, directory: Path, where: Path | str) -> Path | None:
    """The file of `sglab:promote-to` beside the stack in `directory`: None when the target is the stack itself or
    is the default and absent; a target named on purpose that does not exist is a ConfigError (`where`: the stack's
    file, for the message). Read by bench (its target's gate) and by the benchmark Job (the file it carries)."""
    target = stack.promote_to
    if target == stack_name:
        return None
    path = directory / f"Pulumi.{target}.yaml"
    if path.is_file():
        return path
    if "promote_to" in stack.model_fields_set:
        raise ConfigError(where, "sglab:promote-to", f"names stack '{target}', but {path} does not exist",
                          "name an existing stack (stacks/Pulumi.<name>.yaml) or leave sglab:promote-to out")
    return None


def load_mapping(name: str, path: Path, namespaced: dict[str, Any]) -> LoadedStack:
    """Validate the keys of the `sglab:` namespace (already stripped of the prefix)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", UnknownNcclKeyWarning)
        warnings.simplefilter("always", ImageVersionWarning)
        try:
            config = StackConfig.model_validate(_plain(namespaced))
        except ValidationError as exc:
            raise _from_validation(exc, path, namespaced) from None
        try:  # needs the arms' effective launch commands, so it runs on the validated model
            check_contract(config)
        except KeyedValueError as exc:
            key = f"{NAMESPACE}:" + ".".join(str(p) for p in exc.loc)
            problem, _, fix = str(exc).partition(";")
            raise ConfigError(path, key, problem.strip(), fix.strip() or "see docs/config.md",
                              _line_at(namespaced, exc.loc)) from None
    notes = [f"{path}: {w.message}" for w in caught
             if issubclass(w.category, (UnknownNcclKeyWarning, ImageVersionWarning))]
    return LoadedStack(name=name, path=path, config=config, warnings=notes, raw=namespaced)


# Shipped stacks are 1-2 KB. ruamel's round-trip parser is superlinear (measured: 115 KiB of keys in one
# mapping take 2.7 s, 512 KiB of comments 1.8 s), so anything far beyond a real stack is refused unread.
MAX_STACK_BYTES = 64 * 1024
# Values after YAML aliases (&a / *a) are expanded: a 1.6 KB file of nested aliases expands to 10^9.
MAX_EXPANDED_VALUES = 20_000
_BOMS = ((b"\xef\xbb\xbf", "utf-8-sig"), (b"\xff\xfe\x00\x00", "utf-32"), (b"\x00\x00\xfe\xff", "utf-32"),
         (b"\xff\xfe", "utf-16"), (b"\xfe\xff", "utf-16"))


def _read_text(path: Path) -> str:
    """The file as text: bounded in size, UTF-8 (a byte-order mark of UTF-8/16/32 is honoured)."""
    try:
        size = path.stat().st_size
        if size > MAX_STACK_BYTES:
            raise ConfigError(path, None, f"the stack file is {size / 1024 / 1024:.1f} MiB, larger than the "
                              f"{MAX_STACK_BYTES // 1024} KiB a stack file may be",
                              "a stack holds a few settings (the shipped ones are 1-2 KB): remove what is not "
                              "sglab config (long comments, pasted data)")
        with path.open("rb") as handle:
            data = handle.read(MAX_STACK_BYTES + 1)
    except OSError as exc:
        raise ConfigError(path, None, f"cannot read the stack file: {exc.strerror}") from None
    encoding = next((name for bom, name in _BOMS if data.startswith(bom)), "utf-8")
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise ConfigError(path, None, f"not UTF-8 text (byte {exc.start}: {data[exc.start:exc.start + 1]!r})",
                          "save the file as UTF-8", line) from None


def _read_yaml(path: Path) -> Any:
    text = _read_text(path)
    try:
        document = YAML(typ="rt").load(text)
    except YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigError(path, None, f"broken YAML: {problem}",
                          "fix the indentation/quoting at that line (YAML uses spaces, not tabs)", line) from None
    except RecursionError:
        raise ConfigError(path, None, "the YAML is nested too deeply to read",
                          "a stack file is a few levels deep; remove the nesting") from None
    _check_expansion(document, path)
    return document


def _check_expansion(document: Any, path: Path) -> None:
    """Refuse a document whose aliases expand beyond MAX_EXPANDED_VALUES values (a "billion laughs").

    Counts with memoisation on the shared nodes, so the count itself costs one pass over the file's nodes.
    """
    sizes: dict[int, int] = {}

    def size(node: Any, depth: int) -> int:
        if depth > 100:
            raise ConfigError(path, None, "the YAML is nested more than 100 levels deep",
                              "a stack file is a few levels deep; remove the nesting")
        if not isinstance(node, (dict, list)):
            return 1
        known = sizes.get(id(node))
        if known is not None:
            return known
        children = node.values() if isinstance(node, dict) else node
        total = 1
        for child in children:
            total += size(child, depth + 1)
            if total > MAX_EXPANDED_VALUES:
                break
        sizes[id(node)] = total
        return total

    if size(document, 0) > MAX_EXPANDED_VALUES:
        raise ConfigError(path, None, f"YAML aliases (&name / *name) expand this file to more than "
                          f"{MAX_EXPANDED_VALUES} values", "write the values out, or use aliases only for a few "
                          "repeated small blocks")


def _sglab_keys(document: Any, path: Path) -> dict[str, Any]:
    if document is None:
        raise ConfigError(path, None, "the file is empty", "add a config: section with sglab:* keys")
    if not isinstance(document, dict):
        raise ConfigError(path, None, "the top level must be a mapping with a config: section")
    config = document.get("config")
    if not isinstance(config, dict):
        raise ConfigError(path, "config", "missing or not a mapping", "put the stack's settings under config:")
    out: dict[str, Any] = {}
    for key in config:
        key_str = str(key)
        namespace, sep, rest = key_str.partition(":")
        if any(is_control(ch) for ch in key_str):
            raise ConfigError(path, None, f"the key {key_str[:80]} contains a control character "
                              "(shown escaped)", "rename it", _line(config, key))
        if not sep:
            raise ConfigError(path, f"config.{key_str}", "config keys need a namespace",
                              f"write it as {NAMESPACE}:{key_str}", _line(config, key))
        if namespace == NAMESPACE:
            out[rest] = config[key]
        elif namespace not in FOREIGN_NAMESPACES:
            guess = _guess(namespace, [NAMESPACE, *FOREIGN_NAMESPACES])
            raise ConfigError(path, key_str, f"unknown config namespace '{namespace}'",
                              f"did you mean {guess}:{rest}?" if guess else f"use {NAMESPACE}:{rest}",
                              _line(config, key))
    out["__lines__"] = {str(k).partition(":")[2]: _line(config, k) for k in config}
    out["__nodes__"] = {str(k).partition(":")[2]: config[k] for k in config}
    return out


def _plain(value: Any) -> Any:
    """ruamel's round-trip types -> plain dict/list/scalars (and drop our line bookkeeping)."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items() if k not in ("__lines__", "__nodes__")}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, str):
        return str(value)
    return value


def _line(mapping: Any, key: Any) -> int | None:
    try:
        return mapping.lc.key(key)[0] + 1
    except Exception:
        return None


def _line_at(namespaced: dict[str, Any], loc: tuple[Any, ...]) -> int | None:
    """Line of the deepest key along `loc` that is in the file (a missing key points at its parent)."""
    if not loc:
        return None
    line = namespaced.get("__lines__", {}).get(str(loc[0]))
    node = namespaced.get("__nodes__", {}).get(str(loc[0]))
    for part in loc[1:]:
        if isinstance(node, dict) and part in node:
            line = _line(node, part) or line
            node = node[part]
        elif isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
            try:
                line = node.lc.item(part)[0] + 1  # type: ignore[attr-defined]  # ruamel's CommentedSeq
            except Exception:
                pass
            node = node[part]
        else:
            break
    return line


_guess = guess  # the old private name


def _field_names(model: type[BaseModel]) -> list[str]:
    return [(f.alias or n).replace("_", "-") for n, f in model.model_fields.items()]


def _model_at(loc: tuple[Any, ...]) -> type[BaseModel] | None:
    """Walk StackConfig's fields along a validation location to find the model owning the last key."""
    model: Any = StackConfig
    for part in loc[:-1]:
        if isinstance(part, int):  # an item of a list of models (e.g. serving.steps.0)
            continue
        if not (isinstance(model, type) and issubclass(model, BaseModel)):
            return None
        fields = {(f.alias or n).replace("_", "-"): f for n, f in model.model_fields.items()}
        fld = fields.get(str(part))
        if fld is None:
            return None
        model = _unwrap(fld.annotation)
    return model if isinstance(model, type) and issubclass(model, BaseModel) else None


def _unwrap(annotation: Any) -> Any:
    args = getattr(annotation, "__args__", None)
    if args:
        for arg in args:
            if isinstance(arg, type) and issubclass(arg, BaseModel):
                return arg
    return annotation


# Keys a user may look for in one section that are declared once, in another (key -> where, and why).
DECLARED_ELSEWHERE = {"traffic.slo": "policy.slo: the SLO is the gate's, declared once with or without sglab:traffic"}


def _from_validation(exc: ValidationError, path: Path, namespaced: dict[str, Any]) -> ConfigError:
    """The first (most specific) pydantic error as a ConfigError with a key path and a fix."""
    err = exc.errors(include_url=False)[0]
    loc = tuple(p for p in err["loc"] if not (isinstance(p, str) and p.startswith("function-")))
    loc = tuple(p for p in loc if p not in ("literal_error",))
    keyed = err.get("ctx", {}).get("error")
    if isinstance(keyed, KeyedValueError):
        loc = loc + keyed.loc
    key = f"{NAMESPACE}:" + ".".join(str(p)[:80] for p in loc) if loc else NAMESPACE
    line = _line_at(namespaced, loc)
    kind = err["type"]
    msg = err["msg"]
    if msg.startswith("Value error, "):
        msg = msg[len("Value error, "):]
    fix: str | None = None
    if kind == "extra_forbidden":
        owner = _model_at(loc)
        options = _field_names(owner) if owner else []
        guess = _guess(str(loc[-1]), options)
        problem = f"unknown key '{str(loc[-1])[:80]}'"
        fix = f"did you mean '{guess}'?" if guess else (f"valid keys here: {', '.join(options)}" if options else
                                                       "remove it")
        elsewhere = DECLARED_ELSEWHERE.get(".".join(str(p) for p in loc))
        if elsewhere:
            fix = f"move it to {elsewhere}"
        if len(loc) == 1:
            problem = f"unknown key '{str(loc[0])[:80]}' (not a sglab setting)"
        return ConfigError(path, key, problem, fix, line)
    if kind == "missing":
        return ConfigError(path, key, "required key is missing", f"add {loc[-1]}: to this section", line)
    if kind == "literal_error":
        expected = err.get("ctx", {}).get("expected", "")
        fix = f"use one of {expected}"
        return ConfigError(path, key, f"invalid value {repr(err.get('input'))[:80]}", fix, line)
    if "nccl" in [str(p) for p in loc] and "NCCL_" in msg and ";" not in msg:
        fix = "use one of the values NCCL documents (see docs/config.md#nccl)"
    if kind.endswith("_type") or kind.endswith("_parsing"):
        secret = any(is_secret_name(str(p)) or str(p).replace("-", "_") in SECRET_FIELDS for p in loc) or \
            has_url_credentials(str(err.get("input")))
        got = "" if secret else f" (got {repr(err.get('input'))[:80]})"
        return ConfigError(path, key, f"{msg}{got}", "give a value of that type", line)
    if ";" in msg and fix is None:
        problem, _, rest = msg.partition(";")
        return ConfigError(path, key, problem.strip(), rest.strip(), line)
    if ": " in msg and fix is None and msg.split(": ", 1)[0].endswith("missing"):
        problem, _, rest = msg.partition(": ")
        return ConfigError(path, key, problem, rest, line)
    return ConfigError(path, key, msg, fix or "see docs/config.md", line)


__all__ = [
    "ConfigError",
    "LoadedStack",
    "KNOWN_NCCL_KEYS",
    "list_stacks",
    "load_mapping",
    "load_stack",
    "project_root",
    "stack_path",
    "stacks_dir",
]


class ImageVersionWarning(UserWarning):
    """The image's SGLang release could not be checked fully; the message says why and names the image."""


def check_image(image: str, key: str) -> None:
    """An image reference a container runtime accepts (tag and/or sha256 digest)."""
    try:
        parse_image(image)
    except ValueError as exc:
        raise KeyedValueError(key, f"{exc}; give repository[:tag][@sha256:<digest>], e.g. {DEFAULT_IMAGE}") from None


def newer_than_image(argv: tuple[str, ...], version: str) -> list[str]:
    """Each flag or algorithm in argv that the release `version` does not have yet, as 'what (since X)'."""
    found = []
    decoded = flags.decode(argv)
    for name in decoded:
        known = flags.resolve(name) if name.startswith("--") else None
        if known is not None and known.since and not at_least(version, known.since):
            found.append(f"{known.name} (SGLang {known.since} and later)")
    algorithm = decoded.get("--speculative-algorithm")
    if isinstance(algorithm, str) and algorithm in rules.SPECULATIVE_ALGORITHMS:
        since = rules.algorithm(algorithm).since
        if since and not at_least(version, since):
            found.append(f"--speculative-algorithm {algorithm} (SGLang {since} and later)")
    return found


def _check_arm_image(image: str, argv: tuple[str, ...], key: str, role: str) -> None:
    version = parse_image(image).version
    if version is None:
        warnings.warn(f"{key} {image}: its tag names no SGLang release sglab can read, so sglab cannot check the "
                      f"{role}'s flags against it (they are checked against SGLang {SGLANG_VERSION}); use a release "
                      f"tag, pinned by digest: {DEFAULT_IMAGE}@sha256:<digest>", ImageVersionWarning, stacklevel=2)
        return
    if version == SGLANG_VERSION:
        return
    newer = newer_than_image(argv, version)
    if newer:
        raise KeyedValueError(key, f"image {image} is SGLang {version}, which does not have {', '.join(newer)}: "
                              f"the {role} would not start; use image {DEFAULT_IMAGE} (pin its digest) or remove "
                              "those settings")
    if version_key(version) < version_key(OLDEST_KNOWN):
        what = f"older than {OLDEST_KNOWN}, the oldest release sglab knows"
    elif version_key(version) > version_key(SGLANG_VERSION):
        what = f"newer than {SGLANG_VERSION}, the release sglab's flag table and contract test describe"
    else:
        what = (f"not {SGLANG_VERSION}: sglab checked only for flags added after it (flags removed or changed "
                "since are not known)")
    warnings.warn(f"{key} {image} is SGLang {version}, {what}; pin {DEFAULT_IMAGE} for the checked contract",
                  ImageVersionWarning, stacklevel=2)


def check_images(stack: "StackConfig") -> None:
    """Each arm's launch flags against its own image (GPU backend only: the simulator is no SGLang image)."""
    from sglab.config.arms import baseline_arm, candidate_arm  # not at the top: arms imports the stack models

    check_image(stack.image, "image")
    confounds = stack.candidate.confounds
    if confounds is not None and confounds.image:
        check_image(confounds.image, "candidate.confounds.image")
    if stack.backend != "sglang":
        return
    baseline, candidate = baseline_arm(stack), candidate_arm(stack)
    _check_arm_image(baseline.image, baseline.args, "image", "baseline")
    cand_key = "candidate.confounds.image" if candidate.image != stack.image else "image"
    with warnings.catch_warnings():
        if candidate.image == baseline.image:
            warnings.simplefilter("ignore", ImageVersionWarning)  # said once for the shared image
        _check_arm_image(candidate.image, candidate.args, cand_key, "candidate")


def check_speculative_server(stack: "StackConfig") -> None:
    """SGLang's rules that join the speculative block and the candidate's server flags."""
    from sglab.config.arms import candidate_arm

    spec = stack.candidate.speculative
    decoded = flags.decode(candidate_arm(stack).args)
    if spec.algorithm == "UNO":
        if stack.server.tp_size != 1:
            raise KeyedValueError("server.tp-size", f"algorithm UNO runs only at TP 1 (SGLang refuses tp-size "
                                  f"{stack.server.tp_size}); use another algorithm for a tensor-parallel model")
        if decoded.get("--attention-backend") != "fa3":
            raise KeyedValueError("candidate.speculative.algorithm", "algorithm UNO needs FA3 attention for prefill "
                                  "and decode; add --attention-backend fa3 to server.extra-args")
    if rules.ADAPTIVE_FLAG in decoded:
        steps, topk, _ = spec.resolved_shape()
        why = rules.adaptive_fallback(spec.algorithm, topk)
        if why:
            raise KeyedValueError("candidate.speculative.extra-args", f"{rules.ADAPTIVE_FLAG}: {why}, so SGLang would "
                                  "silently run the candidate static; remove the flag or use EAGLE/EAGLE3 with "
                                  "eagle-topk 1")
        if rules.ADAPTIVE_CONFIG_FLAG not in decoded:
            problem = rules.adaptive_steps_problem(steps)
            if problem:
                raise KeyedValueError("candidate.speculative.num-steps", f"{rules.ADAPTIVE_FLAG}: {problem}; set "
                                      f"num-steps to one of {list(rules.ADAPTIVE_DEFAULT_CANDIDATE_STEPS)} or give "
                                      f"{rules.ADAPTIVE_CONFIG_FLAG} with tiers that include it")


def check_contract(stack: "StackConfig") -> None:
    check_images(stack)
    check_speculative_server(stack)
