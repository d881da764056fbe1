"""OpenAI's Responses API on the same queue and runtime: ``POST /v1/responses`` (whole or
streamed), ``GET /v1/responses/{id}`` and ``DELETE /v1/responses/{id}`` (kept responses).

What openai-agents' default model class and OpenAI's newer tools call. A response is kept
(:mod:`.store`) unless the request says ``store: false``, so a later request can continue it
with ``previous_response_id``. Errors come in OpenAI's shape.
"""

from __future__ import annotations

import functools
import time
from collections.abc import AsyncIterator
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from app.engine.server.core.api_errors import ApiError
from app.engine.server.core.echo import clean
from app.engine.server.core.generation_flow import CLIENT_GONE_STATUS, Finished
from app.engine.server.core.reply_stream import reply_events, whole_reply
from app.engine.server.core.scheduler import Job, JobEvent
from app.engine.server.core.server import ApiServer
from app.engine.server.responses.events import ResponseEvents
from app.engine.server.responses.objects import (
    assistant_turn,
    new_id,
    response_object,
    whole_output,
)
from app.engine.server.responses.parsing import ResponsesRequest, parse_responses_body
from app.engine.server.responses.store import ResponseStore


class ResponsesRoutes:
    def __init__(self, server: ApiServer, store: ResponseStore | None = None) -> None:
        self._server = server
        self._store = store or ResponseStore()

    async def create(self, request: Request) -> Response:
        server = self._server
        request.state.logged = False
        started = time.monotonic()
        body = await server.body(request)
        asked = parse_responses_body(body, server.request_defaults, self._store)
        job, first = await server.start(request, asked.parsed)
        response_id = new_id("resp")
        make_body = functools.partial(self._response, response_id, asked, int(time.time()))
        if asked.parsed.stream:
            events = self._stream(request, job, first, asked, response_id, make_body, started)
            return StreamingResponse(events, media_type="text/event-stream")
        reply = await whole_reply(request, job, asked.parsed, first)
        output = whole_output(reply)
        response = make_body(output, reply.finished, reply.calls_complete)
        self._keep(asked, response_id, response)
        server.log_generation(request, started, reply.finished.result, response["status"])
        return JSONResponse(response)

    async def retrieve(self, request: Request) -> Response:
        response_id = request.path_params["response_id"]
        kept = self._store.get(response_id)
        if kept is None:
            raise _not_kept(response_id)
        return JSONResponse(kept.body)

    async def delete(self, request: Request) -> Response:
        response_id = request.path_params["response_id"]
        if not self._store.delete(response_id):
            raise _not_kept(response_id)
        return JSONResponse({"id": response_id, "object": "response", "deleted": True})

    def _response(
        self,
        response_id: str,
        asked: ResponsesRequest,
        created_at: int,
        output: list[dict[str, Any]],
        finished: Finished | None,
        calls_complete: bool,
    ) -> dict[str, Any]:
        model = self._server.config.model_id
        return response_object(
            response_id,
            model,
            asked.echoed,
            output,
            created_at=created_at,
            finished=finished,
            calls_complete=calls_complete,
        )

    def _keep(self, asked: ResponsesRequest, response_id: str, response: dict[str, Any]) -> None:
        if asked.store:
            turns = (*asked.new_turns, assistant_turn(response["output"]))
            self._store.keep(response_id, response, asked.previous_id, turns)

    async def _stream(
        self,
        request: Request,
        job: Job,
        first: JobEvent,
        asked: ResponsesRequest,
        response_id: str,
        make_body: Any,
        started: float,
    ) -> AsyncIterator[str]:
        server = self._server
        writer = ResponseEvents(make_body)
        finished: Finished | None = None
        try:
            yield writer.opening()
            async for event in reply_events(job, asked.parsed, first):
                if isinstance(event, Finished):
                    finished = event
                elif text := writer.feed(event):
                    yield text
            assert finished is not None
            yield writer.closing(finished)
            response = make_body(writer.output, finished, writer.calls_complete)
            self._keep(asked, response_id, response)
            server.log_generation(request, started, finished.result, response["status"])
        except ApiError as error:  # the generation failed after the 200 went out
            yield writer.error(error.message, error.code or error.type)
            server.log_plain(request, error.status, started, error.log_detail)
        except BaseException:  # the client disconnected (cancelled) or the send failed
            server.log_plain(request, CLIENT_GONE_STATUS, started, "client disconnected")
            raise
        finally:
            if finished is None:
                job.cancel()


def _not_kept(response_id: str) -> ApiError:
    return ApiError(
        404,
        f"no response with id '{clean(response_id)}' is kept here (responses sent with store: "
        "false are not kept, and kept ones leave after an hour or a restart)",
        code="not_found",
        param="response_id",
    )
