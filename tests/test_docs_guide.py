"""The user guide (docs/guide/) stays true to the checkout: its links and anchors resolve, every `sglab` command in
its sh blocks parses with sglab's own parser, its pages exist and stay short, the output it quotes is what the named
file or command holds, and its example stack loads. Fast: no servers, no Locust."""

from __future__ import annotations

import contextlib
import io
import re
import shlex
from pathlib import Path

import pytest

from sglab.cli import UsageError, build_parser, main

ROOT = Path(__file__).resolve().parents[1]
GUIDE = ROOT / "docs" / "guide"
PAGES = ("index.md", "quick-start.md", "your-stack.md", "your-servers.md", "your-cluster.md",
         "reading-the-output.md")
MAX_LINES = 200

# Placeholders a guide command may use, and what each stands for when the command is parsed.
PLACEHOLDERS = {"NAME": "mine", "RUN": "20261201T123502Z-670167", "URL": "http://10.0.0.1:30000"}

LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```(\w*)\s*$")
SGLAB_PREFIXES = ("sglab", ".venv/bin/sglab")
ENV_ASSIGNMENT = re.compile(r"^[A-Z_][A-Z0-9_]*=\S*$")


def guide_pages() -> list[Path]:
    return sorted(GUIDE.glob("*.md"))


def blocks(text: str) -> list[tuple[str, str, str]]:
    """(language, the line before the fence that is not blank, body) of each fenced block."""
    out, lines, i = [], text.splitlines(), 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        before = next((ln for ln in reversed(lines[:i]) if ln.strip()), "")
        end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith("```"))
        out.append((m.group(1), before.strip(), "\n".join(lines[i + 1:end])))
        i = end + 1
    return out


def prose(text: str) -> str:
    """The text outside fenced blocks."""
    out, inside = [], False
    for line in text.splitlines():
        if line.startswith("```"):
            inside = not inside
            continue
        if not inside:
            out.append(line)
    return "\n".join(out)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lowercase, punctuation dropped except '-' and '_', spaces to '-'."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(md: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for line in prose(md.read_text(encoding="utf-8")).splitlines():
        m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not m:
            continue
        base = slug(m.group(1))
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


def links_of(md: Path, only: str | None = None) -> list[str]:
    lines = prose(md.read_text(encoding="utf-8")).splitlines()
    return [t for line in lines if only is None or only in line for t in LINK.findall(line)]


def broken(md: Path, target: str) -> str | None:
    """Why a relative link from `md` does not resolve, or None."""
    if re.match(r"^[a-z]+:", target):
        return None  # http(s), mailto: not this test's business
    path, _, anchor = target.partition("#")
    dest = (md.parent / path).resolve() if path else md
    if not dest.exists():
        return f"{md.relative_to(ROOT)}: {target}: no such file"
    if anchor and dest.suffix == ".md" and anchor not in anchors(dest):
        return f"{md.relative_to(ROOT)}: {target}: no heading with anchor #{anchor} in {dest.relative_to(ROOT)}"
    return None


def link_sources() -> list[tuple[Path, str]]:
    out = [(page, t) for page in guide_pages() for t in links_of(page)]
    out += [(ROOT / "README.md", t) for t in links_of(ROOT / "README.md", only="docs/guide/")]
    for name in ("glossary.md", "troubleshooting.md"):
        out += [(ROOT / "docs" / name, t) for t in links_of(ROOT / "docs" / name, only="guide/")]
    return out


def test_every_guide_page_exists_and_is_short():
    for name in PAGES:
        page = GUIDE / name
        assert page.is_file(), f"docs/guide/{name} is missing"
        lines = page.read_text(encoding="utf-8").count("\n")
        assert lines < MAX_LINES, f"docs/guide/{name} has {lines} lines; keep it under {MAX_LINES}"


def test_the_guide_is_linked_from_the_readme_the_glossary_and_troubleshooting():
    assert "docs/guide/index.md" in links_of(ROOT / "README.md", only="docs/guide/")
    for name in ("glossary.md", "troubleshooting.md"):
        assert "guide/index.md" in links_of(ROOT / "docs" / name), f"docs/{name} does not link the guide"


def test_every_link_and_anchor_resolves():
    sources = link_sources()
    assert len(sources) > 40, "the link scan found almost no links: is the pattern broken?"
    problems = [p for md, t in sources if (p := broken(md, t))]
    assert not problems, "\n".join(problems)


