"""``/metrics/resource``: what metrics-server scrapes (Go:
``pkg/kubelet/metrics/collectors/resource_metrics.go``).

Built per scrape from one CPU-and-memory summary, so series exist only for pods and containers that
exist now (gauges kept between scrapes would leak series of gone containers). Each sample carries the
timestamp of its reading, as Go's. ``scrape_error`` / ``resource_scrape_error`` say whether the summary
could be read (1) or not (0).
"""

from __future__ import annotations

from collections.abc import Iterator

import attrs

from kubelet_trio.promtext import CollectorRegistry, CounterMetricFamily, GaugeMetricFamily, Metric
from kubelet_trio.stats.types import Summary

__all__ = ["resource_metrics_registry"]

_CONTAINER = ["container", "pod", "namespace"]
_POD = ["pod", "namespace"]


def _seconds(ns: int) -> float:
    return ns / 1e9


@attrs.frozen
class _ResourceCollector:
    summary: Summary | None

    def collect(self) -> Iterator[Metric]:
        node_cpu = CounterMetricFamily(
            "node_cpu_usage_seconds_total", "Cumulative cpu time consumed by the node in core-seconds"
        )
        node_memory = GaugeMetricFamily(
            "node_memory_working_set_bytes", "Current working set of the node in bytes"
        )
        start = GaugeMetricFamily(
            "container_start_time_seconds",
            "Start time of the container since unix epoch in seconds",
            labels=_CONTAINER,
        )
        container_cpu = CounterMetricFamily(
            "container_cpu_usage_seconds_total",
            "Cumulative cpu time consumed by the container in core-seconds",
            labels=_CONTAINER,
        )
        container_memory = GaugeMetricFamily(
            "container_memory_working_set_bytes",
            "Current working set of the container in bytes",
            labels=_CONTAINER,
        )
        pod_cpu = CounterMetricFamily(
            "pod_cpu_usage_seconds_total",
            "Cumulative cpu time consumed by the pod in core-seconds",
            labels=_POD,
        )
        pod_memory = GaugeMetricFamily(
            "pod_memory_working_set_bytes", "Current working set of the pod in bytes", labels=_POD
        )
        errors = 0.0 if self.summary is not None else 1.0
        if self.summary is not None:
            node = self.summary.node
            if node.cpu is not None and node.cpu.usage_core_nano_seconds is not None:
                node_cpu.add_metric(
                    [], _seconds(node.cpu.usage_core_nano_seconds), timestamp=_seconds(node.cpu.time_ns)
                )
            if node.memory is not None and node.memory.working_set_bytes is not None:
                node_memory.add_metric(
                    [], node.memory.working_set_bytes, timestamp=_seconds(node.memory.time_ns)
                )
            for pod in self.summary.pods:
                ref = pod.pod_ref
                for c in pod.containers:
                    labels = [c.name, ref.name, ref.namespace]
                    if c.start_time_ns is not None and c.start_time_ns > 0:
                        start.add_metric(labels, _seconds(c.start_time_ns))
                    if c.cpu is not None and c.cpu.usage_core_nano_seconds is not None:
                        container_cpu.add_metric(
                            labels, _seconds(c.cpu.usage_core_nano_seconds), timestamp=_seconds(c.cpu.time_ns)
                        )
                    if c.memory is not None and c.memory.working_set_bytes is not None:
                        container_memory.add_metric(
                            labels, c.memory.working_set_bytes, timestamp=_seconds(c.memory.time_ns)
                        )
                if pod.cpu is not None and pod.cpu.usage_core_nano_seconds is not None:
                    pod_cpu.add_metric(
                        [ref.name, ref.namespace],
                        _seconds(pod.cpu.usage_core_nano_seconds),
                        timestamp=_seconds(pod.cpu.time_ns),
                    )
                if pod.memory is not None and pod.memory.working_set_bytes is not None:
                    pod_memory.add_metric(
                        [ref.name, ref.namespace],
                        pod.memory.working_set_bytes,
                        timestamp=_seconds(pod.memory.time_ns),
                    )
        yield from (node_cpu, node_memory, start, container_cpu, container_memory, pod_cpu, pod_memory)
        yield GaugeMetricFamily(
            "scrape_error", "1 if there was an error while getting container metrics, 0 otherwise", errors
        )
        yield GaugeMetricFamily(
            "resource_scrape_error",
            "1 if there was an error while getting container metrics, 0 otherwise",
            errors,
        )


def resource_metrics_registry(summary: Summary | None) -> CollectorRegistry:
    """A registry answering with ``summary`` (None: the summary could not be read)."""
    registry = CollectorRegistry()
    registry.register(_ResourceCollector(summary))
    return registry
