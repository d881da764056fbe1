"""Anthropic's Messages API on the same queues and runtime: what Claude Code and the anthropic SDK
call.

A request's ``model`` picks the model that answers (a 404 ``not_found_error`` when it names none
the server has; ``serve --alias 'claude-*'`` lets Claude Code's own model names through). A
request that waits for its turn gets its headers at once (:mod:`..core.waiting_reply`).

``POST /v1/messages`` answers whole or streamed (Anthropic's event sequence, from
:mod:`.replies`); ``POST /v1/messages/count_tokens`` measures a conversation with the model's own
template and tokenizer in the server's process, in milliseconds, without waiting for the worker
(:mod:`app.engine.server.core.prompt_check`). Errors come in Anthropic's shape (the route's
``dialect``); the key may be sent as ``x-api-key``; ``anthropic-version`` is accepted whatever
its value.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from app.engine.runtime.chat_format.prompting import images_of
from app.engine.runtime.core.request import GenerationRequest, GenerationResult, TokenChunk
from app.engine.runtime.sampling.sampler import SamplerSettings
from app.engine.server.anthropic import replies as anthropic_replies
from app.engine.server.anthropic.parsing import parse_count_tokens_body, parse_messages_body
from app.engine.server.core.api_errors import ApiError
from app.engine.server.core.generation_flow import Finished
from app.engine.server.core.reply_stream import WholeReply, reply_events, whole_reply
from app.engine.server.core.request_fields import ParsedRequest, parses_calls
from app.engine.server.core.route_reply import RouteReply, Running, received, running
from app.engine.server.core.scheduler import JobEvent
from app.engine.server.core.waiting_reply import Waiting

if TYPE_CHECKING:
    from app.engine.server.core.server import ApiServer


class AnthropicRoutes:
    def __init__(self, server: ApiServer) -> None:
        self._server = server

    async def messages(self, request: Request) -> Response:
        server = self._server
        arrived = await received(server, request)
        body, target = arrived.body, arrived.target
        images = await server.request_images(body)
        defaults = target.defaults
        parsed = await server.check(lambda: parse_messages_body(body, defaults, images))
        run = await running(server, request, arrived, parsed, "messages")
        return await _Message(run).response()

    async def count_tokens(self, request: Request) -> Response:
        """``{"input_tokens": N}``: the prompt rendered and tokenized in the server's process
        (no worker time, and a prompt longer than the context is counted too); one with images
        prefilled by the worker, which has the projector."""
        server = self._server
        body = await server.body(request)
        target = await server.model_for(body)
        images = await server.request_images(body)
        conversation = await server.check(lambda: parse_count_tokens_body(body, images))
        probe = GenerationRequest(
            **conversation, max_tokens=1, sampler=SamplerSettings(seed=0), mtp_depth=0
        )
        if target.prompts is not None and not images_of(probe.messages):
            return JSONResponse({"input_tokens": await target.prompts.count(probe)})
        # an image's cells need the model's projector, and a model not loaded yet has no
        # tokenizer here: its worker prefills the prompt to count it (loading the model)
        parsed = ParsedRequest(None, probe, (), stream=False, include_usage_chunk=False)
        job, first = await server.start(request, parsed, target, "count_tokens", early=False)
        assert not isinstance(first, Waiting)
        reply = await whole_reply(request, job, parsed, first)
        return JSONResponse({"input_tokens": reply.finished.result.prompt_token_count})


class _Message(RouteReply):
    """One request's message, whole or streamed."""

    def __init__(self, run: Running) -> None:
        super().__init__(run)
        self._id = anthropic_replies.new_message_id()

    def whole(self, reply: WholeReply) -> dict[str, Any]:
        body = anthropic_replies.message(self._id, self._model, reply)
        self._server.log_generation(
            self._request, self._started, reply.finished.result, body["stop_reason"]
        )
        return body

    def error_body(self, error: ApiError) -> dict[str, Any]:
        return error.anthropic_body()

    def failed_event(self, error: ApiError) -> str:
        return anthropic_replies.event("error", self.failed_body(error))

    async def events(self, first: JobEvent) -> AsyncIterator[str]:
        server, request, job, parsed = self._server, self._request, self._job, self._parsed
        started, message_id = self._started, self._id
        finished: Finished | None = None
        blocks = anthropic_replies.ReplyBlocks(reads_calls=parses_calls(parsed.generation))
        stats = first.stats if isinstance(first, TokenChunk | GenerationResult) else None
        prompt_tokens = stats.prompt_tokens - stats.prompt_reused_tokens if stats else 0
        try:
            yield anthropic_replies.stream_opening(message_id, self._model, prompt_tokens, blocks)
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
            yield self.failed_event(error)
        except BaseException:  # the client disconnected (cancelled) or the send failed
            self.gone()
            raise
        finally:
            if finished is None:
                job.cancel()
