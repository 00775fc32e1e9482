"""``mq proxy`` against a careless or hostile client (issue 29): a SendMessage request is stored whole
or refused with the store unchanged, the signature expires, every client-controlled field is
bounded, message ids are one safe path segment, a bad born time is a client error, a store that is
down is said once, and numeric options are checked. Standalone and cluster where writes are
concerned; real gRPC calls against real redis-server processes."""

from __future__ import annotations

import contextlib
import logging
import os
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from mq import Admin
from mq.cli.main import build_parser
from mq.consumer.types import ConsumeFromWhere
from mq.errors import MQBrokerError, MQClientError
from mq.proxy import auth
from mq.proxy.codes import ProxyError
from mq.proxy.pb import definition, service
from mq.proxy.server import ProxyConfig, ProxyServer
from mq.proxy.settings import Limits
from scheduler.config import BrokerConfig
from tests.helpers import snapshot, stays_quiet_async, wait_for_async
from tests.proxy.test_proxy import Running, _message, running
from tests.servers import RedisClusterProcs, RedisServer, free_port

pytestmark = pytest.mark.anyio
Code = definition.Code


@pytest.fixture(params=["standalone", "cluster"])
def store_url(request: pytest.FixtureRequest) -> str:
    """The URL of the session's standalone server or 3-master cluster."""
    if request.param == "standalone":
        server: RedisServer = request.getfixturevalue("redis_server")
        return server.url
    cluster: RedisClusterProcs = request.getfixturevalue("redis_cluster")
    return cluster.url


@pytest.fixture
def own_server() -> Iterator[RedisServer]:
    """A fresh server of the test's own, that it may stop and start again."""
    with RedisServer(appendonly=True) as server:
        yield server


def _topics(url: str) -> str:
    """A fresh namespace with topics T and T2 (2 queues each), RO (read-only) and group G."""
    namespace = f"ph{uuid.uuid4().hex[:8]}"
    with contextlib.closing(Admin(url, namespace)) as admin:
        admin.create_topic("T", read_queues=2, write_queues=2)
        admin.create_topic("T2", read_queues=2, write_queues=2)
        admin.create_topic("RO", read_queues=2, write_queues=2, perm="r")
        admin.create_group("G", consume_from_where=ConsumeFromWhere.FIRST_OFFSET)
    return namespace


@contextlib.asynccontextmanager
async def endpoint(url: str, **options: Any) -> AsyncIterator[Running]:
    async with running(url, _topics(url), **options) as r:
        yield r


def _stored(url: str, namespace: str, topic: str) -> list[Any]:
    with contextlib.closing(Admin(url, namespace)) as admin:
        return [m for q in range(2) for m in admin.messages(topic, q, 0)]


# -- finding 2: all or nothing ----------------------------------------------------------------------


async def test_a_request_naming_a_read_only_topic_stores_nothing(store_url: str) -> None:
    async with endpoint(store_url) as r:
        before = r.unchanged()
        request = service.SendMessageRequest(messages=[_message("T", b"first"), _message("T2", b"second"), _message("RO")])
        res = await r.stub.SendMessage(request)
        assert res.status.code == Code.Value("FORBIDDEN"), res.status.message
        assert r.unchanged() == before  # before: "first" and "second" were stored, and the client retried them


async def test_the_normal_messages_of_a_request_go_to_one_queue_in_one_call(store_url: str) -> None:
    async with endpoint(store_url) as r:
        msgs = [_message("T", f"m{i}".encode()) for i in range(5)]
        res = await r.stub.SendMessage(service.SendMessageRequest(messages=msgs))
        assert res.status.code == Code.Value("OK")
        assert [e.offset for e in res.entries] == [0, 1, 2, 3, 4]  # one queue, consecutive: one put script
        stored = _stored(r.url, r.namespace, "T")
        assert [(m.msg_id, m.body) for m in stored] == [(m.system_properties.message_id, m.body) for m in msgs]
        assert {m.queue_id for m in stored} == {stored[0].queue_id}


