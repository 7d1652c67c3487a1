"""The docs site's mkdocs hook (mkdocs.yml ``hooks``, loaded by path): marks in each page's HTML what
docs/stylesheets/extra.css needs to lay code out at any width.

- **Words kept whole.** Browsers may break a line after any hyphen, so ``--federation-config`` in a narrow table
  column reads as ``--`` / ``federation-`` / ``config``, and a long command that wraps (the stylesheet wraps code
  blocks) may end a line with ``waggle-``. In the text of every ``<code>`` element, each word (a run of characters
  other than white space) of up to :data:`LONGEST` characters that has a hyphen and a letter or digit -- a flag, a
  file name, a key -- gets a ``<span class="nobreak">``, which the stylesheet keeps on one line; lines still break
  between words. Longer words are left to break where they must.
- **Drawings are not wrapped.** A code block drawn with box-drawing characters (a tree of files, say) would be torn
  apart by wrapping; its ``<pre>`` gets class ``drawing`` and its longest line's length as ``--columns``, and the
  stylesheet shrinks its type to fit that line instead.

The code's text is unchanged, so copying it and searching for it are too. Mermaid's sources
(``<pre class="mermaid">``) are left as they are.
"""

from __future__ import annotations

import html as entities
import re
from typing import Any

#: The longest word kept whole: longer, it would widen a table's column too far.
LONGEST = 40
#: A tag, kept whole when the page is split into tags and the text between them.
_TAG = re.compile(r"(<[^>]*>)")
_NAME = re.compile(r"<\s*(/?)\s*([A-Za-z0-9]+)")
_MERMAID = re.compile(r"""\bclass=["'][^"']*\bmermaid\b""")
_WORD = re.compile(r"\S+")
_PRE = re.compile(r"<pre(\s[^>]*)?>(.*?)</pre>", re.S)
_BOX_DRAWING = re.compile("[\u2500-\u257f]")


def _kept(word: re.Match[str]) -> str:
    text = word.group(0)
    if "-" in text and re.search(r"[A-Za-z0-9]", text) and len(entities.unescape(text)) <= LONGEST:
        return f'<span class="nobreak">{text}</span>'
    return text


def words_kept_whole(page: str) -> str:
    """The page's HTML with every short hyphenated word inside ``<code>`` in ``<span class="nobreak">``."""
    out: list[str] = []
    code = 0  # how many <code> elements the text is in
    mermaid = False
    for part in _TAG.split(page):
        if part.startswith("<"):
            tag = _NAME.match(part)
            if tag and tag.group(2).lower() == "code":
                code = max(0, code + (-1 if tag.group(1) else 1))
            elif tag and tag.group(2).lower() == "pre":
                mermaid = not tag.group(1) and _MERMAID.search(part) is not None
            out.append(part)
        elif code and not mermaid:
            out.append(_WORD.sub(_kept, part))
        else:
            out.append(part)
    return "".join(out)


def _drawing(pre: re.Match[str]) -> str:
    attributes, inner = pre.group(1) or "", pre.group(2)
    text = entities.unescape(_TAG.sub("", inner))
    if _MERMAID.search(attributes) or not _BOX_DRAWING.search(text) or re.search(r"\b(class|style)=", attributes):
        return pre.group(0)
    columns = max(len(line) for line in text.splitlines())
    return f'<pre{attributes} class="drawing" style="--columns: {columns}">{inner}</pre>'


def drawings_marked(page: str) -> str:
    """The page's HTML with each code block drawn with box-drawing characters marked as a drawing."""
    return _PRE.sub(_drawing, page)


def on_page_content(html: str, **kwargs: Any) -> str:
    return words_kept_whole(drawings_marked(html))
