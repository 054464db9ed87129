"""``--redact``: removes the home path, user name, host name and secret-looking environment values
from a Report before any format is rendered, and shows paths relative to the script's folder.

Works on the data, not on the rendered text, so every format (html, json, md, sarif) gets the same
redaction and no escaping gets in the way.
"""

from __future__ import annotations

import dataclasses
import getpass
import os
import re
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rnndoctor.engine import Report, RuleOutcome

# Environment variables whose values are removed wherever they appear.
_SECRET_NAME = re.compile(r"TOKEN|SECRET|PASSWORD|PASSWD|KEY|AUTH|CREDENTIAL|PRIVATE", re.I)
_MIN_SECRET_LEN = 6  # shorter values would match ordinary words (documented in the README)
# Secret literals in the script's own text (code context, script.log): a quoted string assigned to
# a secret-named variable or keyword (api_key = "sk-..."), and an upper-case NAME=value as
# environment dumps and config printouts show it (API_KEY=sk-...). Unquoted code such as
# `tokenizer = Tokenizer(...)` is left alone. The secret word ends its name or a part of it
# (hf_token, API_KEY_V2, mysecret, secretKey): tokenizer_name and num_tokens hold no secret,
# and a value taken for one would be removed from every report wherever it appears (a review).
_SECRET_WORD = r"(?:TOKEN|SECRET|PASSWORD|PASSWD|API_?KEY|ACCESS_?KEY|CREDENTIAL|PRIVATE_?KEY)"
# what may follow the secret word in a name: another part after "_" (hf_token_v2), digits
# (API_KEY2), or a camelCase part (secretKey: a capital after a lower-case letter, so not
# TOKENIZER)
_NAME_REST = r"(?:_\w*|\d\w*|(?-i:(?<=[a-z])[A-Z])\w*)?\b"
_QUOTED_SECRET = re.compile(
    rf"(\b\w*{_SECRET_WORD}{_NAME_REST}[\"']?\s*[:=]\s*)([\"'])([^\"'\s]{{{_MIN_SECRET_LEN},}})\2",
    re.I,
)
_ASSIGNED_SECRET = re.compile(
    rf"(\b[A-Z0-9_]*{_SECRET_WORD}(?:[_0-9][A-Z0-9_]*)?=)([^\s\"',;]{{{_MIN_SECRET_LEN},}})"
)
# A secret-named environment variable's default in the script: os.environ.get("HF_TOKEN",
# "hf_...") or os.getenv("API_KEY", "sk-...").
_DEFAULT_SECRET = re.compile(
    rf"(?:getenv|environ\.get)\(\s*[\"']\w*{_SECRET_WORD}{_NAME_REST}[\"']\s*,\s*([\"'])"
    rf"([^\"'\s]{{{_MIN_SECRET_LEN},}})\1",
    re.I,
)
_MAX_SOURCE_FILES = 50  # the script folder's other .py files read for secret literals, at most
_MAX_SOURCE_BYTES = 2**20  # a larger file is not read for them


def _names() -> list[tuple[str, str]]:
    """(value, label) for the user name and the host names of this machine."""
    names = []
    try:
        names.append((getpass.getuser(), "<user>"))
    except Exception:  # no user name in this environment
        pass
    host = socket.gethostname()
    names += [(h, "<host>") for h in {host, host.split(".")[0]} if h]
    return names


def script_secrets(script: str | os.PathLike | None) -> list[str]:
    """The values of the secret literals in the script's text and in the other ``.py`` files
    of its folder (a ``config.py`` it imports; at most :data:`_MAX_SOURCE_FILES` files of
    :data:`_MAX_SOURCE_BYTES` each): ``api_key = "sk-..."`` -> ``sk-...``
    (:data:`_QUOTED_SECRET`), and a secret-named environment variable's default
    (``os.getenv("HF_TOKEN", "hf_...")``), longest first, so that the script printing one
    (``print(f"using {api_key}")``, a traceback's local) loses it in ``script.log`` and the
    reports too; empty where the script cannot be read."""
    if not script or not Path(script).is_file():
        return []
    path = Path(script)
    others = sorted(p for p in path.parent.glob("*.py") if p != path) if path.parent else []
    found: set[str] = set()
    for source in [path, *others[:_MAX_SOURCE_FILES]]:
        try:
            if source.stat().st_size > _MAX_SOURCE_BYTES:
                continue
            text = source.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        found |= {m.group(3) for m in _QUOTED_SECRET.finditer(text)}
        found |= {m.group(2) for m in _DEFAULT_SECRET.finditer(text)}
    return sorted(found, key=len, reverse=True)


