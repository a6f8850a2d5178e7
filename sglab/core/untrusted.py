"""Untrusted text on its way to a terminal: one function every printer uses (ground floor).

Anything sglab did not write itself (a stack value, a result's run_id, a prompt file's category, a server's
error body) may carry escape sequences that move the cursor, recolour or erase a line; printed raw, a
`results/` writer could hide compare's "HMAC does not match". `printable` keeps the text readable and
makes every control visible instead.
"""

from __future__ import annotations

import logging
import unicodedata

# Unicode categories a reader cannot see for what they are: format characters (bidi overrides and isolates,
# which reorder what a terminal shows (Trojan Source); zero-width spaces and joiners, the word joiner, the byte
# order mark, the soft hyphen, tag characters), line and paragraph separators, surrogates, private use and
# unassigned code points. Every space but the plain one (U+0020) also hides: a no-break space (U+00A0, U+202F)
# prints as a space but is another name or path.
_HIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs", "Co", "Cn"})


def is_control(ch: str) -> bool:
    """A C0/C1 control, DEL, or a character that shows as something else or nothing (bidi, zero-width, a space
    other than U+0020): what no name or path may hold (sglab/config/base.py) and `printable` escapes."""
    if " " <= ch <= "~":
        return False
    category = unicodedata.category(ch)
    return category in _HIDDEN_CATEGORIES or category == "Zs"


def hidden_text(value: object, *, allow: str = "") -> tuple[tuple[str | int, ...], str] | None:
    """(key path, character) of the first `is_control` character (other than those in `allow`) in a string inside
    `value`: the string itself, the items of a list or tuple, the keys and values of a dict, nested; None when
    there is none. What a document's reader checks once where it enters (sglab/schema/records.py PlainText)."""
    if isinstance(value, str):
        hidden = next((ch for ch in value if ch not in allow and is_control(ch)), None)
        return None if hidden is None else ((), hidden)
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, (list, tuple)) \
        else ()
    for key, item in items:
        if isinstance(key, str) and (found := hidden_text(key)) is not None:
            return (key,), found[1]
        if (found := hidden_text(item, allow=allow)) is not None:
            return (key, *found[0]), found[1]
    return None


def character_name(ch: str) -> str:
    """'U+001B (escape)': a hidden character as an error message names it."""
    return f"U+{ord(ch):04X} ({unicodedata.name(ch, 'a control code').lower()})"


def _escape(ch: str) -> str:
    code = ord(ch)
    if code <= 0xFF:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def printable(value: object, *, newlines: bool = False, limit: int | None = 500) -> str:
    """`str(value)` safe for a console: every `is_control` character escaped (`\\x1b`, `\\u202e`, `\\u200b`,
    `\\xa0`); newlines and tabs kept only with `newlines=True` (multi-line messages); cut to `limit` characters
    with a marker saying how much was cut (None: no cut)."""
    text = value if isinstance(value, str) else str(value)
    out = []
    for ch in text:
        if newlines and ch in "\n\t":
            out.append(ch)
        elif is_control(ch):
            out.append(_escape(ch))
        else:
            out.append(ch)
    rendered = "".join(out)
    if limit is not None and len(rendered) > limit:
        rendered = rendered[:limit] + f"… ({len(rendered) - limit} more characters)"
    return rendered


class _PrintableRecords(logging.Filter):
    """Formats a record's message once and makes it `printable` (newlines kept: tracebacks stay readable)."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg, record.args = printable(record.getMessage(), newlines=True, limit=4000), None
        return True


def printable_logger(name: str) -> logging.Logger:
    """`logging.getLogger(name)` whose records reach a console only as `printable` text (a server's error body,
    a form's value): for the loggers of processes whose console is the user's (the Locust web UI, workers)."""
    logger = logging.getLogger(name)
    if not any(isinstance(f, _PrintableRecords) for f in logger.filters):
        logger.addFilter(_PrintableRecords())
    return logger
