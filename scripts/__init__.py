"""Operational scripts: ``stack.py`` (the compose topology as local processes) and ``compose_check.py``."""
