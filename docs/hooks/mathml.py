"""MkDocs hook: the site's math as MathML, rendered when the site is built.

`pymdownx.arithmatex` (generic mode) leaves ``$...$`` and ``$$...$$`` in the HTML as
``<span class="arithmatex">\\(...\\)</span>`` and ``<div class="arithmatex">\\[...\\]</div>``;
this hook turns each into MathML with latex2mathml, which every current browser
draws natively. No script and no network: the pages read the same offline. A formula
latex2mathml cannot convert fails the build (``mkdocs build --strict``) with its page
and text.
"""

from __future__ import annotations

import html
import logging
import re

from latex2mathml.converter import convert

log = logging.getLogger("mkdocs.hooks.mathml")

_MATH = re.compile(
    r'<(?P<tag>span|div) class="arithmatex">\s*(?:\\\((?P<inline>.*?)\\\)|\\\[(?P<block>.*?)\\\])\s*</(?P=tag)>',
    re.DOTALL,
)


_LEFT_AS_TEX = re.compile(r"(<m[oi][^>]*>)\\([A-Za-z]+|[{}|])(</m[oi]>)")
_TOKEN = re.compile(r"<m[oi][^>]*>([^<]*)</m[oi]>")


def _symbol(name: str) -> str:
    """The character latex2mathml gives ``\\name`` on its own (e.g. ``\\lVert`` → ‖)."""
    tokens = _TOKEN.findall(convert("\\" + name))
    if len(tokens) != 1 or "\\" in tokens[0]:
        raise ValueError(f"no symbol for \\{name}")
    return tokens[0]


def to_mathml(tex: str, display: bool) -> str:
    """One formula (HTML-escaped, as arithmatex leaves it) as a ``<math>`` element.

    latex2mathml leaves a delimiter after ``\\bigl``/``\\Bigr`` and the like as TeX
    (``\\{``, ``\\|``, ``\\lVert``); those become their characters here. Any other
    TeX left in the output is an error.
    """
    source = html.unescape(tex).strip()
    # a control space broken across lines ("\\" + newline) is a control space
    source = re.sub(r"\\\\|\\\s", lambda m: m.group(0) if m.group(0) == "\\\\" else "\\ ", source)
    out = convert(source, display="block" if display else "inline")
    out = _LEFT_AS_TEX.sub(lambda m: m.group(1) + _symbol(m.group(2)) + m.group(3), out)
    left = [t for t in _TOKEN.findall(out) if "\\" in t]
    if left:
        raise ValueError(f"left as TeX: {left[0]!r}")
    return out


def on_page_content(content: str, page, config, files) -> str:
    def replace(m: re.Match) -> str:
        display = m.group("block") is not None
        tex = m.group("block") if display else m.group("inline")
        try:
            mathml = to_mathml(tex, display)
        except Exception as exc:  # noqa: BLE001 - any converter failure is reported with its page
            log.warning("%s: cannot render the formula %r as MathML: %s", page.file.src_uri, tex[:80], exc)
            return m.group(0)
        cls = "arithmatex arithmatex-block" if display else "arithmatex"
        return f'<{m.group("tag")} class="{cls}">{mathml}</{m.group("tag")}>'

    return _MATH.sub(replace, content)
