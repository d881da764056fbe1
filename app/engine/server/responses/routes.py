"""OpenAI's Responses API on the same queue and runtime: ``POST /v1/responses`` (whole or
streamed), ``GET /v1/responses/{id}`` and ``DELETE /v1/responses/{id}`` (kept responses).

What openai-agents' default model class and OpenAI's newer tools call. A response is kept
(:mod:`.store`) unless the request says ``store: false``, so a later request can continue it
with ``previous_response_id``. A request's ``model`` picks the model that answers, as on the
other routes (a request that waits for its turn gets its headers at once:
:mod:`..core.waiting_reply`). Errors come in OpenAI's shape.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from app.engine.server.core.api_errors import ApiError
from app.engine.server.core.echo import clean
from app.engine.server.core.generation_flow import Finished
from app.engine.server.core.reply_stream import WholeReply, reply_events
from app.engine.server.core.route_reply import RouteReply, Running, received, running
from app.engine.server.core.scheduler import JobEvent
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
        arrived = await received(server, request)
        target = arrived.target
        store = self._store  # one loop's
        asked = parse_responses_body(arrived.body, target.defaults, store)
        run = await running(server, request, arrived, asked.parsed, "responses")
        return await _Response(run, store, asked).response()

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


class _Response(RouteReply):
    """One request's response, whole or streamed, kept unless it asked otherwise."""

    def __init__(self, run: Running, store: ResponseStore, asked: ResponsesRequest) -> None:
        super().__init__(run)
        self._store = store
        self._asked = asked
        self._id = new_id("resp")
        self._created_at = int(time.time())

    def body(
        self, output: list[dict[str, Any]], finished: Finished | None, calls_complete: bool
    ) -> dict[str, Any]:
        return response_object(
            self._id,
            self._model,
            self._asked.echoed,
            output,
            created_at=self._created_at,
            finished=finished,
            calls_complete=calls_complete,
        )

    def whole(self, reply: WholeReply) -> dict[str, Any]:
        response = self.body(whole_output(reply), reply.finished, reply.calls_complete)
        self._done(response, reply.finished)
        return response

    def failed_event(self, error: ApiError) -> str:
        self.log_failure(error)
        return ResponseEvents(self.body).error(error.message, error.code or error.type)

    def _done(self, response: dict[str, Any], finished: Finished) -> None:
        """Keep the response (unless ``store: false``) and log it."""
        asked = self._asked
        if asked.store:
            turns = (*asked.new_turns, assistant_turn(response["output"]))
            self._store.keep(self._id, response, asked.previous_id, turns)
        self._server.log_generation(
            self._request, self._started, finished.result, response["status"]
        )

    async def events(self, first: JobEvent) -> AsyncIterator[str]:
        writer = ResponseEvents(self.body)
        finished: Finished | None = None
        try:
            yield writer.opening()
            async for event in reply_events(self._job, self._asked.parsed, first):
                if isinstance(event, Finished):
                    finished = event
                elif text := writer.feed(event):
                    yield text
            assert finished is not None
            yield writer.closing(finished)
            self._done(self.body(writer.output, finished, writer.calls_complete), finished)
        except ApiError as error:  # the generation failed after the 200 went out
            yield writer.error(error.message, error.code or error.type)
            self.log_failure(error)
        except BaseException:  # the client disconnected (cancelled) or the send failed
            self.gone()
            raise
        finally:
            if finished is None:
                self._job.cancel()


def _not_kept(response_id: str) -> ApiError:
    return ApiError(
        404,
        f"no response with id '{clean(response_id)}' is kept here (responses sent with store: "
        "false are not kept, and kept ones leave after an hour or a restart)",
        code="not_found",
        param="response_id",
    )
