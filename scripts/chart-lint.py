#!/usr/bin/env python3
"""Lint and render the Helm chart with Helm's own engine, without a helm binary or a cluster.

For the chart's default values and for every charts/cfssl-issuer/ci/*-values.yaml (or, with
--values FILE, for those files only: the tests check that the chart refuses some):

1. `helm lint` through helm-sdkpy (Helm 4.3 as a shared library). Its Lint takes no values
   argument and reports findings without their text, so it lints a copy of the chart whose
   values.yaml is the case's values merged over the defaults, as `helm lint -f` would, and
   names the file of each finding.
2. `helm lint --strict` through helm-python-sdk (Helm 4.2, another shared-library build),
   which takes the values and says what is wrong.
   In both, warnings fail the case as errors do; INFO findings (such as "icon is
   recommended") do not.
3. The values against values.schema.json (Helm's validator, draft-07).
4. `helm template` through helm-python-sdk: every template must render, every rendered
   document must parse as YAML and name its apiVersion, kind and metadata.name. With
   --out DIR the manifests are written to DIR/<case>.yaml and the notes to
   DIR/<case>.NOTES.txt, for tests/deploy_manifests.rs to check.

The two libraries each carry a Go runtime, and two Go runtimes cannot share a process, so
helm-sdkpy runs in a child process (this script with --sdkpy-lint).

Exit status: 0 when every case is clean, 1 on any finding, 2 when a library is missing.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import importlib.util
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

# `make test` (scripts/test-deps.sh) installs these into the project's .venv.
PIP_INSTALL = "scripts/test-deps.sh  (or: .venv/bin/python3 scripts/chart-lint.py after it)"
ROOT = Path(__file__).resolve().parent.parent
CHART = ROOT / "charts" / "cfssl-issuer"
RELEASE = "cfssl-issuer"
NAMESPACE = "cfssl-issuer-system"
# Helm's lint severities.
SEVERITY = {0: "UNKNOWN", 1: "INFO", 2: "WARNING", 3: "ERROR"}


def missing_library(name: str, err: Exception) -> None:
    print(f"chart-lint: cannot import {name} ({err}); install the chart tools with:\n  {PIP_INSTALL}", file=sys.stderr)
    sys.exit(2)


def merge_values(base: object, override: object) -> object:
    """Helm's coalescing of a values file over the chart's: maps merge, null deletes."""
    if not isinstance(base, dict) or not isinstance(override, dict):
        return copy.deepcopy(override)
    merged = copy.deepcopy(base)
    for key, value in override.items():
        if value is None:
            merged.pop(key, None)
        elif key in merged:
            merged[key] = merge_values(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def sdkpy_lint_child(chart_dir: str) -> None:
    """--sdkpy-lint: print helm-sdkpy's lint report of chart_dir as JSON."""
    try:
        import helm_sdkpy
    except ImportError as err:
        missing_library("helm_sdkpy", err)
    config = helm_sdkpy.Configuration(namespace=NAMESPACE)
    report = asyncio.run(helm_sdkpy.Lint(config).run(chart_dir))
    json.dump(report, sys.stdout)


def sdkpy_lint(chart: Path, values: dict) -> list[str]:
    """Findings of helm-sdkpy's strict lint, on a chart copy whose defaults are `values`."""
    import yaml

    with tempfile.TemporaryDirectory(prefix="chart-lint-") as tmp:
        copy_dir = Path(tmp) / chart.name
        shutil.copytree(chart, copy_dir, ignore=shutil.ignore_patterns("ci"))
        (copy_dir / "values.yaml").write_text(yaml.safe_dump(values, sort_keys=False))
        child = subprocess.run(
            [sys.executable, __file__, "--sdkpy-lint", str(copy_dir)],
            capture_output=True,
            text=True,
            check=False,
        )
    if child.returncode != 0:
        return [f"helm-sdkpy lint did not run: {child.stderr.strip() or child.returncode}"]
    report = json.loads(child.stdout)
    findings = [
        f"helm-sdkpy: {SEVERITY.get(m['Severity'], m['Severity'])} in {m['Path']}"
        for m in report.get("Messages") or []
        if m["Severity"] >= 2
    ]
    if report.get("Errors") and not findings:
        findings.append(f"helm-sdkpy: {len(report['Errors'])} lint error(s)")
    return findings


