"""The hostile-input table of issues 23 and 34: each lying file, setting, Hub, server or request,
before and after the fix.

    python bench/hostile_inputs.py --before /path/to/old/checkout [--after .] [--json]

Builds every hostile input once in a temporary folder (from the bundled demo model and
checkpoints, copied), then runs each case as the user would — the real
CLI, ``python -m app …``, or the real build script — once with each checkout's code (its folder
as working directory and ``PYTHONPATH``, so ``-m app`` imports that code). Each run is a
subprocess with a wall-clock timeout (``--timeout``, 20 s) and an address-space cap
(``RLIMIT_AS``, ``--memory-gib``, 4 GiB), so no case can take the machine down; a run past the
timeout is killed with its process group. Reported per run: exit status (``timeout`` when
killed), wall time, the child's peak RSS (``wait4``), and the last line it printed, cut short
(the temporary folder shown as ``…``). Notes in brackets flag what must not happen: a secret or
raw terminal escapes printed, a line over 1,000 characters, the job history grown by a megabyte.

Issue 34's rows (:mod:`hostile_issue34`) run the CLI against a hostile local Hub
(``tests.localhub``, seeded here) and lying ``chat --endpoint`` servers served by this process.
The rows starting ``serve:`` start the checkout's ``serve`` and send one hostile request (or hold
1,020 half-sent ones) through ``bench/health_under_attack.py``: exit is the HTTP status or how the
server failed, peak MiB the server's own.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from health_under_attack import cases as server_cases
from health_under_attack import run_server_case
from hostile_issue34 import hostile_endpoints, issue34_rows, seed_hostile_hub

HERE = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(HERE))
DEMO = HERE / "resources" / "models"
SECRET = "S3cretPass"
LONG_LINE = 1000


@dataclass(frozen=True)
class Case:
    name: str
    argv: Callable[[Path], list[str]]
    """The command for a checkout (its root given)."""
    env: dict[str, str]
    flags: tuple[tuple[bytes, str], ...] = ()
    """Output that must not appear, and the note shown when it does."""


@dataclass(frozen=True)
class Run:
    exit: str
    seconds: float
    peak_mib: float
    last_line: str


def _gguf_with_value(path: Path, value: bytes) -> Path:
    """A GGUF header with one key whose typed value is ``value`` (and nothing after it)."""
    string = struct.pack("<Q", len(b"general.name")) + b"general.name"
    path.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + string + value + bytes(64))
    return path


def _copied_checkpoint(source: Path, folder: Path, edit: Callable[[dict], None]) -> Path:
    """A copy of ``source`` (links would be refused as leading outside the checkpoint)."""
    shutil.copytree(source, folder, ignore=shutil.ignore_patterns("config.json"))
    config = json.loads((source / "config.json").read_text())
    edit(config)
    (folder / "config.json").write_text(json.dumps(config))
    return folder


def _alias_bomb() -> str:
    lines = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for level in range(1, 9):
        lines.append(f"a{level}: &a{level} [{','.join([f'*a{level - 1}'] * 9)}]")
    return "\n".join(lines) + "\nmodels:\n  - key: bomb\n    repo: *a8\n"


def build_cases(work: Path) -> list[Case]:
    """Write every hostile input under ``work`` and return the cases that use them."""
    hf, fp8 = DEMO / "demo-mtp-hf", DEMO / "demo-mtp-fp8"
    trillion = _copied_checkpoint(
        hf, work / "trillion-mtp", lambda c: c.update(mtp_num_hidden_layers=10**12)
    )
    nextn = _copied_checkpoint(
        hf, work / "trillion-nextn", lambda c: c.update(num_nextn_predict_layers=10**12)
    )
    deep = work / "deep-config"
    _copied_checkpoint(hf, deep, lambda c: None)
    (deep / "config.json").write_text('{"a":' + "[" * 50_000 + "]" * 50_000 + "}")
    digits = work / "digits-index"
    shutil.copytree(fp8, digits)
    index = json.loads((fp8 / "model.safetensors.index.json").read_text())
    text = json.dumps(index).replace('"metadata": {', '"metadata": {"n": ' + "9" * 50_000 + ", ", 1)
    (digits / "model.safetensors.index.json").write_text(text)

    string_2_60 = _gguf_with_value(work / "str-2-60.gguf", struct.pack("<IQ", 8, 2**60))
    string_max = _gguf_with_value(work / "str-max.gguf", struct.pack("<IQ", 8, 2**64 - 1))
    nested = _gguf_with_value(
        work / "nested.gguf", struct.pack("<I", 9) + struct.pack("<IQ", 9, 1) * 5000
    )
    sidecar = work / "sidecar.safetensors"  # any file: the base is read first
    sidecar.write_bytes(bytes(16))

    (work / "bomb.yaml").write_text(_alias_bomb())
    (work / "flow.yaml").write_text("models: " + "[" * 5000 + "]" * 5000 + "\n")
    (work / "block.yaml").write_text("models:\n  " + "- " * 1500 + "a\n")
    entry = "  - key: m{i}\n    repo: org/m{i}\n    base_model: org/base\n    notes: {pad}\n"
    pad = "x" * 60
    for name, count in (("big.yaml", 100_000), ("at-cap.yaml", 1_900)):
        with (work / name).open("w") as out:
            out.write("models:\n")
            for i in range(count):
                out.write(entry.format(i=i, pad=pad))

    link_target = work / "victim.txt"
    link_target.write_text("precious")
    (work / "chat-link.md").symlink_to(link_target)
    export = (
        "import sys; from pathlib import Path; "
        "from tests.hardening.test_hostile_names import small_conversation; "
        "from app.engine.chat.export import export_conversation; "
        "from app.engine.errors import MtpStudioError\n"
        f"try: export_conversation(small_conversation(Path({str(work)!r})), Path(sys.argv[1]))\n"
        "except MtpStudioError as exc: print(f'error: {exc}', file=sys.stderr); sys.exit(2)"
    )

    def build_script(root: Path) -> list[str]:
        """The checkout's build.sh, copied into a folder with no .venv beside it."""
        bare = work / f"bare-{abs(hash(str(root)))}"
        if not bare.exists():
            shutil.copytree(root / "packaging", bare / "packaging")
        return ["bash", str(bare / "packaging" / "build.sh")]

    python = sys.executable
    app = [python, "-m", "app"]
    base = {"HF_HUB_OFFLINE": "1"}
    out = str(work / "out")

    def graft(base_file: Path) -> Callable[[Path], list[str]]:
        return lambda _root: [
            *[*app, "graft", "--base", str(base_file)],
            *["--sidecar", str(sidecar), "--out", out + ".gguf"],
        ]

    def extract(source: Path) -> Callable[[Path], list[str]]:
        return lambda _root: [*app, "extract", "--source", str(source), "--out", out + ".st"]

    def catalog(path: Path) -> Callable[[Path], list[str]]:
        return lambda _root: [*app, "catalog", "validate", "--catalog", str(path)]

    return [
        Case("extract: mtp_num_hidden_layers = 10^12", extract(trillion), base),
        Case("extract: num_nextn_predict_layers = 10^12", extract(nextn), base),
        Case("extract: config.json nested 50 000 deep", extract(deep), base),
        Case("extract: index with a 50 000-digit number", extract(digits), base),
        Case("graft --base: string length 2^60", graft(string_2_60), base),
        Case("graft --base: string length 2^64-1", graft(string_max), base),
        Case("graft --base: 5 000 nested arrays", graft(nested), base),
        Case("catalog validate: 450-byte alias bomb", catalog(work / "bomb.yaml"), base),
        Case("catalog validate: flow nesting 5 000", catalog(work / "flow.yaml"), base),
        Case("catalog validate: block nesting 1 500", catalog(work / "block.yaml"), base),
        Case("catalog validate: 10 MB catalog", catalog(work / "big.yaml"), base),
        Case(
            "catalog validate: 250 KB catalog (1 900 entries)", catalog(work / "at-cap.yaml"), base
        ),
        Case(
            "chat --seed -1 (demo model)",
            lambda _root: [
                *app,
                "chat",
                "--seed",
                "-1",
                "--prompt",
                "Hi",
                "--max-tokens",
                "2",
                "--threads",
                "1",
                "--ctx",
                "512",
            ],
            base,
        ),
        Case(
            "export onto a symlink (victim kept?)",
            lambda _root: [python, "-c", export, str(work / "chat-link.md")],
            base,
        ),
        Case(
            "export to a 300-character name",
            lambda _root: [python, "-c", export, str(work / ("c" * 300 + ".md"))],
            base,
        ),
        Case(
            "download with a secret in HF_ENDPOINT (secret printed?)",
            lambda _root: [*app, "download", "org/repo"],
            {"HF_ENDPOINT": f"http://user:{SECRET}@127.0.0.1:9/hub?token={SECRET}"},
        ),
        Case(
            "packaging/build.sh before setup",
            build_script,
            base,
        ),
    ]


