"""extra-args as SGLang's parser reads them, wherever a stack has them: `server.extra-args` (both arms),
`candidate.confounds.server.extra-args` (the candidate, a confound) and `candidate.speculative.extra-args`
(the speculative block's other --speculative-* flags, never a confound).
"""

from __future__ import annotations

from sglab.config.base import SECRETS_FIX
from sglab.sglang import flags, honesty
from sglab.sglang.secret_names import secret_word

SPECULATIVE_PREFIX = "--speculative-"
SPECULATIVE_EXTRA_ARGS = "candidate.speculative.extra-args"
# SGLang's other --speculative-* flags, which sglab passes through candidate.speculative.extra-args untyped (read
# from SGLang's speculative arguments, srt/server_args.py and srt/arg_groups/spec.py); with the typed ones of
# sglab/sglang/flags.py they are every --speculative-* flag there is, so any other is a misspelling. A flag newer
# than the image's release is SGLang's to refuse at start. Adding one is one name here.
SGLANG_SPECULATIVE_FLAGS = frozenset({
    "--speculative-draft-model-revision", "--speculative-draft-load-format", "--speculative-draft-model-quantization",
    "--speculative-draft-attention-backend", "--speculative-draft-kv-cache-dtype", "--speculative-draft-window-size",
    "--speculative-moe-runner-backend", "--speculative-moe-a2a-backend", "--speculative-dsa-topk-backend",
    "--speculative-use-rejection-sampling", "--speculative-skip-dp-mlp-sync",
    "--speculative-dspark-sps-table-path", "--speculative-dspark-confidence-sts-path",
    "--speculative-dspark-align-verify-tokens-to-graph-tier", "--speculative-ngram-external-corpus-max-tokens",
})


def check_extra_args(args: list[str], *, speculative: bool = False) -> list[str]:
    """extra-args as SGLang's parser reads them: no ambiguous abbreviation, no managed flag by any spelling,
    no flag named like a secret, and --speculative-* flags only in the speculative block (`speculative`:
    the list is candidate.speculative.extra-args, which holds nothing else).

    A malformed list (a value without its flag) is left to SGLang, which refuses it loudly at start.
    """
    try:
        flags.decode(args)
    except flags.FlagError as exc:
        raise ValueError(f"{exc}; fix the argument list (SGLang's launch_server would refuse it)") from None
    if faked := honesty.lossy_args(args):  # before the other checks: say it is lossy, not only who renders it
        raise ValueError(honesty.refusal(faked, "extra-args"))
    conflict = flags.secret_conflict(args) or _secret_shaped(args) or flags.managed_conflict(args) or \
        _unknown_speculative(args) or _misplaced(args, speculative)
    if conflict:
        raise ValueError(conflict)
    return args


def _options(args: list[str]) -> list[tuple[str, str]]:
    """(option as written, the flag SGLang reads it as) for every --flag in args."""
    out = []
    for token in args:
        if token.startswith("--") and token != "--":
            option = token.partition("=")[0]
            found = flags.spelled_as(option)
            out.append((option, found[0].name if found is not None else option))
    return out


def _secret_shaped(args: list[str]) -> str | None:
    for option, name in _options(args):
        word = secret_word(name)
        if word is not None:
            return (f"{option} is named like a secret (the word '{word}'), so its value would be printed by validate "
                    f"and render and stored in plain text; remove it from extra-args: {SECRETS_FIX}")
    return None


def _unknown_speculative(args: list[str]) -> str | None:
    """A --speculative-* flag SGLang does not have: its parser refuses it only at start, and until then validate
    would report "confounds: none" for a run that never starts."""
    for option, name in _options(args):
        if name.startswith(SPECULATIVE_PREFIX) and flags.spelled_as(option) is None and \
                not any(known.startswith(option) for known in SGLANG_SPECULATIVE_FLAGS):
            typed = [f.name for f in flags.FLAGS if f.name.startswith(SPECULATIVE_PREFIX) and not f.managed_by]
            allowed = ", ".join(sorted([*typed, *SGLANG_SPECULATIVE_FLAGS]))
            return (f"{option} is not a --speculative-* flag of SGLang (its launch_server would refuse it at start); "
                    f"fix the spelling: {SPECULATIVE_EXTRA_ARGS} may set {allowed}, "
                    "and the others are keys of candidate.speculative (docs/config.md). A flag newer than sglab "
                    "knows is one name in sglab/config/extra_args.py")
    return None


def _misplaced(args: list[str], speculative: bool) -> str | None:
    for option, name in _options(args):
        spelled = "" if option == name else f" (SGLang reads it as {name})"
        if name.startswith(SPECULATIVE_PREFIX) and not speculative:
            return (f"{option}{spelled} is a flag of the candidate's speculative block, so here it would either reach "
                    "the baseline or hide from the confounds; move it to " + SPECULATIVE_EXTRA_ARGS)
        if speculative and not name.startswith(SPECULATIVE_PREFIX):
            return (f"{option}{spelled} is not a --speculative-* flag, and {SPECULATIVE_EXTRA_ARGS} holds only the "
                    "speculative block's own flags; put a candidate-only server flag under "
                    "candidate.confounds.server.extra-args (reported as a confound), a shared one under "
                    "server.extra-args")
    return None
