"""The arms' order in each round: a Williams design (a balanced Latin square; for odd n with its mirror), so
every arm stands in every position and follows every other equally often and carry-over balances out."""

from __future__ import annotations


def williams_rows(n: int) -> list[list[int]]:
    if n < 1:
        raise ValueError(f"need at least one arm, not {n}")
    # First row 0, 1, n-1, 2, n-2, ...: consecutive differences take every value 1..n-1 once
    # (mod n), so the shifted rows give every ordered pair of neighbours exactly once.
    first = [0] + [(k + 1) // 2 if k % 2 else n - k // 2 for k in range(1, n)]
    rows = [[(index + shift) % n for index in first] for shift in range(n)]
    if n % 2 and n > 1:  # odd n: the mirrored square supplies the pairs in the other direction
        rows += [list(reversed(row)) for row in rows]
    return rows


def cycle_length(n: int) -> int:
    return len(williams_rows(n))


def round_order(arms: list[str], round_index: int) -> list[str]:
    rows = williams_rows(len(arms))
    return [arms[i] for i in rows[round_index % len(rows)]]
