"""Comparing stored runs: a baseline and a new run, or a fleet (three or more, e.g. one per node), matched
on the GEMM and its configuration, inputs checked before bits. Exit 1 when bits differ under identical
inputs (or a time regressed past ``--fail-on``); else 2 when nothing was comparable; else 0."""

from __future__ import annotations

import dataclasses
import os
from collections import Counter

from ..bits.digest import digest_groups
from ..base.errors import ExitCode
from ..results.timing import is_control
from ..core.device import describe_machine
from ..store.run import NO_IDENTITY, Entry, StoredRun
from ..base.words import plural, wrapped
from .time_verdict import CLEAR_GAP, SAME_CENTER, TimeLabel, time_verdict

IDENTICAL, DIFFER, INPUTS_DIFFER = "identical bits", "bits DIFFER", "inputs differ"


@dataclasses.dataclass(frozen=True)
class Comparison:
    """The answer, then the rest, unwrapped, and the exit code they imply."""

    answer: list
    details: list
    exit_code: int

    @property
    def lines(self) -> list:
        return self.answer + self.details

    def text(self, width: int) -> str:
        return "\n".join(part for line in self.answer + [""] + self.details for part in wrapped(line, width, "    "))


def _named(entry: Entry) -> str:
    """``trunk/W_in/dW[PEDANTIC] (128x56x4096:nt)``; a custom shape by its spec alone."""
    return entry.label + (f" ({entry.spec})" if entry.spec != entry.shape_name else "")


def inputs_differ(base: Entry, new: Entry) -> str | None:
    """Why two paired results are not the same problem, or None when they are (as far as can be told)."""
    if base.spec != new.spec:
        both = base.tokens and new.tokens and base.tokens != new.tokens
        tokens = f", T {base.tokens} vs {new.tokens}" if both else ""
        return f"another GEMM: {base.spec} vs {new.spec}{tokens}"
    a, b = base.identity, new.identity
    if a is None or b is None:
        return None  # a file of cublas_det 0.1: said once in a note
    reasons = []
    if a.get("seed") != b.get("seed"):
        reasons.append(f"seed {a.get('seed')} vs {b.get('seed')}")
    if a.get("inputs") and b.get("inputs") and a["inputs"] != b["inputs"]:
        why = "the input digests differ"
        if a.get("seed") == b.get("seed") and a.get("numpy") != b.get("numpy"):
            why += (f" (NumPy {a.get('numpy')} vs {b.get('numpy')}: NumPy promises its seeded stream only on one "
                    "build)")
        reasons.append(why)
    return "; ".join(reasons) or None


def _bits(base: Entry, new: Entry) -> str:
    if not (base.digests and new.digests):
        return "no digest"
    return IDENTICAL if base.digests == new.digests and len(new.digests) == 1 else DIFFER


def time_legend(fail_on_pct: float | None) -> list[str]:
    """What the time verdicts mean, and the thresholds behind them."""
    return ["time: the change of the median, its interval from both runs' 95% intervals; FASTER or SLOWER:",
            f"  all of it beyond ±{CLEAR_GAP:.1%}; SAME: within ±{SAME_CENTER:.0%} (or centred there, intervals "
            "overlapping);", "  UNSURE: neither (docs/method.md)"] + (
        [f"  REGRESSION: SLOWER by more than {fail_on_pct:g}% (--fail-on)"] if fail_on_pct is not None else [])


def _legacy_notes(runs: list[StoredRun]) -> list[str]:
    return [f"note: {run.source} was written by cublas_det {run.version}, which recorded {NO_IDENTITY}: its results "
            "are matched on M, N, K, op and configuration, and their inputs are assumed to be the same"
            for run in runs if run.legacy]