async def test_a_write_failing_part_way_answers_which_messages_were_stored(store_url: str) -> None:
    """Two message groups on different queues: two store calls; the second fails (the store stops
    answering there). The answer says the first message is stored (with its offset), the second not."""
    async with endpoint(store_url) as r:
        backend = r.server.backend
        real_call = backend.call
        puts: list[tuple[Any, ...]] = []

        async def failing_second_put(name: str, *args: Any, **kwargs: Any) -> Any:
            if name == "put":
                puts.append(args)
                if len(puts) == 2:
                    raise MQBrokerError("store error while storing: Connection reset by peer (injected)")
            return await real_call(name, *args, **kwargs)

        backend.call = failing_second_put  # type: ignore[method-assign]
        a = _message("T", b"a", message_type=definition.FIFO, message_group="a")
        b = _message("T", b"b", message_type=definition.FIFO, message_group="x")  # a, x hash to queues 0, 1 of 2
        res = await r.stub.SendMessage(service.SendMessageRequest(messages=[a, b]))
        backend.call = real_call  # type: ignore[method-assign]
        assert [p[1] for p in puts] == [0, 1]
        assert res.status.code == Code.Value("MULTIPLE_RESULTS"), res.status.message
        first, second = res.entries
        assert (first.status.code, first.message_id, first.offset) == (Code.Value("OK"), a.system_properties.message_id, 0)
        assert second.status.code == Code.Value("INTERNAL_SERVER_ERROR") and "not stored" in second.status.message
        assert [m.msg_id for m in _stored(r.url, r.namespace, "T")] == [a.system_properties.message_id]


async def test_a_request_whose_first_write_fails_stores_nothing_and_answers_the_error(
    own_server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    async with endpoint(own_server.url) as r:
        before = r.unchanged()
        with own_server.client() as client, caplog.at_level(logging.INFO, logger="mq.proxy"):
            client.config_set("maxmemory", 1)  # every write refused: OOM
            try:
                res = await r.stub.SendMessage(service.SendMessageRequest(messages=[_message("T"), _message("T")]))
            finally:
                client.config_set("maxmemory", 0)
        assert res.status.code == Code.Value("INTERNAL_SERVER_ERROR") and "OOM" in res.status.message, res.status
        assert list(res.entries) == []
        assert r.unchanged() == before
        # a store that answers with an error is not an outage: logged with the request, as an error
        assert [rec.getMessage() for rec in caplog.records if rec.levelno >= logging.ERROR] == [
            f"SendMessage failed: {res.status.message}"
        ]


# -- finding 9: AK/SK ------------------------------------------------------------------------------


def _signed(access_key: str, secret: str, date_time: str) -> tuple[tuple[str, str], ...]:
    value = f"MQv2-HMAC-SHA1 Credential={access_key}, SignedHeaders=x-mq-date-time, Signature={auth.sign(secret, date_time)}"
    return (("x-mq-date-time", date_time), ("authorization", value))


async def test_a_signature_must_be_of_a_current_date_in_rocketmqs_format(redis_server: RedisServer) -> None:
    async with endpoint(redis_server.url, credentials=auth.Credentials("ak", "sk")) as r:
        req = service.SendMessageRequest(messages=[_message("T")])
        now = time.time()

        def at(offset_s: float) -> str:
            return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(now + offset_s))

        before = r.unchanged()
        for date_time in ("not-a-date", "20261327T000000Z", at(0) + " ", at(-16 * 60), at(16 * 60), "99991231T235959Z"):
            res = await r.stub.SendMessage(req, metadata=_signed("ak", "sk", date_time))
            assert res.status.code == Code.Value("UNAUTHORIZED"), date_time
        assert r.unchanged() == before
        for offset_s in (-14 * 60, 0, 14 * 60):
            res = await r.stub.SendMessage(req, metadata=_signed("ak", "sk", at(offset_s)))
            assert res.status.code == Code.Value("OK"), (offset_s, res.status.message)


def test_the_skew_window_is_the_operators_choice() -> None:
    """A client signing its local time labelled Z (rocketmq-python-client 5.1 in UTC+8) is refused by
    default, with a message saying why, and accepted when the operator widens the window."""
    now = 1_800_000_000.0
    local = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(now + 8 * 3600))
    headers = dict(_signed("ak", "sk", local))
    with pytest.raises(ProxyError, match="TZ=UTC"):
        auth.Credentials("ak", "sk").check(headers, now_s=now)
    auth.Credentials("ak", "sk", max_skew_s=9 * 3600).check(headers, now_s=now)
    with pytest.raises(ValueError, match="max_skew_s"):
        auth.Credentials("ak", "sk", max_skew_s=float("nan"))