class LineLengths:
    """The longest line in a stream, counted as it arrives (the output kept is only its end)."""

    def __init__(self) -> None:
        self.longest = 0
        self._current = 0

    def feed(self, chunk: bytes) -> None:
        *ended, rest = chunk.split(b"\n")
        for piece in ended:
            self.longest = max(self.longest, self._current + len(piece))
            self._current = 0
        self._current += len(rest)
        self.longest = max(self.longest, self._current)


def _history_bytes(home: Path) -> int:
    return sum(path.stat().st_size for path in home.rglob("*.sqlite3*"))


def run_case(case: Case, root: Path, home: Path, timeout: float, memory_bytes: int) -> Run:
    history_before = _history_bytes(home)
    env = {
        **{k: v for k, v in os.environ.items() if k not in ("PY", "HF_ENDPOINT")},
        "PYTHONPATH": str(root),
        "QT_QPA_PLATFORM": "offscreen",
        "MTP_STUDIO_HOME": str(home),
        "HF_HOME": str(home / "hf"),
        **case.env,
    }

    def limit() -> None:
        os.setsid()
        resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))

    started = time.perf_counter()
    child = subprocess.Popen(
        case.argv(root),
        cwd=root,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        preexec_fn=limit,
    )
    assert child.stdout is not None
    os.set_blocking(child.stdout.fileno(), False)
    output = bytearray()
    lengths = LineLengths()
    status, usage, killed = None, None, False
    while status is None:
        chunk = child.stdout.read()
        if chunk:
            lengths.feed(chunk)
            output += chunk[-65536:]
            del output[:-65536]
        pid, raw_status, raw_usage = os.wait4(child.pid, os.WNOHANG)
        if pid:
            status, usage = raw_status, raw_usage
        elif time.perf_counter() - started > timeout:
            os.killpg(child.pid, signal.SIGKILL)
            killed = True
            _, status, usage = os.wait4(child.pid, 0)
        else:
            time.sleep(0.02)
    seconds = time.perf_counter() - started
    rest = child.stdout.read() or b""
    lengths.feed(rest)
    output += rest
    child.returncode = os.waitstatus_to_exitcode(status)
    lines = [line for line in output.decode("utf-8", "replace").splitlines() if line.strip()]
    last = lines[-1].strip() if lines else ""
    exit_text = "timeout" if killed else str(child.returncode)
    if SECRET in output.decode("utf-8", "replace"):
        last = "[SECRET PRINTED] " + last
    for pattern, note in case.flags:
        if pattern in output:
            last = f"{note} {last}"
    if lengths.longest > LONG_LINE:
        last = f"[a line of {lengths.longest:,} bytes] {last}"
    grown = _history_bytes(home) - history_before
    if grown > 2**20:
        last = f"[job history grew {grown / 2**20:.1f} MiB] {last}"
    return Run(exit_text, round(seconds, 2), round(usage.ru_maxrss / 1024, 1), last[:110])


