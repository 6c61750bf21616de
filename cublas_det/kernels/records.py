"""One kernel execution as CUPTI records it, from a CUPTI activity or a stored dict (the tests' fixtures)."""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class KernelRecord:
    """A kernel that ran: its name as CUPTI gives it (often mangled), launch geometry and GPU timestamps (ns)."""
    name: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    start_ns: int
    end_ns: int
    stream_id: int = 0
    correlation_id: int = 0
    graph_id: int = 0  # 0: launched directly, not from a CUDA graph
    device_id: int = 0

    duration_ns = property(lambda self: self.end_ns - self.start_ns)

    @classmethod
    def from_activity(cls, activity) -> KernelRecord:
        return cls(str(activity.name), (activity.grid_x, activity.grid_y, activity.grid_z),
                   (activity.block_x, activity.block_y, activity.block_z), int(activity.start), int(activity.end),
                   int(activity.stream_id), int(activity.correlation_id), int(getattr(activity, "graph_id", 0)),
                   int(activity.device_id))

    def to_dict(self) -> dict:
        return {**dataclasses.asdict(self), "grid": list(self.grid), "block": list(self.block)}

    @classmethod
    def from_dict(cls, data: dict) -> KernelRecord:
        values = {f.name: data[f.name] for f in dataclasses.fields(cls) if f.name in data}
        return cls(**{**values, "grid": tuple(values["grid"]), "block": tuple(values["block"])})
