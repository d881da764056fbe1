"""OpenAI's routes: ``POST /v1/chat/completions`` and ``POST /v1/completions`` (whole or streamed
as server-sent events) and ``GET /v1/models`` / ``GET /v1/models/{id}``, over the shared
:class:`ApiServer`.

A request's ``model`` picks the model that answers (a 404 ``model_not_found`` when it names none
the server has), and the reply names that model. A reply starts once the generation has
started, so an error known before any text is an HTTP 4xx — unless the request waits for its
turn past a moment, when its headers go out at once (:mod:`..core.waiting_reply`). Tool calls
stream as they are written (:mod:`app.engine.server.core.reply_stream`), and a stream silent for
10 s gets a keep-alive comment; a client that disconnects — while queued, mid-stream or while
waiting for a whole reply — cancels its generation. A request for ``n`` choices runs them one
after another (:mod:`.choice_fields`): the later ones resume from the prompt's kept state, and a
stream sends each choice's chunks under its ``index``. Log-probabilities go with the text they
belong to (:mod:`app.engine.server.core.reply_logprobs`).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from app.engine.runtime.chat_format.tool_call_events import (
    ArgumentsPiece,
    CallEnded,
    CallStarted,
    TextPiece,
)
from app.engine.runtime.core.request import GenerationResult
from app.engine.runtime.sampling.logprobs import TokenLogprob
from app.engine.server.core.api_errors import ApiError
from app.engine.server.core.generation_flow import Finished
from app.engine.server.core.model_directory import RequestModel
from app.engine.server.core.reply_logprobs import (
    TokenLogprobs,
    chat_logprobs,
    completion_logprobs,
)
from app.engine.server.core.reply_stream import (
    KeepAlive,
    WholeReply,
    gathered_reply,
    reply_events,
    whole_reply,
)
from app.engine.server.core.request_fields import ParsedRequest
from app.engine.server.core.route_reply import RouteReply, Running, received, running
from app.engine.server.core.scheduler import Job, JobEvent
from app.engine.server.core.server import ApiServer
from app.engine.server.core.waiting_reply import Waiting
from app.engine.server.openai import replies
from app.engine.server.openai.choice_fields import choice_request
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
        run = await running(server, request, arrived, parsed, _endpoint(chat))
        return await _Reply(run, chat, target).response()


Gather = Callable[[Job, ParsedRequest, JobEvent], Awaitable[WholeReply]]


class _Reply(RouteReply):
    """One request's reply, whole or streamed, with its ``n`` choices."""

    def __init__(self, run: Running, chat: bool, target: RequestModel) -> None:
        super().__init__(run)
        self._id = replies.new_id("chatcmpl" if chat else "cmpl")
        self._chat = chat
        self._target = target

    async def response(self) -> Response:
        first = self._first
        if self._parsed.choices == 1 or self._parsed.stream or isinstance(first, Waiting):
            return await super().response()
        request = self._request

        async def gather(job: Job, parsed: ParsedRequest, event: JobEvent) -> WholeReply:
            return await whole_reply(request, job, parsed, event)

        return JSONResponse(await self._choices(first, gather))

    async def gathered(self, first: JobEvent) -> dict[str, Any]:
        return await self._choices(first, gathered_reply)

    async def _choices(self, first: JobEvent, gather: Gather) -> dict[str, Any]:
        """Every choice's whole reply, as one body (the prompt counted once in ``usage``)."""
        parsed = self._parsed
        bodies = [self._whole_choice(await gather(self._job, parsed, first), parsed, 0)]
        for index in range(1, parsed.choices):
            later = choice_request(parsed, index)
            job, event = await self._start(later)
            bodies.append(self._whole_choice(await gather(job, later, event), later, index))
        body, results = bodies[0][0], [result for _body, result in bodies]
        body["choices"] = [choice for one, _result in bodies for choice in one["choices"]]
        body["usage"] = replies.usage(results)
        reason = body["choices"][0]["finish_reason"]
        self._server.log_generation(self._request, self._started, results[0], reason)
        return body

    async def _start(self, parsed: ParsedRequest) -> tuple[Job, JobEvent]:
        """A later choice's job, queued after the first choice's and waited for."""
        job, event = await self._server.start(
            self._request, parsed, self._target, _endpoint(self._chat), early=False
        )
        assert not isinstance(event, Waiting), "early=False waits for the first event"
        return job, event

    def whole(self, reply: WholeReply) -> dict[str, Any]:
        body, result = self._whole_choice(reply, self._parsed, 0)
        reason = body["choices"][0]["finish_reason"]
        self._server.log_generation(self._request, self._started, result, reason)
        return body

    def _whole_choice(
        self, reply: WholeReply, parsed: ParsedRequest, index: int
    ) -> tuple[dict[str, Any], GenerationResult]:
        """One choice's whole reply (its body holds it as its only choice), and its result."""
        model = self._model
        reason = replies.finish_reason(
            reply.finished, calls=len(reply.calls), calls_complete=reply.calls_complete
        )
        result = reply.finished.result
        asked = parsed.generation.logprobs is not None
        if self._chat:
            logprobs = chat_logprobs(reply.logprobs) if asked else None
            body = replies.chat_completion(self._id, model, reply.content, result, reason, logprobs)
            body["choices"][0]["message"] = whole_message(reply)
        else:
            echoed = _echoed(parsed)
            logprobs = completion_logprobs(reply.logprobs, len(echoed)) if asked else None
            body = replies.text_completion(
                self._id, model, echoed + reply.content, reason, result, whole=True,
                logprobs=logprobs,
            )  # fmt: skip
        body["choices"][0]["index"] = index
        return body, result

    def failed_event(self, error: ApiError) -> str:
        return _sse(self.failed_body(error))

    async def events(self, first: JobEvent) -> AsyncIterator[str]:
        parsed, chat = self._parsed, self._chat
        results: list[GenerationResult] = []
        reasons: list[str] = []
        job, event = self._job, first
        try:
            for index in range(parsed.choices):
                choice = choice_request(parsed, index)
                if index:
                    job, event = await self._start(choice)
                stream = _ChoiceStream(_Where(self._id, self._model, chat, index), choice)
                async for text in stream.events(job, event):
                    yield text
                assert stream.result is not None and stream.reason is not None
                results.append(stream.result)
                reasons.append(stream.reason)
            if parsed.include_usage_chunk:
                object_name = "chat.completion.chunk" if chat else "text_completion"
                yield _sse(replies.usage_chunk(self._id, self._model, results, object_name))
            yield "data: [DONE]\n\n"
            self._server.log_generation(self._request, self._started, results[0], reasons[0])
        except ApiError as error:  # the generation failed after the 200 went out
            yield self.failed_event(error)
        except BaseException:  # the client disconnected (cancelled) or the send failed
            self.gone()
            raise


