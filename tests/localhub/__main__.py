"""``python -m tests.localhub --port PORT --data DIR [--token T]``: run the local hub by hand.

Why: manual trials of the CLI and the GUI against a Hub that needs no network. It prints the
endpoint to put in ``HF_ENDPOINT`` and serves until interrupted; state persists in ``--data``.
"""

from __future__ import annotations

import argparse
import sys
import threading
from pathlib import Path

from tests.localhub.server import LocalHub


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.localhub", description=__doc__)
    parser.add_argument("--port", type=int, default=0, help="main API port (0: any free port)")
    parser.add_argument("--storage-port", type=int, default=0, help="storage origin port")
    parser.add_argument("--data", type=Path, required=True, help="folder holding the hub's state")
    parser.add_argument("--token", help="accept only this token for writes (default: any token)")
    parser.add_argument("--user", default="mtp-tester", help="the user every valid token maps to")
    parser.add_argument("--org", action="append", default=[], help="an org the user belongs to")
    parser.add_argument(
        "--seed",
        nargs=2,
        action="append",
        default=[],
        metavar=("REPO", "DIR"),
        help="commit the folder DIR into repo REPO before serving",
    )
    parser.add_argument("--verbose", action="store_true", help="log every request line")
    args = parser.parse_args(argv)

    hub = LocalHub(
        args.data,
        port=args.port,
        storage_port=args.storage_port,
        user=args.user,
        orgs=tuple(args.org),
        token=args.token,
        verbose=args.verbose,
    )
    for repo_id, folder in args.seed:
        print(f"seeded {repo_id} at {hub.seed_folder(repo_id, Path(folder))}")
    with hub:
        print(f"local hub: {hub.endpoint} (storage {hub.storage_endpoint}), data in {args.data}")
        print(f"use it with: export HF_ENDPOINT={hub.endpoint} HF_HUB_DISABLE_XET=1")
        sys.stdout.flush()
        try:
            threading.Event().wait()
        except KeyboardInterrupt:
            print("local hub: stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
