"""The hostile-input table of issue 23: each lying file or setting, before and after the fix.

    python bench/hostile_inputs.py --before /path/to/old/checkout [--after .] [--json]

Builds every hostile input once in a temporary folder (from the bundled demo model and
checkpoints, copied), then runs each case as the user would — the real
CLI, ``python -m app …``, or the real build script — once with each checkout's code (its folder
as working directory and ``PYTHONPATH``, so ``-m app`` imports that code). Each run is a
subprocess with a wall-clock timeout (``--timeout``, 20 s) and an address-space cap
(``RLIMIT_AS``, ``--memory-gib``, 4 GiB), so no case can take the machine down; a run past the
timeout is killed with its process group. Reported per run: exit status (``timeout`` when
killed), wall time, the child's peak RSS (``wait4``), and the last line it printed, cut short
(the temporary folder shown as ``…``).
"""

from __future__ import annotations

import argparse
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

HERE = Path(__file__).resolve().parents[1]
DEMO = HERE / "resources" / "models"
SECRET = "S3cretPass"


@dataclass(frozen=True)
class Case:
    name: str
    argv: Callable[[Path], list[str]]
    """The command for a checkout (its root given)."""
    env: dict[str, str]


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


def run_case(case: Case, root: Path, home: Path, timeout: float, memory_bytes: int) -> Run:
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
    status, usage, killed = None, None, False
    while status is None:
        chunk = child.stdout.read()
        if chunk:
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
    rest = child.stdout.read()
    output += rest or b""
    child.returncode = os.waitstatus_to_exitcode(status)
    lines = [line for line in output.decode("utf-8", "replace").splitlines() if line.strip()]
    last = lines[-1].strip() if lines else ""
    exit_text = "timeout" if killed else str(child.returncode)
    if SECRET in output.decode("utf-8", "replace"):
        last = "[SECRET PRINTED] " + last
    return Run(exit_text, round(seconds, 2), round(usage.ru_maxrss / 1024, 1), last[:110])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", type=Path, required=True, help="checkout with the old code")
    parser.add_argument("--after", type=Path, default=HERE, help="checkout with the new code")
    parser.add_argument("--timeout", type=float, default=20.0)
    parser.add_argument("--memory-gib", type=float, default=4.0)
    parser.add_argument("--only", default="", help="run only cases whose name contains this")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    memory = int(args.memory_gib * 2**30)
    rows = []
    with tempfile.TemporaryDirectory(prefix="hostile-") as folder:
        work = Path(folder)
        cases = [c for c in build_cases(work) if args.only in c.name]
        for case in cases:
            row = {"input": case.name}
            for label, root in (("before", args.before), ("after", args.after)):
                home = work / f"home-{label}"
                home.mkdir(exist_ok=True)
                victim = work / "victim.txt"
                link = work / "chat-link.md"
                if not link.is_symlink():
                    link.unlink(missing_ok=True)
                    link.symlink_to(victim)
                victim.write_text("precious")
                run = run_case(case, root.resolve(), home, args.timeout, memory)
                run = Run(run.exit, run.seconds, run.peak_mib, run.last_line.replace(folder, "…"))
                if "symlink" in case.name:
                    kept = link.is_symlink() and victim.read_text() == "precious"
                    note = f"[link {'kept' if kept else 'REPLACED'}] {run.last_line}"
                    run = Run(run.exit, run.seconds, run.peak_mib, note)
                row[label] = asdict(run)
                print(f"{case.name} [{label}]: {run}", file=sys.stderr, flush=True)
            rows.append(row)
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
