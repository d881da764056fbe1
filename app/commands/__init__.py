"""CLI subcommands, one module per area, named after the subcommand.

Each module exposes ``register(subparsers)`` which adds its subcommand(s) and sets ``func`` on the
parser to a callable ``(args) -> int``. ``app.cli`` imports only the module of the subcommand
being run (every module pulls in its engine area: numpy, the Hub client, llama.cpp…), so
``mtp-studio --help`` and a small ``extract`` start fast; the one-line summaries below stand in
for the other subcommands in ``--help`` (a test keeps them equal to each module's own).
"""

COMMANDS: dict[str, str] = {
    "catalog": "check and inspect catalog files",
    "publish": "publish a catalog entry's MTP sidecar to the Hub",
    "scratch": "manage the scratch folder",
    "extract": "extract the MTP heads of a checkpoint into a BF16 sidecar file",
    "graft": "add a sidecar's MTP head to a GGUF so llama.cpp can draft with it",
    "convert": "convert an FP8 checkpoint to BF16 (optionally quantised for MLX)",
    "download": "download a repo (or some of its files), resumable and verified",
    "search": "search the Hub for a model's GGUF / MLX conversions and their quantisations",
    "get": "download one quantisation of a model and make it MTP-ready",
    "bench": "run a benchmark and print its figures",
    "chat": "chat with a model (MTP speculative decoding)",
    "serve": "serve a model over OpenAI- and Anthropic-compatible HTTP APIs",
    "ls": "list the models on disk that serve can run, with their MTP status",
    "ps": "show what a running server has loaded",
}