def sglab_commands() -> list[tuple[str, str]]:
    """(page, command line) of every sglab command in the guide's sh blocks, comments stripped."""
    out = []
    for page in guide_pages():
        for lang, _, body in blocks(page.read_text(encoding="utf-8")):
            if lang != "sh":
                continue
            for line in body.splitlines():
                line = line.split(" #", 1)[0].strip()
                if line and not line.startswith("#"):
                    out.append((page.name, line))
    return out


def argv_of(line: str) -> list[str] | None:
    """The sglab arguments of a shell line (leading VAR=value assignments skipped), None for other programs."""
    words = shlex.split(line)
    while words and ENV_ASSIGNMENT.match(words[0]):
        words = words[1:]
    if not words or words[0] not in SGLAB_PREFIXES:
        return None  # pulumi, make, kubectl, cp, export: not sglab's to parse
    return [_substitute(w) for w in words[1:]]


def _substitute(word: str) -> str:
    for key, value in PLACEHOLDERS.items():
        word = re.sub(rf"\b{key}\b", value, word)
    return word


def parse_problem(argv: list[str]) -> str | None:
    try:
        args = build_parser().parse_args(argv)
    except UsageError as exc:
        return str(exc)
    if args.command == "sim" and "--stack" in argv:  # `sglab sim --stack NAME --arm ARM [--port P]`
        from sglab.cli.sim import _arm_parser

        err = io.StringIO()
        try:
            with contextlib.redirect_stderr(err):
                _arm_parser().parse_args(args.sim_args)
        except SystemExit:
            return err.getvalue().strip()
    return None


def test_every_sglab_command_in_the_guide_parses():
    commands = [(page, line, argv) for page, line in sglab_commands() if (argv := argv_of(line)) is not None]
    assert len(commands) > 25, f"only {len(commands)} sglab commands found in the guide's sh blocks"
    problems = [f"docs/guide/{page}: {line}\n  {why}" for page, line, argv in commands
                if (why := parse_problem(argv))]
    assert not problems, "\n".join(problems)


def squash(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def run_sglab(command: str) -> str:
    argv = shlex.split(command)
    assert argv[0] == "sglab", command
    out = io.StringIO()
    with _chdir(ROOT), contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        code = main(argv[1:])
    assert code == 0, f"`{command}` exited {code}"
    return out.getvalue()


@contextlib.contextmanager
def _chdir(path: Path):
    import os

    before = os.getcwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(before)


def quoted_blocks() -> list[tuple[str, str, str]]:
    """(page, source: `quoted from FILE` or `output of: COMMAND`, block body) of every marked quote."""
    out = []
    for page in guide_pages():
        for _, before, body in blocks(page.read_text(encoding="utf-8")):
            m = re.match(r"^<!-- (quoted from .+?|output of: .+?) -->$", before)
            if m:
                out.append((page.name, m.group(1), body))
    return out


def test_quoted_output_is_what_its_source_holds():
    quotes = quoted_blocks()
    assert len(quotes) >= 8, f"only {len(quotes)} marked quotes found"
    sources: dict[str, str] = {}
    problems = []
    for page, source, body in quotes:
        if source not in sources:
            if source.startswith("quoted from "):
                sources[source] = (ROOT / source.removeprefix("quoted from ")).read_text(encoding="utf-8")
            else:
                sources[source] = run_sglab(source.removeprefix("output of: "))
        held = squash(sources[source])
        problems += [f"docs/guide/{page}: `{line.strip()}` is not in ({source})"
                     for line in body.splitlines() if line.strip() and squash(line) not in held]
    assert not problems, "\n".join(problems)


def test_the_example_stack_loads(tmp_path):
    from sglab.config.loader import load_stack

    found = [body for _, before, body in blocks((GUIDE / "your-stack.md").read_text(encoding="utf-8"))
             if before == "<!-- stack example: loads as a stack -->"]
    assert len(found) == 1, "your-stack.md's example stack is not marked"
    path = tmp_path / "Pulumi.guide-example.yaml"
    path.write_text(found[0], encoding="utf-8")
    stack = load_stack("guide-example", path=path).config
    assert stack.policy.levels == list(stack.traffic.levels)  # the gate follows sglab:traffic, as the page says


@pytest.mark.parametrize("line", ["sglab bench --stack mine --no-such-flag",
                                  "sglab sim --stack mine --arm neither"])
def test_a_bad_command_is_caught(line):
    argv = argv_of(line)
    assert argv is not None and parse_problem(argv)


def test_a_broken_link_or_anchor_is_caught():
    page = GUIDE / "index.md"
    assert broken(page, "no-such-page.md")
    assert broken(page, "../deploy.md#no-such-heading")
    assert broken(page, "../deploy.md#your-cluster-what-to-change-in-a-shipped-stack") is None
