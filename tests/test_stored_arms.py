"""A stored arm whose name no configuration reads back (a pinned algorithm's, a mode this version does
not make, a hand-edited one) is shown and paired by its name, as the file has it: the run still reads."""

import json
import pathlib

from cublas_det.cli import report
from cublas_det.core.config import name_role
from cublas_det.results.timing import AA_SUFFIX, Arm, ratio_pairs

DATA = pathlib.Path(__file__).parent / "data"
PINNED = "PEDANTIC/lt-pin20k66.034366"


def test_an_arm_no_configuration_reads_back_keeps_its_name():
    for name in (PINNED, "TF32+DISALLOW_RPR/lt"):
        arm = Arm.read(name)
        assert (arm, arm.config, arm.control, arm.role) == (name, None, False, name_role(name))
        control = Arm.read(name + AA_SUFFIX)
        assert control.control and control.base == name and control.config is None
        assert ratio_pairs([Arm.read("PEDANTIC"), arm, control])[-1] == (control, arm)  # the A/A pair holds
    assert Arm.read("PEDANTIC").config is not None  # a name that parses keeps its configuration


def test_a_run_timing_such_an_arm_reports(tmp_path, capsys):
    odd = "TF32+DISALLOW_RPR/lt"
    text = (DATA / "h200_run.json").read_text().replace('"TF32"', f'"{odd}"').replace("[TF32]", f"[{odd}]")
    data = json.loads(text)
    for entry in data["benchmarks"]:  # no check: the timing alone names the arm
        entry["extra_info"].pop("scenarios", None)
    (tmp_path / "odd.json").write_text(json.dumps(data))
    assert report.main([str(tmp_path / "odd.json")], "cublas-det report") == 0
    out = capsys.readouterr().out
    assert f"Time, {odd} vs PEDANTIC:" in out and f"  {odd}  " in out
