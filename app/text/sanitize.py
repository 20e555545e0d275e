"""Markdown and HTML to speakable text.

Parsing is done by markdown-it-py (CommonMark plus GFM strikethrough and tables, raw HTML on,
indented code blocks off so that text indented by accident is still read); the token stream is
walked here. Controls and invisible format characters go first (``app.text.invisible``: a control
becomes a space, a zero-width or bidi character nothing). What becomes of each construct:

- emphasis, bold, strikethrough, links, headings, block quotes: markers go, the text stays;
  links read their text, images their alt text, autolinks their address;
- inline code keeps its text; **fenced code blocks are dropped** (code read aloud is noise to a
  listener; the reference did the same);
- list markers go, except an ordered "list" of one item that does not start at 1, which is text
  such as "2024. Tahun yang baik." and keeps its number;
- table cells are read in order, separated by commas, one row a sentence;
- HTML tags go (inline phrasing tags such as ``<b>`` without a trace, any other tag becomes a
  space so words never merge), comments, ``<script>`` and ``<style>`` go with their content,
  and entities (``&amp;``) are decoded;
- each block (paragraph, heading, list item, table row, blank-line paragraph of plain text) ends a
  sentence: if it has no closing punctuation and more text follows, a "." ("。" after CJK) is put
  in; whitespace is collapsed. Nothing is appended after the last block.

Text with none of Markdown's or HTML's marker characters skips the parser (same result, faster).
``<|...|>`` special tokens are not handled here; the prompt builder removes them.
"""

from __future__ import annotations

import html
import re
from functools import cache

from markdown_it import MarkdownIt
from markdown_it.token import Token

from app.text.invisible import strip_invisible

__all__ = ["sanitize"]

# Any of these, or a line that starts like a list item, rule or setext underline, needs the parser.
_MARKUP_CHAR = re.compile(r"[*_`#>\[\]<&~|\\]")
_MARKUP_LINE = re.compile(r"^[ \t]*(?:[-+](?:[ \t]|$)|\d{1,9}[.)](?:[ \t]|$)|[-=]+[ \t]*$)", re.MULTILINE)
_BLANK_LINE = re.compile(r"\n[ \t]*\n\s*")
_SPACE = re.compile(r"\s+")

_PHRASING_TAGS = frozenset(
    (
        *("a", "abbr", "b", "bdi", "bdo", "cite", "code", "data", "del", "dfn", "em", "font", "i", "ins"),
        *("kbd", "mark", "q", "s", "samp", "small", "span", "strike", "strong", "sub", "sup", "time"),
        *("tt", "u", "var"),
    )
)
_TAG = re.compile(r"<!--.*?-->|<![^>]*>|<\?.*?\?>|</?([A-Za-z][A-Za-z0-9-]*)(?:\s[^<>]*)?/?>", re.DOTALL)
_HIDDEN_ELEMENT = re.compile(r"<(script|style)\b[^>]*>.*?</\1\s*>", re.DOTALL | re.IGNORECASE)
_AUTOLINK = re.compile(r"<([A-Za-z][A-Za-z0-9+.-]{1,31}:[^<>\s]*|[^<>\s@]+@[^<>\s]+)>")

_TERMINAL = frozenset(".!?;:,…。！？；：，、")
_CLOSERS = "\"')]}」』”’»"


def sanitize(text: str) -> str:
    """Strip Markdown and HTML from ``text`` and collapse whitespace; see the module docstring."""
    text = strip_invisible(text).replace("\r\n", "\n").replace("\r", "\n")
    if _MARKUP_CHAR.search(text) or _MARKUP_LINE.search(text):
        blocks = _markdown_blocks(text)
    else:
        blocks = _BLANK_LINE.split(text)
    return _join_blocks(blocks)


@cache
def _parser() -> MarkdownIt:
    return MarkdownIt("commonmark", {"html": True}).enable(["strikethrough", "table"]).disable("code")


