"""Checks that need the whole stack and the SGLang contract: each arm's flags against its image's release,
--speculative-adaptive's rules, and what UNO asks of the server.

sglab's flag table is SGLang 0.5.23's (sglab/sglang/version.py). An image that names another release gets
its flags checked against what sglab knows of that release: a flag or algorithm newer than it (`since`
in sglab/sglang/flags.py and rules.py) is refused with the image named. An image whose release sglab
cannot tell (a digest alone, `latest`, a custom tag) or does not know gets a warning that says so.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING

from sglab.config.base import KeyedValueError
from sglab.sglang import flags, rules
from sglab.sglang.version import DEFAULT_IMAGE, OLDEST_KNOWN, SGLANG_VERSION, at_least, parse_image, version_key

if TYPE_CHECKING:
    from sglab.config.stack import StackConfig


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
