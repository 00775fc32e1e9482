"""Operational scripts: ``stack.py`` (the compose topology as local processes), ``compose_check.py``
and ``docs_hooks.py`` (the documentation site's MkDocs hooks)."""
