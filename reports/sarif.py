"""SARIF 2.1.0 output (``--format sarif``), so that CI code scanning annotates the user's lines.

One run, one result per finding, each with its rule, level and the physical location of the
user's file:line. Paths are relative to the ``%SRCROOT%`` base: the git work tree holding the
script (else the working directory where it holds the script, else the script's folder:
``facts.run.source_root``), which is how code scanning resolves them; paths outside it are
absolute ``file://`` URIs; both percent-encoded, as a URI is. The fix, the evidence and the
estimated gain go into each result's property bag, and after ``--verify`` the fix's
``verification`` (status, estimate, measured speedup with its 90% interval, loss, CPU label, in
the patch; the all-fixes copy's in the invocation's properties). ``<``, ``>`` and ``&`` are
written as JSON ``\\u`` escapes, so that no raw HTML from layer names or paths appears in the
file.

Reference: OASIS, *Static Analysis Results Interchange Format (SARIF) Version 2.1.0*.
"""

from __future__ import annotations

import dataclasses
import json
import os
import urllib.parse
from pathlib import Path
from typing import Any

from rnndoctor.engine import Report
from rnndoctor.findings import Severity
from rnndoctor.reports.verified import VerifiedRow
from rnndoctor.reports.view import FindingView, ReportView, build_view
from rnndoctor.verify.summary import ALL

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
_LEVEL = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "note"}


def _artifact(path: str, root: str | None, script_dir: str | None) -> dict[str, Any]:
    """The artifact location of ``path``, relative to the source root where possible.

    A relative ``path`` is relative to the script's folder (as ``--redact`` writes them), which
    lies at ``script_dir`` under the root.
    """
    if not os.path.isabs(path):
        rel = os.path.normpath(os.path.join(script_dir or ".", path))
        if not rel.startswith(".."):
            return {"uri": _uri(rel), "uriBaseId": "%SRCROOT%"}
        return {"uri": _uri(path)}
    if root and os.path.isabs(root):
        rel = os.path.relpath(path, root)
        if not rel.startswith(".."):
            return {"uri": _uri(rel), "uriBaseId": "%SRCROOT%"}
    return {"uri": Path(path).as_uri()}


def _uri(relative: str) -> str:
    """A relative path as a URI reference (SARIF 2.1.0, 3.10.3: ``uri`` holds one, RFC 3986):
    its characters other than letters, digits, ``/`` and ``-._~`` percent-encoded, UTF-8 for
    the others, as ``Path.as_uri`` encodes an absolute path (a file named ``wrïte <x>.py`` is
    ``wr%C3%AFte%20%3Cx%3E.py``)."""
    return urllib.parse.quote(Path(relative).as_posix(), safe="/")


def _verification(row: VerifiedRow | None) -> dict[str, Any] | None:
    """A result's ``verification`` property (``check --verify``): the fix's status and its
    measurement beside the estimate; None when the fix was not verified."""
    if row is None:
        return None
    item = row.item
    return {
        "status": row.status,
        "statusText": row.status_text,
        "estimate": item.estimate,
        "measured": item.measured,
        "low": item.low,
        "high": item.high,
        "level": 0.9,
        "pairs": item.pairs,
        "loss": item.loss,
        "cpuLabel": item.cpu_label,
        "inPatch": item.in_patch,
    }


def _result(item: FindingView, index: int, root: str | None, script_dir: str | None) -> dict:
    finding = item.finding
    result: dict[str, Any] = {
        "ruleId": finding.rule_id,
        "ruleIndex": index,
        "level": _LEVEL[finding.severity],
        "message": {"text": finding.message},
        "properties": {
            "layer": finding.layer,
            "evidence": [dataclasses.asdict(e) for e in finding.evidence],
            "fix": dataclasses.asdict(finding.fix) if finding.fix else None,
            "estimatedGain": finding.gain,
            "fastPathAfterFix": finding.fast_path_after_fix,
        },
    }
    verification = _verification(item.verified)
    if verification is not None:
        result["properties"]["verification"] = verification
    if finding.location is not None:
        region: dict[str, Any] = {"startLine": finding.location.line}
        if finding.location.code:
            region["snippet"] = {"text": finding.location.code}
        result["locations"] = [
            {
                "physicalLocation": {
                    "artifactLocation": _artifact(finding.location.file, root, script_dir),
                    "region": region,
                }
            }
        ]
    return result


def render_sarif(report: Report, view: ReportView | None = None) -> str:
    """Renders ``report`` as a SARIF 2.1.0 log (JSON text), from ``view`` if given."""
    view = view or build_view(report)
    facts = view.facts
    root = facts.run.source_root
    if root is None and facts.run.script and os.path.isabs(facts.run.script):
        root = os.path.dirname(facts.run.script)  # facts from before source_root existed
    script_dir = facts.run.script_dir_in_source_root
    rules = view.rules
    index = {rule.id: i for i, rule in enumerate(rules)}
    run: dict[str, Any] = {
        "tool": {
            "driver": {
                "name": "rnndoctor",
                "version": facts.tool_version or "0",
                "informationUri": "https://pypi.org/project/rnndoctor/",
                "rules": [
                    {
                        "id": rule.id,
                        "name": rule.name,
                        "shortDescription": {"text": rule.summary},
                        "fullDescription": {"text": rule.doc.split("\n\n")[0]},
                        "help": {"text": rule.doc},
                    }
                    for rule in rules
                ],
            }
        },
        "results": [
            _result(item, index[item.finding.rule_id], root, script_dir) for item in view.findings
        ],
        "invocations": [
            {
                "executionSuccessful": facts.run.outcome == "completed",
                "properties": {"outcome": facts.run.outcome, "phase": facts.run.phase},
            }
        ],
    }
    if view.verified is not None:  # the all-fixes copy belongs to no one finding
        run["invocations"][0]["properties"]["verifiedAllFixes"] = _verification(
            view.verified.row_for(ALL)
        )
    if root and os.path.isabs(root):
        run["originalUriBaseIds"] = {"%SRCROOT%": {"uri": Path(root).as_uri() + "/"}}
    log = {"$schema": SARIF_SCHEMA, "version": "2.1.0", "runs": [run]}
    text = json.dumps(log, indent=2, default=repr)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
