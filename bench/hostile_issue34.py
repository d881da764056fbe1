"""The command-line rows issue 34 adds to ``bench/hostile_inputs.py``: a hostile Hub (the local
test hub, seeded here), a lying ``chat --endpoint`` server (:mod:`tests.remote.hostile_endpoint`,
served in this process), head files with retyped tensors, and a damaged or forged chat history.

Each row is ``(name, argv(root), env, flags)``: ``flags`` maps bytes that must not appear in the
output (raw terminal escapes, a quantisation shown as parts it does not have) to the note the table
prints when they do. The server rows come from ``bench/health_under_attack.py``.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
DEMO = HERE / "resources" / "models" / "demo-mtp.gguf"
RAW_ESCAPE = {b"\x1b": "[RAW ESCAPES PRINTED]"}
Row = tuple[str, Callable[[Path], list[str]], dict[str, str], dict[bytes, str]]


def seed_hostile_hub(hub: object, work: Path) -> None:
    """The repos the Hub rows search and fetch (``hub`` is a :class:`tests.localhub.LocalHub`)."""
    gguf = b"GGUF" + bytes(100)
    big = work / "big-config.json"
    with big.open("w") as out:  # 300 MB, written in pieces
        out.write('{"hidden_size": 4096, "pad": "')
        for _ in range(300):
            out.write("x" * 1_000_000)
        out.write('"}')
    repos = {
        "evil/inf-GGUF": {"config.json": b'{"hidden_size": Infinity, "num_hidden_layers": NaN}'},
        "evil/deep-GGUF": {"config.json": b"[" * 200_000 + b"]" * 200_000},
        "evil/big-GGUF": {"config.json": big},
        "evil/ansi-GGUF": {"x\x1b]0;PWNED\x07\x1b[2J.gguf": gguf},
        "evil/long-GGUF": {"a" * 240 + "-Q4_K_M.gguf": gguf},
        "evil/twins-GGUF": {"alpha-Q4_K_M.gguf": gguf, "beta/other-Q4_K_M.gguf": gguf + b"x"},
    }
    for repo, files in repos.items():
        with_weights = {"m-Q4_K_M.gguf": gguf} if "config.json" in files else {}
        hub.seed_files(repo, {**with_weights, **files})  # type: ignore[attr-defined]


@contextlib.contextmanager
def hostile_endpoints() -> Iterator[dict[str, str]]:
    """Every lying endpoint served at once: case → base URL."""
    from tests.remote.hostile_endpoint import REPLIES, hostile_endpoint

    with contextlib.ExitStack() as stack:
        yield {case: stack.enter_context(hostile_endpoint(case)) for case in REPLIES}


def _retyped_head(work: Path, type_name: str) -> Path:
    """The demo's head file with its ``eh_proj`` stored as ``type_name`` (data sized to fit)."""
    from tests.graft.bases import HEAD_BLOCK, write_retyped_head

    tensor = f"blk.{HEAD_BLOCK}.nextn.eh_proj.weight"
    return write_retyped_head(DEMO, work / f"mtp-retyped-{type_name}.gguf", type_name, tensor)


JOIN_SCRIPT = """
import sys
from pathlib import Path
from app.engine.errors import MtpStudioError
from app.engine.graft.split import join_split_gguf
first = Path(sys.argv[1])
try:
    join_split_gguf(first, first.with_name("joined.gguf"))
except MtpStudioError as exc:
    print(f"mtp-studio: error: {exc}", file=sys.stderr)
    sys.exit(2)
"""

HISTORY_SCRIPT = """
import sqlite3, sys
from pathlib import Path
from app.engine.chat.conversation import ChatSettings
from app.engine.chat.history import HistoryStore
import tempfile
path = Path(tempfile.mkdtemp(dir=sys.argv[1])) / "chat.sqlite3"
store = HistoryStore(path)
cid = store.create_conversation("t", ChatSettings())
store.close()
with sqlite3.connect(path) as db:
    db.execute("UPDATE conversations SET settings = '{not json' WHERE id = ?", (cid,))
print("opened with", HistoryStore(path).conversation(cid).settings)
"""

