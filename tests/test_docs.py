"""The documentation: README.md and docs/*.md keep every line within 100 characters, and what they say
of the code (the findings, the names, the bench scripts' exit codes ...) is held to the code.

Fenced code blocks (a command stays one line) and table rows are left as they are; a line that is one
word alone (a long link or path) may pass the width.
"""

import ast
import pathlib
import re

import pytest

from cublas_det.base.errors import ExitCode

ROOT = pathlib.Path(__file__).resolve().parent.parent
WIDTH = 100
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def long_prose_lines(text: str, width: int = WIDTH) -> list[tuple[int, int]]:
    """(line number, length in characters) of each prose line longer than ``width``."""
    found, fenced = [], False
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if stripped.startswith(("```", "~~~")):
            fenced = not fenced
            continue
        if fenced or stripped.startswith("|") or len(line) <= width:
            continue
        if len(stripped.lstrip("-*> ").split()) <= 1:  # a link or a path alone on its line
            continue
        found.append((number, len(line)))
    return found


@pytest.mark.parametrize("path", DOCS, ids=lambda path: str(path.relative_to(ROOT)))
def test_prose_lines_fit_the_width(path):
    long = long_prose_lines(path.read_text(encoding="utf-8"))
    assert not long, f"{path.relative_to(ROOT)}: lines over {WIDTH} characters (line, length): {long}"


def test_the_docs_are_found():
    assert (ROOT / "README.md") in DOCS and len(DOCS) > 1


def test_the_checker_finds_a_planted_long_line(tmp_path):
    fine = "word " * 19 + "µµµµ"  # 99 characters, 103 bytes: counted in characters
    planted = ("a prose line " * 8).strip()  # 103 characters
    table = "| " + "cell | " * 20
    code = "```bash\n" + "x" * 150 + "\n```"
    alone = "  https://example.com/" + "p" * 100  # a link alone on its line
    page = tmp_path / "page.md"
    page.write_text("\n".join(["# Title", fine, table, code, alone, planted, "end"]) + "\n", encoding="utf-8")
    assert len(fine) == 99 and len(fine.encode()) > WIDTH
    # line 8: after the title, the fine line, the table row, the three lines of the fence and the link
    assert long_prose_lines(page.read_text(encoding="utf-8")) == [(8, len(planted))]
    assert long_prose_lines("- " + planted) == [(1, len(planted) + 2)]  # a list item is prose
    assert long_prose_lines("```\n```\n" + planted) == [(3, len(planted))]  # after a closed fence


def test_the_readme_gives_each_exit_code_the_meaning_errors_gives_it():
    readme = " ".join((ROOT / "README.md").read_text().split())  # lines joined, as a reader reads them
    for code in ExitCode:
        assert f"{int(code)} {code.meaning}" in readme, f"README's exit code {int(code)}: {code.meaning!r}"


def test_the_readme_sample_is_what_report_prints_of_the_run_it_names(typed, monkeypatch):
    monkeypatch.chdir(ROOT)  # as the README's reader types it: the path the report's note names is the one given
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## What it tells you\n", 1)[1]
    (command,) = re.findall(r"`cublas-det report (\S+)`", section.split("```", 1)[0])
    sample = section.split("```text\n", 1)[1].split("\n```", 1)[0].splitlines()
    printed = [line.rstrip() for line in typed("cublas-det report", command, env={"COLUMNS": "100"})
               .stdout.splitlines()]
    at = 0
    for part in "\n".join(sample).split("\n...\n"):  # a line `...` stands for lines cut
        lines = part.splitlines()
        found = next((i for i in range(at, len(printed)) if printed[i:i + len(lines)] == lines), None)
        assert found is not None and (found == 0 or at > 0), f"not printed (or not first): {lines[0]!r}"
        at = found + len(lines)


def _section(path: pathlib.Path, heading: str) -> str:
    """The text under ``## heading`` up to the next section."""
    return path.read_text(encoding="utf-8").split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]


