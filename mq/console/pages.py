"""The console's HTML pages: server-rendered Jinja2 templates over the same functions the JSON API
uses (:mod:`mq.console.service`), with htmx for the parts that refresh and uPlot for the charts.

``routes`` is what the app mounts. Every change is a POST form carrying the CSRF token the guard
(:mod:`mq.console.auth`) puts in ``request.state.csrf_token``; in read-only mode no change control is
drawn and the guard and the service refuse the change anyway (403). A failed request shows the error
page with the service's message and the status the API would answer (400, 403, 404, 409, 503).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from mq.console import service, views
from mq.console.api import console_of, status_of
from mq.console.service import BadInput
from mq.console.templating import STATIC_DIR, make_templates
from mq.errors import MQBrokerError, MQClientError

log = logging.getLogger("mq.console")

templates = make_templates()

Handler = Callable[[Request], Awaitable[Response]]

#: The navigation bar: (path, label); a page marks its own entry with ``aria-current``.
NAV = [
    ("/", "Overview"),
    ("/topics", "Topics"),
    ("/groups", "Groups"),
    ("/messages", "Messages"),
    ("/dlq", "Dead letters"),
    ("/transactions", "Transactions and timers"),
]


async def _call(request: Request, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``fn(console, *args, **kwargs)`` in the thread pool (the service is synchronous)."""
    return await run_in_threadpool(fn, console_of(request), *args, **kwargs)


def render(request: Request, template: str, *, status_code: int = 200, nav: str = "", **context: Any) -> Response:
    """``template`` with what every page needs: the console's settings, the CSRF token, the navigation."""
    console = console_of(request)
    base = {
        "info": service.info(console),
        "read_only": console.read_only,
        "csrf": getattr(request.state, "csrf_token", ""),
        "nav": NAV,
        "current": nav,
    }
    return templates.TemplateResponse(request, template, base | context, status_code=status_code)


def page(nav: str) -> Callable[[Handler], Handler]:
    """A page handler whose refusals (bad input, not found, read-only, store down) become the error page."""

    def wrap(handler: Handler) -> Handler:
        @functools.wraps(handler)
        async def guarded(request: Request) -> Response:
            try:
                return await handler(request)
            except (MQClientError, MQBrokerError) as e:
                if isinstance(e, MQBrokerError):
                    log.warning("%s %s: %s", request.method, request.url.path, e)
                status = status_of(e)
                return render(request, "error.html", status_code=status, nav=nav, error=str(e), status=status)

        return guarded

    return wrap


async def _form(request: Request) -> dict[str, str]:
    """A POST form's text fields (file uploads are refused: no form here has one)."""
    form: FormData = await request.form()
    out: dict[str, str] = {}
    for name, value in form.multi_items():
        if not isinstance(value, str):
            raise BadInput(f"field {name!r} must be text, not a file")
        out[name] = value
    return out


def _query(request: Request, name: str, default: str = "") -> str:
    return request.query_params.get(name, default)


# -- overview ---------------------------------------------------------------------------------------


@page("/")
async def overview(request: Request) -> Response:
    data, busiest = await _call(request, views.overview_with_busiest)
    return render(request, "overview.html", nav="/", overview=data, busiest=busiest)


@page("/")
async def overview_live(request: Request) -> Response:
    """The overview's figures alone: htmx swaps them in every few seconds."""
    data, busiest = await _call(request, views.overview_with_busiest)
    return render(request, "_overview_live.html", nav="/", overview=data, busiest=busiest)


@page("/")
async def doctor(request: Request) -> Response:
    checks = await _call(request, service.doctor)
    return render(request, "_doctor.html", nav="/", checks=checks)


# -- topics -----------------------------------------------------------------------------------------


@page("/topics")
async def topics(request: Request) -> Response:
    search, system = _query(request, "search"), _query(request, "system") == "1"
    found = await _call(request, service.topics, search=search, page=_query(request, "page", "1"), system=system)
    return render(request, "topics.html", nav="/topics", found=found, search=search, system=system)