async def test_an_unknown_access_key_and_a_wrong_signature_get_the_same_answer(redis_server: RedisServer) -> None:
    async with endpoint(redis_server.url, credentials=auth.Credentials("ak", "sk")) as r:
        req = service.QueryRouteRequest()
        req.topic.name = "T"
        now = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        unknown = await r.stub.QueryRoute(req, metadata=_signed("other", "sk", now))
        wrong = await r.stub.QueryRoute(req, metadata=_signed("ak", "wrong", now))
        assert unknown.status == wrong.status and unknown.status.code == Code.Value("UNAUTHORIZED")
        assert "other" not in unknown.status.message


# -- finding 11: an open endpoint warns ------------------------------------------------------------


@pytest.mark.parametrize("keys", [False, True])
def test_an_endpoint_on_every_address_without_keys_warns(keys: bool) -> None:
    """The store is down here, so the command exits at its store check after the warning (nothing is bound)."""
    args = [sys.executable, "-m", "mq", "proxy", "--url", f"redis://127.0.0.1:{free_port()}", "--host", "0.0.0.0", "--port", "0"]
    env = {"MQ_PROXY_ACCESS_KEY": "ak", "MQ_PROXY_SECRET_KEY": "sk"} if keys else {}
    done = subprocess.run(args, capture_output=True, text=True, timeout=60, env={**os.environ, **env})
    assert done.returncode == 1, done.stdout + done.stderr
    assert ("WARNING: mq proxy listens on 0.0.0.0 without --access-key" in done.stderr) is not keys, done.stderr


# -- finding 12: every client-controlled field bounded ---------------------------------------------


def _over_limits() -> list[tuple[str, Any]]:
    return [
        ("ILLEGAL_MESSAGE_GROUP", _message("T", message_type=definition.FIFO, message_group="g" * 65)),
        ("ILLEGAL_MESSAGE_GROUP", _message("T", message_type=definition.FIFO, message_group="g\n1")),
        ("BAD_REQUEST", _message("T", b"x", trace_context="t" * (4 * 1024 * 1024))),
        ("BAD_REQUEST", _message("T", trace_context="t" * 1025)),
        ("BAD_REQUEST", _message("T", born_host="h" * 256)),
        ("BAD_REQUEST", _message("T", born_host="host\x1b[2J")),
        ("MESSAGE_PROPERTIES_TOO_LARGE", _message("T", keys=["k" * 9000, "k" * 9000])),
        ("BAD_REQUEST", _message("T", tag="a|b")),
        ("ILLEGAL_MESSAGE_TAG", _message("T", tag="a\x1b[2J")),
        ("ILLEGAL_MESSAGE_KEY", _message("T", keys=["ok", "k\x00"])),
    ]


@pytest.mark.parametrize("case", range(len(_over_limits())))
async def test_system_fields_over_their_limits_are_refused_and_store_nothing(store_url: str, case: int) -> None:
    expected, message = _over_limits()[case]
    async with endpoint(store_url) as r:
        before = r.unchanged()
        res = await r.stub.SendMessage(service.SendMessageRequest(messages=[_message("T", b"fine"), message]))
        assert res.status.code == Code.Value(expected), res.status.message
        assert r.unchanged() == before


async def test_system_fields_at_their_limits_are_stored_and_read_back_whole(store_url: str) -> None:
    async with endpoint(store_url) as r:
        group, trace, host = "g" * 64, "t" * 1024, "h" * 255
        msg = _message("T", b"x", message_type=definition.FIFO, message_group=group, trace_context=trace, born_host=host)
        res = await r.stub.SendMessage(service.SendMessageRequest(messages=[msg]))
        assert res.status.code == Code.Value("OK"), res.status.message
        [stored] = _stored(r.url, r.namespace, "T")
        system = stored.system_properties
        assert (system["__SHARDINGKEY"], system["TRACE_CONTEXT"], system["BORN_HOST"]) == (group, trace, host)


