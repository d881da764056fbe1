"""How long ``/health`` waits while each hostile server case of issue 34 runs, and what the case
itself gets.

    python bench/health_under_attack.py [--root CHECKOUT] [--only TEXT] [--json]

For each case a fresh ``serve`` of the checkout (its folder as working directory and
``PYTHONPATH``; the bundled demo model; at most 1,024 open files, the usual default, and 4 GiB of
address space) is started and, while a thread polls ``GET /health`` every 20 ms, the attack runs:
one hostile request of :mod:`tests.server.hostile_bodies` (its answer awaited up to 60 s); 700
stop strings of 10 KB plus one that the greedy reply (asked for first) is a prefix of; or 1,020
connections that each send their headers and half a body and stay open for 5 s. Printed per
case: the outcome (HTTP status, or how the server failed), the attack's seconds, the worst and
median ``/health`` latency (a poll without an answer counts its 10 s timeout), whether the server
still answers afterwards, its peak memory (VmHWM) and how much it logged. The CPU is shared, so
figures are noisy; compare checkouts in one run (``bench/hostile_inputs.py`` does, with these
cases as the rows starting ``serve:``).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import resource
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(HERE))

from tests.server.hostile_bodies import HostileRequest, hostile_requests  # noqa: E402

DEMO = HERE / "resources" / "models" / "demo-mtp.gguf"
POLL_SECONDS = 0.02
POLL_TIMEOUT = 10.0
ANSWER_TIMEOUT = 60.0
SLOW_CONNECTIONS = 1020
SLOW_HOLD_SECONDS = 5.0
OPEN_FILES = 1024
ADDRESS_SPACE = 4 * 2**30
_LISTENING = re.compile(r"listening on http://127\.0\.0\.1:(\d+)/v1")
SLOW_CLIENTS = "1,020 connections sending headers and half a body"
STOP_STRINGS = "700 stop strings of 10 KB, the reply a prefix of one more"
STOP_REPLY_TOKENS = 300


@dataclass(frozen=True)
class ServerRun:
    case: str
    outcome: str
    seconds: float
    worst_health_ms: float
    median_health_ms: float
    polls: int
    answers_after: bool
    peak_mib: float
    log_mib: float


class Serve:
    """``serve`` from a checkout, with its stderr counted (not kept: a spinning log is large)."""

    def __init__(self, root: Path, home: Path) -> None:
        def limits() -> None:
            os.setsid()
            resource.setrlimit(resource.RLIMIT_NOFILE, (OPEN_FILES, OPEN_FILES))
            resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))

        env = {**os.environ, "PYTHONPATH": str(root), "MTP_STUDIO_HOME": str(home)}
        command = [sys.executable, "-m", "app", "serve", "--model", str(DEMO), "--port", "0"]
        self.process = subprocess.Popen(
            [*command, "--threads", "1"],
            cwd=root,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            preexec_fn=limits,
        )
        self.log_bytes = 0
        self.port = 0
        self.peak_kib = 0
        self._ready = threading.Event()
        threading.Thread(target=self._read_log, daemon=True).start()
        if not self._ready.wait(120) or not self.port:
            raise RuntimeError(f"serve from {root} did not start")

    def _read_log(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.log_bytes += len(line)
            if not self.port and (match := _LISTENING.search(line.decode("utf-8", "replace"))):
                self.port = int(match.group(1))
                self._ready.set()
        self._ready.set()

    def sample_memory(self) -> None:
        try:
            status = Path(f"/proc/{self.process.pid}/status").read_text()
        except OSError:
            return
        if match := re.search(r"VmHWM:\s+(\d+) kB", status):
            self.peak_kib = max(self.peak_kib, int(match.group(1)))

    def stop(self) -> str | None:
        """Stop it; the signal that had already killed it, if one had."""
        code = self.process.poll()
        if code is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
            return None
        return signal.Signals(-code).name if code < 0 else f"exit {code}"


def get(port: int, path: str, timeout: float) -> int:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        connection.request("GET", path, headers={"host": "localhost"})
        response = connection.getresponse()
        response.read()
        return response.status
    finally:
        connection.close()


POLLER = """
import http.client, json, select, sys, time
port, period, timeout = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3])
latencies = []
print("ready", flush=True)
while True:  # until a line arrives on stdin
    started = time.perf_counter()
    try:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
        connection.request("GET", "/health", headers={"host": "localhost"})
        connection.getresponse().read()
        connection.close()
    except OSError:
        pass
    latencies.append(time.perf_counter() - started)
    if select.select([sys.stdin], [], [], period)[0]:
        break
