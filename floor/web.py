"""The floor's and the dealer display's web apps (Starlette): pages, JSON API, live stream.

Why Starlette and not FastAPI: a handful of routes whose JSON is already built by
:mod:`floor.views`; FastAPI's typed models would add pydantic for no check we need.
The live stream is Server-Sent Events (``GET /api/events``): one-way, plain HTTP, the
browser reconnects by itself, no library on either side.

Pages are Jinja2 templates in ``floor/templates``; the only script is
``floor/static/floor.js`` (plain JavaScript, no build step, nothing from the internet): on
an event it fetches the changed fragment, rendered by the same template as the page.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import orjson
from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from floor.alerts import AlertStatus
from floor.core import AckError, Floor
from floor.rounds import RoundLookupError, lookup_rounds
from floor.views import WHAT_TO_DO, Disclosure, card_face, table_view

HERE = Path(__file__).resolve().parent
TEMPLATES = Environment(loader=FileSystemLoader(HERE / "templates"),
                        autoescape=select_autoescape(["html"]))
TEMPLATES.globals["what_to_do"] = WHAT_TO_DO
TEMPLATES.filters["face"] = card_face
#: a keep-alive comment on an idle stream this often (proxies close silent connections)
KEEPALIVE = 15.0


class Hub:
    """Fans the follower thread's events out to every open stream (one queue per client)."""

    def __init__(self, max_queue: int = 2000) -> None:
        self.loop: asyncio.AbstractEventLoop | None = None
        self.queues: set[asyncio.Queue[dict[str, Any] | None]] = set()
        self.max_queue = max_queue

    def publish(self, event: dict[str, Any]) -> None:
        """Thread-safe: called by the follower thread."""
        loop = self.loop
        if loop is None or loop.is_closed():
            return
        with contextlib.suppress(RuntimeError):  # the loop closed under us (shutdown)
            loop.call_soon_threadsafe(self._fan_out, event)

    def _fan_out(self, event: dict[str, Any] | None) -> None:
        for q in list(self.queues):
            if event is None or q.qsize() < self.max_queue:
                q.put_nowait(event)

    def close(self) -> None:
        """End every open stream (the server is stopping); thread-safe."""
        loop = self.loop
        if loop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(self._fan_out, None)

    async def stream(self, request: Request) -> AsyncIterator[bytes]:
        q: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
        self.queues.add(q)
        try:
            yield b"retry: 1000\n: connected\n\n"
            while True:
                try:
                    event = await asyncio.wait_for(q.get(), KEEPALIVE)
                except TimeoutError:
                    if await request.is_disconnected():
                        return
                    yield b": keep-alive\n\n"
                    continue
                if event is None:
                    return
                yield (b"event: " + str(event.get("type", "message")).encode() + b"\ndata: "
                       + orjson.dumps(event) + b"\n\n")
        finally:
            self.queues.discard(q)


def _json(data: Any, status: int = 200) -> Response:
    return Response(orjson.dumps(data), status_code=status, media_type="application/json")


def _render(name: str, **context: Any) -> HTMLResponse:
    return HTMLResponse(TEMPLATES.get_template(name).render(**context))


def _events(hub: Hub) -> Callable[[Request], Any]:
    async def events(request: Request) -> StreamingResponse:
        return StreamingResponse(hub.stream(request), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-cache",
                                          "X-Accel-Buffering": "no"})
    return events


def _lifespan(floor: Floor, hub: Hub, follow: bool) -> Any:
    @contextlib.asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        hub.loop = asyncio.get_running_loop()
        floor.publish = hub.publish
        if follow:
            floor.start()
        try:
            yield
        finally:
            hub.loop = None
            if follow:
                await run_in_threadpool(floor.stop)
    return lifespan


