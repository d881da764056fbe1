"""OpenAI's Responses API: responses whole and streamed, function tools, and the responses kept
for ``previous_response_id``."""