def test_capture_md_findings_table_is_the_registry_of_findings():
    from cublas_det.apilog.findings import KINDS

    documented = {}
    for row in _section(ROOT / "docs" / "capture.md", "Findings").splitlines():
        if row.startswith("| `"):
            ids, kind = row.split("|")[1:3]
            documented.update({finding: kind.split()[0] for finding in re.findall(r"`([^`]+)`", ids)})
    assert documented == KINDS


def test_every_name_architecture_md_gives_is_in_the_code():
    """A name in backticks (`OPS`, `Router.plan`, `command_main()`) is a word of the package or its tests,
    so that a renamed or removed one (`_GEMMS`) fails here rather than misleading a contributor."""
    sources = [*(ROOT / "cublas_det").rglob("*.py"), *(ROOT / "tests").glob("*.py")]
    sources.remove(pathlib.Path(__file__).resolve())  # this file names the gone one
    words = set(re.findall(r"\w+", "\n".join(path.read_text(encoding="utf-8") for path in sources)))
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    names = [name for name in re.findall(r"`([A-Za-z_][\w.]*)(?:\(\))?`", text) if not name.endswith((".py", ".md"))]
    assert len(names) > 30, names  # the pattern still finds the names
    assert not [name for name in names if set(name.split(".")) - words]


@pytest.mark.parametrize("script", sorted((ROOT / "bench").glob("*.py")), ids=lambda path: path.name)
def test_each_bench_script_states_its_exit_codes_as_method_md_says(script):
    assert "The scripts in `bench/` state their own exit codes" in " ".join((ROOT / "docs" / "method.md").read_text()
                                                                           .split())
    docstring = " ".join((ast.get_docstring(ast.parse(script.read_text(encoding="utf-8"))) or "").split())
    assert re.search(r"(?i)\bexit(s| codes)?\b.*?\b0\b", docstring), f"{script.name}: no exit codes in its docstring"


def test_the_docs_give_the_test_suite_s_count_once():
    """Counts of the suite go stale with every test added: one place gives the latest."""
    counts = [(path.name, count) for path in DOCS for count in re.findall(r"\b\d[\d,]{2,} passed", path.read_text())]
    assert len(counts) <= 1, counts


def test_the_readme_sample_cuts_nothing_before_its_verdict():
    """The answer is shown whole, notes included: a `...` may stand only for lines after the verdict."""
    section = (ROOT / "README.md").read_text(encoding="utf-8").split("## What it tells you\n", 1)[1]
    sample = section.split("```text\n", 1)[1].split("\n```", 1)[0].splitlines()
    verdict = next(i for i, line in enumerate(sample) if line.startswith("Verdict:"))
    assert "..." not in sample[:verdict]


def test_the_readme_s_troubleshooting_names_the_nvml_extra_and_its_note_without_it():
    from cublas_det.timing.monitor import NO_NVML

    readme = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    assert re.search(r"(?m)^nvml = \[", (ROOT / "pyproject.toml").read_text())
    assert 'python -m pip install ".[cuda12,nvml]"' in readme and "other processes are not recorded" in NO_NVML


def test_lock_md_says_which_pytorch_settings_a_locked_call_reads_as_the_router_does():
    """docs/lock.md: a locked call reads allow_tf32 and none of PyTorch's determinism or reduction settings."""
    from cublas_det.bindings.cublaslt import ALGO_CONFIG
    from cublas_det.lock.deterministic_ops import SETTING

    section = " ".join(_section(ROOT / "docs" / "lock.md", "What the lock covers, and PyTorch's settings beside it")
                       .split())
    router = (ROOT / "cublas_det" / "lock" / "router.py").read_text(encoding="utf-8")
    for setting, read in (("use_deterministic_algorithms", False), ("CUBLAS_WORKSPACE_CONFIG", False),
                          ("allow_bf16_reduced_precision_reduction", False), ("allow_tf32", True)):
        assert setting in section and (setting in router) == read, setting
    assert f"**`{SETTING}`**" in section and "`splitk`, `reduction_scheme` of its `lt_algo`" in section
    assert {"splitk", "reduction_scheme"} <= set(ALGO_CONFIG)  # a lock entry's names for them
    assert section.count("A locked call does not read it") == 2
