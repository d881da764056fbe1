"""Human-readable sizes, rates and lists of names, in one place so CLI, GUI and logs agree."""

from collections.abc import Sequence


def format_bytes(count: float) -> str:
    """``1300000000`` → ``'1.3 GB'`` (decimal units, as the Hub shows sizes)."""
    value = float(count)
    if abs(value) < 1000:
        return f"{value:.0f} B"
    for unit in ("kB", "MB", "GB"):
        value /= 1000
        if abs(value) < 1000:
            return f"{value:.1f} {unit}"
    return f"{value / 1000:.1f} TB"


def format_rate(bytes_per_second: float) -> str:
    return f"{format_bytes(bytes_per_second)}/s"


def format_names(names: Sequence[str], shown: int = 3) -> str:
    """``a, b, c and 99,995 more``: a list a file name can make as long as it likes (a split
    GGUF named ``-00001-of-99999``) cut to its first ``shown`` names."""
    listed = ", ".join(names[:shown])
    rest = len(names) - shown
    return f"{listed} and {rest:,} more" if rest > 0 else listed
