"""OpenAI's routes: ``POST /v1/chat/completions`` and ``POST /v1/completions`` (whole or streamed
as server-sent events) and ``GET /v1/models``, over the shared :class:`ApiServer`.

A reply starts only once the generation has started, so an error known before any text is an
HTTP 4xx; tool calls stream as they are written (:mod:`app.engine.server.core.reply_stream`),
and a stream silent for 10 s gets a keep-alive comment; a client that disconnects — while
queued, mid-stream or while waiting for a whole reply — cancels its generation. The one served
model answers whatever model a request names, and says its own name.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from app.engine.runtime.chat_format.tool_call_events import (
    ArgumentsPiece,
    CallEnded,
    CallStarted,
    TextPiece,
)
from app.engine.server.core.api_errors import ApiError
from app.engine.server.core.generation_flow import CLIENT_GONE_STATUS, Finished
from app.engine.server.core.mtp_field import MTP_EXTENSION
from app.engine.server.core.reply_stream import KeepAlive, reply_events, whole_reply
from app.engine.server.core.request_fields import ParsedRequest
from app.engine.server.core.scheduler import Job, JobEvent
from app.engine.server.core.server import ApiServer
from app.engine.server.openai import replies
from app.engine.server.openai.parsing import parse_chat_body, parse_completion_body
from app.engine.server.openai.tool_fields import call_delta, whole_message


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
            parsed = await self._server.check(lambda: parse_chat_body(body, defaults, images))
        else:
            parsed = await self._server.check(lambda: parse_completion_body(body, defaults))
        job, first = await self._server.start(request, parsed)
        reply_id = replies.new_id("chatcmpl" if chat else "cmpl")
        if parsed.stream:
            events = self._stream(request, job, first, parsed, reply_id, started, chat=chat)
            return StreamingResponse(events, media_type="text/event-stream")
        reply = await whole_reply(request, job, parsed, first)
        reason = replies.finish_reason(
            reply.finished, calls=len(reply.calls), calls_complete=reply.calls_complete
        )
        model, result = self._server.config.model_id, reply.finished.result
        if chat:
            body = replies.chat_completion(reply_id, model, reply.content, result, reason)
            body["choices"][0]["message"] = whole_message(reply)
        else:
            text = _echoed(parsed) + reply.content
            body = replies.text_completion(reply_id, model, text, reason, result, whole=True)
        self._server.log_generation(request, started, result, reason)
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
        calls, calls_complete = 0, True
        try:
            if chat:
                yield _sse(
                    replies.chat_chunk(reply_id, model, {"role": "assistant", "content": ""})
                )
            elif parsed.echo:
                yield _sse(replies.text_completion(reply_id, model, _echoed(parsed)))
            async for event in reply_events(job, parsed, first):
                if isinstance(event, Finished):
                    finished = event
                elif isinstance(event, KeepAlive):
                    yield KEEP_ALIVE_COMMENT
                elif isinstance(event, TextPiece):
                    yield _sse(_text_chunk(reply_id, model, event.text, chat=chat))
                elif isinstance(event, CallStarted | ArgumentsPiece):
                    yield _sse(replies.chat_chunk(reply_id, model, call_delta(event)))
                elif isinstance(event, CallEnded):
                    calls, calls_complete = calls + 1, calls_complete and event.complete
            assert finished is not None
            reason = replies.finish_reason(finished, calls=calls, calls_complete=calls_complete)
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


KEEP_ALIVE_COMMENT = ": keep-alive\n\n"
"""An SSE comment: clients skip it, proxies and timeouts see the stream is alive."""


def _text_chunk(reply_id: str, model: str, text: str, *, chat: bool) -> dict[str, Any]:
    if chat:
        return replies.chat_chunk(reply_id, model, {"content": text})
    return replies.text_completion(reply_id, model, text)


def _echoed(parsed: ParsedRequest) -> str:
    """The prompt, when the request asked for it back (``echo``)."""
    return (parsed.generation.prompt or "") if parsed.echo else ""


def _sse(data: dict[str, Any]) -> str:
    return f"data: {json.dumps(data)}\n\n"
