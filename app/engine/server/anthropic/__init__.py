"""Anthropic's Messages API: messages, count_tokens, content blocks and tool use."""