def _markdown_blocks(text: str) -> list[str]:
    """The text of each block of ``text`` in reading order."""
    tokens = _parser().parse(text)
    keep_number = _numbered_text_items(tokens)
    blocks: list[str] = []
    row: list[str] = []
    prefix = ""
    for index, token in enumerate(tokens):
        kind = token.type
        if kind == "list_item_open" and index in keep_number:
            prefix = f"{token.info}{token.markup} "
        elif kind == "inline":
            content = _inline_text(token.children or [])
            if tokens[index - 1].type in ("th_open", "td_open"):
                row.append(content)
            else:
                blocks.append(prefix + content)
                prefix = ""
        elif kind == "tr_close":
            blocks.append(", ".join(cell for cell in (c.strip() for c in row) if cell))
            row = []
        elif kind == "html_block":
            blocks.append(_strip_html(token.content))
    return blocks


def _numbered_text_items(tokens: list[Token]) -> set[int]:
    """Indexes of ``list_item_open`` tokens of one-item ordered lists that do not start at 1."""
    keep: set[int] = set()
    for index, token in enumerate(tokens):
        if token.type != "ordered_list_open" or token.attrs.get("start", 1) == 1:
            continue
        items = []
        for later in range(index + 1, len(tokens)):
            other = tokens[later]
            if other.type == "ordered_list_close" and other.level == token.level:
                break
            if other.type == "list_item_open" and other.level == token.level + 1:
                items.append(later)
        if len(items) == 1:
            keep.update(items)
    return keep


def _inline_text(children: list[Token]) -> str:
    """The speakable text of an inline token's children."""
    parts: list[str] = []
    hidden_until: str | None = None
    for child in children:
        if child.type == "html_inline":
            tag = _tag_name(child.content)
            if hidden_until is not None:
                if tag == f"/{hidden_until}":
                    hidden_until = None
            elif tag in ("script", "style"):
                hidden_until = tag
            else:
                parts.append(_tag_replacement(child.content))
        elif hidden_until is not None:
            continue
        elif child.type in ("text", "code_inline", "image"):
            parts.append(child.content)
        elif child.type in ("softbreak", "hardbreak"):
            parts.append(" ")
    return "".join(parts)


def _tag_name(tag: str) -> str:
    """``"b"`` for ``<b ...>``, ``"/b"`` for ``</b>``, ``""`` for comments and declarations."""
    match = re.match(r"<(/?)([A-Za-z][A-Za-z0-9-]*)", tag)
    return f"{match.group(1)}{match.group(2).lower()}" if match else ""


def _tag_replacement(tag: str) -> str:
    """Nothing for phrasing tags and comments, a space for any other tag."""
    name = _tag_name(tag).lstrip("/")
    return "" if not name or name in _PHRASING_TAGS else " "


def _strip_html(block: str) -> str:
    """The text of a raw HTML block: hidden elements and tags removed, entities decoded."""
    block = _HIDDEN_ELEMENT.sub(" ", block)
    block = _TAG.sub(lambda match: _tag_replacement(match.group(0)), block)
    return html.unescape(_AUTOLINK.sub(r"\1", block))


def _join_blocks(blocks: list[str]) -> str:
    """Collapse whitespace in each block and join them, ending each non-final block as a sentence."""
    cleaned = [text for text in (_SPACE.sub(" ", block).strip() for block in blocks) if text]
    if not cleaned:
        return ""
    parts = [cleaned[0]]
    for text in cleaned[1:]:
        parts[-1] = _end_sentence(parts[-1])
        # Chinese and Japanese sentences follow each other without a space.
        parts.append(text if parts[-1][-1] in "。！？" and _is_cjk(text[0]) else " " + text)
    return "".join(parts)


def _end_sentence(text: str) -> str:
    """``text`` with a full stop added when it does not already end with punctuation."""
    core = text.rstrip(_CLOSERS)
    if not core or core[-1] in _TERMINAL:
        return text
    return text + ("。" if _is_cjk(core[-1]) else ".")


def _is_cjk(char: str) -> bool:
    return "\u3040" <= char <= "\u30ff" or "\u3400" <= char <= "\u9fff" or "\uf900" <= char <= "\ufaff"
