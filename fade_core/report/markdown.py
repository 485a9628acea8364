"""A small, safe Markdown-to-HTML renderer for the data card (and other Markdown fade writes).

Safe: every character of the input reaches the page HTML-escaped; the only tags in the output are the
ones this module writes. Supported, as fade's own Markdown uses them (fade_core.data.card)::

    # .. ###### headings          | a | b | pipe tables (a |---| line under the header)
    - / * / 1. lists (indented     ``` fenced code blocks ```, and    indented code (4 spaces)
      items nest)                  paragraphs (line breaks kept); a blank line ends a block
    inline: `code`, **bold**, *italic*, [text](http(s)://...) links (other link targets stay text)

Anything else is shown as the text it is. Not a full CommonMark implementation.
"""

from __future__ import annotations

import html
import re

_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_LIST_ITEM = re.compile(r"^(\s*)([-*+]|\d+[.)])\s+(.*)$")
_TABLE_SEP = re.compile(r"^\s*\|?\s*:?-{2,}:?\s*(\|\s*:?-{2,}:?\s*)*\|?\s*$")
_FENCE = re.compile(r"^\s*(```|~~~)")
_INLINE = re.compile(
    r"`(?P<code>[^`]+)`"
    r"|\*\*(?P<bold>.+?)\*\*"
    r"|(?<![\w*])\*(?P<em>[^*\s](?:[^*]*[^*\s])?)\*(?![\w*])"
    r"|\[(?P<text>[^\]]+)\]\((?P<url>[^)\s]+)\)"
)


def inline(text: str) -> str:
    """One line of Markdown inline syntax as escaped HTML (code spans, bold, italic, http(s) links)."""
    out: list[str] = []
    pos = 0
    for m in _INLINE.finditer(text):
        out.append(html.escape(text[pos:m.start()]))
        if m.group("code") is not None:
            out.append(f"<code>{html.escape(m.group('code'))}</code>")
        elif m.group("bold") is not None:
            out.append(f"<strong>{inline(m.group('bold'))}</strong>")
        elif m.group("em") is not None:
            out.append(f"<em>{inline(m.group('em'))}</em>")
        else:
            url = m.group("url")
            label = inline(m.group("text"))
            if re.match(r"^https?://", url):
                out.append(f"<a href=\"{html.escape(url, quote=True)}\">{label}</a>")
            else:
                out.append(f"{label} ({html.escape(url)})")
        pos = m.end()
    out.append(html.escape(text[pos:]))
    return "".join(out)


def _cells(line: str) -> list[str]:
    """The cells of a pipe-table row (outer pipes optional; ``\\|`` is a literal pipe)."""
    body = line.strip()
    if body.startswith("|"):
        body = body[1:]
    if body.endswith("|") and not body.endswith("\\|"):
        body = body[:-1]
    cells = re.split(r"(?<!\\)\|", body)
    return [c.strip().replace("\\|", "|") for c in cells]


def _table(rows: list[str]) -> str:
    head, body = _cells(rows[0]), [_cells(r) for r in rows[2:]]
    parts = ["<table class='tbl md'><thead><tr>", *(f"<th>{inline(c)}</th>" for c in head), "</tr></thead><tbody>"]
    for cells in body:
        cells = (cells + [""] * len(head))[: max(len(head), len(cells))]
        parts.append("<tr>" + "".join(f"<td>{inline(c)}</td>" for c in cells) + "</tr>")
    parts.append("</tbody></table>")
    return "".join(parts)


def _list(items: list[tuple[int, bool, str]]) -> str:
    """Nested lists from (indent, ordered, text) items, in order."""
    out: list[str] = []
    stack: list[tuple[int, str]] = []  # (indent, tag)
    for indent, ordered, text in items:
        tag = "ol" if ordered else "ul"
        while stack and (indent < stack[-1][0] or (indent == stack[-1][0] and tag != stack[-1][1])):
            out.append(f"</li></{stack.pop()[1]}>")  # back out of deeper lists, or a list of the other kind
        if not stack or indent > stack[-1][0]:
            out.append(f"<{tag}><li>")
            stack.append((indent, tag))
        else:
            out.append("</li><li>")
        out.append(inline(text))
    while stack:
        out.append(f"</li></{stack.pop()[1]}>")
    return "".join(out)


def to_html(markdown: str) -> str:
    """``markdown`` as an HTML fragment (see the module docstring for what is rendered)."""
    lines = markdown.replace("\r\n", "\n").split("\n")
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.strip():
            i += 1
            continue
        if fence := _FENCE.match(line):
            marker = fence.group(1)
            j = i + 1
            while j < len(lines) and not lines[j].strip().startswith(marker):
                j += 1
            out.append(f"<pre><code>{html.escape(chr(10).join(lines[i + 1:j]))}</code></pre>")
            i = j + 1
            continue
        if m := _HEADING.match(line):
            level = len(m.group(1))
            out.append(f"<h{level}>{inline(m.group(2))}</h{level}>")
            i += 1
            continue
        if "|" in line and i + 1 < len(lines) and _TABLE_SEP.match(lines[i + 1]):
            j = i + 2
            while j < len(lines) and lines[j].strip() and "|" in lines[j]:
                j += 1
            out.append(_table(lines[i:j]))
            i = j
            continue
        if _LIST_ITEM.match(line):
            items: list[tuple[int, bool, str]] = []
            while i < len(lines) and lines[i].strip():
                if m := _LIST_ITEM.match(lines[i]):
                    items.append((len(m.group(1).expandtabs(4)), m.group(2)[0].isdigit(), m.group(3)))
                elif items:  # a continuation line of the last item
                    indent, ordered, text = items[-1]
                    items[-1] = (indent, ordered, text + " " + lines[i].strip())
                i += 1
            out.append(_list(items))
            continue
        if line.startswith("    ") or line.startswith("\t"):
            j = i
            while j < len(lines) and (lines[j].startswith("    ") or lines[j].startswith("\t") or not lines[j].strip()):
                j += 1
            block = "\n".join(x[4:] if x.startswith("    ") else x.lstrip("\t") for x in lines[i:j]).rstrip("\n")
            out.append(f"<pre><code>{html.escape(block)}</code></pre>")
            i = j
            continue
        j = i
        para: list[str] = []
        while (j < len(lines) and lines[j].strip() and not _HEADING.match(lines[j]) and not _FENCE.match(lines[j])
               and not _LIST_ITEM.match(lines[j])
               and not ("|" in lines[j] and j + 1 < len(lines) and _TABLE_SEP.match(lines[j + 1]))):
            para.append(lines[j].strip())
            j += 1
        out.append("<p>" + "<br>".join(inline(x) for x in para) + "</p>")
        i = j
    return "\n".join(out)
