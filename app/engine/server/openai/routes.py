"""OpenAI's routes: ``POST /v1/chat/completions`` and ``POST /v1/completions`` (whole or streamed
as server-sent events) and ``GET /v1/models`` / ``GET /v1/models/{id}``, over the shared
:class:`ApiServer`.

A request's ``model`` picks the model that answers (a 404 ``model_not_found`` when it names none
the server has), and the reply names that model. A reply starts once the generation has
started, so an error known before any text is an HTTP 4xx — unless the request waits for its
turn past a moment, when its headers go out at once (:mod:`..core.waiting_reply`). Tool calls
stream as they are written (:mod:`app.engine.server.core.reply_stream`), and a stream silent for
10 s gets a keep-alive comment; a client that disconnects — while queued, mid-stream or while
waiting for a whole reply — cancels its generation.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from app.engine.runtime.chat_format.tool_call_events import (
    ArgumentsPiece,
    CallEnded,
    CallStarted,
    TextPiece,
)
from app.engine.server.core.api_errors import ApiError
from app.engine.server.core.generation_flow import Finished
from app.engine.server.core.reply_stream import KeepAlive, WholeReply, reply_events
from app.engine.server.core.request_fields import ParsedRequest
from app.engine.server.core.route_reply import RouteReply, Running, received, running
from app.engine.server.core.scheduler import JobEvent
from app.engine.server.core.server import ApiServer
from app.engine.server.openai import replies
from app.engine.server.openai.model_cards import model_card, model_list
from app.engine.server.openai.parsing import parse_chat_body, parse_completion_body
from app.engine.server.openai.tool_fields import call_delta, whole_message


class OpenAiRoutes:
    def __init__(self, server: ApiServer) -> None:
        self._server = server

    async def models(self, request: Request) -> Response:
        request.state.logged = False
        directory = self._server.models
        await directory.rescanned()
        return JSONResponse(model_list(directory))

    async def model(self, request: Request) -> Response:
        """One model by its id (ids hold slashes: ``owner/Repo-GGUF/file.gguf``)."""
        request.state.logged = False
        directory = self._server.models
        asked = request.path_params["model_id"]
        target = await directory.model_for(asked)
        status = next((s for s in directory.loaded() if s.id == target.id), None)
        return JSONResponse(model_card(target.model, directory, status))

    async def chat_completions(self, request: Request) -> Response:
        return await self._generate(request, chat=True)

    async def completions(self, request: Request) -> Response:
        return await self._generate(request, chat=False)

    async def _generate(self, request: Request, *, chat: bool) -> Response:
        server = self._server
        arrived = await received(server, request)
        body, target = arrived.body, arrived.target
        defaults = target.defaults
        if chat:
            images = await server.request_images(body)
            parsed = await server.check(lambda: parse_chat_body(body, defaults, images))
        else:
            parsed = await server.check(lambda: parse_completion_body(body, defaults))
        endpoint = "chat_completions" if chat else "completions"
        run = await running(server, request, arrived, parsed, endpoint)
        return await _Reply(run, chat).response()


class _Reply(RouteReply):
    """One request's reply, whole or streamed."""

    def __init__(self, run: Running, chat: bool) -> None:
        super().__init__(run)
        self._id = replies.new_id("chatcmpl" if chat else "cmpl")
        self._chat = chat

    def whole(self, reply: WholeReply) -> dict[str, Any]:
        parsed, model = self._parsed, self._model
        reason = replies.finish_reason(
            reply.finished, calls=len(reply.calls), calls_complete=reply.calls_complete
        )
        result = reply.finished.result
        if self._chat:
            body = replies.chat_completion(self._id, model, reply.content, result, reason)
            body["choices"][0]["message"] = whole_message(reply)
        else:
            text = _echoed(parsed) + reply.content
            body = replies.text_completion(self._id, model, text, reason, result, whole=True)
        self._server.log_generation(self._request, self._started, result, reason)
        return body

    def failed_event(self, error: ApiError) -> str:
        return _sse(self.failed_body(error))

    async def events(self, first: JobEvent) -> AsyncIterator[str]:
        request, job, parsed, model = self._request, self._job, self._parsed, self._model
        chat, reply_id = self._chat, self._id
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
            self._server.log_generation(request, self._started, result, reason)
        except ApiError as error:  # the generation failed after the 200 went out
            yield self.failed_event(error)
        except BaseException:  # the client disconnected (cancelled) or the send failed
            self.gone()
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