@page("/topics")
async def create_topic(request: Request) -> Response:
    form = await _form(request)
    row = await _call(
        request,
        service.create_topic,
        form.get("topic", ""),
        read_queues=form.get("read_queues", ""),
        write_queues=form.get("write_queues", ""),
        perm=form.get("perm", ""),
        order=form.get("order") == "on",
    )
    return await _topic_page(request, row.name, done=f"Topic {row.name} created.")


@page("/topics")
async def topic(request: Request) -> Response:
    return await _topic_page(request, request.path_params["topic"])


async def _topic_page(request: Request, name: str, *, done: str = "", **context: Any) -> Response:
    detail = await _call(request, service.topic_detail, name)
    return render(request, "topic.html", nav="/topics", detail=detail, done=done, **context)


@page("/topics")
async def lite_topics(request: Request) -> Response:
    """A lite parent's live lite topics by prefix, a page at a time: the "next page" link carries the
    Admin's cursor (SCAN goes one way: there is a first page and a next one, no previous)."""
    found = await _call(
        request,
        service.lite_topics,
        request.path_params["topic"],
        prefix=_query(request, "prefix"),
        cursor=_query(request, "cursor"),
    )
    return render(request, "lite.html", nav="/topics", found=found)


@page("/topics")
async def update_topic(request: Request) -> Response:
    form = await _form(request)
    name = request.path_params["topic"]
    await _call(
        request,
        service.update_topic,
        name,
        read_queues=form.get("read_queues") or None,
        write_queues=form.get("write_queues") or None,
        perm=form.get("perm") or None,
    )
    return await _topic_page(request, name, done=f"Topic {name} updated.")


@page("/topics")
async def delete_topic(request: Request) -> Response:
    name = await _call(request, service.delete_topic, request.path_params["topic"])
    found = await _call(request, service.topics)
    return render(request, "topics.html", nav="/topics", found=found, search="", system=False, done=f"Topic {name} deleted.")


@page("/topics")
async def send_message(request: Request) -> Response:
    form = await _form(request)
    name = request.path_params["topic"]
    sent = await _call(
        request, service.send_test_message, name, body=form.get("body", ""), tags=form.get("tags") or None, keys=form.get("keys")
    )
    return await _topic_page(
        request, name, done=f"Sent message {sent.msg_id} to queue {sent.queue_id} at offset {sent.queue_offset}."
    )


# -- groups -----------------------------------------------------------------------------------------


@page("/groups")
async def groups(request: Request) -> Response:
    search = _query(request, "search")
    found = await _call(request, service.groups, search=search, page=_query(request, "page", "1"))
    return render(request, "groups.html", nav="/groups", found=found, search=search)


@page("/groups")
async def group(request: Request) -> Response:
    return await _group_page(request, request.path_params["group"])


async def _group_page(request: Request, name: str, *, done: str = "", **context: Any) -> Response:
    detail = await _call(request, service.group_detail, name)
    return render(request, "group.html", nav="/groups", detail=detail, done=done, **context)


@page("/groups")
async def pause_group(request: Request) -> Response:
    name = request.path_params["group"]
    enable = request.url.path.endswith("/resume")
    await _call(request, service.set_consume_enable, name, enable)
    return await _group_page(request, name, done=f"Group {name} {'resumed' if enable else 'paused'}.")


@page("/groups")
async def reset_offset(request: Request) -> Response:
    form = await _form(request)
    name = request.path_params["group"]
    reset = await _call(request, service.reset_offset, name, form.get("topic", ""), form.get("timestamp", ""))
    return await _group_page(request, name, done=f"Offsets of {name} on {reset.topic} reset.", reset=reset)


# -- messages ---------------------------------------------------------------------------------------


