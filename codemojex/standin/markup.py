"""Text the way Telegram measures and parses it.

Telegram counts lengths and entity offsets in UTF-16 code units, and rejects formatted text
it cannot parse. The stand-in does the same so that a bot which builds HTML out of user
names, or counts a 4,096 limit in code points, fails here and not in production.
"""

from __future__ import annotations

import re
from typing import Any

Entity = dict[str, Any]

MAX_TEXT_LENGTH = 4096


class MarkupError(ValueError):
    """The text cannot be parsed with the given parse_mode; str(exc) is Telegram's wording."""


def utf16_len(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def utf16_slice(text: str, offset: int, length: int) -> str:
    """The part of `text` an entity (offset, length in UTF-16 units) covers."""
    data = text.encode("utf-16-le")
    return data[2 * offset : 2 * (offset + length)].decode("utf-16-le", errors="replace")


def _byte_offset(text: str, index: int) -> int:
    return len(text[:index].encode("utf-8"))


# Commands anywhere in the text, as Telegram's clients detect them: after start or whitespace.
_COMMAND_RE = re.compile(r"(?<![^\s])/[A-Za-z0-9_]{1,64}(?:@[A-Za-z0-9_]{3,32})?")
_MENTION_RE = re.compile(r"(?<![\w@])@[A-Za-z0-9_]{5,32}\b")


def auto_entities(text: str) -> list[Entity]:
    """bot_command and mention entities Telegram attaches to a message a user typed."""
    found: list[tuple[int, Entity]] = []
    for pattern, kind in ((_COMMAND_RE, "bot_command"), (_MENTION_RE, "mention")):
        for match in pattern.finditer(text):
            offset = utf16_len(text[: match.start()])
            entity = {"type": kind, "offset": offset, "length": utf16_len(match.group())}
            found.append((match.start(), entity))
    found.sort(key=lambda item: item[0])
    return [entity for _, entity in found]


def parse(text: str, parse_mode: str | None) -> tuple[str, list[Entity]]:
    """Plain text and entities for `text` sent with `parse_mode`, stripped like Telegram does."""
    mode = (parse_mode or "").strip().lower()
    entities: list[Entity]
    if mode == "":
        plain, entities = text, []
    elif mode == "html":
        plain, entities = _parse_html(text)
    elif mode == "markdownv2":
        plain, entities = _parse_markdown_v2(text)
    elif mode == "markdown":
        plain, entities = _parse_markdown(text)
    else:
        raise MarkupError(f"Bad Request: unsupported parse_mode {parse_mode!r}")
    return _strip(plain, entities)


def _strip(text: str, entities: list[Entity]) -> tuple[str, list[Entity]]:
    left = len(text) - len(text.lstrip())
    stripped = text.strip()
    shift = utf16_len(text[:left])
    total = utf16_len(stripped)
    kept: list[Entity] = []
    for entity in entities:
        start = max(0, entity["offset"] - shift)
        end = min(total, entity["offset"] - shift + entity["length"])
        if end > start:
            kept.append({**entity, "offset": start, "length": end - start})
    return stripped, kept


class _Builder:
    """Accumulates plain text and tracks UTF-16 offsets for entities being opened and closed."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.offset = 0
        self.entities: list[Entity] = []

    def add(self, chunk: str) -> None:
        self.parts.append(chunk)
        self.offset += utf16_len(chunk)

    def close(self, kind: str, start: int, **extra: Any) -> None:
        if self.offset > start:
            self.entities.append(
                {"type": kind, "offset": start, "length": self.offset - start, **extra}
            )

    def result(self) -> tuple[str, list[Entity]]:
        # Outer entities first: longer first, and of equal spans the one closed last.
        order = sorted(
            enumerate(self.entities), key=lambda p: (p[1]["offset"], -p[1]["length"], -p[0])
        )
        return "".join(self.parts), [entity for _, entity in order]


_HTML_TAGS = {
    "b": "bold",
    "strong": "bold",
    "i": "italic",
    "em": "italic",
    "u": "underline",
    "ins": "underline",
    "s": "strikethrough",
    "strike": "strikethrough",
    "del": "strikethrough",
    "tg-spoiler": "spoiler",
    "span": "spoiler",
    "a": "text_link",
    "code": "code",
    "pre": "pre",
    "blockquote": "blockquote",
    "tg-emoji": "custom_emoji",
}
_TAG_NAME_RE = re.compile(r"[A-Za-z][A-Za-z0-9-]*")
_ATTR_RE = re.compile(r"\s*([A-Za-z-]+)(?:\s*=\s*(?:\"([^\"]*)\"|'([^']*)'|([^\s>]+)))?")
_HTML_ENTITY_RE = re.compile(r"&(#[0-9]{1,7}|#x[0-9A-Fa-f]{1,6}|[A-Za-z]{2,8});")
_NAMED = {"lt": "<", "gt": ">", "amp": "&", "quot": '"'}


def _parse_html(text: str) -> tuple[str, list[Entity]]:
    out = _Builder()
    stack: list[tuple[str, int, dict[str, str]]] = []
    i, n = 0, len(text)
    while i < n:
        char = text[i]
        if char == "&":
            match = _HTML_ENTITY_RE.match(text, i)
            if match:
                body = match.group(1)
                if body.startswith("#x"):
                    out.add(chr(int(body[2:], 16)))
                elif body.startswith("#"):
                    out.add(chr(int(body[1:])))
                elif body.lower() in _NAMED:
                    out.add(_NAMED[body.lower()])
                else:
                    out.add(match.group())
                i = match.end()
            else:
                out.add(char)
                i += 1
            continue
        if char != "<":
            out.add(char)
            i += 1
            continue
        at = _byte_offset(text, i)
        if text.startswith("</", i):
            end = text.find(">", i)
            if end < 0:
                raise MarkupError(
                    f"Bad Request: can't parse entities: unclosed end tag at byte offset {at}"
                )
            name = text[i + 2 : end].strip().lower()
            if not stack:
                raise MarkupError(
                    f"Bad Request: can't parse entities: unexpected end tag at byte offset {at}"
                )
            open_name, start, open_attrs = stack.pop()
            if name != open_name:
                raise MarkupError(
                    "Bad Request: can't parse entities: unmatched end tag at byte offset "
                    f'{at}, expected "</{open_name}>", found "</{name}>"'
                )
            kind = _HTML_TAGS[open_name]
            if kind == "text_link":
                out.close(kind, start, url=open_attrs.get("href", ""))
            elif kind == "pre" and open_attrs.get("language"):
                out.close(kind, start, language=open_attrs["language"])
            else:
                out.close(kind, start)
            i = end + 1
            continue
        name_match = _TAG_NAME_RE.match(text, i + 1)
        name = name_match.group().lower() if name_match else ""
        if name not in _HTML_TAGS:
            raise MarkupError(
                f'Bad Request: can\'t parse entities: unsupported start tag "{name}" '
                f"at byte offset {at}"
            )
        assert name_match is not None
        j = name_match.end()
        attrs: dict[str, str] = {}
        while True:
            while j < n and text[j].isspace():
                j += 1
            if j >= n:
                raise MarkupError(
                    f"Bad Request: can't parse entities: unclosed start tag at byte offset {at}"
                )
            if text[j] == ">":
                j += 1
                break
            attr = _ATTR_RE.match(text, j)
            if not attr or attr.end() == j:
                raise MarkupError(
                    "Bad Request: can't parse entities: expected equal sign in declaration of "
                    f"an attribute of the tag at byte offset {at}"
                )
            value = attr.group(2) or attr.group(3) or attr.group(4) or ""
            attrs[attr.group(1).lower()] = value
            j = attr.end()
        if name == "span" and attrs.get("class") != "tg-spoiler":
            raise MarkupError(
                'Bad Request: can\'t parse entities: tag "span" must have class "tg-spoiler" '
                f"at byte offset {at}"
            )
        if name == "code" and stack and stack[-1][0] == "pre" and "class" in attrs:
            language = attrs["class"].removeprefix("language-")
            pre_name, pre_start, pre_attrs = stack[-1]
            stack[-1] = (pre_name, pre_start, {**pre_attrs, "language": language})
        stack.append((name, out.offset, attrs))
        i = j
    if stack:
        raise MarkupError(
            "Bad Request: can't parse entities: can't find end tag corresponding to start tag "
            f'"{stack[-1][0]}"'
        )
    return out.result()


_RESERVED_V2 = set("_*[]()~`>#+-=|{}.!")
_V2_MARKERS = {"*": "bold", "_": "italic", "__": "underline", "~": "strikethrough", "||": "spoiler"}


def _parse_markdown_v2(text: str) -> tuple[str, list[Entity]]:
    out = _Builder()
    stack: list[tuple[str, int, int]] = []  # marker, output offset, input index
    i, n = 0, len(text)
    line_start = True
    quote_start: int | None = None
    while i < n:
        char = text[i]
        if char == "\\" and i + 1 < n and 0 < ord(text[i + 1]) <= 126:
            out.add(text[i + 1])
            i += 2
            line_start = False
            continue
        if line_start and char == ">":
            quote_start = out.offset if quote_start is None else quote_start
            i += 1
            line_start = False
            continue
        if char == "\n":
            if quote_start is not None and not text.startswith(">", i + 1):
                out.close("blockquote", quote_start)
                quote_start = None
            out.add(char)
            i += 1
            line_start = True
            continue
        line_start = False
        if char == "`":
            fence = text.startswith("```", i)
            width = 3 if fence else 1
            j = i + width
            language = ""
            if fence:
                newline = text.find("\n", j)
                first_line = text[j:newline] if newline >= 0 else ""
                if newline >= 0 and first_line and not any(c.isspace() for c in first_line):
                    language = first_line
                    j = newline + 1
            start = out.offset
            closed = False
            while j < n:
                if text[j] == "\\" and j + 1 < n:
                    out.add(text[j + 1])
                    j += 2
                    continue
                if text.startswith("`" * width, j):
                    closed = True
                    break
                out.add(text[j])
                j += 1
            if not closed:
                raise MarkupError(
                    "Bad Request: can't parse entities: can't find end of "
                    f"{'Pre' if fence else 'Code'} entity at byte offset {_byte_offset(text, i)}"
                )
            if fence:
                extra = {"language": language} if language else {}
                out.close("pre", start, **extra)
            else:
                out.close("code", start)
            i = j + width
            continue
        marker = ""
        if text.startswith("__", i):
            marker = "__"
        elif text.startswith("||", i):
            marker = "||"
        elif char in "*_~":
            marker = char
        if marker:
            if stack and stack[-1][0] == marker:
                _, start, _ = stack.pop()
                out.close(_V2_MARKERS[marker], start)
            elif any(entry[0] == marker for entry in stack):
                raise MarkupError(
                    "Bad Request: can't parse entities: can't find end of "
                    f"{_V2_MARKERS[stack[-1][0]].title()} entity at byte offset "
                    f"{_byte_offset(text, stack[-1][2])}"
                )
            else:
                stack.append((marker, out.offset, i))
            i += len(marker)
            continue
        if char == "[" or (char == "!" and text.startswith("![", i)):
            stack.append(("[", out.offset, i))
            i += 2 if char == "!" else 1
            continue
        if char == "]" and stack and stack[-1][0] == "[":
            _, start, opened = stack.pop()
            if not text.startswith("(", i + 1):
                raise MarkupError(
                    "Bad Request: can't parse entities: can't find end of the URL for text URL "
                    f"at byte offset {_byte_offset(text, opened)}"
                )
            j = i + 2
            url: list[str] = []
            while j < n and text[j] != ")":
                if text[j] == "\\" and j + 1 < n:
                    j += 1
                url.append(text[j])
                j += 1
            if j >= n:
                raise MarkupError(
                    "Bad Request: can't parse entities: can't find end of a URL at byte offset "
                    f"{_byte_offset(text, i + 1)}"
                )
            target = "".join(url)
            if text[opened] == "!":
                out.close("custom_emoji", start, custom_emoji_id=target.rpartition("=")[2])
            else:
                out.close("text_link", start, url=target)
            i = j + 1
            continue
        if char in _RESERVED_V2:
            raise MarkupError(
                f"Bad Request: can't parse entities: character '{char}' is reserved and must be "
                "escaped with the preceding '\\'"
            )
        out.add(char)
        i += 1
    if quote_start is not None:
        out.close("blockquote", quote_start)
    if stack:
        marker, _, opened = stack[-1]
        name = "TextUrl" if marker == "[" else _V2_MARKERS[marker].title()
        raise MarkupError(
            f"Bad Request: can't parse entities: can't find end of {name} entity at byte offset "
            f"{_byte_offset(text, opened)}"
        )
    return out.result()


_LEGACY = {"*": "bold", "_": "italic"}


def _parse_markdown(text: str) -> tuple[str, list[Entity]]:
    out = _Builder()
    i, n = 0, len(text)
    while i < n:
        char = text[i]
        if char == "\\" and i + 1 < n and text[i + 1] in "_*`[":
            out.add(text[i + 1])
            i += 2
            continue
        if char in "*_`[":
            width = 3 if text.startswith("```", i) else 1
            closer = "]" if char == "[" else char * width
            end = text.find(closer, i + width)
            if end < 0:
                raise MarkupError(
                    "Bad Request: can't parse entities: can't find end of the entity starting "
                    f"at byte offset {_byte_offset(text, i)}"
                )
            start = out.offset
            out.add(text[i + width : end])
            if char == "[":
                close_paren = text.find(")", end) if text.startswith("(", end + 1) else -1
                if close_paren < 0:
                    raise MarkupError(
                        "Bad Request: can't parse entities: can't find end of the entity "
                        f"starting at byte offset {_byte_offset(text, i)}"
                    )
                out.close("text_link", start, url=text[end + 2 : close_paren])
                i = close_paren + 1
                continue
            kind = _LEGACY.get(char) or ("pre" if width == 3 else "code")
            out.close(kind, start)
            i = end + width
            continue
        out.add(char)
        i += 1
    return out.result()