def compare_runs(base: StoredRun, new: StoredRun, fail_on_pct: float | None = None) -> Comparison:
    """A baseline against a new run, result by result (the A/A timing controls are no results of their own)."""
    head = [f"{run.source}: {run.describe()}, {run.datetime}" for run in (base, new)] + _legacy_notes([base, new])
    base_entries, new_entries = (tuple(e for e in run.entries if not is_control(e.config)) for run in (base, new))
    pairs = _pair(base_entries, new_entries)
    counts: Counter = Counter()
    regressed, lines, untrusted = [], [], 0
    times = dict.fromkeys((TimeLabel.SAME, TimeLabel.FASTER, TimeLabel.SLOWER, TimeLabel.UNSURE), 0)
    for entry in new_entries:
        match = pairs.get(id(entry))
        if match is None:
            lines.append(f"{_named(entry)}: only in {new.source}")
            continue
        reason = inputs_differ(match, entry)
        if reason:
            counts[INPUTS_DIFFER] += 1
            lines.append(f"{_named(entry)}: {INPUTS_DIFFER}, not comparable: {reason}")
            continue
        bits = _bits(match, entry)
        counts[bits] += 1
        per_device, in_base = (e.extra_info.get("device_digests") or {} for e in (entry, match))
        detail = (f" ({plural(len(per_device), 'device')} in {new.source}, {len(in_base)} in {base.source})"
                  if per_device or in_base else "")
        if bits == DIFFER and match.digests == entry.digests:  # the same digests: each file's devices disagree
            detail = (" (the devices of each file disagree, " + (
                "alike in both: " + ", ".join(f"device {d} {digest[:12]}" for d, digest in sorted(per_device.items()))
                if per_device == in_base else f"the same {len(entry.digests)} digests in both on other devices") + ")")
        verdict = time_verdict(match, entry, fail_on_pct)  # FASTER, SLOWER, SAME or UNSURE; REGRESSION past --fail-on
        if verdict is not None:
            times[verdict.label] += 1
            untrusted += bool(verdict.untrusted)
            regressed += [(_named(entry), verdict)] * verdict.fails
            detail += f", {verdict}" + " REGRESSION" * verdict.fails + (
                f" (timing not trusted in {'; '.join(verdict.untrusted)})" if verdict.untrusted else "")
        lines.append(f"{_named(entry)}: {bits}{detail}")
    paired = {id(match) for match in pairs.values()}
    lines += [f"{_named(entry)}: only in {base.source}" for entry in base_entries if id(entry) not in paired]
    compared = counts[IDENTICAL] + counts[DIFFER]
    timed = ", ".join(f"{count} {label.value}" for label, count in times.items() if count)
    answer = [] if compared else [
        "nothing comparable: no result with the same GEMM, configuration and inputs in both files"]
    answer.append(f"compared {compared}: {counts[IDENTICAL]} identical, {counts[DIFFER]} differ"
                  + (f"; time: {timed}" if timed else "")
                  + (f" ({untrusted} on timing a run did not trust)" if untrusted else "")
                  + f"; {counts[INPUTS_DIFFER]} with other inputs, {counts['no digest']} without a digest")
    if regressed:
        shown = ", ".join(f"{name} {verdict.change_pct:+.1f}%" for name, verdict in regressed[:5])
        more = f", and {len(regressed) - 5} more marked REGRESSION below" if len(regressed) > 5 else ""
        answer.append(f"time REGRESSION: {plural(len(regressed), 'result')} slower by more than {fail_on_pct:g}% "
                      f"(--fail-on): {shown}{more}")
    exit_code = ExitCode.FINDING if counts[DIFFER] or regressed else ExitCode.OK if compared else ExitCode.USAGE
    return Comparison(answer, head + lines + (time_legend(fail_on_pct) if timed else []), exit_code)


def _pair(base: tuple[Entry, ...], new: tuple[Entry, ...]) -> dict:
    """``{id(new entry): base entry}``: by role and configuration, then by the GEMM itself for the rest."""
    by_role = {entry.label: entry for entry in base}
    pairs = {id(entry): by_role[entry.label] for entry in new if entry.label in by_role}
    taken = {id(match) for match in pairs.values()}
    by_gemm = {entry.gemm_key: entry for entry in base if id(entry) not in taken}
    for entry in new:
        if id(entry) not in pairs and entry.gemm_key in by_gemm:
            pairs[id(entry)] = by_gemm.pop(entry.gemm_key)
    return pairs


@dataclasses.dataclass(frozen=True)
class Member:
    """One device's result in a fleet: which file (and device), its machine, its digest and inputs."""

    label: str
    machine: str
    digest: str
    entry: Entry
    file: int  # the index of its file in the fleet


def _members(run: StoredRun, entry: Entry, file: int) -> list[Member]:
    label = os.path.basename(run.source)
    per_device = entry.extra_info.get("device_digests")
    if not per_device:
        return [Member(label, run.describe(), next(iter(entry.digests)), entry, file)] if entry.digests else []
    devices = {str(d.get("device_id")): d.get("provenance") or {} for d in run.machine_info.get("devices") or []}
    return [Member(f"{label}:device {device}", describe_machine(devices.get(device, run.machine_info)), digest, entry,
                   file) for device, digest in sorted(per_device.items())]


