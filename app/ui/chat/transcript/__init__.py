"""The conversation as the user reads it: messages, Markdown, highlighted code, reply figures.

Widgets only: nothing here talks to the runtime or knows the other rooms of the chat page.
"""