def make_scrubber(
    base_dir: str | None, cwd: str | None = None, script: str | os.PathLike | None = None
) -> Callable[[str], str]:
    """A function that redacts one string (see module doc).

    Args:
        base_dir: the script's folder; paths under it become relative to it.
        cwd: the folder the check ran in; paths under it become relative to the script's folder
            too (``../lib/helpers.py``).
        script: the user's script: the values of its secret literals (:func:`script_secrets`)
            are removed wherever they appear, not only beside their name.
    """
    home = str(Path.home())
    secrets = [
        (value, f"<redacted:{name}>")
        for name, value in os.environ.items()
        if _SECRET_NAME.search(name) and len(value) >= _MIN_SECRET_LEN
    ]
    # a literal's value wherever it appears, as a whole word: "sk-live-9f8e" in a log line
    literals = [
        (re.compile(rf"(?<![\w-]){re.escape(value)}(?![\w-])"), "<redacted>")
        for value in script_secrets(script)
    ]
    # Not inside a longer run of letters and digits: a host named "vm" must not turn "kvm" into
    # "k<host>", but "alice-exp" and "alice_runs" in a path do lose "alice".
    words = [
        (re.compile(rf"(?<![A-Za-z0-9]){re.escape(value)}(?![A-Za-z0-9])"), label)
        for value, label in sorted(_names(), key=lambda n: -len(n[0]))
    ]
    # (folder, what it becomes): every path ends up relative to the script's folder
    folders = []
    if base_dir and base_dir.rstrip("/"):
        folders.append((base_dir.rstrip("/"), "."))
        if cwd and cwd.rstrip("/") and cwd.rstrip("/") != base_dir.rstrip("/"):
            folders.append((cwd.rstrip("/"), os.path.relpath(cwd, base_dir)))

    def scrub(text: str) -> str:
        for value, label in secrets:
            text = text.replace(value, label)
        for pattern, label in literals:
            text = pattern.sub(label, text)
        text = _QUOTED_SECRET.sub(r"\1\2<redacted>\2", text)
        text = _ASSIGNED_SECRET.sub(r"\1<redacted>", text)
        for folder, relative in folders:
            text = text.replace(folder + "/", "" if relative == "." else relative + "/")
            text = re.sub(rf"{re.escape(folder)}(?![\w.-])", relative, text)
        if home and home != "/":
            text = re.sub(rf"{re.escape(home)}(?=/|\b|$)", "~", text)
        for pattern, label in words:
            text = pattern.sub(label, text)
        return text

    return scrub


def scrub_strings(value: Any, scrub: Callable[[str], str]) -> Any:
    """``value`` with ``scrub`` applied to every string in it, dict keys included: dataclasses
    (copied with ``dataclasses.replace``), lists, tuples and dicts are walked; other values are
    kept as they are."""
    if isinstance(value, str):
        return scrub(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        changes = {
            f.name: scrub_strings(getattr(value, f.name), scrub) for f in dataclasses.fields(value)
        }
        return dataclasses.replace(value, **changes)
    if isinstance(value, list):
        return [scrub_strings(v, scrub) for v in value]
    if isinstance(value, tuple):
        return tuple(scrub_strings(v, scrub) for v in value)
    if isinstance(value, dict):
        return {
            scrub(k) if isinstance(k, str) else k: scrub_strings(v, scrub) for k, v in value.items()
        }
    return value


def redact_report(report: Report) -> Report:
    """A redacted copy of ``report``: facts, findings, rule reasons (rule docs are static) and
    the verification (``--verify``)."""
    script = report.facts.run.script
    cwd = report.facts.run.cwd or None
    scrub = make_scrubber(
        os.path.dirname(script) if script and script.startswith("/") else None,
        cwd,
        os.path.join(cwd or "", script) if script else None,
    )
    facts = scrub_strings(report.facts, scrub)
    facts.run.notes.append("redacted: home path, user name, host name and secret values removed")
    outcomes = [
        RuleOutcome(
            rule=o.rule,
            status=o.status,
            reason=scrub(o.reason) if o.reason else o.reason,
            findings=[scrub_strings(f, scrub) for f in o.findings],
            needs_gpu=o.needs_gpu,
        )
        for o in report.outcomes
    ]
    verification = report.verification
    if verification is not None:
        verification = verification.scrubbed(lambda doc: scrub_strings(doc, scrub))
    return Report(facts=facts, outcomes=outcomes, verification=verification)


def redact_file(
    path: str | os.PathLike,
    base_dir: str | None,
    cwd: str | None = None,
    script: str | os.PathLike | None = None,
) -> None:
    """Redacts a text file in place, line by line (``script.log`` after ``--redact``).

    The same scrubber as the reports (home path, user and host names, secret values, the
    values of ``script``'s secret literals; paths under the script's folder or ``cwd`` made
    relative). Bytes that are not UTF-8 are kept as they are (``surrogateescape``). The file is
    replaced atomically.

    Raises:
        OSError: the file cannot be read or written.
    """
    scrub = make_scrubber(base_dir, cwd, script)
    path = Path(path)
    tmp = path.with_name(path.name + ".redacting")
    with (
        open(path, encoding="utf-8", errors="surrogateescape", newline="") as src,
        open(tmp, "w", encoding="utf-8", errors="surrogateescape", newline="") as dst,
    ):
        for line in src:
            dst.write(scrub(line))
    tmp.replace(path)
