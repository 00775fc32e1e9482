"""The console's JSON API under ``/api``: one route per view or action of :mod:`mq.console.service`.

Reads are GETs with query parameters; changes are POSTs with a JSON object body (or a urlencoded
form) and the CSRF token (see :mod:`mq.console.auth`). Answers are JSON: the view (see the
dataclasses of :mod:`mq.console.service`), or ``{"error": "…"}`` with 400 (bad input), 403
(read-only, CSRF), 404 (unknown topic, group, message or path), 409 (conflict) or 503 (store down).
Nothing is written when a request is refused. The table of routes is in docs/console-api.md
(tests/console/test_console_api.py keeps it in step with :data:`ROUTES`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from mq.console import service
from mq.console.service import BadInput, Conflict, Console, NotFound, ReadOnly
from mq.errors import MQBrokerError, MQClientError, TopicNotFoundError

log = logging.getLogger("mq.console")

Handler = Callable[[Request], Awaitable[Response]]


def status_of(error: BaseException) -> int:
    """The HTTP status of an error raised by :mod:`mq.console.service` (pages use it too)."""
    if isinstance(error, ReadOnly):
        return 403
    if isinstance(error, NotFound | TopicNotFoundError):
        return 404
    if isinstance(error, Conflict):
        return 409
    if isinstance(error, MQClientError):
        return 400
    if isinstance(error, MQBrokerError):
        return 503
    return 500


def console_of(request: Request) -> Console:
    """The :class:`Console` of the app serving ``request``."""
    console: Console = request.app.state.console
    return console


def _endpoint(view: Callable[[Request, Console], Awaitable[Any]], *, status: int = 200) -> Handler:
    """An endpoint answering ``view``'s result as JSON, and service errors as ``{"error": …}``."""

    async def endpoint(request: Request) -> Response:
        try:
            result = await view(request, console_of(request))
        except (MQClientError, MQBrokerError) as e:
            if isinstance(e, MQBrokerError):
                log.warning("%s %s: %s", request.method, request.url.path, e)
            return JSONResponse({"error": str(e)}, status_of(e))
        if isinstance(result, Response):  # a download (a message field's whole value)
            return result
        return JSONResponse(service.to_jsonable(result), status)

    return endpoint


