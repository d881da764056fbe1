"""Anthropic's Messages API on the same queue and runtime: what Claude Code and the anthropic SDK
call.

``POST /v1/messages`` answers whole or streamed (Anthropic's event sequence, from
:mod:`.replies`); ``POST /v1/messages/count_tokens`` measures a conversation with the model's own
template and tokenizer in the server's process, in milliseconds, without waiting for the worker
(:mod:`app.engine.server.core.prompt_check`). Errors come in Anthropic's shape (the route's
``dialect``); the key may be sent as ``x-api-key``; ``anthropic-version`` is accepted whatever
its value.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from app.engine.runtime.chat_format.prompting import images_of
from app.engine.runtime.core.request import GenerationRequest, GenerationResult, TokenChunk
from app.engine.runtime.sampling.sampler import SamplerSettings
from app.engine.server.anthropic import replies as anthropic_replies
from app.engine.server.anthropic.parsing import parse_count_tokens_body, parse_messages_body
from app.engine.server.core.api_errors import ApiError
from app.engine.server.core.generation_flow import CLIENT_GONE_STATUS, Finished
from app.engine.server.core.reply_stream import reply_events, whole_reply
from app.engine.server.core.request_fields import ParsedRequest, parses_calls
from app.engine.server.core.scheduler import Job, JobEvent

if TYPE_CHECKING:
    from app.engine.server.core.server import ApiServer


class AnthropicRoutes:
    def __init__(self, server: ApiServer) -> None:
        self._server = server

    async def messages(self, request: Request) -> Response:
        server = self._server
        request.state.logged = False
        started = time.monotonic()
        body = await server.body(request)
        images = await server.request_images(body)
        defaults = server.request_defaults
        parsed = await server.check(lambda: parse_messages_body(body, defaults, images))
        job, first = await server.start(request, parsed)
        message_id = anthropic_replies.new_message_id()
        if parsed.stream:
            events = self._stream(request, job, first, parsed, message_id, started)
            return StreamingResponse(events, media_type="text/event-stream")
        reply = await whole_reply(request, job, parsed, first)
        body = anthropic_replies.message(message_id, server.config.model_id, reply)
        server.log_generation(request, started, reply.finished.result, body["stop_reason"])
        return JSONResponse(body)

    async def count_tokens(self, request: Request) -> Response:
        """``{"input_tokens": N}``: the prompt rendered and tokenized in the server's process
        (no worker time, and a prompt longer than the context is counted too); one with images
        prefilled by the worker, which has the projector."""
        server = self._server
        body = await server.body(request)
        images = await server.request_images(body)
        conversation = await server.check(lambda: parse_count_tokens_body(body, images))
        probe = GenerationRequest(
            **conversation, max_tokens=1, sampler=SamplerSettings(seed=0), mtp_depth=0
        )
        if not images_of(probe.messages):
            return JSONResponse({"input_tokens": await server.prompts.count(probe)})
        # an image's cells need the model's projector: the worker prefills the prompt to count it
        parsed = ParsedRequest(None, probe, (), stream=False, include_usage_chunk=False)
        job, first = await server.start(request, parsed)
        reply = await whole_reply(request, job, parsed, first)
        return JSONResponse({"input_tokens": reply.finished.result.prompt_token_count})

    async def _stream(
        self,
        request: Request,
        job: Job,
        first: JobEvent,
        parsed: ParsedRequest,
        message_id: str,
        started: float,
    ) -> AsyncIterator[str]:
        server = self._server
        finished: Finished | None = None
        blocks = anthropic_replies.ReplyBlocks(reads_calls=parses_calls(parsed.generation))
        stats = first.stats if isinstance(first, TokenChunk | GenerationResult) else None
        prompt_tokens = stats.prompt_tokens - stats.prompt_reused_tokens if stats else 0
        try:
            yield anthropic_replies.stream_opening(
                message_id, server.config.model_id, prompt_tokens, blocks
            )
            async for reply_event in reply_events(job, parsed, first):
                if isinstance(reply_event, Finished):
                    finished = reply_event
                elif events := blocks.feed(reply_event):
                    yield events
            assert finished is not None
            yield anthropic_replies.stream_closing(finished, blocks)
            reason = anthropic_replies.stop_reason(
                finished, called=blocks.called, complete=blocks.complete
            )
            server.log_generation(request, started, finished.result, reason)
        except ApiError as error:  # the generation failed after the 200 went out
            yield anthropic_replies.event("error", error.anthropic_body())
            server.log_plain(request, error.status, started, error.log_detail)
        except BaseException:  # the client disconnected (cancelled) or the send failed
            server.log_plain(request, CLIENT_GONE_STATUS, started, "client disconnected")
            raise
        finally:
            if finished is None:
                job.cancel()
