"""Publish benchmark: ``python bench/bench_publish.py [--mtp-gb 0.8] [--trunk-gb 2] [--json]``.

Why: the publish claims are about bytes and time — it fetches only the MTP tensors' bytes (not
whole shards), the network side adds little to extraction, and the upload runs near the speed of
the link. This script measures all three in one run, side by side, on a synthetic DeepSeek-V3-
shaped FP8 checkpoint of a few GB put on the local test hub (tests/localhub, in this process):

* bytes: needed (MTP tensors + scales), fetched (client count), served (the hub's own count),
  and the size of the whole shards that hold the MTP layer;
* time: extraction from the local folder, extraction through the hub (ranged GETs), and the
  full publish (pre-flight, pin, extract, card, multipart upload, collection, clean);
* upload throughput against a raw loopback copy of the same file (socket → file, no protocol).

Everything lives in a temporary folder (``--dir``) that is deleted at the end. The hub runs in
this process (threads), as the tests run it; both servers share the client's two cores here.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("HF_HUB_DISABLE_XET", "1")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")

from app.engine.hub import HubSource, PublishOptions, pin_repo, publish_sidecar
from app.engine.mtp import LocalFolderSource, detect_mtp, extract_mtp
from app.engine.mtp.synthetic import generate_fp8_checkpoint
from app.engine.publish_plan import MtpSidecarPlan
from app.engine.scratch import sidecar_output_path
from app.engine.units import format_bytes, format_rate
from tests.localhub import LocalHub

TOKEN = "hf_bench_token"
SOURCE = "deepseek-ai/DeepSeek-V3-bench"
SIDECAR = "bench/deepseek-v3-bench-mtp"
COPY_CHUNK = 8 << 20


def raw_loopback_copy(path: Path, target: Path) -> float:
    """Seconds to push ``path`` through a loopback TCP socket into ``target`` (sendfile → write)."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)

        def receive() -> None:
            connection, _ = listener.accept()
            with connection, open(target, "wb") as out:
                while chunk := connection.recv(COPY_CHUNK):
                    out.write(chunk)

        receiver = threading.Thread(target=receive)
        receiver.start()
        started = time.perf_counter()
        with socket.create_connection(listener.getsockname()) as sender, open(path, "rb") as f:
            sender.sendfile(f)
        receiver.join()
        return time.perf_counter() - started


def warm(paths: list[Path]) -> None:
    """Read files once so every timed run starts page-cached."""
    for path in paths:
        with open(path, "rb") as handle:
            while handle.read(COPY_CHUNK):
                pass


def run(work: Path, mtp_bytes: int, trunk_bytes: int) -> dict[str, float]:
    folder = work / "checkpoint"
    started = time.perf_counter()
    info = generate_fp8_checkpoint(folder, mtp_bytes, trunk_bytes)
    generate_seconds = time.perf_counter() - started
    detection = detect_mtp(LocalFolderSource(folder))
    mtp_shards = detection.shards
    whole_shards = sum((folder / shard).stat().st_size for shard in mtp_shards)

    with LocalHub(work / "hub", user="bench", token=TOKEN) as hub:
        hub.seed_folder(SOURCE, folder)
        warm([*folder.glob("*.safetensors"), *(work / "hub" / "objects" / "lfs").iterdir()])

        started = time.perf_counter()
        extract_mtp(LocalFolderSource(folder), work / "local.safetensors")
        local_seconds = time.perf_counter() - started
        (work / "local.safetensors").unlink()

        hub.traffic.reset()
        started = time.perf_counter()
        pinned = pin_repo(SOURCE, endpoint=hub.endpoint, token=TOKEN)
        with HubSource(pinned, endpoint=hub.endpoint, token=TOKEN) as source:
            remote = extract_mtp(source, work / "remote.safetensors")
            fetched = source.bytes_fetched
        hub_seconds = time.perf_counter() - started
        served = hub.traffic.bytes_served(SOURCE)
        sidecar = work / "remote.safetensors"
        copy_seconds = raw_loopback_copy(sidecar, work / "copy.bin")
        (work / "copy.bin").unlink()
        sidecar.unlink()

        plan = MtpSidecarPlan(SOURCE, SIDECAR, sidecar_output_path(work / "scratch", SIDECAR))
        started = time.perf_counter()
        result = publish_sidecar(plan, PublishOptions(token=TOKEN, endpoint=hub.endpoint))
        publish_seconds = time.perf_counter() - started

    return {
        "checkpoint_bytes": info.total_bytes,
        "generate_seconds": generate_seconds,
        "bytes_needed": detection.bytes_needed,
        "bytes_fetched_client": fetched,
        "bytes_served_hub": served,
        "whole_mtp_shards_bytes": whole_shards,
        "mtp_shards": len(mtp_shards),
        "sidecar_bytes": remote.bytes_written,
        "local_extract_seconds": local_seconds,
        "hub_extract_seconds": hub_seconds,
        "publish_seconds": publish_seconds,
        "publish_extract_seconds": result.seconds_extract,
        "upload_seconds": result.seconds_upload,
        "raw_copy_seconds": copy_seconds,
    }