def helm_python_lint(helm, chart: Path, values: dict) -> list[str]:
    report = helm.lint(str(chart), values, strict=True, namespace=NAMESPACE)
    findings = [
        f"helm-python-sdk: {SEVERITY.get(m['severity'], m['severity'])} in {m['path']}: {m['error']}"
        for m in report.get("messages") or []
        if m["severity"] >= 2
    ]
    findings += [f"helm-python-sdk: {e}" for e in report.get("errors") or [] if not any(e in f for f in findings)]
    return findings


def render(helm, chart: Path, values: dict) -> tuple[list[str], str, str]:
    """(findings, manifests as one multi-document YAML, NOTES.txt) of `helm template`."""
    import yaml

    findings: list[str] = []
    with helm.Chart.load(str(chart)) as loaded:
        try:
            loaded.validate_schema(loaded.merge_values(values))
        except helm.HelmError as err:
            findings.append(f"values.schema.json: {err}")
        try:
            rendered = loaded.render(values, name=RELEASE, namespace=NAMESPACE, is_install=True)
        except helm.HelmError as err:
            return findings + [f"render: {err}"], "", ""
    notes = ""
    documents = []
    for path in sorted(rendered):
        text = rendered[path]
        if path.endswith("NOTES.txt"):
            notes = text
            continue
        try:
            docs = list(yaml.safe_load_all(text))
        except yaml.YAMLError as err:
            findings.append(f"{path}: rendered YAML does not parse: {err}")
            continue
        for doc in docs:
            if doc is None:
                continue
            if not isinstance(doc, dict) or not all(k in doc for k in ("apiVersion", "kind", "metadata")):
                findings.append(f"{path}: a rendered document lacks apiVersion, kind or metadata")
                continue
            if not (doc.get("metadata") or {}).get("name"):
                findings.append(f"{path}: a rendered {doc['kind']} has no metadata.name")
            documents.append(f"# Source: {path}\n{yaml.safe_dump(doc, sort_keys=False)}")
    if not notes.strip():
        findings.append("templates/NOTES.txt rendered empty")
    return findings, "---\n".join(documents), notes


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chart", type=Path, default=CHART, help="chart directory")
    parser.add_argument("--out", type=Path, help="write each case's manifests and notes here")
    parser.add_argument(
        "--values",
        type=Path,
        action="append",
        help="check only these values files instead of the defaults and ci/ (repeatable); "
        "tests/deploy_manifests.rs uses it for values the chart must refuse",
    )
    parser.add_argument("--sdkpy-lint", metavar="DIR", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.sdkpy_lint:
        sdkpy_lint_child(args.sdkpy_lint)
        return 0

    try:
        import yaml
    except ImportError as err:
        missing_library("yaml", err)
    try:
        import helm_python as helm
    except ImportError as err:
        missing_library("helm_python", err)
    # helm-sdkpy is only loaded by the child processes; make sure it is there at all.
    if importlib.util.find_spec("helm_sdkpy") is None:
        missing_library("helm_sdkpy", ModuleNotFoundError("no module named helm_sdkpy"))

    chart = args.chart.resolve()
    defaults = yaml.safe_load((chart / "values.yaml").read_text()) or {}
    cases = {} if args.values else {"default": {}}
    for path in args.values or sorted((chart / "ci").glob("*-values.yaml")):
        cases[path.name.removesuffix("-values.yaml")] = yaml.safe_load(path.read_text()) or {}
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)

    failed = 0
    for case, values in cases.items():
        findings = sdkpy_lint(chart, merge_values(defaults, values))
        findings += helm_python_lint(helm, chart, values)
        render_findings, manifests, notes = render(helm, chart, values)
        findings += render_findings
        if args.out:
            (args.out / f"{case}.yaml").write_text(manifests)
            (args.out / f"{case}.NOTES.txt").write_text(notes)
        kinds = manifests.count("\nkind: ") + manifests.startswith("kind: ")
        if findings:
            failed += 1
            print(f"FAIL {case}")
            for finding in findings:
                print("  " + finding.replace("\n", "\n    "))
        else:
            print(f"ok   {case}: lint clean, {kinds} objects rendered")
    print(f"chart-lint: {len(cases) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