@pytest.mark.parametrize(
    "field,value", [("version", "v" * 65), ("hostname", "h" * 256), ("platform", "p" * 257), ("hostname", "a\x00b")]
)
async def test_a_consumers_user_agent_over_its_limits_is_refused_and_not_kept(
    redis_server: RedisServer, field: str, value: str
) -> None:
    async with endpoint(redis_server.url) as r:
        before = r.unchanged()
        settings = definition.Settings(client_type=definition.SIMPLE_CONSUMER)
        settings.subscription.group.name = "G"
        settings.subscription.subscriptions.add().topic.name = "T"
        setattr(settings.user_agent, field, value)

        async def send() -> AsyncIterator[Any]:
            yield service.TelemetryCommand(settings=settings)

        call = r.stub.Telemetry(send(), metadata=(("x-mq-client-id", "client-ua"),))
        reply = await call.read()
        call.cancel()
        assert reply.status.code == Code.Value("BAD_REQUEST") and f"user_agent.{field}" in reply.status.message
        after = {k: v for k, v in r.unchanged().items() if k not in before}
        assert after == {}, after  # no settings copy, no registry entry
        assert not any(b"client-ua" in k for k in snapshot(r.url, r.namespace))


# -- finding 14: message ids are one safe path segment ---------------------------------------------


@pytest.mark.parametrize(
    "msg_id", ["../../topics/T/x", "a/b", "a\\b", "a?b", "a#b", "a%2Fb", "..", ".hidden", "a b", "x\n", "é1", "-a"]
)
async def test_message_ids_with_path_characters_are_refused(redis_server: RedisServer, msg_id: str) -> None:
    async with endpoint(redis_server.url) as r:
        before = r.unchanged()
        res = await r.stub.SendMessage(service.SendMessageRequest(messages=[_message("T", message_id=msg_id)]))
        assert res.status.code == Code.Value("ILLEGAL_MESSAGE_ID"), res.status.message
        assert r.unchanged() == before


async def test_client_message_ids_of_letters_digits_and_separators_are_kept(redis_server: RedisServer) -> None:
    async with endpoint(redis_server.url) as r:
        ids = ["0A1B2C3D4E5F60718293A4B5C6D7E8F9", "order-17_v2.a:b", "x" * 128]
        res = await r.stub.SendMessage(service.SendMessageRequest(messages=[_message("T", message_id=i) for i in ids]))
        assert res.status.code == Code.Value("OK") and [e.message_id for e in res.entries] == ids
        assert sorted(m.msg_id for m in _stored(r.url, r.namespace, "T")) == sorted(ids)


# -- finding 15: a born time protobuf cannot hold is a client error --------------------------------


@pytest.mark.parametrize("seconds,nanos", [(10**15, 0), (253_402_300_800, 0), (-1, 0), (-(10**12), 0)])
async def test_a_born_timestamp_out_of_range_is_a_client_error(
    redis_server: RedisServer, caplog: pytest.LogCaptureFixture, seconds: int, nanos: int
) -> None:
    async with endpoint(redis_server.url) as r:
        before = r.unchanged()
        msg = _message("T")
        msg.system_properties.born_timestamp.seconds = seconds
        msg.system_properties.born_timestamp.nanos = nanos
        with caplog.at_level(logging.INFO, logger="mq.proxy"):
            res = await r.stub.SendMessage(service.SendMessageRequest(messages=[msg]))
        assert res.status.code == Code.Value("BAD_REQUEST") and "born_timestamp" in res.status.message, res.status
        assert not [rec for rec in caplog.records if rec.levelno >= logging.ERROR or rec.exc_info]
        assert r.unchanged() == before


# -- finding 16: a store that is down ---------------------------------------------------------------


async def test_an_endpoint_whose_store_is_down_refuses_to_start_with_a_clear_message() -> None:
    url = f"redis://:hunter2@127.0.0.1:{free_port()}"
    server = ProxyServer(ProxyConfig(url=url, port=0))
    with pytest.raises(MQBrokerError, match="does not answer") as raised:
        await server.start()
    assert "Start Redis or fix --url" in str(raised.value) and "hunter2" not in str(raised.value)
    assert server.port == 0  # nothing bound


