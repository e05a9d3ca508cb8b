"""The pure parts of scripts/check_docs_site.py and scripts/check_notebook.py: each check
finds what it is for on small made-up pages and outputs (no browser, no Jupyter)."""

import importlib.util
import sys
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"


def _load(name):
    spec = importlib.util.spec_from_file_location(f"_check_{name}", SCRIPTS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # a dataclass looks its module up while being made
    spec.loader.exec_module(module)
    return module


site = _load("check_docs_site")
nb = _load("check_notebook")

TOC = ('<nav class="md-nav md-nav--secondary"><ul><li><a href="#echosim.loop">loop</a>'
       '<nav class="md-nav"><a href="#echosim.loop.echoing">echoing</a></nav></li></ul></nav>')


def _page(body, toc=TOC):
    return site.parse_page(f"<html><body>{toc}<article>{body}</article></body></html>")


def test_parse_page_reads_ids_links_contents_and_doc_headings():
    page = _page('<h2 id="echosim.loop" class="doc doc-heading">m</h2>'
                 '<h3 id="echosim.loop.echoing" class="doc doc-heading">f</h3>'
                 '<h2 id="plain">p</h2><a href="../x/#a">x</a><img src="fig.png">')
    assert page.toc == ["echosim.loop", "echosim.loop.echoing"]
    assert page.doc_headings == ["echosim.loop", "echosim.loop.echoing"]
    assert {"echosim.loop", "plain"} <= page.ids
    assert ("a", "../x/#a") in page.links and ("img", "fig.png") in page.links


def test_check_links_finds_a_missing_page_and_a_missing_anchor_and_ignores_external_ones():
    pages = {
        "index.html": _page('<a href="howto/a/#step-2">ok</a><a href="howto/a/#gone">bad anchor</a>'
                            '<a href="howto/b/">no page</a><a href="https://example.org/#x">out</a>'
                            '<a href="#here">self</a><span id="here"></span><img src="figures/f.png">', toc=""),
        "howto/a/index.html": _page('<h2 id="step-2">2</h2><a href="../../index.html#here">back</a>', toc=""),
    }
    files = set(pages) | {"figures/f.png"}
    problems = site.check_links(pages, files)
    assert len(problems) == 2
    assert any("'howto/a/#gone'" in p and "no id 'gone'" in p for p in problems)
    assert any("'howto/b/'" in p and "no file howto/b/index.html" in p for p in problems)


def test_reference_contents_must_list_every_directive_and_member():
    page = _page('<h2 id="echosim.loop" class="doc doc-heading">m</h2>'
                 '<h3 id="echosim.loop.echoing" class="doc doc-heading">f</h3>'
                 '<h3 id="echosim.loop.Records" class="doc doc-heading">R</h3>')
    problems = site.check_reference_toc(page, ["echosim.loop", "echosim.pilot"], "loop")
    assert problems == ["loop: '::: echosim.pilot' renders no heading",
                        "loop: member echosim.loop.Records is not in the table of contents"]
    assert site.directives("# t\n\n::: echosim.loop\n\ntext ::: not\n::: echosim.pilot\n") == [
        "echosim.loop", "echosim.pilot"]


def test_long_code_lines_counts_code_not_outputs():
    code = ('<div class="highlight"><pre><span></span><code><span class="n">x</span> = 1'
            + " " * 90 + "# far</code></pre></div>")
    output = '<div class="highlight"><pre><span></span><code>' + "y" * 120 + "</code></pre></div>"
    assert len(site.long_code_lines(code + output, limit=80)) == 1
    assert site.long_code_lines(output, limit=80) == []


def test_a_view_without_html_with_internal_names_or_too_long_fails():
    good = {"text/plain": "Plan(wall_clock_to_target='4.46 s')", "text/html": "<p>4.46 s, 8919 steps</p>"}
    assert nb.check_display("plan", good, {"html": ("s", "steps"), "text": ("s",)}) == []
    problems = nb.check_display("sweep", {"text/plain": "x" * 3000 + " conv_time"}, {"text": ("s",)})
    assert any("no text/html view" in p for p in problems)
    assert any("internal name 'conv_time'" in p for p in problems)
    assert any("3010 characters" in p for p in problems)
    assert any("never says 's'" in p for p in problems)


def test_frame_columns_need_a_unit_unless_they_are_labels_or_indices():
    text = "(['batch', 'policy', 'load_time_s', 'R', 'risk'], {'risk': 'excess risk'})"
    assert nb.check_frame("f", text) == ["f: columns without a unit (in the name or attrs['units']): ['R']"]
    assert nb.check_frame("f", "not a tuple")[0].startswith("f: could not read")


def test_notebook_check_reads_prints_errors_and_global_state():
    nbformat = pytest.importorskip("nbformat")
    book = nb.build_notebook()
    assert [c.metadata["name"] for c in book.cells] == [name for name, _, _ in nb.CELLS]
    state = '{"backend": "agg", "warnings": 3}\n'
    for cell in book.cells:
        name = cell.metadata["name"]
        if name.startswith("state"):
            text = state if name == "state_before" else state.replace("agg", "inline")
            cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=text)]
        elif name == "trace":
            cell.outputs = [nbformat.v4.new_output("stream", name="stderr", text="loading...\n"),
                            nbformat.v4.new_output("execute_result", data={
                                "text/plain": "Trace(n=3)", "text/html": "<p>times in the time unit</p>"})]
    problems = nb.check_notebook(book)
    assert "trace: printed to stderr: 'loading...'" in problems
    assert "global state changed: backend 'agg' -> 'inline'" in problems
    assert "trajectory: displayed nothing" in problems  # cells left without outputs
    assert not any(p.startswith("trace:") and "never says" in p for p in problems)


def test_progress_must_show_named_as_a_widget_or_a_line():
    line = [("stderr", "nb 100%|##########| 16/16 [00:00<00:00, 555.51 run/s]\n")]
    assert nb.check_progress("p", line, [], "nb") == []
    assert nb.check_progress("p", [], [{nb.WIDGET: {}, "text/plain": "nb: 0%"}], "nb") == []
    assert nb.check_progress("p", [("stderr", "100%|##| 16/16 [00:00<00:00]\n")], [], "nb") != []
    assert nb.check_progress("p", [("stdout", line[0][1])], [], "nb") != []


def test_a_signature_on_one_long_line_is_unformatted_but_a_long_value_is_not():
    def block(text):
        return f'<div class="doc-signature highlight"><pre><span></span><code>{text}</code></pre></div>'

    args = ", ".join(f"argument_{i}: int = {i}" for i in range(6))
    long_call = f"echoing({args}) -&gt; Records"
    formatted = "echoing(\n" + "".join(f"    argument_{i}: int = {i},\n" for i in range(6)) + ")"
    long_value = 'ACCURACY = "' + "x" * 200 + '"'
    found = site.unformatted_signatures(block(long_call) + block(formatted) + block(long_value))
    assert found == [f"echoing({args}) -> Records"]
    classvar = "Exponential(fit_params: ClassVar = 1, mean: float)"
    assert site.unformatted_signatures(block(classvar)) == [classvar]