@dataclass(frozen=True)
class _Where:
    """Where a choice's chunks go: the reply's id and model, its API, the choice's index."""

    reply_id: str
    model: str
    chat: bool
    index: int


class _ChoiceStream:
    """One choice's chunks in a stream: its text, calls and log-probabilities under its
    ``index``, then its last chunk (finish reason, MTP statistics)."""

    def __init__(self, where: _Where, parsed: ParsedRequest) -> None:
        self._where = where
        self._parsed = parsed
        self._entries: list[TokenLogprob] = []
        self._offset = 0  # characters of the choice's text sent before this chunk's
        self.result: GenerationResult | None = None
        self.reason: str | None = None

    async def events(self, job: Job, first: JobEvent) -> AsyncIterator[str]:
        chat, parsed = self._where.chat, self._parsed
        finished: Finished | None = None
        calls, calls_complete = 0, True
        try:
            if chat:
                yield self._chunk({"role": "assistant", "content": ""})
            elif parsed.echo:
                yield self._chunk(_echoed(parsed))
            async for event in reply_events(job, parsed, first):
                if isinstance(event, Finished):
                    finished = event
                elif isinstance(event, KeepAlive):
                    yield KEEP_ALIVE_COMMENT
                elif isinstance(event, TokenLogprobs):
                    self._entries.extend(event.entries)
                elif isinstance(event, TextPiece):
                    yield self._chunk({"content": event.text} if chat else event.text)
                elif isinstance(event, CallStarted | ArgumentsPiece):
                    yield self._chunk(call_delta(event))
                elif isinstance(event, CallEnded):
                    calls, calls_complete = calls + 1, calls_complete and event.complete
            assert finished is not None
            reason = replies.finish_reason(finished, calls=calls, calls_complete=calls_complete)
            self.result, self.reason = finished.result, reason
            yield self._chunk({} if chat else "", reason, self.result)
        finally:
            if finished is None:
                job.cancel()

    def _chunk(
        self,
        delta: dict[str, Any] | str,
        reason: str | None = None,
        result: GenerationResult | None = None,
    ) -> str:
        """A chunk of this choice, carrying the log-probabilities of the text sent so far."""
        where = self._where
        logprobs = self._logprobs(delta if isinstance(delta, str) else delta.get("content"))
        if isinstance(delta, dict):
            chunk = replies.chat_chunk(
                where.reply_id, where.model, delta, reason, result,
                index=where.index, logprobs=logprobs,
            )  # fmt: skip
        else:
            chunk = replies.text_completion(
                where.reply_id, where.model, delta, reason, result,
                index=where.index, logprobs=logprobs,
            )  # fmt: skip
        return _sse(chunk)

    def _logprobs(self, text: str | None) -> dict[str, Any] | None:
        offset = self._offset
        self._offset += len(text or "")
        if self._parsed.generation.logprobs is None or not self._entries:
            return None
        entries, self._entries = self._entries, []
        if self._where.chat:
            return chat_logprobs(entries)
        return completion_logprobs(entries, offset)


KEEP_ALIVE_COMMENT = ": keep-alive\n\n"
"""An SSE comment: clients skip it, proxies and timeouts see the stream is alive."""


def _endpoint(chat: bool) -> str:
    return "chat_completions" if chat else "completions"


def _echoed(parsed: ParsedRequest) -> str:
    """The prompt, when the request asked for it back (``echo``)."""
    return (parsed.generation.prompt or "") if parsed.echo else ""


def _sse(data: dict[str, Any]) -> str:
    return f"data: {json.dumps(data)}\n\n"