def issue34_cases(work: Path, stack: contextlib.ExitStack) -> list[Case]:
    """Issue 34's command-line rows, with the local Hub and the lying endpoints they use."""
    from tests.localhub.fixtures import configure_client_environment

    configure_client_environment()  # before huggingface_hub is imported
    from tests.localhub import LocalHub

    hub = stack.enter_context(LocalHub(work / "localhub", port=_hub_port()))
    seed_hostile_hub(hub, work)
    endpoints = stack.enter_context(hostile_endpoints())
    return [
        Case(name, argv, env, tuple(flags.items()))
        for name, argv, env, flags in issue34_rows(work, hub.endpoint, endpoints)
    ]


def _hub_port() -> int:
    return int(os.environ["HF_ENDPOINT"].rsplit(":", 1)[1])


def server_row(name: str, attack: Callable, roots: dict[str, Path]) -> dict[str, object]:
    """A ``serve:`` row: the case run against a fresh server of each checkout."""
    row: dict[str, object] = {"input": f"serve: {name}"}
    for label, root in roots.items():
        run = run_server_case(root.resolve(), name, attack)
        exit_text = run.outcome.split(":")[0]
        health = f"[/health worst {run.worst_health_ms:g} ms, log {run.log_mib:g} MiB]"
        said = f"{health} {run.outcome}"[:110]
        row[label] = asdict(Run(exit_text, run.seconds, run.peak_mib, said))
        print(f"serve: {name} [{label}]: {run}", file=sys.stderr, flush=True)
    return row


