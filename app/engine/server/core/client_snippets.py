"""Ready-to-paste client set-ups for a running server: what the Server page shows and copies.

A new user's first question after "Start" is "how do I call it?": each :class:`ClientSnippet` is
a complete, runnable answer for one client (curl, which any shell has; OpenAI's Python client;
Anthropic's; Claude Code's environment variables), with this server's URLs and model filled in.
A snippet that needs a package says how to install it on its first line (a bare ``python`` has
no ``openai`` module: pasted as it was, the snippet failed with ``No module named 'openai'``).
The API key is never written into a snippet: a keyed server gets a placeholder the user replaces.
"""

from __future__ import annotations

from dataclasses import dataclass

NO_KEY = "unused"  # a loopback server without --api-key accepts any value
KEY_PLACEHOLDER = "YOUR_API_KEY"


@dataclass(frozen=True)
class ClientSnippet:
    title: str
    language: str
    text: str


def anthropic_base_url(openai_url: str) -> str:
    """The Anthropic clients' base URL (they add ``/v1/messages`` themselves)."""
    return openai_url.removesuffix("/v1")


def client_snippets(
    openai_url: str, model_id: str, *, key_required: bool = False
) -> tuple[ClientSnippet, ...]:
    key = KEY_PLACEHOLDER if key_required else NO_KEY
    base = anthropic_base_url(openai_url)
    body = (
        f'{{"model": "{model_id}", "max_tokens": 256, '
        '"messages": [{"role": "user", "content": "Hello!"}]}'
    )
    curl = f"""curl -s {openai_url}/chat/completions \\
  -H "Content-Type: application/json" \\
  -H "Authorization: Bearer {key}" \\
  -d '{body}'
"""
    openai_python = f'''# needs the openai package: pip install openai
from openai import OpenAI

client = OpenAI(base_url="{openai_url}", api_key="{key}")
reply = client.chat.completions.create(
    model="{model_id}",
    max_tokens=256,
    messages=[{{"role": "user", "content": "Hello!"}}],
)
print(reply.choices[0].message.content)
print(reply.model_extra["mtp"]["acceptance_by_depth"])  # MTP statistics
'''
    anthropic_python = f'''# needs the anthropic package: pip install anthropic
from anthropic import Anthropic

client = Anthropic(base_url="{base}", api_key="{key}")
message = client.messages.create(
    model="{model_id}",
    max_tokens=256,
    messages=[{{"role": "user", "content": "Hello!"}}],
)
print(message.content[0].text)
'''
    claude_code = f"""# needs Claude Code: npm install -g @anthropic-ai/claude-code
export ANTHROPIC_BASE_URL={base}
export ANTHROPIC_AUTH_TOKEN={key}
export ANTHROPIC_MODEL={model_id}
export ANTHROPIC_DEFAULT_HAIKU_MODEL={model_id}  # its quick background requests too
claude
"""
    return (
        ClientSnippet("curl (any shell)", "sh", curl),
        ClientSnippet("OpenAI (Python)", "python", openai_python),
        ClientSnippet("Anthropic (Python)", "python", anthropic_python),
        ClientSnippet("Claude Code (shell)", "sh", claude_code),
    )