def report(m: dict[str, float]) -> None:
    needed = m["bytes_needed"]
    upload_rate = m["sidecar_bytes"] / m["upload_seconds"]
    copy_rate = m["sidecar_bytes"] / m["raw_copy_seconds"]
    print(
        f"checkpoint {format_bytes(m['checkpoint_bytes'])} (generated in "
        f"{m['generate_seconds']:.1f} s); MTP layer in {int(m['mtp_shards'])} shard(s) of "
        f"{format_bytes(m['whole_mtp_shards_bytes'])}; sidecar {format_bytes(m['sidecar_bytes'])}"
    )
    print("bytes")
    print(f"  needed (MTP tensors + scales)   {format_bytes(needed):>10}")
    print(
        f"  fetched (client)                {format_bytes(m['bytes_fetched_client']):>10}"
        f"  {m['bytes_fetched_client'] / needed:.4f} x needed"
    )
    print(
        f"  served (hub's counter)          {format_bytes(m['bytes_served_hub']):>10}"
        f"  {m['bytes_served_hub'] / needed:.4f} x needed"
    )
    print(
        f"  whole shards holding MTP        {format_bytes(m['whole_mtp_shards_bytes']):>10}"
        f"  fetched is {m['bytes_served_hub'] / m['whole_mtp_shards_bytes']:.3f} of it"
    )
    local = m["local_extract_seconds"]
    print("time")
    print(f"  extraction, local folder        {local:8.2f} s  1.00 x")
    print(
        f"  extraction through the hub      {m['hub_extract_seconds']:8.2f} s  "
        f"{m['hub_extract_seconds'] / local:.2f} x"
    )
    print(
        f"  publish end to end              {m['publish_seconds']:8.2f} s  "
        f"{m['publish_seconds'] / local:.2f} x  (extract {m['publish_extract_seconds']:.2f} s, "
        f"upload {m['upload_seconds']:.2f} s)"
    )
    print("upload")
    print(f"  publish upload (multipart LFS)  {format_rate(upload_rate):>12}")
    print(f"  raw loopback copy               {format_rate(copy_rate):>12}")
    print(f"  ratio upload / raw copy         {upload_rate / copy_rate:12.2f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mtp-gb", type=float, default=0.8, help="FP8 bytes of the MTP layer")
    parser.add_argument("--trunk-gb", type=float, default=2.0, help="bytes of trunk tensors")
    parser.add_argument("--dir", type=Path, default=None, help="where the temporary folder goes")
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir, prefix="bench-publish-") as work:
        figures = run(Path(work), int(args.mtp_gb * 1e9), int(args.trunk_gb * 1e9))
    if args.json:
        print(json.dumps(figures, indent=2))
    else:
        report(figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
