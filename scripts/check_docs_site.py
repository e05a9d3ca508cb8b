"""Build the docs site, check its links and reference contents, and screenshot pages.

Run from the repository root (the docs extra installed):

    python scripts/check_docs_site.py                   # build, check, screenshot
    python scripts/check_docs_site.py --site /tmp/site  # check an already built site
    python scripts/check_docs_site.py --pages index.html figures/index.html

Checks, each of which fails the run:
- every function signature of the reference is formatted (none on one line past 88
  characters: without ruff in the docs extra they come out as one long line);
- every internal link and image of every page points at a file of the site, and every
  ``#anchor`` at an id on the target page;
- on each reference page, every object named by a ``:::`` line and every documented
  member (a mkdocstrings heading) is listed in the page's table of contents.

Screenshots (a headless Chromium at 1280 px wide) go to ``--out``; look at them. Without
Chromium the checks still run and the screenshots are skipped with a message.
"""

from __future__ import annotations

import argparse
import functools
import http.server
import os
import posixpath
import re
import shutil
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

ROOT = Path(__file__).resolve().parent.parent

# The pages a reader meets first, and the ones a past review found wrong.
DEFAULT_PAGES = (
    "index.html",
    "tutorial/index.html",
    "howto/should-i-echo/index.html",
    "howto/rl-rollout-reuse/index.html",
    "howto/profile-your-loader/index.html",
    "figures/index.html",
    "reference/plan/index.html",
    "reference/loop/index.html",
    "reference/experiments/index.html",
)

_EXTERNAL = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")  # http:, mailto:, data:, ...
_DIRECTIVE = re.compile(r"^:::\s+(\S+)\s*$", re.MULTILINE)


@dataclass
class Page:
    """What the checks need from one HTML page."""

    ids: set = field(default_factory=set)
    links: list = field(default_factory=list)  # (tag, url)
    toc: list = field(default_factory=list)  # anchors in the page's table of contents
    doc_headings: list = field(default_factory=list)  # ids of mkdocstrings headings


