"""The chat page's links to what answers: the inference worker (through a RuntimeClient) or a
remote server, each on its own thread so the GUI thread never blocks."""
