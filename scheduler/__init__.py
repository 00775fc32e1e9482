"""The broker service: APScheduler jobs for timers, retention, clean-up and health."""

from scheduler.config import BrokerConfig
from scheduler.service import BrokerService, healthy_brokers

__all__ = ["BrokerConfig", "BrokerService", "healthy_brokers"]