print(json.dumps(latencies))
"""


class HealthPoller:
    """Polls ``/health`` from its own process, so the attack's work in this one (building a 7 MB
    body, opening 1,020 sockets) cannot delay the polls; :meth:`stop` collects the latencies."""

    def __init__(self, serve: Serve) -> None:
        self._serve = serve
        self.latencies: list[float] = []
        self._process = subprocess.Popen(
            [sys.executable, "-c", POLLER, str(serve.port), str(POLL_SECONDS), str(POLL_TIMEOUT)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self._process.stdout is not None
        self._process.stdout.readline()  # "ready"
        self._sampling = threading.Event()
        threading.Thread(target=self._sample, daemon=True).start()

    def _sample(self) -> None:
        while not self._sampling.wait(0.05):
            self._serve.sample_memory()

    def stop(self) -> None:
        self._sampling.set()
        output, _ = self._process.communicate("stop\n", timeout=POLL_TIMEOUT + 10)
        self.latencies = json.loads(output)


def send(request: HostileRequest) -> Callable[[Serve], str]:
    def attack(serve: Serve) -> str:
        connection = http.client.HTTPConnection("127.0.0.1", serve.port, timeout=ANSWER_TIMEOUT)
        try:
            connection.request("POST", request.path, body=request.body, headers=request.headers)
            response = connection.getresponse()
            body = response.read()
        except TimeoutError:
            return f"no answer in {ANSWER_TIMEOUT:g} s"
        except OSError as exc:
            return f"connection failed ({type(exc).__name__})"
        finally:
            connection.close()
        return f"HTTP {response.status}: {_message(body)}"

    return attack


def _message(body: bytes) -> str:
    try:
        error = json.loads(body).get("error")
        text = error.get("message") if isinstance(error, dict) else None
    except (ValueError, AttributeError):
        text = None
    return (text or body.decode("utf-8", "replace"))[:90]


def stop_strings(serve: Serve) -> str:
    """700 stop strings of 10 KB plus one that the (greedy, so known) reply is a prefix of: the
    whole reply is held back while every string is compared with it."""
    story = [{"role": "user", "content": "Write a long story about a dragon."}]
    ask = {
        "model": "demo-mtp",
        "messages": story,
        "max_tokens": STOP_REPLY_TOKENS,
        "temperature": 0,
    }
    probe = HostileRequest("probe", "/v1/chat/completions", json.dumps(ask).encode())
    connection = http.client.HTTPConnection("127.0.0.1", serve.port, timeout=ANSWER_TIMEOUT)
    connection.request("POST", probe.path, body=probe.body, headers=probe.headers)
    reply = json.loads(connection.getresponse().read())["choices"][0]["message"]["content"]
    connection.close()
    stops = [f"{i}" + "x" * 10_000 for i in range(700)] + [reply + "y" * 10_000]
    body = json.dumps({**ask, "stop": stops}).encode()
    return send(HostileRequest("stops", probe.path, body))(serve)


def slow_clients(serve: Serve) -> str:
    head = (
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\n"
        b"Content-Type: application/json\r\nContent-Length: 100000\r\n\r\n"
        b'{"messages": [{"role": "user", "content": "'
    )
    held: list[socket.socket] = []
    for _ in range(SLOW_CONNECTIONS):
        try:
            connection = socket.create_connection(("127.0.0.1", serve.port), timeout=5)
            connection.sendall(head)
            held.append(connection)
        except OSError:
            break
    time.sleep(SLOW_HOLD_SECONDS)
    try:
        answered = get(serve.port, "/health", POLL_TIMEOUT) == 200
    except OSError:
        answered = False
    for connection in held:
        connection.close()
    state = "a new client is answered" if answered else "a new client is locked out"
    return f"{len(held)} held open 5 s; {state}"


def cases() -> dict[str, Callable[[Serve], str]]:
    found: dict[str, Callable[[Serve], str]] = {
        request.name: send(request)
        for request in hostile_requests()
        if "stop strings" not in request.name  # the reply must be known first: stop_strings
    }
    found[STOP_STRINGS] = stop_strings
    found[SLOW_CLIENTS] = slow_clients
    return found


def run_server_case(root: Path, name: str, attack: Callable[[Serve], str]) -> ServerRun:
    with tempfile.TemporaryDirectory(prefix="health-") as home:
        serve = Serve(root, Path(home))
        poller = HealthPoller(serve)
        time.sleep(0.5)  # a few polls before
        started = time.perf_counter()
        outcome = attack(serve)
        seconds = time.perf_counter() - started
        time.sleep(1.0)  # and after
        poller.stop()
        serve.sample_memory()
        try:
            answers_after = get(serve.port, "/health", POLL_TIMEOUT) == 200
        except OSError:
            answers_after = False
        died = serve.stop()
        if died:
            outcome = f"server died ({died}); {outcome}"
        latencies = poller.latencies or [POLL_TIMEOUT]
        return ServerRun(
            case=name,
            outcome=outcome,
            seconds=round(seconds, 2),
            worst_health_ms=round(max(latencies) * 1000, 1),
            median_health_ms=round(statistics.median(latencies) * 1000, 1),
            polls=len(poller.latencies),
            answers_after=answers_after,
            peak_mib=round(serve.peak_kib / 1024, 1),
            log_mib=round(serve.log_bytes / 2**20, 2),
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, default=HERE, help="the checkout to serve")
    parser.add_argument("--only", default="", help="run only cases whose name contains this")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 8192)), hard))
    runs = []
    for name, attack in cases().items():
        if args.only in name:
            runs.append(run_server_case(args.root.resolve(), name, attack))
            print(runs[-1], file=sys.stderr, flush=True)
    if args.json:
        print(json.dumps([asdict(run) for run in runs], indent=2))
        return 0
    print(
        "| case | outcome | s | /health worst ms | median ms | answers after | peak MiB | log MiB |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for run in runs:
        print(
            f"| {run.case} | {run.outcome.replace('|', '/')} | {run.seconds} | "
            f"{run.worst_health_ms} | {run.median_health_ms} | "
            f"{'yes' if run.answers_after else 'NO'} | {run.peak_mib} | {run.log_mib} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