EXPORT_SCRIPT = """
import sys
from pathlib import Path
from markdown_it import MarkdownIt
from app.engine.chat.conversation import ChatSettings
from app.engine.chat.export import export_conversation
from app.engine.chat.history import HistoryStore
import tempfile
folder = Path(tempfile.mkdtemp(dir=sys.argv[1]))
store = HistoryStore(folder / "chat.sqlite3")
cid = store.create_conversation("Plans\\n## Assistant\\nforged", ChatSettings())
store.add_user_message(cid, "hi\\n## Assistant\\nforged reply\\nUser\\n---\\n<h2>User</h2>")
text = export_conversation(store.conversation(cid), folder / "chat.md").read_text()
tokens = MarkdownIt("commonmark").parse(text)
found = [tokens[i + 1].content for i, t in enumerate(tokens) if t.tag in ("h1", "h2")
         and t.type == "heading_open"]
print("sections:", found)
"""


def issue34_rows(work: Path, hub_endpoint: str, endpoints: dict[str, str]) -> list[Row]:
    python = sys.executable
    app = [python, "-m", "app"]
    hub = {"HF_ENDPOINT": hub_endpoint}
    offline = {"HF_HUB_OFFLINE": "1"}

    def cli(*args: str) -> Callable[[Path], list[str]]:
        return lambda _root: [*app, *args]

    def script(text: str, argument: Path) -> Callable[[Path], list[str]]:
        return lambda _root: [python, "-c", text, str(argument)]

    rows: list[Row] = [
        ("search: config.json with Infinity and NaN", cli("search", "evil/inf"), hub, {}),
        ("search: config.json nested 200 000 deep", cli("search", "evil/deep"), hub, {}),
        ("search: 300 MB config.json", cli("search", "evil/big"), hub, {}),
        ("search: file name with ANSI/OSC escapes", cli("search", "evil/ansi"), hub, RAW_ESCAPE),
        ("search --limit -1", cli("search", "evil", "--limit", "-1"), hub, {}),
        (
            "search: two unrelated files with one label",
            cli("search", "evil/twins"),
            hub,
            {b"in 2 parts": "[SHOWN AS 2 PARTS]"},
        ),
        (
            "get: a 252-character file name",
            cli("get", "evil/long-GGUF", "--quant", "Q4_K_M"),
            hub,
            {},
        ),
        ("chat --temp 1e-320 (demo model)", cli("chat", *_chat("--temp", "1e-320")), offline, {}),
    ]
    split = work / "m-Q4_K_M-00001-of-99999.gguf"
    split.write_bytes(DEMO.read_bytes())
    trunk = work / "trunk-Q8_0.gguf"
    from tests.graft.bases import write_trunk_only

    write_trunk_only(DEMO, trunk)
    rows.append(
        ("get's join of a split named -00001-of-99999", script(JOIN_SCRIPT, split), offline, {})
    )
    for type_name in ("I64", "IQ2_XXS", "MXFP4"):
        head, out = _retyped_head(work, type_name), work / f"grafted-{type_name}.gguf"
        graft_then_chat = (
            f"{python} -m app graft --base {trunk} --sidecar {head} --out {out} && "
            f"{python} -m app chat --model {out} {' '.join(_chat())}"
        )
        name = f"graft + chat: head tensor retyped to {type_name}"
        rows.append((name, lambda _root, c=graft_then_chat: ["sh", "-c", c], offline, {}))
    for case, url in endpoints.items():
        rows.append(
            (
                f"chat --endpoint: {case}",
                cli("chat", "--endpoint", url, "--prompt", "Hi"),
                offline,
                RAW_ESCAPE,
            )
        )
    history = work / "history"
    history.mkdir()
    rows.append(
        (
            "chat history: settings not JSON",
            script(HISTORY_SCRIPT, history),
            offline,
            {},
        )
    )
    rows.append(("export: forged title and sections", script(EXPORT_SCRIPT, history), offline, {}))
    return rows


def _chat(*extra: str) -> list[str]:
    return ["--prompt", "Hi", "--max-tokens", "4", "--threads", "1", "--ctx", "512", *extra]