def _call(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Awaitable[Any]:
    """Run a (blocking) service function in Starlette's thread pool."""
    return run_in_threadpool(fn, *args, **kwargs)


async def _body(request: Request) -> dict[str, Any]:
    """A POST's parameters: a JSON object body, or a urlencoded form; BadInput otherwise."""
    kind = request.headers.get("content-type", "")
    raw = await request.body()
    if not raw.strip():
        return {}
    if kind.startswith("application/x-www-form-urlencoded") or kind.startswith("multipart/form-data"):
        form = await request.form()
        data: dict[str, Any] = {}
        for k, v in form.multi_items():
            if k == "csrf_token" or not isinstance(v, str):
                continue
            if k == "msg_ids":  # a list: one field per id
                data.setdefault(k, []).append(v)
            else:
                data[k] = v
        return data
    try:
        value = json.loads(raw)
    except ValueError as e:
        raise BadInput(f"the body must be a JSON object or a form: {e}") from None
    if not isinstance(value, dict):
        raise BadInput(f"the body must be a JSON object, got {type(value).__name__}")
    return value


def _q(request: Request, name: str, default: Any = None) -> Any:
    return request.query_params.get(name, default)


def _paging(request: Request) -> dict[str, Any]:
    """The ``page`` and ``per_page`` query parameters of a list, with their defaults."""
    return {"page": _q(request, "page", 1), "per_page": _q(request, "per_page", service.DEFAULT_PER_PAGE)}


def _flag(value: object, name: str) -> bool:
    if isinstance(value, bool):
        return value
    if value in (None, "", "0", "false", "no", "off"):
        return False
    if value in ("1", "true", "yes", "on"):
        return True
    raise BadInput(f"{name} must be true or false, got {value!r}")


def _only(data: dict[str, Any], allowed: set[str]) -> dict[str, Any]:
    unknown = set(data) - allowed
    if unknown:
        raise BadInput(f"unknown field(s) {sorted(unknown)}: expected some of {sorted(allowed)}")
    return data


# -- views ------------------------------------------------------------------------------------------


def _read(fn: Callable[[Console], Any]) -> Callable[[Request, Console], Awaitable[Any]]:
    """The view of a read without parameters: ``fn(console)`` in the thread pool."""

    async def view(request: Request, console: Console) -> Any:
        return await _call(fn, console)

    return view


async def _info(request: Request, console: Console) -> Any:
    data = service.to_jsonable(service.info(console))
    return {**data, "csrf_token": request.state.csrf_token}


async def _series(request: Request, console: Console) -> Any:
    return await _call(service.series, console, _q(request, "topic"))


async def _topic_series(request: Request, console: Console) -> Any:
    return await _call(service.series, console, request.path_params["topic"])


async def _topics(request: Request, console: Console) -> Any:
    return await _call(
        service.topics,
        console,
        search=_q(request, "search", ""),
        **_paging(request),
        system=_flag(_q(request, "system"), "system"),
    )


async def _topic(request: Request, console: Console) -> Any:
    return await _call(service.topic_detail, console, request.path_params["topic"])


async def _lite_topics(request: Request, console: Console) -> Any:
    return await _call(
        service.lite_topics,
        console,
        request.path_params["topic"],
        prefix=_q(request, "prefix", ""),
        cursor=_q(request, "cursor", "0"),
        per_page=_q(request, "per_page", service.DEFAULT_PER_PAGE),
    )


async def _create_topic(request: Request, console: Console) -> Any:
    data = _only(await _body(request), {"name", "read_queues", "write_queues", "perm", "order"})
    if "name" not in data:
        raise BadInput("name is required")
    return await _call(
        service.create_topic,
        console,
        data["name"],
        read_queues=data.get("read_queues", service.DEFAULT_QUEUE_NUMS),
        write_queues=data.get("write_queues", service.DEFAULT_QUEUE_NUMS),
        perm=data.get("perm", "rw"),
        order=_flag(data.get("order", False), "order"),
    )


async def _update_topic(request: Request, console: Console) -> Any:
    data = _only(await _body(request), {"read_queues", "write_queues", "perm"})
    blank = {k: v for k, v in data.items() if v not in ("", None)}
    return await _call(service.update_topic, console, request.path_params["topic"], **blank)


async def _delete_topic(request: Request, console: Console) -> Any:
    _only(await _body(request), set())
    return {"deleted": await _call(service.delete_topic, console, request.path_params["topic"])}


async def _send(request: Request, console: Console) -> Any:
    data = _only(await _body(request), {"body", "tags", "keys", "properties"})
    return await _call(
        service.send_test_message,
        console,
        request.path_params["topic"],
        body=data.get("body", ""),
        tags=data.get("tags"),
        keys=data.get("keys"),
        properties=data.get("properties"),
    )


async def _groups(request: Request, console: Console) -> Any:
    return await _call(
        service.groups,
        console,
        search=_q(request, "search", ""),
        **_paging(request),
    )


async def _group(request: Request, console: Console) -> Any:
    return await _call(service.group_detail, console, request.path_params["group"])


async def _reset(request: Request, console: Console) -> Any:
    data = _only(await _body(request), {"topic", "timestamp"})
    if "topic" not in data or "timestamp" not in data:
        raise BadInput("topic and timestamp (epoch ms or ISO 8601) are required")
    return await _call(service.reset_offset, console, request.path_params["group"], data["topic"], data["timestamp"])


async def _pause(request: Request, console: Console) -> Any:
    _only(await _body(request), set())
    return await _call(service.set_consume_enable, console, request.path_params["group"], False)


async def _resume(request: Request, console: Console) -> Any:
    _only(await _body(request), set())
    return await _call(service.set_consume_enable, console, request.path_params["group"], True)


async def _dlq(request: Request, console: Console) -> Any:
    return await _call(
        service.dlq,
        console,
        request.path_params["group"],
        **_paging(request),
    )


async def _resend(request: Request, console: Console) -> Any:
    data = _only(await _body(request), {"msg_ids", "all"})
    resend_all = _flag(data.get("all", False), "all")
    if resend_all == ("msg_ids" in data):
        raise BadInput('send either msg_ids (a list of msg ids) or "all": true')
    return await _call(service.resend_dlq, console, request.path_params["group"], msg_ids=None if resend_all else data["msg_ids"])


async def _messages(request: Request, console: Console) -> Any:
    topic = _q(request, "topic")
    if not topic:
        raise BadInput("topic is required")
    return await _call(
        service.search_messages,
        console,
        topic,
        msg_id=_q(request, "msg_id"),
        key=_q(request, "key"),
        begin=_q(request, "begin"),
        end=_q(request, "end"),
        **_paging(request),
    )


async def _message(request: Request, console: Console) -> Any:
    # the id is the rest of the path, percent-encoded (it may hold "/"), or ?id= for "." and ".."
    msg_id = request.path_params["msg_id"] or _q(request, "id", "")
    name = _q(request, "field")
    if name is None:
        return await _call(service.message_detail, console, request.path_params["topic"], msg_id)
    # one field's whole value (the page cuts long ones, D99): a download, never rendered by the browser
    value = await _call(service.message_field, console, request.path_params["topic"], msg_id, name)
    filename = "".join(c if c.isalnum() or c in "-_." else "_" for c in f"{msg_id}-{name}")[:120] + ".txt"
    return Response(
        value.encode(errors="surrogatepass"),
        media_type="text/plain; charset=utf-8",
        headers={"Content-Disposition": f'attachment; filename="{filename}"', "X-Content-Type-Options": "nosniff"},
    )


async def _discarded(request: Request, console: Console) -> Any:
    return await _call(
        service.discarded,
        console,
        topic=_q(request, "topic") or None,
        **_paging(request),
    )


async def _not_found(request: Request) -> Response:
    return JSONResponse({"error": f"no API at {request.method} {request.url.path}: see docs/console-api.md"}, 404)


#: ``(method, path, view, status)`` of every API route: docs/console-api.md's table follows it.
ROUTES: list[tuple[str, str, Callable[[Request, Console], Awaitable[Any]], int]] = [
    ("GET", "/api", _info, 200),
    ("GET", "/api/overview", _read(service.overview), 200),
    ("GET", "/api/overview/series", _series, 200),
    ("GET", "/api/brokers", _read(service.brokers), 200),
    ("GET", "/api/doctor", _read(service.doctor), 200),
    ("GET", "/api/topics", _topics, 200),
    ("POST", "/api/topics", _create_topic, 201),
    ("GET", "/api/topics/{topic}", _topic, 200),
    ("GET", "/api/topics/{topic}/series", _topic_series, 200),
    ("GET", "/api/topics/{topic}/lite", _lite_topics, 200),
    ("POST", "/api/topics/{topic}/update", _update_topic, 200),
    ("POST", "/api/topics/{topic}/delete", _delete_topic, 200),
    ("POST", "/api/topics/{topic}/send", _send, 201),
    ("GET", "/api/topics/{topic}/messages/{msg_id:path}", _message, 200),
    ("GET", "/api/groups", _groups, 200),
    ("GET", "/api/groups/{group}", _group, 200),
    ("POST", "/api/groups/{group}/reset", _reset, 200),
    ("POST", "/api/groups/{group}/pause", _pause, 200),
    ("POST", "/api/groups/{group}/resume", _resume, 200),
    ("GET", "/api/groups/{group}/dlq", _dlq, 200),
    ("POST", "/api/groups/{group}/dlq/resend", _resend, 200),
    ("GET", "/api/messages", _messages, 200),
    ("GET", "/api/timers", _read(service.timer_backlog), 200),
    ("GET", "/api/transactions/half", _read(service.half_backlog), 200),
    ("GET", "/api/transactions/discarded", _discarded, 200),
]

routes: list[BaseRoute] = [
    *(Route(path, _endpoint(view, status=status), methods=[method]) for method, path, view, status in ROUTES),
    Route("/api/{rest:path}", _not_found, methods=["GET", "POST"]),
]
