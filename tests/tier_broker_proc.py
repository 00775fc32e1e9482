"""A broker service with a tier that kills itself (SIGKILL) when its uploader reaches a step: the
crash points of the tier's commit protocol, for tests/tier/test_tier_faults.py.

Usage: python -m tests.tier_broker_proc URL NAMESPACE TIER_URL STEP
STEP: uploading (mid-file), uploaded (before the manifest), recorded (before the trim), trimming
(between trim calls).
"""

from __future__ import annotations

import os
import signal
import sys
import time

from scheduler import BrokerService
from tests.tier_helpers import tier_config


def main() -> None:
    url, namespace, tier_url, step = sys.argv[1:5]
    config = tier_config(tier_url, tier_interval_s=0.2, tier_segment_messages=5000, hot_retention_s=0.001, tier_lease_s=2.0)
    service = BrokerService(url, namespace, config)
    assert service.tier is not None

    def crash(name: str) -> None:
        if name == step:
            os.kill(os.getpid(), signal.SIGKILL)  # kill -9: nothing after this runs

    service.tier.step = crash
    service.start()
    time.sleep(60)  # the test waits for the kill; this is the bound if the step is never reached
    service.shutdown()
    sys.exit(3)


if __name__ == "__main__":
    main()
