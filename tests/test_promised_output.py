"""'The promised output is missing -> exit 2' is one rule in one place (cli.common.unless_missing): a clean
0 becomes 2, a finding (1), an error, Ctrl-C or a captured command's own code stands."""

import ast
import pathlib

from cublas_det.cli.common import unless_missing

CLI = pathlib.Path(__file__).resolve().parent.parent / "cublas_det" / "cli"


def test_a_missing_output_turns_only_a_clean_0_into_2():
    assert [unless_missing(code, False) for code in (0, 1, 2, 3, 130)] == [2, 1, 2, 3, 130]
    assert [unless_missing(code, True) for code in (0, 1, 2, 3, 130)] == [0, 1, 2, 3, 130]


def test_every_command_that_promises_a_file_asks_the_one_rule():
    def calls(path):
        return {node.func.id for node in ast.walk(ast.parse(path.read_text()))
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)}
    assert sorted(path.stem for path in CLI.glob("*.py") if "unless_missing" in calls(path)) == [
        "capture", "diff", "gemms", "prescribe", "report"]  # gemms: bench's and sweep's exit code

