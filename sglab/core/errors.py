"""How sglab fails: the one error bad input raises (ConfigError, with a "did you mean" guess), and the table of
every exit status a command or Job returns (what the number means and who returns it).

ConfigError sits on the ground floor so that every layer may raise or catch it (`results/` need not import
`config/`). A verdict is printed, not returned: `sglab bench`, `compare` and `sweep` exit 0 whether the candidate
is promoted or not (scripts read `verdict:` or result.json). The statuses that mean a decision are the serving
judges', which a Kubernetes Job or Argo Rollouts reads (0 is Successful, anything else Failed).
docs/troubleshooting.md's table is generated from EXIT_STATUSES (`python -m sglab.core.errors`);
tests/test_exit_statuses.py keeps both true.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from pathlib import Path

from sglab.core.untrusted import printable


class ConfigError(Exception):
    """Bad stack input. `str()` is the whole user-facing message (file[:line]: key: problem, then the fix)."""

    def __init__(self, file: Path | str, key: str | None, problem: str, fix: str | None = None,
                 line: int | None = None):
        self.file = str(file)
        self.key = key
        self.problem = problem
        self.fix = fix
        self.line = line
        super().__init__(self.render())

    def render(self) -> str:
        """Every part may quote the file it is about (a key name, a value): each is made `printable`."""
        where = printable(self.file, limit=300) + (f":{self.line}" if self.line else "")
        problem = printable(self.problem, limit=2000)
        head = f"{where}: {printable(self.key, limit=200)}: {problem}" if self.key else f"{where}: {problem}"
        return head + (f"\n  fix: {printable(self.fix, limit=2000)}" if self.fix else "")


def guess(word: str, options: list[str]) -> str | None:
    """The closest option to a misspelt word, for 'did you mean ...?' fixes (None when nothing is close)."""
    match = difflib.get_close_matches(word, options, n=1, cutoff=0.6)
    return match[0] if match else None


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
               "another config than the stable, and no rollout explains it (its follower did not move it)",
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
