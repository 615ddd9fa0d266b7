"""The Prometheus tier's summary: per dashboard and rule group, how many expressions returned data."""

from __future__ import annotations

from typing import Any

import pytest

_reports: dict[str, tuple[int, int]] = {}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    for name, value in report.user_properties:
        if name == "mixin_report":
            _reports.update(value)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if _reports:
        terminalreporter.write_sep("-", "kubernetes-mixin expressions returning data")
        for group, (with_data, total) in sorted(_reports.items()):
            terminalreporter.write_line(f"{group}: {with_data}/{total}")
