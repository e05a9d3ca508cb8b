"""docs/howto/should-i-echo.md runs and prints what it says (the rules of tests/test_docs.py)."""

from tests.test_docs import DOCS, run_page, same_output

PAGE = DOCS / "howto" / "should-i-echo.md"


def test_should_i_echo_page_runs_and_prints_what_it_says(tmp_path):
    results = run_page(PAGE, tmp_path)
    assert len(results) >= 2
    for block, expected, printed in results:
        if expected is None or expected["varies"]:
            continue
        assert same_output(printed, expected["source"]), (
            f"block at line {block['line']}: the page says\n{expected['source']}\nbut the code now prints\n{printed}")


def test_page_is_in_the_nav():
    from tests.test_docs import ROOT

    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    assert "howto/should-i-echo.md" in nav and "background/plan-model.md" in nav
