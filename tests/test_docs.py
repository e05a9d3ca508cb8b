"""The documentation cannot rot: run the code of the tutorial and how-tos, build the site.

The pages in PAGES (the tutorial, the how-tos, the pipeline model) and the README follow
one convention:

- every ```python block of a page runs, in order, in one namespace per page, in a
  temporary working directory;
- a ```text block right after a python block is that block's printed output, and the
  test compares it with what the code prints now: words must match exactly, integers
  exactly, decimals to one unit in their last printed digit;
- a ```text block preceded by the line ``<!-- output varies -->`` (wall-clock
  measurements) is not compared;
- ```bash blocks (installs, the command line) are not run here.

The site build (``mkdocs build --strict``) runs only if MkDocs, Material and
mkdocstrings are installed (``pip install -e ".[docs]"``), and skips otherwise.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import math
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
PAGES = [
    "tutorial.md",
    "howto/profile-your-loader.md",
    "howto/choose-k-and-b.md",
    "howto/seeds.md",
    "howto/rl-rollout-reuse.md",
    "background/pipeline-model.md",
]
VARIES = "<!-- output varies -->"

_FENCE = re.compile(r"^```(\w*)\s*$")
_NUMBER = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?")


def code_blocks(text: str) -> list[dict]:
    """Fenced blocks of a page: language, source, and whether an output 'varies'."""
    blocks, lines, i = [], text.splitlines(), 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if m is None:
            i += 1
            continue
        lang, start = m.group(1), i + 1
        end = start
        while end < len(lines) and lines[end].rstrip() != "```":
            end += 1
        if end == len(lines):
            raise ValueError(f"unclosed code fence at line {i + 1}")
        prev = next((ln.strip() for ln in reversed(lines[:i]) if ln.strip()), "")
        blocks.append({"lang": lang, "source": "\n".join(lines[start:end]) + "\n",
                       "line": i + 1, "varies": prev == VARIES})
        i = end + 1
    return blocks


def examples(text: str) -> list[tuple[dict, dict | None]]:
    """(python block, its expected-output block or None), in page order."""
    blocks = code_blocks(text)
    out = []
    for k, b in enumerate(blocks):
        if b["lang"] != "python":
            continue
        nxt = blocks[k + 1] if k + 1 < len(blocks) else None
        out.append((b, nxt if nxt is not None and nxt["lang"] == "text" else None))
    return out


def _split(text: str) -> tuple[list[str], list[str]]:
    """Numbers and the words between them (whitespace collapsed)."""
    numbers = _NUMBER.findall(text)
    words = [" ".join(w.split()) for w in _NUMBER.split(text)]
    return numbers, words


def _ulp(token: str) -> float:
    """One unit in the last printed digit of a decimal token; 0 for an integer."""
    mantissa, _, exp = token.lower().partition("e")
    if "." not in mantissa and not exp:
        return 0.0
    decimals = len(mantissa.split(".")[1]) if "." in mantissa else 0
    return 10.0 ** (int(exp or 0) - decimals)


def same_output(actual: str, documented: str) -> bool:
    """Words equal, integers equal, decimals within one unit of their last digit."""
    a_num, a_words = _split(actual.strip())
    d_num, d_words = _split(documented.strip())
    if a_words != d_words or len(a_num) != len(d_num):
        return False
    return all(math.isclose(float(a), float(d), rel_tol=0.0, abs_tol=1.01 * _ulp(d))
               for a, d in zip(a_num, d_num))


def run_page(path: Path, workdir: Path) -> list[tuple[dict, dict | None, str]]:
    """Run a page's python blocks in order; return (block, expected, printed) triples."""
    namespace: dict = {"__name__": "__docs__"}
    results = []
    with contextlib.chdir(workdir):
        for block, expected in examples(path.read_text(encoding="utf-8")):
            buf = io.StringIO()
            code = compile(block["source"], f"{path.name}:{block['line']}", "exec")
            with contextlib.redirect_stdout(buf):
                exec(code, namespace)
            results.append((block, expected, buf.getvalue()))
    return results


# --------------------------------------------------------------------------- tests


def test_output_comparison_rules():
    assert same_output("risk=1.41e-04 after 121 batches", "risk=1.42e-04 after 121 batches")
    assert not same_output("risk=1.44e-04 after 121 batches", "risk=1.42e-04 after 121 batches")
    assert not same_output("after 122 batches", "after 121 batches")
    assert not same_output("status=diverged", "status=ok")
    assert same_output("x   0.500\n", "x 0.501")