def floor_app(floor: Floor, *, disclosure: Disclosure = Disclosure.LIVE,
              follow: bool = True) -> Starlette:
    """The floor: ``/``, ``/tables/{table}``, the JSON API and ``/api/events``.

    ``follow``: start the floor's follower thread with the app (and stop it after).
    """
    hub = Hub()

    def tables() -> list[dict[str, Any]]:
        with floor.lock:
            return [floor.table_summary(t) for t in sorted(floor.tables)]

    def alerts(status: str = AlertStatus.OPEN) -> list[dict[str, Any]]:
        with floor.lock:
            found = [a for a in floor.alerts.values()
                     if status == AlertStatus.ALL or (a.is_open == (status == AlertStatus.OPEN))]
        return [a.to_dict() for a in sorted(found, key=lambda a: (a.ts, a.id), reverse=True)]

    def view(table: str) -> dict[str, Any] | None:
        with floor.lock:
            watch = floor.tables.get(table)
            if watch is None:
                return None
            return table_view(watch.state, [a for a in floor.alerts.values()
                                            if a.table == table], disclosure=disclosure)

    async def api_tables(_request: Request) -> Response:
        return _json(tables())

    async def api_table(request: Request) -> Response:
        v = view(request.path_params["table"])
        return _json(v) if v is not None else _json(
            {"error": f"no table {request.path_params['table']!r} on this floor"}, 404)

    async def api_alerts(request: Request) -> Response:
        status = request.query_params.get("status", "open")
        if status not in tuple(AlertStatus):
            return _json({"error": f"status: one of open, acked, all (got {status!r})"}, 400)
        return _json(alerts(status))

    async def api_ack(request: Request) -> Response:
        try:
            alert_id = int(request.path_params["id"])
        except ValueError:
            return _json({"error": "alert id: a whole number"}, 400)
        try:
            body = orjson.loads(await request.body())
        except orjson.JSONDecodeError:
            return _json({"error": 'body: JSON {"by": NAME, "note": TEXT}'}, 400)
        if not isinstance(body, dict):
            return _json({"error": 'body: JSON {"by": NAME, "note": TEXT}'}, 400)
        try:
            alert = await run_in_threadpool(floor.ack, alert_id, body.get("by"),  # type: ignore[arg-type]
                                            body.get("note", ""))  # ack() checks both
        except AckError as exc:
            return _json({"error": str(exc)}, exc.status)
        return _json(alert.to_dict())

    async def api_rounds(request: Request) -> Response:
        table = request.path_params["table"]
        q = request.query_params
        try:
            found = await run_in_threadpool(
                lookup_rounds, floor, table, day=q.get("day"), shoe=q.get("shoe"),
                round_=q.get("round"), disclosure=disclosure)
        except RoundLookupError as exc:
            return _json({"error": str(exc)}, exc.status)
        return _json(found)

    async def api_witness(request: Request) -> Response:
        """The table's signed checkpoints, JSON Lines: ``audit verify --witness URL``."""
        table = request.path_params["table"]
        found = await run_in_threadpool(floor.store.checkpoints, table)
        return Response(b"".join(cp.to_line() for cp in found),
                        media_type="application/x-ndjson")

    async def page_floor(_request: Request) -> Response:
        return _render("floor.html", tables=tables(), alerts=alerts(), now=_now())

    async def fragment_floor(_request: Request) -> Response:
        return _render("floor_live.html", tables=tables(), alerts=alerts(), now=_now())

    async def page_table(request: Request) -> Response:
        v = view(request.path_params["table"])
        if v is None:
            return HTMLResponse(f"no table {request.path_params['table']!r} on this floor",
                                404)
        return _render("table.html", v=v, display=False)

    async def fragment_table(request: Request) -> Response:
        v = view(request.path_params["table"])
        if v is None:
            return HTMLResponse("", 404)
        return _render("table_live.html", v=v, display=False)

    routes = [
        Route("/", page_floor),
        Route("/fragments/floor", fragment_floor),
        Route("/tables/{table}", page_table),
        Route("/tables/{table}/live", fragment_table),
        Route("/api/tables", api_tables),
        Route("/api/tables/{table}", api_table),
        Route("/api/tables/{table}/rounds", api_rounds),
        Route("/api/alerts", api_alerts),
        Route("/api/witness/{table}", api_witness),
        Route("/api/alerts/{id}/ack", api_ack, methods=["POST"]),
        Route("/api/events", _events(hub)),
        Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
    ]
    app = Starlette(routes=routes, lifespan=_lifespan(floor, hub, follow))
    app.state.floor, app.state.hub = floor, hub
    return app


def display_app(floor: Floor, table: str | None = None, *, follow: bool = True) -> Starlette:
    """The dealer display of one table: the table's live template, big, and its stream."""
    hub = Hub()

    def view() -> dict[str, Any] | None:
        with floor.lock:
            name = table or next(iter(sorted(floor.tables)), None)
            watch = floor.tables.get(name) if name else None
            if watch is None:
                return None
            return table_view(watch.state, [], disclosure=Disclosure.LIVE)

    async def page(_request: Request) -> Response:
        return _render("display.html", v=view(), display=True)

    async def fragment(_request: Request) -> Response:
        v = view()
        return _render("table_live.html", v=v, display=True) if v else HTMLResponse(
            "<p class='waiting'>waiting for the table's first record…</p>")

    async def api_state(_request: Request) -> Response:
        return _json(view())

    routes = [
        Route("/", page),
        Route("/live", fragment),
        Route("/api/state", api_state),
        Route("/api/events", _events(hub)),
        Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
    ]
    app = Starlette(routes=routes, lifespan=_lifespan(floor, hub, follow))
    app.state.floor, app.state.hub = floor, hub
    return app


def _now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%H:%M:%S")