class _PageParser(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.page = Page()
        self._nav_depth = 0  # nesting of <nav> inside the table of contents
        self._in_header = 0  # inside Material's <header>/<footer>: not page content

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if a.get("id"):
            self.page.ids.add(a["id"])
        if a.get("name") and tag == "a":
            self.page.ids.add(a["name"])
        classes = (a.get("class") or "").split()
        if tag == "nav":
            if self._nav_depth:
                self._nav_depth += 1
            elif "md-nav--secondary" in classes:
                self._nav_depth = 1
        href = a.get("href")
        if tag == "a" and href is not None:
            if self._nav_depth and href.startswith("#"):
                self.page.toc.append(unquote(href[1:]))
            self.page.links.append((tag, href))
        if tag in ("img", "script") and a.get("src"):
            self.page.links.append((tag, a["src"]))
        if tag == "link" and a.get("href") and a.get("rel") in ("stylesheet", "icon"):
            self.page.links.append((tag, a["href"]))
        if re.fullmatch(r"h[1-6]", tag) and "doc-heading" in classes and a.get("id"):
            self.page.doc_headings.append(a["id"])

    def handle_endtag(self, tag):
        if tag == "nav" and self._nav_depth:
            self._nav_depth -= 1


def parse_page(html: str) -> Page:
    """Ids, links, table-of-contents anchors and mkdocstrings headings of a page."""
    parser = _PageParser()
    parser.feed(html)
    parser.close()
    return parser.page


def _target(page_path: str, url: str):
    """(site-relative file, fragment) a link of ``page_path`` points at; None if external."""
    if _EXTERNAL.match(url) or url.startswith("//"):
        return None
    parts = urlsplit(url)
    path, frag = unquote(parts.path), unquote(parts.fragment)
    if not path:
        return page_path, frag
    if path.startswith("/"):
        target = posixpath.normpath(path.lstrip("/"))
    else:
        target = posixpath.normpath(posixpath.join(posixpath.dirname(page_path), path))
    if url.split("#")[0].endswith("/") or target == ".":
        target = posixpath.join(target, "index.html") if target != "." else "index.html"
    return target, frag


def check_links(pages: dict, files: set) -> list:
    """Broken internal links and anchors, as messages.

    ``pages`` maps each site-relative HTML path to its parsed :class:`Page`; ``files``
    holds every site-relative file path of the site.
    """
    problems = []
    for path, page in sorted(pages.items()):
        for tag, url in page.links:
            resolved = _target(path, url)
            if resolved is None:
                continue
            target, frag = resolved
            if target not in files:
                # a directory link written without its trailing slash
                if posixpath.join(target, "index.html") in files:
                    target = posixpath.join(target, "index.html")
                else:
                    problems.append(f"{path}: <{tag}> {url!r}: no file {target}")
                    continue
            if frag and target in pages and frag not in pages[target].ids:
                problems.append(f"{path}: <{tag}> {url!r}: no id {frag!r} on {target}")
    return problems


def check_reference_toc(page: Page, objects: list, name: str) -> list:
    """Objects and documented members missing from a reference page's contents."""
    problems = []
    toc = set(page.toc)
    for obj in objects:
        if obj not in page.doc_headings:
            problems.append(f"{name}: '::: {obj}' renders no heading")
        elif obj not in toc:
            problems.append(f"{name}: {obj} is not in the table of contents")
    missing = [h for h in page.doc_headings if h not in toc and h not in objects]
    problems += [f"{name}: member {h} is not in the table of contents" for h in missing]
    return problems


def directives(markdown: str) -> list:
    """The objects a page documents with ``::: name`` lines."""
    return _DIRECTIVE.findall(markdown)


_PRE = re.compile(
    r'<div class="(?:language-\w+ )?highlight">\s*<pre[^>]*>(.*?)</pre>', re.DOTALL
)
CODE_WIDTH = 80  # characters of code a 1280 px window shows without scrolling


def long_code_lines(html: str, limit: int = CODE_WIDTH) -> list:
    """Lines of the page's highlighted code blocks longer than `limit` characters: a
    reader scrolls sideways to see their end. Output blocks (``text``: no highlighting)
    are left alone: they are what the code prints."""
    import html as _html

    out = []
    for block in _PRE.findall(html):
        if '<span class="' not in block:
            continue
        text = _html.unescape(re.sub(r"<[^>]+>", "", block))
        out += [line for line in text.splitlines() if len(line) > limit]
    return out


_SIGNATURE = re.compile(
    r'<div class="doc-signature highlight">\s*<pre[^>]*>(.*?)</pre>', re.DOTALL
)
_CALL = re.compile(r"^[\w.]+\(.*\)( -> .*)?$")
SIGNATURE_WIDTH = 88  # mkdocs.yml's line_length: ruff formats every longer signature


def unformatted_signatures(html: str, limit: int = SIGNATURE_WIDTH) -> list:
    """Function signatures written on one line longer than `limit` (the build formats
    signatures with ruff, the docs extra; without it, or when a signature is not valid
    Python, they come out as one long line), and constructors that list a ``ClassVar``
    (a bare ``ClassVar`` annotation, which the docs' reader takes for a field)."""
    import html as _html

    out = []
    for block in _SIGNATURE.findall(html):
        text = _html.unescape(re.sub(r"<[^>]+>", "", block)).strip()
        if "\n" not in text and len(text) > limit and _CALL.match(text):
            out.append(text)
        elif _CALL.match(text.replace("\n", " ")) and ": ClassVar" in text:
            out.append(text)  # a class constant shown as a parameter of the constructor
    return out


def check_site(site: Path, docs: Path) -> list:
    """All problems of a built site, as messages."""
    files = {p.relative_to(site).as_posix() for p in site.rglob("*") if p.is_file()}
    pages = {
        f: parse_page((site / f).read_text(encoding="utf-8"))
        for f in files
        if f.endswith(".html")
    }
    problems = check_links(pages, files)
    for f in sorted(pages):
        if f.startswith("reference/"):
            html = (site / f).read_text(encoding="utf-8")
            problems += [
                f"{f}: unformatted signature {sig[:70]!r}..."
                for sig in unformatted_signatures(html)
            ]
    for md in sorted((docs / "reference").glob("*.md")):
        objects = directives(md.read_text(encoding="utf-8"))
        html = f"reference/{md.stem}/index.html"
        if html not in pages:
            problems.append(f"{md}: no built page {html}")
            continue
        problems += check_reference_toc(pages[html], objects, html)
    return problems


def build(dest: Path) -> None:
    """``mkdocs build --strict`` of the repository's docs into ``dest``."""
    cmd = [sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d", str(dest)]
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}  # Material's banner, not a problem
    subprocess.run(cmd, cwd=ROOT, check=True, env=env)


def find_chromium():
    for name in (
        "chromium",
        "chromium-browser",
        "google-chrome",
        "google-chrome-stable",
    ):
        found = shutil.which(name)
        if found:
            return found
    return None


def screenshot(site: Path, pages, out: Path, browser: str, width=1280, height=2400):
    """Serve ``site`` on a free local port and screenshot each page into ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    handler = functools.partial(_QuietHandler, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    shots = []
    try:
        with tempfile.TemporaryDirectory() as profile:
            for page in pages:
                name = page.removesuffix("index.html").strip("/").replace("/", "_")
                png = out / f"{name or 'index'}.png"
                cmd = [
                    browser, "--headless", "--no-sandbox", "--disable-gpu",
                    "--disable-quic", "--no-first-run", "--disable-background-networking",
                    "--disable-component-update", "--disable-sync", "--hide-scrollbars",
                    f"--user-data-dir={profile}", f"--window-size={width},{height}",
                    f"--screenshot={png}", f"http://127.0.0.1:{port}/{page}",
                ]  # fmt: skip
                subprocess.run(cmd, capture_output=True, timeout=120, check=False)
                if png.exists():
                    shots.append(png)
                else:
                    print(f"no screenshot of {page}", file=sys.stderr)
    finally:
        server.shutdown()
        server.server_close()
    return shots


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--site", type=Path, help="a built site (default: build one)")
    ap.add_argument("--out", type=Path, default=Path("/tmp/docs-shots"))
    ap.add_argument("--pages", nargs="*", default=list(DEFAULT_PAGES))
    ap.add_argument("--width", type=int, default=1280, help="window width, px")
    ap.add_argument("--height", type=int, default=2400, help="window height, px")
    args = ap.parse_args(argv)

    with tempfile.TemporaryDirectory() as tmp:
        site = args.site
        if site is None:
            site = Path(tmp) / "site"
            build(site)
        problems = check_site(site, ROOT / "docs")
        for p in problems:
            print("FAIL", p)
        print(f"{len(problems)} problem(s) in links and reference contents")
        for page in args.pages:
            path = site / page
            wide = (
                long_code_lines(path.read_text(encoding="utf-8"))
                if path.exists()
                else []
            )
            if wide:
                print(
                    f"note: {page}: {len(wide)} code line(s) over {CODE_WIDTH} characters "
                    f"(scrolled at 1280 px), e.g. {wide[0].strip()[:60]!r}"
                )
        browser = find_chromium()
        if browser is None:
            print("screenshots skipped: no chromium on PATH (apt-get install chromium)")
        else:
            shots = screenshot(
                site,
                args.pages,
                args.out,
                browser,
                width=args.width,
                height=args.height,
            )
            print(f"{len(shots)} screenshot(s) in {args.out}: look at each")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
