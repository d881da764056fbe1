"""Human-readable sizes and rates, in one place so CLI, GUI and logs agree."""


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
