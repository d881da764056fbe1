"""OpenAI's routes: ``POST /v1/chat/completions`` and ``POST /v1/completions`` (whole or streamed
as server-sent events) and ``GET /v1/models``, over the shared :class:`ApiServer`.

A reply starts only once the generation has started, so an error known before any text is an
HTTP 4xx; a client that disconnects — while queued, mid-stream or while waiting for a whole
reply — cancels its generation. The one served model answers whatever model a request names,
and says its own name.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from app.engine.server.core.api_errors import ApiError
from app.engine.server.core.generation_flow import (
    CLIENT_GONE_STATUS,
    Finished,
    collect_unless_gone,
    pieces,
)
from app.engine.server.core.mtp_field import MTP_EXTENSION
from app.engine.server.core.request_fields import ParsedRequest, parses_calls
from app.engine.server.core.scheduler import Job, JobEvent
from app.engine.server.core.server import ApiServer
from app.engine.server.openai import replies
from app.engine.server.openai.parsing import parse_chat_body, parse_completion_body
from app.engine.server.openai.tool_fields import TOOL_CALLS_REASON, StreamedCalls, whole_message


class OpenAiRoutes:
    def __init__(self, server: ApiServer) -> None:
        self._server = server

    async def models(self, request: Request) -> Response:
        request.state.logged = False
        return JSONResponse({"object": "list", "data": [self._model_card()]})

    def _model_card(self) -> dict[str, Any]:
        return {
            "id": self._server.config.model_id,
            "object": "model",
            "created": self._server.started,
            "owned_by": "mtp-studio",
            "description": (
                "The one model this server runs: requests naming any model are answered by it, "
                "and replies name it."
            ),
            MTP_EXTENSION: {
                "layers": self._server.mtp_layers,
                "depth": self._server.config.mtp_depth,
            },
        }

    async def chat_completions(self, request: Request) -> Response:
        return await self._generate(request, chat=True)

    async def completions(self, request: Request) -> Response:
        return await self._generate(request, chat=False)

    async def _generate(self, request: Request, *, chat: bool) -> Response:
        request.state.logged = False
        started = time.monotonic()
        body = await self._server.body(request)
        defaults = self._server.request_defaults
        if chat:
            images = await self._server.request_images(body)
            parsed = parse_chat_body(body, defaults, images)
        else:
            parsed = parse_completion_body(body, defaults)
        job, first = await self._server.start(request, parsed)
        reply_id = replies.new_id("chatcmpl" if chat else "cmpl")
        if parsed.stream:
            events = self._stream(request, job, first, parsed, reply_id, started, chat=chat)
            return StreamingResponse(events, media_type="text/event-stream")
        text, finished = await collect_unless_gone(request, job, parsed.stop, first)
        reason = replies.finish_reason(finished.result, finished.stopped_by_sequence)
        model = self._server.config.model_id
        if chat:
            body = replies.chat_completion(reply_id, model, text, finished.result, reason)
            message, called = whole_message(text, parsed.generation)
            body["choices"][0]["message"] = message
            if called:
                reason = body["choices"][0]["finish_reason"] = TOOL_CALLS_REASON
        else:
            body = replies.text_completion(
                reply_id, model, text, reason, finished.result, whole=True
            )
        self._server.log_generation(request, started, finished.result, reason)
        return JSONResponse(body)

    async def _stream(
        self,
        request: Request,
        job: Job,
        first: JobEvent,
        parsed: ParsedRequest,
        reply_id: str,
        started: float,
        *,
        chat: bool,
    ) -> AsyncIterator[str]:
        model = self._server.config.model_id
        finished: Finished | None = None
        try:
            if chat:
                yield _sse(
                    replies.chat_chunk(reply_id, model, {"role": "assistant", "content": ""})
                )
            calls = StreamedCalls() if chat and parses_calls(parsed.generation) else None
            async for piece in pieces(job, parsed.stop, first):
                if isinstance(piece, Finished):
                    finished = piece
                    break
                if calls is not None:
                    for delta in calls.feed(piece):
                        yield _sse(replies.chat_chunk(reply_id, model, delta))
                elif chat:
                    yield _sse(replies.chat_chunk(reply_id, model, {"content": piece}))
                else:
                    yield _sse(replies.text_completion(reply_id, model, piece))
            assert finished is not None
            reason = replies.finish_reason(finished.result, finished.stopped_by_sequence)
            if calls is not None:
                for delta in calls.finish():
                    yield _sse(replies.chat_chunk(reply_id, model, delta))
                reason = TOOL_CALLS_REASON if calls.had_calls else reason
            result = finished.result
            if chat:
                yield _sse(replies.chat_chunk(reply_id, model, {}, reason, result))
            else:
                yield _sse(replies.text_completion(reply_id, model, "", reason, result))
            if parsed.include_usage_chunk:
                object_name = "chat.completion.chunk" if chat else "text_completion"
                yield _sse(replies.usage_chunk(reply_id, model, result, object_name))
            yield "data: [DONE]\n\n"
            self._server.log_generation(request, started, result, reason)
        except ApiError as error:  # the generation failed after the 200 went out
            yield _sse(error.body())
            self._server.log_plain(request, error.status, started, error.log_detail)
        except BaseException:  # the client disconnected (cancelled) or the send failed
            self._server.log_plain(request, CLIENT_GONE_STATUS, started, "client disconnected")
            raise
        finally:
            if finished is None:
                job.cancel()


def _sse(data: dict[str, Any]) -> str:
    return f"data: {json.dumps(data)}\n\n"