def _fleet_groups(runs: list[StoredRun]) -> dict:
    """``{entry label (role and configuration): [Member]}``, paired as :func:`compare_runs` pairs, then across roles of
    one GEMM (the role in the most files takes in the others whose files it does not share); moved
    members say what their file called the GEMM."""
    keys: dict = {}
    for index, run in enumerate(runs):
        for entry in run.entries:
            keys.setdefault(entry.label, []).extend(_members(run, entry, index))
    roles_of_gemm: dict = {}
    for key in (key for key, members in keys.items() if members):  # a result without a digest takes no part
        roles_of_gemm.setdefault(keys[key][0].entry.gemm_key, []).append(key)
    for roles in roles_of_gemm.values():
        # The role in the most files first, a preset's before a custom spec, then by name: order-independent.
        roles.sort(key=lambda key: (-len({m.file for m in keys[key]}),
                                    keys[key][0].entry.shape_name == keys[key][0].entry.spec, key))
        for target in (role for role in roles if role in keys):
            for other in (o for o in roles if o != target and o in keys
                          and not {m.file for m in keys[o]} & {m.file for m in keys[target]}):
                keys[target] += [dataclasses.replace(member, label=f"{member.label} as {member.entry.shape_name}")
                                 for member in keys.pop(other)]
    return keys


def _by_inputs(members: list[Member]) -> list[list[Member]]:
    """Members with the same inputs together (as :func:`inputs_differ` tells), the largest group first."""
    groups: list[list[Member]] = []
    for member in members:
        group = next((g for g in groups if not inputs_differ(g[0].entry, member.entry)), [])
        if not group:
            groups.append(group)
        group.append(member)
    return sorted(groups, key=lambda group: -len({m.file for m in group}))


def _agreement(members: list[Member]) -> tuple[str, bool]:
    """(``all 3 agree (digest)``, or the digest groups with their machines; whether all agree)."""
    groups = digest_groups((member, member.digest) for member in members)
    if len(groups) == 1:
        return f"all {len(members)} agree ({next(iter(groups))[:12]})", True
    parts = [f"[{', '.join(m.label for m in group)}] {digest[:12]} on {'; '.join(sorted({m.machine for m in group}))}"
             for digest, group in sorted(groups.items(), key=lambda item: -len(item[1]))]
    return f"{len(groups)} groups: " + " | ".join(parts), False


def compare_fleet(runs: list[StoredRun]) -> Comparison:
    """Per GEMM and configuration, the files (and devices) grouped by digest; only the same inputs in two or more
    files are compared, and a file with none compared never agrees."""
    head = [f"fleet of {len(runs)} files:"] + [f"  {os.path.basename(r.source)}: {r.describe()}" for r in runs]
    lines = []
    compared = differing = alone = other_inputs = 0
    in_a_comparison: set = set()  # the indices of the files some result of which was compared
    for members in _fleet_groups(runs).values():
        if not members:
            continue  # no digest in any file
        named = _named(members[0].entry)
        groups = _by_inputs(members)
        comparable = [group for group in groups if len({m.file for m in group}) > 1]
        if not comparable:
            if len(groups) == 1:
                alone += 1
                lines.append(f"{named}: only in {os.path.basename(runs[members[0].file].source)}")
            else:
                other_inputs += 1
                lines.append(f"{named}: {INPUTS_DIFFER} in every file: not comparable ("
                             f"{inputs_differ(groups[0][0].entry, groups[1][0].entry)})")
            continue
        lines += [f"{named}: {INPUTS_DIFFER} in {', '.join(m.label for m in group)}: not comparable with "
                  f"{comparable[0][0].label} ({inputs_differ(comparable[0][0].entry, group[0].entry)})"
                  for group in groups if group not in comparable]
        for group in comparable:
            compared += 1
            in_a_comparison |= {m.file for m in group}
            verdict, agree = _agreement(group)
            differing += not agree
            inputs = f" [inputs of {group[0].label}]" if len(groups) > 1 else ""
            lines.append(f"{named}{inputs}: {verdict}")
    apart = f"; {alone} only in one file" if alone else ""
    apart += f"; {other_inputs} with other inputs in every file" if other_inputs else ""
    answer = [] if compared else [
        "nothing comparable: no result with the same GEMM, configuration and inputs in two files"]
    answer.append(f"compared {compared} GEMM/configuration pairs present in two or more files: "
                  f"{compared - differing} agree, {differing} differ{apart}")
    unmatched = [os.path.basename(run.source) for index, run in enumerate(runs)
                 if index not in in_a_comparison and any(entry.digests for entry in run.entries)]
    if compared and unmatched:
        answer.append(f"compared with nothing: {', '.join(unmatched)} (no result with the same GEMM, configuration "
                      "and inputs in another file): not counted as agreeing")
    exit_code = ExitCode.FINDING if differing else ExitCode.USAGE if not compared or unmatched else ExitCode.OK
    return Comparison(answer, head + _legacy_notes(runs) + lines, exit_code)
