"""A producer process that stores a half message and dies (SIGKILL) inside its local transaction.

``python -m tests.tx_proc URL NAMESPACE GROUP TOPIC BODY`` prints the msg id, then kills itself.
"""

from __future__ import annotations

import os
import signal
import sys

from mq import LocalTransactionState, Message, TransactionProducer


def main() -> None:
    url, namespace, group, topic, body = sys.argv[1:6]

    def die(msg, arg):  # type: ignore[no-untyped-def]
        print(arg, flush=True)
        os.kill(os.getpid(), signal.SIGKILL)  # the local transaction never finishes
        return LocalTransactionState.COMMIT_MESSAGE

    producer = TransactionProducer(group, url, namespace=namespace, checker=lambda m: LocalTransactionState.UNKNOW)
    producer.start()
    producer.send_message_in_transaction(Message(topic, body.encode()), die, arg="half stored")


if __name__ == "__main__":
    main()