def test_mq_proxy_against_a_store_that_is_down_exits_with_one_line() -> None:
    args = [sys.executable, "-m", "mq", "proxy", "--url", f"redis://127.0.0.1:{free_port()}", "--port", "0"]
    done = subprocess.run(args, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert done.stderr.startswith("mq: error: the store does not answer") and "Traceback" not in done.stderr, done.stderr
    assert "Ctrl-C to stop" not in done.stdout


async def test_a_store_outage_is_logged_once_when_it_starts_and_once_when_it_ends(
    own_server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    async with endpoint(own_server.url) as r:
        with caplog.at_level(logging.INFO, logger="mq.proxy"):
            own_server.stop()
            for _ in range(3):
                res = await r.stub.SendMessage(service.SendMessageRequest(messages=[_message("T")]))
                assert res.status.code == Code.Value("INTERNAL_SERVER_ERROR")
            # three rounds of the check-back reader, which retries every second: logged once all the same
            await _sleep(3.5)
            down = [rec for rec in caplog.records if rec.levelno >= logging.WARNING]
            own_server.start()
            await wait_for_async(
                lambda: any(rec.getMessage() == "the store answers again" for rec in caplog.records), 15, "the recovery logged"
            )
            await stays_quiet_async(  # two rounds of the reader: nothing more logged
                lambda: sum(rec.levelno >= logging.WARNING for rec in caplog.records), "the proxy's warnings"
            )
        records = [rec for rec in caplog.records if rec.levelno >= logging.WARNING]
        assert [rec.levelname for rec in down] == ["ERROR"] and "stopped answering" in down[0].getMessage(), down
        assert not [rec for rec in records if rec.exc_info], "no traceback while the store is down"
        assert [rec.getMessage() for rec in records[len(down) :]] == ["the store answers again"]
        res = await r.stub.SendMessage(service.SendMessageRequest(messages=[_message("T")]))
        assert res.status.code == Code.Value("OK")


async def _sleep(seconds: float) -> None:
    import anyio

    await anyio.sleep(seconds)


# -- finding 17: numeric options and config fields ---------------------------------------------------


@pytest.mark.parametrize(
    "argv",
    [
        ["proxy", "--max-body-mib", "0"],
        ["proxy", "--max-body-mib", "-1"],
        ["proxy", "--max-body-mib", "nan"],
        ["proxy", "--max-body-mib", "inf"],
        ["proxy", "--max-body-mib", "65"],
        ["proxy", "--max-delay-h", "-5"],
        ["proxy", "--max-delay-h", "0"],
        ["proxy", "--max-delay-h", "nan"],
        ["proxy", "--port", "70000"],
        ["proxy", "--port", "-1"],
        ["proxy", "--tls-port", "65536"],
        ["proxy", "--metrics-port", "0"],
        ["proxy", "--max-clock-skew-min", "0"],
        ["proxy", "--max-clock-skew-min", "nan"],
        ["broker", "--retention-h", "0"],
        ["broker", "--retention-h", "-1"],
        ["broker", "--retention-h", "nan"],
        ["broker", "--retention-h", "inf"],
        ["broker", "--metrics-port", "99999"],
    ],
)
def test_careless_numeric_options_are_refused_when_parsed(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(argv)
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert f"argument {argv[1]}: {argv[2]}" in err and ("out of range" in err), err


def test_numeric_options_in_range_are_taken() -> None:
    args = build_parser().parse_args(["proxy", "--max-body-mib", "0.5", "--max-delay-h", "48", "--port", "0"])
    assert (args.max_body_mib, args.max_delay_h, args.port) == (0.5, 48.0, 0)
    assert build_parser().parse_args(["broker", "--retention-h", "0.25"]).retention_h == 0.25


@pytest.mark.parametrize("value", [0.0, -1.0, float("nan"), float("inf")])
def test_broker_config_refuses_non_finite_and_non_positive_durations(value: float) -> None:
    with pytest.raises(MQClientError, match="file_reserved_time_h must be a positive finite number"):
        BrokerConfig(file_reserved_time_h=value)
    with pytest.raises(MQClientError, match="retention_interval_s"):
        BrokerConfig(retention_interval_s=value)
    with pytest.raises(MQClientError, match="timer_batch"):
        BrokerConfig(timer_batch=value)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "kwargs",
    [{"max_body_size": 0}, {"max_body_size": -1}, {"backoff_multiplier": float("nan")}, {"long_polling_s": 0}],
)
def test_endpoint_limits_refuse_values_that_would_refuse_everything(kwargs: dict[str, Any]) -> None:
    with pytest.raises(MQClientError, match="Limits"):
        Limits(**kwargs)


@pytest.mark.parametrize(
    "kwargs", [{"port": -1}, {"port": 70000}, {"tls_port": 65536}, {"max_delay_ms": 0}, {"max_delay_ms": -5}]
)
def test_proxy_config_refuses_bad_ports_and_delays(kwargs: dict[str, Any]) -> None:
    with pytest.raises(MQClientError, match="ProxyConfig"):
        ProxyConfig(**kwargs)
