"""``bench serve``'s figures as a table: clients at once, model switching, memory."""

from __future__ import annotations

from typing import Any

from app.engine.units import format_bytes


def print_report(report: dict[str, Any]) -> None:
    print(
        f"bench serve: {report['model']} · {report['max_tokens']} tokens per request, greedy · "
        f"threads {report['threads']} · median of {report['rounds']} rounds"
    )
    print(
        f"  {'':44} {'clients':>7} {'aggregate tok/s':>16} {'per-client tok/s':>17} "
        f"{'TTFT mean / max':>18}"
    )
    for config in report["configs"]:
        for row in config["rounds"]:
            ttft = (
                f"{row['mean_ttft_seconds'] * 1000:.0f} / {row['max_ttft_seconds'] * 1000:.0f} ms"
            )
            print(
                f"  {config['label']:44} {row['clients']:>7} "
                f"{row['aggregate_tokens_per_second']:>16.1f} "
                f"{row['client_tokens_per_second']:>17.1f} {ttft:>18}"
            )
    _print_ratios(report["configs"], report["parallel"])
    switching = report["switching"]
    cold = " / ".join(f"{seconds:.2f} s" for seconds in switching["cold_load_ttft_seconds"])
    print(f"switching models ({report['second_model']} as the second):")
    print(f"  first request to each (cold load)          {cold}")
    print(
        f"  switch, both loaded (--max-loaded 2)       "
        f"{switching['switch_both_loaded_ttft_seconds'] * 1000:.0f} ms TTFT"
    )
    print(
        f"  switch, one at a time (--max-loaded 1)     "
        f"{switching['switch_one_loaded_ttft_seconds'] * 1000:.0f} ms TTFT (unload + load)"
    )
    memory = report["memory"]
    for label, key in (
        ("two models loaded", "two_loaded"),
        ("after idle unload", "after_idle_unload"),
    ):
        held = memory[key]
        print(
            f"  memory, {label:20} server {format_bytes(held['server_bytes'])} + workers "
            f"{format_bytes(held['workers_bytes'])}"
        )


def _print_ratios(configs: list[dict[str, Any]], parallel: int) -> None:
    """Ours (``--parallel N``) over llama-server's, per client count, plain and MTP."""
    by_label = {config["label"]: config["rounds"] for config in configs}
    ours = [label for label in by_label if label.startswith(f"serve --parallel {parallel} ")]
    theirs = [label for label in by_label if label.startswith("llama-server")]
    if len(ours) != 2 or len(theirs) != 2:
        return
    for mine, other, what in ((ours[0], theirs[0], "plain"), (ours[1], theirs[1], "MTP")):
        ratios = [
            f"{a['clients']}: {_ratio(a, b):.2f}×"
            for a, b in zip(by_label[mine], by_label[other], strict=True)
            if b["aggregate_tokens_per_second"] > 0
        ]
        print(f"  aggregate, ours / llama-server ({what}): {', '.join(ratios)}")


def _ratio(ours: dict[str, Any], theirs: dict[str, Any]) -> float:
    return ours["aggregate_tokens_per_second"] / theirs["aggregate_tokens_per_second"]
