"""Every exit status an sglab command or Job returns, in one table: what the number means and who returns it.

A verdict is printed, not returned: `sglab bench`, `compare` and `sweep` exit 0 whether the candidate is promoted or
not (scripts read `verdict:` or result.json). The statuses that mean a decision are the serving judges', which a
Kubernetes Job or Argo Rollouts reads (0 is Successful, anything else Failed). docs/troubleshooting.md's table is
generated from EXIT_STATUSES (`python -m sglab.core.exits`); tests/test_exit_statuses.py keeps both true.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ExitStatus:
    code: int
    name: str
    meaning: str
    returned_by: str


OK = 0
NO = 1  # a judge said no
USAGE = 2  # bad input; nothing written
UNDECIDED = 3  # measured, nothing decided
UNLIKE = 4  # the comparison is not of like configs
INTERRUPTED = 130  # 128 + SIGINT
BROKEN_PIPE = 141  # 128 + SIGPIPE

EXIT_STATUSES = (
    ExitStatus(OK, "ok", "done: a run measured and judged (whatever its verdict), a check passed, a canary "
               "promotes, the live gain holds (or too few windows to say: `no-data`)", "every command"),
    ExitStatus(NO, "no", "a judge said no: the canary aborts, the live gain fell below zero", "`sglab canary`, the "
               "canary's judge Job, `sglab watch` and its CronJob"),
    ExitStatus(USAGE, "usage", "bad input: a stack, flag, file, result or server answer; one `error:` line names "
               "the file, key and fix, and nothing is written", "every command and Job"),
    ExitStatus(UNDECIDED, "undecided", "measured, but nothing decided: the bench run is invalid (an arm died or "
               "froze; what was measured is kept), or the canary's judge needs more windows (`continue`)",
               "`sglab bench`, `sglab canary`, the judge Job"),
    ExitStatus(UNLIKE, "unlike-configs", "the live comparison is of unlike configs: the standing control runs "
               "another config than the stable (after an aborted promotion that changed shared keys)",
               "`sglab watch` and its CronJob"),
    ExitStatus(INTERRUPTED, "interrupted", "stopped by SIGINT, SIGTERM or SIGHUP: what was measured is kept "
               "(a sweep prints its `--resume`)", "`sglab bench`, `sglab sweep`, every command"),
    ExitStatus(BROKEN_PIPE, "broken-pipe", "its output's reader went away (`sglab ...` piped into `head`)",
               "every command"),
)


def markdown_table() -> str:
    rows = ["| exit | name | meaning | returned by |", "|---|---|---|---|"]
    rows += [f"| {s.code} | `{s.name}` | {s.meaning} | {s.returned_by} |" for s in EXIT_STATUSES]
    return "\n".join(rows)


if __name__ == "__main__":
    print(markdown_table())