def run_cli_rows(cases: list[Case], work: Path, roots: dict[str, Path], args: Any) -> list[dict]:
    rows = []
    memory = int(args.memory_gib * 2**30)
    for case in cases:
        row: dict[str, object] = {"input": case.name}
        for label, root in roots.items():
            home = work / f"home-{label}"
            home.mkdir(exist_ok=True)
            victim = work / "victim.txt"
            link = work / "chat-link.md"
            if not link.is_symlink():
                link.unlink(missing_ok=True)
                link.symlink_to(victim)
            victim.write_text("precious")
            run = run_case(case, root.resolve(), home, args.timeout, memory)
            run = Run(run.exit, run.seconds, run.peak_mib, run.last_line.replace(str(work), "…"))
            if "symlink" in case.name:
                kept = link.is_symlink() and victim.read_text() == "precious"
                note = f"[link {'kept' if kept else 'REPLACED'}] {run.last_line}"
                run = Run(run.exit, run.seconds, run.peak_mib, note)
            row[label] = asdict(run)
            print(f"{case.name} [{label}]: {run}", file=sys.stderr, flush=True)
        rows.append(row)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", type=Path, required=True, help="checkout with the old code")
    parser.add_argument("--after", type=Path, default=HERE, help="checkout with the new code")
    parser.add_argument("--timeout", type=float, default=20.0)
    parser.add_argument("--memory-gib", type=float, default=4.0)
    parser.add_argument("--only", default="", help="run only cases whose name contains this")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    roots = {"before": args.before, "after": args.after}
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 8192)), hard))
    with tempfile.TemporaryDirectory(prefix="hostile-") as folder, contextlib.ExitStack() as stack:
        work = Path(folder)
        cases = [*build_cases(work), *issue34_cases(work, stack)]
        rows = run_cli_rows([c for c in cases if args.only in c.name], work, roots, args)
        for name, attack in server_cases().items():
            if args.only in f"serve: {name}":
                rows.append(server_row(name, attack, roots))
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    print("| input | before: exit, s, peak MiB | before says | after: exit, s, peak MiB |", end="")
    print(" after says |")
    print("|---|---|---|---|---|")
    for row in rows:
        b, a = row["before"], row["after"]
        print(
            f"| {row['input']} | {b['exit']}, {b['seconds']}, {b['peak_mib']} | "
            f"{b['last_line'][:60].replace('|', '/')} | "
            f"{a['exit']}, {a['seconds']}, {a['peak_mib']} | {a['last_line'].replace('|', '/')} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
