"""The one jinja2 environment of the reports (HTML report, Markdown report, comparison page).

Autoescaping is on for every template except the Markdown ones (``*.md.j2``), whose user strings
go through the ``md_text`` / ``md_code`` / ``md_block`` filters instead. A new template, or an
included one such as ``_macros.j2``, is therefore escaped unless it is Markdown.
"""

from __future__ import annotations

import functools

import jinja2

from rnndoctor.reports import formatting

FILTERS = {
    "fmt": formatting.format_value,
    "duration": formatting.duration,
    "pct": formatting.pct,
    "ms": formatting.ms,
    "us_as_ms": formatting.us_as_ms,
    "md_text": formatting.md_text,
    "md_code": formatting.md_code,
    "md_command": formatting.md_command,
    "md_block": formatting.md_block,
    "md_numbered": formatting.md_numbered,
}


def _autoescape(name: str | None) -> bool:
    return not (name or "").endswith(".md.j2")


@functools.cache
def environment() -> jinja2.Environment:
    """The shared environment: templates from ``reports/templates``, strict undefined values,
    block tags that leave no blank lines, and the :data:`FILTERS`."""
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("rnndoctor.reports", "templates"),
        autoescape=_autoescape,  # every user-controlled string (layer names, paths) is escaped
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(FILTERS)
    return env
