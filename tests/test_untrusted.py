"""sglab.core.untrusted.printable: nothing a hostile file carries reaches a terminal raw."""

from sglab.core.untrusted import printable


def test_escape_sequences_are_made_visible():
    hidden = "run-1\x1b[2K\x1b[1A\rHMAC matches"
    shown = printable(hidden)
    assert "\x1b" not in shown and "\r" not in shown
    assert shown == "run-1\\x1b[2K\\x1b[1A\\x0dHMAC matches"


def test_c1_controls_bidi_and_del_are_escaped():
    for ch in ("\x9b", "\x7f", "\u202e", "\u2066", "\u2028", "\x00"):
        assert ch not in printable(f"a{ch}b")


def test_newlines_only_where_asked_and_plain_text_unchanged():
    assert printable("a\nb") == "a\\x0ab"
    assert printable("a\nb\tc", newlines=True) == "a\nb\tc"
    assert printable("Kimi-K2.5 — /shared/kimi-k2.5-int4 +3.9% µs") == "Kimi-K2.5 — /shared/kimi-k2.5-int4 +3.9% µs"


def test_long_text_is_cut_with_a_marker():
    shown = printable("x" * 2000, limit=100)
    assert shown.startswith("x" * 100) and "1900 more characters" in shown
    assert printable("x" * 2000, limit=None) == "x" * 2000


def test_hidden_text_finds_the_first_hidden_character_with_its_key_path():
    from sglab.core.untrusted import hidden_text

    assert hidden_text({"a": ["ok", {"b": "x\u200by"}]}) == (("a", 1, "b"), "\u200b")
    assert hidden_text({"k\x1b": "v"}) == (("k\x1b",), "\x1b")
    assert hidden_text(["line one\nline two\t."], allow="\n\t") is None
    assert hidden_text(["line\r"], allow="\n\t") == ((0,), "\r")
    assert hidden_text({"n": 1.5, "s": "plain text"}) is None


def test_a_config_check_that_quotes_the_raw_value_shows_it_escaped():
    """KeyedValueError makes its message printable once, for every check that quotes what it refused."""
    from sglab.config.base import KeyedValueError

    refused = KeyedValueError(("env", "A"), "'A\x1b[2K' is not a valid name")
    assert "\x1b" not in str(refused) and "A\\x1b[2K" in str(refused)
    assert refused.loc == ("env", "A")
