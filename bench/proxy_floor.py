"""``mq proxy`` whose SendMessage stores nothing: the floor of ``bench.proxy`` (``python -m bench.proxy_floor
--url URL --port 0``, the options of ``mq proxy``).

Every other RPC is the real endpoint's (routes, settings, heartbeats), so the official clients start
as usual; a SendMessage gets the same frame as a real one (headers, metrics) and an OK answer per
message, without checking, encoding or storing it. What one process serves this way, and the CPU it
spends a message, is what gRPC's Python server and the client cost with a handler that costs
nothing: the part of a send no change to our handler can remove.
"""

from __future__ import annotations

import sys
from typing import Any

from mq.cli import main as cli_main
from mq.proxy import server
from mq.proxy.codes import status
from mq.proxy.pb import service
from mq.proxy.service import MessagingService, RpcCall


class FloorService(MessagingService):
    """The endpoint's handlers, with a SendMessage that answers OK and stores nothing."""

    async def SendMessage(self, request: Any, context: Any) -> Any:
        async def body(_: RpcCall) -> Any:
            entries = [
                service.SendResultEntry(status=status(), message_id=m.system_properties.message_id, offset=0)
                for m in request.messages
            ]
            return service.SendMessageResponse(status=status(), entries=entries)

        return await self._unary("SendMessage", context, service.SendMessageResponse, body)


def main() -> None:
    server.MessagingService = FloorService  # type: ignore[misc]  # this process only: a bench, not a mode of mq proxy
    sys.exit(cli_main(["proxy", *sys.argv[1:]]))


if __name__ == "__main__":
    main()