@pytest.mark.parametrize("page", [*PAGES, "../README.md"])
def test_page_examples_run_and_print_what_the_page_says(page, tmp_path):
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    path = DOCS / page
    results = run_page(path, tmp_path)
    assert results, f"{page} has no python example"
    for block, expected, printed in results:
        if expected is None or expected["varies"]:
            continue
        assert same_output(printed, expected["source"]), (
            f"{page}, block at line {block['line']}: the page says\n{expected['source']}\n"
            f"but the code now prints\n{printed}")


def test_pages_in_nav_exist_and_link_the_sweep_page():
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    for page in PAGES + ["index.md", "background/data-echoing.md"]:
        assert page in nav
        assert (DOCS / page).is_file()
    assert "sweep.md" in nav


def test_the_home_page_lists_every_how_to_of_the_nav():
    lines = (ROOT / "mkdocs.yml").read_text(encoding="utf-8").splitlines()
    start = lines.index("  - How-to:") + 1
    howtos = []
    for line in lines[start:]:
        m = re.match(r"^      - (.+?): (\S+\.md)$", line)
        if m is None:
            break
        howtos.append(m.groups())
    assert len(howtos) >= 5
    home = (DOCS / "index.md").read_text(encoding="utf-8")
    for title, page in howtos:
        assert f"]({page})" in home, f"the home page does not list {title!r} ({page})"


def test_the_home_page_links_every_reference_and_background_page_of_the_nav():
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    pages = re.findall(r"^      - .+?: ((?:reference|background)/\S+\.md)$", nav, flags=re.M)
    assert len(pages) >= 15
    home = (DOCS / "index.md").read_text(encoding="utf-8")
    missing = [page for page in pages if f"]({page})" not in home]
    assert not missing, f"the home page does not link {missing}"


def test_math_becomes_mathml_with_every_delimiter_as_a_character():
    pytest.importorskip("latex2mathml")
    spec = importlib.util.spec_from_file_location("mathml_hook", DOCS / "hooks" / "mathml.py")
    hook = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hook)
    for tex in ("\\eta^\\star = \\min\\Bigl\\{\\frac{1}{\\beta},\\\n\\frac{D}{\\rho}\\Bigr\\}",  # a control space, wrapped
                r"\bigl\lVert w_0 - w^\star \bigr\rVert \le D", r"\Bigl\| x \Bigr\|", r"\lceil R \rceil"):
        out = hook.to_mathml(tex, display=True)
        assert out.startswith("<math") and "\\" not in out, (tex, out)
    page = '<p><span class="arithmatex">\\(K &lt; 2\\)</span> and</p><div class="arithmatex">\\[x^2\\]</div>'
    html = hook.on_page_content(page, None, None, None)
    assert html.count("<math") == 2 and "\\(" not in html and 'display="block"' in html


def _have_docs_tools() -> bool:
    return all(importlib.util.find_spec(m) is not None
               for m in ("mkdocs", "material", "mkdocstrings", "mkdocstrings_handlers.python", "latex2mathml"))


@pytest.mark.skipif(not _have_docs_tools(), reason='needs pip install -e ".[docs]"')
def test_site_builds_strict(tmp_path):
    if shutil.which("mkdocs") is None and importlib.util.find_spec("mkdocs") is None:
        pytest.skip("mkdocs not installed")
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
        env={**__import__("os").environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    site = tmp_path / "site"
    assert (site / "reference" / "theory" / "index.html").is_file()
    pages = sorted(site.rglob("*.html"))
    n_math = 0
    for page in pages:
        html = page.read_text(encoding="utf-8")
        # offline: nothing is loaded from another host (scripts, styles, fonts, images)
        loads = re.findall(r'<(?:script|img|iframe)[^>]*\ssrc="(https?:)?//[^"]*"', html)
        loads += re.findall(r'<link[^>]*rel="(?:stylesheet|preconnect|preload)"[^>]*href="(?:https?:)?//[^"]*"', html)
        loads += re.findall(r'<link[^>]*href="(?:https?:)?//[^"]*"[^>]*rel="(?:stylesheet|preconnect|preload)"', html)
        assert not loads, f"{page.relative_to(site)} loads from the network: {loads[:3]}"
        # every formula is MathML, rendered when the site was built (no \( or \[ left for a script)
        spans = re.findall(r'<(span|div) class="arithmatex[^"]*">(.*?)</\1>', html, flags=re.DOTALL)
        assert all(body.lstrip().startswith("<math") for _, body in spans), page.relative_to(site)
        n_math += len(spans)
    assert n_math > 500  # the background pages and the theory reference are mostly formulas
    home = (site / "index.html").read_text(encoding="utf-8")
    assert 'href="howto/should-i-echo/"' in home
