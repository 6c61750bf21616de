"""``sm-count``: the GEMM planned for fewer SMs, as on a smaller GPU of the same architecture."""

from __future__ import annotations

from ...bits.compare import compare
from ...core.device import device_properties
from ...core.shapes import sm_count_ladder
from ...results.check import Kind
from .base import Scenario, ScenarioContext


SM_TARGETS = "sm-count targets"  # key in ScenarioContext.shared: targets asked for instead of the ladder's


def _sm_count(context: ScenarioContext):
    sm_count = device_properties()["sm_count"]
    asked = context.shared.get(SM_TARGETS)
    targets = sorted({t for t in asked if 0 < t < sm_count}) if asked else sm_count_ladder(sm_count)
    if not targets:
        return SM_COUNT.does_not_apply(f"the device has {sm_count} SM: no smaller count to emulate")
    out = context.new_output()
    label = {target: f"{target} SMs" for target in targets}
    per_target, mismatches, signatures = {}, [], {}
    for target in targets:
        with context.new_handle(stream=context.stream) as limited:
            limited.sm_count_target = target
            signatures[label[target]] = context.traced(
                lambda: context.gemm(context.a, context.b, out, limited, context.shape))
            mismatch = compare(context.reference, out)
        per_target[target] = mismatch.mismatched_elements
        mismatches.append(mismatch)
    extra = {"mismatched_by_sm_count": per_target}
    extra.update(context.kernel_extra(signatures, [label[t] for t, n in per_target.items() if n]))
    changes = extra.get("kernel_changes", {})
    detail = ", ".join(f"{label[t]}: {'identical' if n == 0 else f'{n} elements differ'}"
                       + (f" ({changes[label[t]]})" if label[t] in changes else "")
                       for t, n in per_target.items()) + f" (device has {sm_count})"
    return SM_COUNT.from_mismatches(mismatches, detail, extra)


def _untestable(cure) -> str:
    # It overrides the very setting that emulates a smaller GPU: here it would compare a plan with itself.
    if not cure.lt_sm_count_target:
        return ""
    return (f"same plan on every GPU with at least {cure.lt_sm_count_target} SMs by construction; "
            "emulation cannot test it: check on a real GPU of that size")


SM_COUNT = Scenario("sm-count", "cublasSetSmCountTarget below the device's SM count, as on a GPU with fewer SMs",
                    Kind.HAZARD, "SM count", _sm_count, untestable=_untestable, lock="bits",
                    evidence=lambda result, targets: f"under SM-count targets {', '.join(map(str, targets))} "
                    "and the full count" if targets else "")
