"""The frozen Linux bundle is the whole app: it builds from the checkout, answers every kind of
command from its own executable (resources, the inference worker and llama.cpp inside it), and
opens its window. Its llama.cpp is the portable build, so it runs on other people's CPUs: every
CPU variant inside, the best one picked at load, and the baseline one proven by a forced run.

Building takes minutes, so it happens once per session; ``MTP_STUDIO_BUNDLE`` may point at an
already built executable (the test then checks that one instead of building).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest

from app.commands import COMMANDS
from tests.desktop_app import run_until_shown
from tests.server.server_process import running_server
from tests.workers import PORTABLE_BUILD

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [
    pytest.mark.slow,
    pytest.mark.xdist_group(PORTABLE_BUILD),  # its llama.cpp is the portable build
    pytest.mark.skipif(
        not sys.platform.startswith("linux"),
        reason="packaging/build.sh builds the bundle of the OS it runs on; here it is Linux",
    ),
]


@pytest.fixture(scope="module")
def bundle() -> Path:
    """The bundle ``packaging/build.sh`` builds, once per session: this file's tests are one
    group (:data:`PORTABLE_BUILD`), which pytest-xdist keeps on one worker, so no other build
    writes ``dist/`` and ``packaging/build`` meanwhile (tests/test_workers.py checks that)."""
    given = os.environ.get("MTP_STUDIO_BUNDLE")
    if given:
        return Path(given)
    built = subprocess.run(
        ["bash", "packaging/build.sh"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=3 * 3600,  # the first build on a machine compiles the portable llama.cpp
    )
    assert built.returncode == 0, built.stderr[-4000:]
    executable = Path(built.stdout.strip().splitlines()[-1])
    assert executable.is_file(), built.stdout
    return executable


@pytest.fixture
def isolated_env(tmp_path: Path) -> Iterator[dict[str, str]]:
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("PYTHON", "VIRTUAL_ENV"))
    }
    env.update(
        MTP_STUDIO_HOME=str(tmp_path / "home"),
        HF_HOME=str(tmp_path / "hf"),
        HF_ENDPOINT="http://127.0.0.1:9",  # nothing listens: the bundle must not need the network
        QT_QPA_PLATFORM="offscreen",
    )
    yield env


def run_bundle(bundle: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(bundle), *args],
        env=env,
        cwd=bundle.parent,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_the_bundle_is_a_folder_with_desktop_entry_icon_and_tarball(bundle: Path) -> None:
    folder = bundle.parent
    desktop = folder / "share" / "applications" / "mtp-studio.desktop"
    assert "Name=MTP Studio" in desktop.read_text()
    assert (folder / "share/icons/hicolor/256x256/apps/mtp-studio.png").stat().st_size > 1000
    assert list(folder.parent.glob("mtp-studio-*-linux-*.tar.gz"))


def test_version_and_help_answer_from_the_bundle(bundle: Path, isolated_env) -> None:
    from app import __version__

    version = run_bundle(bundle, isolated_env, "--version")
    assert version.returncode == 0, version.stderr
    assert version.stdout.strip() == f"mtp-studio {__version__}"
    for command in COMMANDS:
        helped = run_bundle(bundle, isolated_env, command, "--help")
        assert helped.returncode == 0, (command, helped.stderr)


def test_the_bundle_chats_with_its_demo_model_through_the_worker(bundle: Path, isolated_env):
    answered = run_bundle(
        bundle,
        isolated_env,
        "chat",
        "--prompt",
        "Reverse a string.",
        "--temp",
        "0",
        "--max-tokens",
        "24",
        "--mtp-depth",
        "2",
        "--json",
    )
    assert answered.returncode == 0, answered.stderr
    reply = json.loads(answered.stdout)
    assert reply["text"].strip()
    assert reply["stats"]["drafted_by_depth"][0] > 0  # the MTP head drafted inside the bundle


X86_VARIANTS = {
    *("x64", "sse42", "sandybridge", "ivybridge", "piledriver", "haswell", "skylakex"),
    *("cannonlake", "cascadelake", "icelake", "cooperlake", "zen4", "alderlake", "sapphirerapids"),
}


def _cpu_variants_ranked(lib: Path) -> list[str]:
    """The bundle's CPU variants this CPU runs, best first (ranked in a process of their own)."""
    listed = subprocess.run(
        [sys.executable, str(ROOT / "packaging" / "smoke_llama.py"), "--list-variants", str(lib)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return listed.stdout.split()


def test_the_bundle_carries_every_cpu_variant_and_no_native_cpu_code(bundle: Path) -> None:
    lib = bundle.parent / "_internal" / "llama_cpp" / "lib"
    carried = {path.name.removeprefix("libggml-cpu-")[:-3] for path in lib.glob("libggml-cpu-*.so")}
    assert carried == X86_VARIANTS
    assert not list(lib.glob("libggml-cpu.so*"))  # the native build's single CPU library


def test_the_bundle_chats_on_its_best_and_on_its_baseline_cpu_variant(
    bundle: Path, isolated_env
) -> None:
    ranked = _cpu_variants_ranked(bundle.parent / "_internal" / "llama_cpp" / "lib")
    best, baseline = ranked[0], ranked[-1]
    assert baseline == "x64"  # no instruction set beyond x86-64: runs on every x86-64 CPU
    for variant, forced in ((best, ""), (baseline, baseline)):
        env = {**isolated_env, "MTP_STUDIO_CPU_VARIANT": forced}
        answered = run_bundle(
            bundle,
            env,
            "chat",
            "--prompt",
            "Reverse a string.",
            "--temp",
            "0",
            "--max-tokens",
            "24",
        )
        assert answered.returncode == 0, answered.stderr
        assert answered.stdout.strip()
        assert f"llama.cpp CPU variant {variant}" in answered.stderr
    unknown = run_bundle(
        bundle, {**isolated_env, "MTP_STUDIO_CPU_VARIANT": "486"}, "chat", "--prompt", "Hi"
    )
    assert unknown.returncode == 2
    assert unknown.stderr.strip().endswith(
        "MTP_STUDIO_CPU_VARIANT=486 is not one of this build's CPU variants; this CPU runs: "
        + ", ".join(ranked)
    )


def test_a_cpu_below_x86_64_v2_is_told_so_instead_of_crashing(
    bundle: Path, isolated_env, tmp_path: Path
) -> None:
    core2 = (
        "fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush mmx fxsr "
        "sse sse2 ss ht syscall nx lm constant_tsc pni ssse3 cx16 lahf_lm"
    )
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(
        f"processor\t: 0\nmodel name\t: Intel(R) Core(TM)2 Duo\nflags\t\t: {core2}\n"
    )
    refused = run_bundle(bundle, {**isolated_env, "MTP_STUDIO_CPUINFO": str(cpuinfo)}, "--version")
    assert refused.returncode == 1
    assert refused.stderr.strip() == (
        "mtp-studio: this CPU lacks popcnt sse4_1 sse4_2, part of x86-64-v2, which MTP Studio's "
        "libraries need (Intel CPUs since 2008, AMD since 2011); it cannot run here"
    )


def test_the_bundle_runs_a_model_folder_on_mlx_with_its_own_mtp_head(bundle: Path, isolated_env):
    folder = ROOT / "resources" / "models" / "demo-mtp-hf"
    answered = run_bundle(
        bundle,
        isolated_env,
        "chat",
        "--model",
        str(folder),
        "--backend",
        "mlx",
        "--prompt",
        "Reverse a string.",
        "--temp",
        "0",
        "--max-tokens",
        "12",
        "--mtp-depth",
        "1",
        "--json",
    )
    assert answered.returncode == 0, answered.stderr
    reply = json.loads(answered.stdout)
    assert reply["text"].strip()
    assert reply["stats"]["drafted_by_depth"][0] > 0


def test_the_bundle_reads_its_catalog_and_extracts_a_sidecar(bundle: Path, isolated_env, tmp_path):
    listed = run_bundle(bundle, isolated_env, "catalog", "list")
    assert listed.returncode == 0, listed.stderr
    assert "Qwen" in listed.stdout
    out = tmp_path / "mtp.safetensors"
    source = ROOT / "resources" / "models" / "demo-mtp-fp8"
    extracted = run_bundle(
        bundle, isolated_env, "extract", "--source", str(source), "--out", str(out)
    )
    assert extracted.returncode == 0, extracted.stderr
    assert out.stat().st_size > 1_000_000


def test_the_bundle_serves_the_openai_api(bundle: Path, isolated_env) -> None:
    with running_server(program=[str(bundle)], env=isolated_env) as server:
        models = httpx2.get(f"{server.base_url}/models", timeout=30).json()
    assert models["data"], models


def test_the_bundled_window_stays_up_for_ten_seconds(
    bundle: Path, isolated_env: dict[str, str]
) -> None:
    home = Path(isolated_env["MTP_STUDIO_HOME"])
    err = run_until_shown([str(bundle)], isolated_env, home, stay_up_seconds=10)
    assert "Traceback" not in err
