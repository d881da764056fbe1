"""The chat page's behaviour: which conversation is open, sending and regenerating replies,
choosing a model, remote connections, and the actions (graft, convert, compare) — the code that
wires the widgets to the bridges."""