@page("/messages")
async def messages(request: Request) -> Response:
    """The message search. A store-time range without an end gets one, now: the pager's links carry it,
    so messages stored meanwhile do not shift the pages (the order is queue id, then offset)."""
    criteria = {k: _query(request, k) for k in ("topic", "msg_id", "key", "begin", "end")}
    if criteria["begin"] and not criteria["end"] and not criteria["msg_id"] and not criteria["key"]:
        criteria["end"] = datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    found = None
    if criteria["topic"]:
        found = await _call(
            request,
            service.search_messages,
            criteria["topic"],
            msg_id=criteria["msg_id"] or None,
            key=criteria["key"] or None,
            begin=criteria["begin"] or None,
            end=criteria["end"] or None,
            page=_query(request, "page", "1"),
        )
    topic_names = await _call(request, views.user_topics)
    return render(request, "messages.html", nav="/messages", found=found, criteria=criteria, topic_names=topic_names)


@page("/messages")
async def message(request: Request) -> Response:
    # the id is the rest of the path (it may hold "/"), or ?id= for "." and ".." (see templating.message_url)
    msg_id = request.path_params["msg_id"] or _query(request, "id")
    detail = await _call(request, service.message_detail, request.path_params["topic"], msg_id)
    return render(request, "message.html", nav="/messages", detail=detail, view=_query(request, "view", "text"))


# -- dead letters -----------------------------------------------------------------------------------


@page("/dlq")
async def dlq_index(request: Request) -> Response:
    table = await _call(request, service.lag_table)
    return render(request, "dlq_index.html", nav="/dlq", dlq=table.dlq)


@page("/dlq")
async def dlq(request: Request) -> Response:
    return await _dlq_page(request, request.path_params["group"])


async def _dlq_page(request: Request, name: str, **context: Any) -> Response:
    letters = await _call(request, service.dlq, name, page=_query(request, "page", "1"))
    return render(request, "dlq.html", nav="/dlq", group=name, letters=letters, **context)


@page("/dlq")
async def resend(request: Request) -> Response:
    name = request.path_params["group"]
    form: FormData = await request.form()
    ids = [str(v) for v in form.getlist("msg_id")]
    if form.get("all") != "1" and not ids:
        raise BadInput("tick the dead letters to resend, or use “Resend all”")
    result = await _call(request, service.resend_dlq, name, msg_ids=None if form.get("all") == "1" else ids)
    return await _dlq_page(request, name, result=result)


# -- transactions and timers ------------------------------------------------------------------------


@page("/transactions")
async def transactions(request: Request) -> Response:
    discarded = await _call(request, service.discarded, page=_query(request, "page", "1"))
    timers = await _call(request, service.timer_backlog)
    halves = await _call(request, service.half_backlog)
    return render(request, "transactions.html", nav="/transactions", discarded=discarded, timers=timers, halves=halves)


routes: list[BaseRoute] = [
    Route("/", overview, name="overview"),
    Route("/overview/live", overview_live, name="overview_live"),
    Route("/overview/doctor", doctor, name="doctor"),
    Route("/topics", topics, name="topics"),
    Route("/topics", create_topic, methods=["POST"], name="create_topic"),
    Route("/topics/{topic}", topic, name="topic"),
    Route("/topics/{topic}/lite", lite_topics, name="lite_topics"),
    Route("/topics/{topic}/update", update_topic, methods=["POST"], name="update_topic"),
    Route("/topics/{topic}/delete", delete_topic, methods=["POST"], name="delete_topic"),
    Route("/topics/{topic}/send", send_message, methods=["POST"], name="send_message"),
    Route("/groups", groups, name="groups"),
    Route("/groups/{group}", group, name="group"),
    Route("/groups/{group}/pause", pause_group, methods=["POST"], name="pause_group"),
    Route("/groups/{group}/resume", pause_group, methods=["POST"], name="resume_group"),
    Route("/groups/{group}/reset", reset_offset, methods=["POST"], name="reset_offset"),
    Route("/messages", messages, name="messages"),
    Route("/messages/{topic}/{msg_id:path}", message, name="message"),
    Route("/dlq", dlq_index, name="dlq_index"),
    Route("/dlq/{group}", dlq, name="dlq"),
    Route("/dlq/{group}/resend", resend, methods=["POST"], name="resend"),
    Route("/transactions", transactions, name="transactions"),
    Mount("/static", app=StaticFiles(directory=str(STATIC_DIR)), name="static"),
]
