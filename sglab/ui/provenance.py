"""Whether an interactive run measured the stack's servers: the check promotion makes before trusting it.

An interactive run's arm URLs come from wherever its Locust process got them. Only two sources are
the stack's own: URLs that `sglab ui` started or was given (fixed for the session, `urls_source` "sglab"),
and, in the cluster, the stack's Services (kind "in-cluster", compared here with `stack_urls`). URLs
typed into the web-UI form, or a file that does not say where its URLs came from, are not evidence.
Pure: no I/O, no imports from the rest of sglab beyond the result model.
"""

from __future__ import annotations

from dataclasses import dataclass

from sglab.schema.result import RunResult


@dataclass(frozen=True)
class Refusal:
    problem: str
    fix: str


def refusal(result: RunResult, stack_urls: dict[str, str] | None = None) -> Refusal | None:
    """Why `result` cannot be promotion evidence because of its target, or None. Non-interactive runs pass."""
    if result.kind != "interactive":
        return None
    target, run, stack = result.target, result.run_id, result.stack
    rerun = (f"measure again with `sglab ui --stack {stack}` (do not edit the arm URLs), or "
             f"`sglab bench --stack {stack}`")
    urls = ", ".join(f"{arm} {url}" for arm, url in sorted(target.urls.items())) or "none recorded"
    if target.urls_source is None:
        return Refusal(f"interactive run {run} does not record where its arm URLs came from ({urls}); it was "
                       f"written before sglab recorded it, and its URLs may have been changed in the web-UI form",
                       rerun)
    if target.urls_source == "form":
        return Refusal(f"the arm URLs of interactive run {run} were changed in the web-UI form ({urls}); "
                       f"they are not the stack's servers", rerun)
    if target.kind == "in-cluster":
        if not stack_urls:
            return Refusal(f"interactive run {run} measured in-cluster URLs ({urls}) but the stack's service URLs "
                           f"were not given to compare them with", "pass the stack's service URLs to the check")
        differ = [f"{arm} measured {target.urls.get(arm) or 'nothing'}, the stack's service is {url}"
                  for arm, url in sorted(stack_urls.items()) if target.urls.get(arm) != url]
        if differ:
            return Refusal(f"interactive run {run} did not measure the stack's servers: {'; '.join(differ)}", rerun)
    return None
