"""``--explain SHAPE``: the kernels one GEMM shape runs per configuration, SM-count target and batch rung, as one
table of cells (the main kernel's key, ``+R`` for a reduce after it, grid, time per call; ``*``: other kernels or
another split than on the whole device): why its bits change under each hazard."""

from __future__ import annotations

import dataclasses

from ..core.call import shape_gemm
from ..core.config import resolve_config
from ..core.device import device_properties, gpu_failures
from ..core.handle import create_handle
from ..core.operands import device_operands, output
from ..core.shapes import batch_ladder, sm_count_ladder
from ..base.words import table
from ..kernels.signature import KernelSignature, is_split_k_reduce, math_of, recorded_signature, tile_of

CALLS = 3  # recorded calls per cell, after one untimed call


@dataclasses.dataclass(frozen=True)
class Explanation:
    """The signature of every (condition, configuration) cell; a cell that failed holds its error."""
    shape: object  # GemmShape
    sm_count: int
    configs: tuple[str, ...]
    rows: tuple[tuple[str, dict], ...]  # (condition, {config name: KernelSignature | str})


def sm_targets(sm_count: int) -> list[int]:
    return sm_count_ladder(sm_count, divisors=(2, 4, 8))[::-1]


def explain_shape(shape, configs, *, seed: int = 0) -> Explanation:
    """The kernels of ``shape`` per configuration: on the device, per SM-count target, per batch rung."""
    sm_count = device_properties()["sm_count"]
    configs = [resolve_config(config)[0] for config in configs]
    conditions = [(f"device ({sm_count} SMs)", None, None)]
    conditions += [(f"SM target {t}", t, None) for t in sm_targets(sm_count)]
    conditions += [(f"M = {m}", None, m) for m in batch_ladder(shape.m)]
    cells = {label: {} for label, _, _ in conditions}
    operands = {}
    for config in configs:
        if config.input_dtype not in operands:
            try:
                operands[config.input_dtype] = device_operands(shape, seed, config)
            except gpu_failures() as err:  # out of memory: every cell of the type says so
                operands[config.input_dtype] = f"error: {type(err).__name__}: {err}"
        made = operands[config.input_dtype]
        for label, target, rows in conditions:
            cells[label][config.name] = made if isinstance(made, str) else _cell(shape, config, *made, target, rows)
    return Explanation(shape, sm_count, tuple(c.name for c in configs),
                       tuple((label, cells[label]) for label, _, _ in conditions))


def _cell(shape, config, a, b, target, rows):
    import cupy
    if rows is not None:
        shape = dataclasses.replace(shape, m=rows)
        a = cupy.ascontiguousarray(a[..., :rows] if shape.trans_a else a[..., :rows, :])  # each matrix's rows
    try:
        out = output(shape, config)
        with create_handle(config) as handle:
            if target is not None:
                handle.sm_count_target = target
            shape_gemm(a, b, out, handle, shape)  # untimed: module loading, the heuristic's cache

            def calls():
                for _ in range(CALLS):
                    shape_gemm(a, b, out, handle, shape)

            return recorded_signature(calls, CALLS)
    except gpu_failures() as err:
        return f"error: {type(err).__name__}: {err}"


def render_explanation(explanation: Explanation) -> str:
    keys: dict[str, str] = {}  # main kernel name -> k1, k2 ...
    reduces = set()
    for _, row in explanation.rows:
        for cell in row.values():
            if isinstance(cell, KernelSignature) and cell.main:
                keys.setdefault(cell.main.name, f"k{len(keys) + 1}")
                if cell.reduce:
                    reduces.add(cell.reduce.name)
    baseline = explanation.rows[0][1]
    rows = [["condition"] + [f"{name}: kernel grid µs" for name in explanation.configs]]
    rows += [[condition] + [_cell_text(row.get(name), baseline.get(name), keys, condition.startswith("M = "))
                            for name in explanation.configs] for condition, row in explanation.rows]
    shape = explanation.shape
    title = shape.name if shape.name == shape.spec else f"{shape.name} ({shape.spec})"
    lines = [f"kernels of {title}, {CALLS} calls per cell after an untimed one; * = other kernels or another split "
             "of the work than on the whole device"]
    lines += table(rows, indent="  ")
    lines.append("legend")
    lines += [f"  {key} = {name}" + _kind(name) for name, key in keys.items()]
    lines += [f"  +R = {name} after the main kernel: " + ("it sums the split-K slices (grid z of the main kernel)"
                                                          if is_split_k_reduce(name) else
                                                          "it reduces its partial results") for name in sorted(reduces)]
    errors = sorted({cell for _, row in explanation.rows for cell in row.values() if isinstance(cell, str)})
    lines += [f"  {error}" for error in errors[:3]]
    return "\n".join(lines)


def _kind(name: str) -> str:
    words = " ".join(w for w in (math_of(name), tile_of(name) and f"tile {tile_of(name)}") if w)
    return f" ({words})" if words else ""


def differs(cell: KernelSignature, baseline: KernelSignature, batch_row: bool) -> bool:
    """Other kernels or another split of the work (in a batch row, only another grid z: M moves x and y)."""
    if [k.name for k in cell.launches] != [k.name for k in baseline.launches]:
        return True
    if batch_row:
        return cell.main.grid[2] != baseline.main.grid[2]
    return [k.grid for k in cell.launches] != [k.grid for k in baseline.launches]


def _cell_text(cell, baseline, keys, batch_row: bool = False) -> str:
    if cell is None:
        return "-"
    if isinstance(cell, str):
        return "error"
    main = cell.main
    text = f"{keys.get(main.name, '?')}{'+R' if cell.reduce else ''} {main.grid_text} {cell.kernel_us:.1f}"
    if cell.variants > 1:
        text += f" ({cell.variants} variants)"
    changed = isinstance(baseline, KernelSignature) and differs(cell, baseline, batch_row)
    return text + (" *" if changed else "")
