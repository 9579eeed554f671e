"""Telegram-style text measurement and markup parsing used by the stand-in."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from codemojex.standin.markup import MarkupError, auto_entities, parse, utf16_len, utf16_slice


def test_utf16_length_counts_surrogate_pairs() -> None:
    assert utf16_len("abc") == 3
    assert utf16_len("🍎") == 2
    assert utf16_len("👍🏽") == 4
    assert utf16_len("❤️") == 2  # U+2764 + variation selector: two BMP code points
    assert utf16_slice("🍎/g x", 2, 2) == "/g"


def test_commands_and_mentions_are_found_with_utf16_offsets() -> None:
    assert auto_entities("/g@codemojex_bot 🍎") == [
        {"type": "bot_command", "offset": 0, "length": 16}
    ]
    entities = auto_entities("🍎 /top and @someone")
    assert entities == [
        {"type": "bot_command", "offset": 3, "length": 4},
        {"type": "mention", "offset": 12, "length": 8},
    ]
    assert auto_entities("a/b not a command, nor is http://x/y") == []


def test_plain_text_is_stripped() -> None:
    assert parse("  hi \n", None) == ("hi", [])


def test_html_entities_and_offsets() -> None:
    html = '🏆 <b>Ann</b> won: <a href="https://t.me/x">link</a> &amp; more'
    text, entities = parse(html, "HTML")
    assert text == "🏆 Ann won: link & more"
    assert entities == [
        {"type": "bold", "offset": 3, "length": 3},
        {"type": "text_link", "offset": 12, "length": 4, "url": "https://t.me/x"},
    ]
    assert parse("<pre><code class='language-py'>x</code></pre>", "HTML")[1] == [
        {"type": "pre", "offset": 0, "length": 1, "language": "py"},
        {"type": "code", "offset": 0, "length": 1},
    ]


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("a < b", 'unsupported start tag ""'),
        ("<b>bold", "can't find end tag"),
        ("<b>x</i>", "unmatched end tag"),
        ("x</b>", "unexpected end tag"),
        ("<span>x</span>", "tg-spoiler"),
        ("<marquee>x</marquee>", 'unsupported start tag "marquee"'),
    ],
)
def test_html_errors_use_telegrams_wording(text: str, reason: str) -> None:
    with pytest.raises(MarkupError, match="can't parse entities") as caught:
        parse(text, "HTML")
    assert reason in str(caught.value)


def test_markdown_v2() -> None:
    source = "*Round 2* _ended_: `🍎🍌` \\- see [rules](https://x.y/z\\)w)"
    text, entities = parse(source, "MarkdownV2")
    assert text == "Round 2 ended: 🍎🍌 - see rules"
    assert [e["type"] for e in entities] == ["bold", "italic", "code", "text_link"]
    assert entities[2] == {"type": "code", "offset": 15, "length": 4}
    assert entities[3]["url"] == "https://x.y/z)w"
    assert parse("__u__ ||s|| ~x~", "MarkdownV2")[0] == "u s x"
    assert parse(">quoted\nplain", "MarkdownV2")[1] == [
        {"type": "blockquote", "offset": 0, "length": 6}
    ]


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("1. first", "character '.' is reserved"),
        ("(attempt 3)", "character '(' is reserved"),
        ("*bold", "can't find end of Bold entity"),
        ("`code", "can't find end of Code entity"),
        ("[text]", "can't find end of the URL"),
    ],
)
def test_markdown_v2_errors(text: str, reason: str) -> None:
    with pytest.raises(MarkupError) as caught:
        parse(text, "MarkdownV2")
    assert reason in str(caught.value)


def test_legacy_markdown() -> None:
    assert parse("*bold* _it_ `c` [t](http://u)", "Markdown") == (
        "bold it c t",
        [
            {"type": "bold", "offset": 0, "length": 4},
            {"type": "italic", "offset": 5, "length": 2},
            {"type": "code", "offset": 8, "length": 1},
            {"type": "text_link", "offset": 10, "length": 1, "url": "http://u"},
        ],
    )
    with pytest.raises(MarkupError, match="can't find end of the entity"):
        parse("snake_case", "Markdown")


def test_unknown_parse_mode() -> None:
    with pytest.raises(MarkupError, match="unsupported parse_mode"):
        parse("x", "BBCode")


@given(st.text(max_size=200))
def test_html_parser_either_parses_or_refuses(text: str) -> None:
    try:
        plain, entities = parse(text, "HTML")
    except MarkupError:
        return
    total = utf16_len(plain)
    for entity in entities:
        assert entity["offset"] >= 0 and entity["offset"] + entity["length"] <= total


@given(st.text(max_size=200))
def test_markdown_v2_parser_either_parses_or_refuses(text: str) -> None:
    try:
        plain, entities = parse(text, "MarkdownV2")
    except MarkupError:
        return
    total = utf16_len(plain)
    for entity in entities:
        assert entity["offset"] >= 0 and entity["offset"] + entity["length"] <= total
