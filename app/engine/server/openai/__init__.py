"""OpenAI's API: chat and text completions, models, tool calls and structured output fields."""
