"""Render kubernetes-mixin into ``mixin_queries.json``: the PromQL the Prometheus tier evaluates.

Run by hand when moving to a newer mixin (the tier itself needs neither jsonnet nor the mixin)::

    python tests/prometheus/render_mixin.py MIXIN_DIR VENDOR_DIR [COMMIT]

``MIXIN_DIR`` is a kubernetes-mixin checkout; ``VENDOR_DIR`` holds its jsonnet-bundler dependencies
(``github.com/grafana/grafonnet``, ``github.com/jsonnet-libs/docsonnet``, ``github.com/jsonnet-libs/xtd``).
The selectors are the ones kube-prometheus uses for a kubelet scraped as one job: ``job="kubelet"`` with
a ``metrics_path`` label per endpoint. Needs ``pip install jsonnet``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

DASHBOARDS = ("kubelet.json", "k8s-resources-node.json", "k8s-resources-pod.json")
ALERT_GROUPS = ("kubernetes-system-kubelet",)
RULE_GROUPS = ("kubelet.rules", "node.rules")  # plus every k8s.rules.* group
SNIPPET = """
local mixin = (import 'mixin.libsonnet') + {_config+:: {
  cadvisorSelector: 'job="kubelet", metrics_path="/metrics/cadvisor"',
  kubeletSelector: 'job="kubelet", metrics_path="/metrics"',
}};
{dashboards: mixin.grafanaDashboards, rules: mixin.prometheusRules, alerts: mixin.prometheusAlerts}
"""


def _panel_queries(panel: dict[str, Any], out: list[dict[str, str]]) -> None:
    for target in panel.get("targets", []):
        if target.get("expr"):
            out.append({"title": panel.get("title", ""), "expr": target["expr"]})
    for child in [*panel.get("panels", []), *panel.get("rows", [])]:
        _panel_queries(child, out)


def dashboard_queries(dashboard: dict[str, Any]) -> list[dict[str, str]]:
    out: list[dict[str, str]] = []
    _panel_queries(dashboard, out)
    for variable in dashboard.get("templating", {}).get("list", []):
        query = variable.get("query")
        query = query.get("query") if isinstance(query, dict) else query
        if variable.get("type") == "query" and query:
            out.append({"title": "$" + variable["name"], "expr": query})
    return out


def main(mixin_dir: str, vendor_dir: str, commit: str = "") -> None:
    import _jsonnet

    rendered = json.loads(_jsonnet.evaluate_snippet("mixin", SNIPPET, jpathdir=[mixin_dir, vendor_dir]))
    result = {
        "source": f"kubernetes-monitoring/kubernetes-mixin {commit}".strip(),
        "dashboards": {name: dashboard_queries(rendered["dashboards"][name]) for name in DASHBOARDS},
        "alert_groups": {
            group["name"]: [{"title": r["alert"], "expr": r["expr"]} for r in group["rules"]]
            for group in rendered["alerts"]["groups"]
            if group["name"] in ALERT_GROUPS
        },
        "rule_groups": [
            group
            for group in rendered["rules"]["groups"]
            if group["name"] in RULE_GROUPS or group["name"].startswith("k8s.rules.")
        ],
    }
    path = Path(__file__).with_name("mixin_queries.json")
    path.write_text(json.dumps(result, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main(*sys.argv[1:])
