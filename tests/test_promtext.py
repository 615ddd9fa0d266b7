"""``kubelet_trio.promtext``: the text format written out by hand, then judged by the reference library
(prometheus-client, a test dependency only) rendering the same metrics; and no node imports the latter."""

from __future__ import annotations

import math
import re
import subprocess
import sys
from collections.abc import Iterable, Iterator
from typing import Any

import prometheus_client
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client.core import CounterMetricFamily as ReferenceCounterFamily
from prometheus_client.core import GaugeMetricFamily as ReferenceGaugeFamily
from prometheus_client.metrics_core import Metric as ReferenceMetric
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.utils import floatToGoString

from kubelet_trio.promtext import (
    CollectorRegistry,
    Counter,
    CounterMetricFamily,
    Gauge,
    GaugeMetricFamily,
    Histogram,
    ProcessCollector,
    format_float,
    generate_latest,
)


class _Fixed:
    """A collector answering the given families (ours or the reference library's)."""

    def __init__(self, families: Iterable[Any]) -> None:
        self.families = list(families)

    def collect(self) -> Iterator[Any]:
        return iter(self.families)


# -- the format, written out -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (1, "1.0"),
        (0, "0.0"),
        (-0.0, "-0.0"),
        (0.1, "0.1"),
        (2.5, "2.5"),
        (-3.25, "-3.25"),
        (1.5e-7, "1.5e-07"),
        (123456.0, "123456.0"),  # six integer digits: written out
        (1e6, "1e+06"),  # seven: Go's exponent
        (1234567.5, "1.2345675e+06"),
        (1.7e9, "1.7e+09"),
        (12345678901.0, "1.2345678901e+10"),
        (2**53, "9.007199254740992e+15"),
        (1e16, "1e+16"),  # Python's own exponent from here
        (1e21, "1e+21"),
        (-12345678.0, "-12345678.0"),  # negative: as Python writes it (prometheus-client's too)
        (math.inf, "+Inf"),
        (-math.inf, "-Inf"),
        (math.nan, "NaN"),
    ],
)
def test_numbers_are_written_as_go_reads_them(value: float, text: str) -> None:
    assert format_float(value) == text
    assert floatToGoString(value) == text


@settings(max_examples=300, deadline=None)
@given(st.floats() | st.integers(min_value=-(2**70), max_value=2**70))
def test_numbers_match_the_reference_library(value: float) -> None:
    assert format_float(value) == floatToGoString(value)


def test_help_and_label_values_are_escaped_and_labels_sorted() -> None:
    registry = CollectorRegistry()
    family = GaugeMetricFamily("odd", 'back\\slash, "quotes"\nand a newline', labels=["z", "a", "m"])
    family.add_metric(['q"uote', "back\\slash", "new\nline"], 1)
    registry.register(_Fixed([family]))
    assert generate_latest(registry).decode() == (
        '# HELP odd back\\\\slash, "quotes"\\nand a newline\n'
        "# TYPE odd gauge\n"
        'odd{a="back\\\\slash",m="new\\nline",z="q\\"uote"} 1.0\n'
    )


def test_histogram_buckets_are_cumulative_and_end_at_inf() -> None:
    registry = CollectorRegistry()
    histogram = Histogram("wait_seconds", "Waits.", ["z", "a"], buckets=(1, 0.5, 2), registry=registry)
    for value in (0.1, 0.5, 0.7, 3.0, 2.0):
        histogram.labels("zz", "aa").observe(value)
    plain = Histogram("plain_seconds", "Plain.", buckets=(1.0, math.inf), registry=registry)
    assert generate_latest(registry).decode() == (
        "# HELP wait_seconds Waits.\n"
        "# TYPE wait_seconds histogram\n"
        'wait_seconds_bucket{a="aa",le="0.5",z="zz"} 2.0\n'
        'wait_seconds_bucket{a="aa",le="1.0",z="zz"} 3.0\n'
        'wait_seconds_bucket{a="aa",le="2.0",z="zz"} 4.0\n'
        'wait_seconds_bucket{a="aa",le="+Inf",z="zz"} 5.0\n'
        'wait_seconds_count{a="aa",z="zz"} 5.0\n'
        'wait_seconds_sum{a="aa",z="zz"} 6.3\n'
        "# HELP plain_seconds Plain.\n"
        "# TYPE plain_seconds histogram\n"
        'plain_seconds_bucket{le="1.0"} 0.0\n'
        'plain_seconds_bucket{le="+Inf"} 0.0\n'
        "plain_seconds_count 0.0\n"
        "plain_seconds_sum 0.0\n"
    )
    plain.observe(1.0)
    assert 'plain_seconds_bucket{le="1.0"} 1.0\n' in generate_latest(registry).decode()


def test_series_come_and_go_and_an_empty_family_keeps_its_comments() -> None:
    registry = CollectorRegistry()
    counter = Counter("ops_total", "Operations.", ["op"], registry=registry)
    gauge = Gauge("up", "Up.", registry=registry)
    evictions = CounterMetricFamily("kubelet_evictions", "Evictions.", labels=["signal"])  # no _total added
    evictions.add_metric(["memory.available"], 2)
    registry.register(_Fixed([evictions]))
    assert generate_latest(registry).decode() == (
        "# HELP ops_total Operations.\n# TYPE ops_total counter\n"
        "# HELP up Up.\n# TYPE up gauge\nup 0.0\n"
        "# HELP kubelet_evictions Evictions.\n# TYPE kubelet_evictions counter\n"
        'kubelet_evictions{signal="memory.available"} 2.0\n'
    )
    counter.labels("b").inc()
    counter.labels("a").inc()
    counter.labels("b").inc(2.5)
    gauge.set(-1)
    text = generate_latest(registry).decode()
    assert 'ops_total{op="b"} 3.5\nops_total{op="a"} 1.0\n' in text  # in order of first use
    assert "up -1.0\n" in text
    counter.remove("b")
    counter.remove("never")
    assert 'ops_total{op="b"}' not in generate_latest(registry).decode()
    counter.clear()
    assert "ops_total{" not in generate_latest(registry).decode()
    with pytest.raises(ValueError):
        counter.labels("a").inc(-1)
    with pytest.raises(ValueError):
        counter.labels("a", "b")


def test_timestamps_are_whole_milliseconds() -> None:
    family = CounterMetricFamily("cpu_seconds_total", "CPU.", labels=["c"])
    family.add_metric(["x"], 1.5, timestamp=1795935182.4570558)
    family.add_metric(["y"], 2, timestamp=1.5)
    family.add_metric(["z"], 3)
    assert generate_latest(_Fixed([family])).decode().splitlines()[2:] == [
        'cpu_seconds_total{c="x"} 1.5 1795935182457',
        'cpu_seconds_total{c="y"} 2.0 1500',
        'cpu_seconds_total{c="z"} 3.0',
    ]


def test_process_metrics_are_read_from_proc() -> None:
    families = list(ProcessCollector().collect())
    assert [(f.name, f.type) for f in families] == [
        ("process_virtual_memory_bytes", "gauge"),
        ("process_resident_memory_bytes", "gauge"),
        ("process_start_time_seconds", "gauge"),
        ("process_cpu_seconds_total", "counter"),
        ("process_open_fds", "gauge"),
        ("process_max_fds", "gauge"),
    ]
    values = {f.name: f.samples[0].value for f in families}
    assert values["process_resident_memory_bytes"] > 1e6
    assert values["process_start_time_seconds"] > 1.6e9
    assert values["process_open_fds"] >= 3
    assert list(ProcessCollector(proc="/nonexistent").collect()) == []


# -- judged by the reference library -----------------------------------------------------------------


class _WithoutCreated:
    """prometheus-client's families minus its ``*_created`` samples (which it cannot leave out per
    registry), as the Go kubelet writes them."""

    def __init__(self, registry: prometheus_client.CollectorRegistry) -> None:
        self.registry = registry

    def collect(self) -> Iterator[ReferenceMetric]:
        for family in self.registry.collect():
            trimmed = ReferenceMetric(family.name, family.documentation, family.type, family.unit)
            trimmed.samples = [s for s in family.samples if not s.name.endswith("_created")]
            yield trimmed


def _reference_text(registry: prometheus_client.CollectorRegistry) -> str:
    return prometheus_client.generate_latest(_WithoutCreated(registry)).decode()


LABEL_VALUES = st.text(alphabet=st.sampled_from('ab\\"\n é{}=,'), max_size=6)
AMOUNTS = st.floats(min_value=0, max_value=1e12, allow_nan=False) | st.sampled_from([0.005, 1e6, 1234567.0])


@settings(max_examples=60, deadline=None)
@given(
    ops=st.lists(
        st.tuples(st.sampled_from(["counter", "gauge", "histogram", "remove"]), LABEL_VALUES, AMOUNTS),
        max_size=25,
    )
)
def test_registries_render_as_prometheus_client_renders_them(ops: list[tuple[str, str, float]]) -> None:
    ours, theirs = CollectorRegistry(), prometheus_client.CollectorRegistry()
    buckets = (0.005, 0.5, 1.0, 2.5, 1e6)
    our_counter = Counter("ops_total", "Ops\\ and\nmore.", ["path", "kind"], registry=ours)
    their_counter = prometheus_client.Counter("ops", "Ops\\ and\nmore.", ["path", "kind"], registry=theirs)
    our_gauge = Gauge("level", "Level.", registry=ours)
    their_gauge = prometheus_client.Gauge("level", "Level.", registry=theirs)
    our_histogram = Histogram("took_seconds", "Took.", ["z_op", "a_op"], buckets=buckets, registry=ours)
    their_histogram = prometheus_client.Histogram(
        "took_seconds", "Took.", ["z_op", "a_op"], buckets=buckets, registry=theirs
    )
    our_plain = Histogram("plain_seconds", "Plain.", buckets=buckets, registry=ours)
    their_plain = prometheus_client.Histogram("plain_seconds", "Plain.", buckets=buckets, registry=theirs)
    for kind, label, amount in ops:
        if kind == "counter":
            our_counter.labels(label, "x").inc(amount)
            their_counter.labels(label, "x").inc(amount)
        elif kind == "gauge":
            our_gauge.set(-amount)
            their_gauge.set(-amount)
        elif kind == "histogram":
            our_histogram.labels(label, "y").observe(amount)
            their_histogram.labels(label, "y").observe(amount)
            our_plain.observe(amount)
            their_plain.observe(amount)
        else:
            our_counter.remove(label, "x")
            their_counter.remove(label, "x")
    assert generate_latest(ours).decode() == _reference_text(theirs)


@settings(max_examples=60, deadline=None)
@given(
    series=st.lists(
        st.tuples(LABEL_VALUES, AMOUNTS, st.none() | st.floats(min_value=0, max_value=2e9)), max_size=6
    ),
    single=st.floats(allow_nan=True) | st.integers(min_value=-(2**60), max_value=2**60),
)
def test_scrape_time_families_render_as_prometheus_client_renders_them(
    series: list[tuple[str, float, float | None]], single: float
) -> None:
    our_counter = CounterMetricFamily("bytes_total", "Bytes.", labels=["iface", "dev"])
    their_counter = ReferenceCounterFamily("bytes_total", "Bytes.", labels=["iface", "dev"])
    for label, value, timestamp in series:
        our_counter.add_metric([label, "d"], value, timestamp=timestamp)
        their_counter.add_metric([label, "d"], value, timestamp=timestamp)
    ours = [
        GaugeMetricFamily("single", "One value.", single),
        our_counter,
        GaugeMetricFamily("empty", "None."),
    ]
    theirs = [
        ReferenceGaugeFamily("single", "One value.", single),
        their_counter,
        ReferenceGaugeFamily("empty", "None."),
    ]
    reference = prometheus_client.generate_latest(_Fixed(theirs)).decode()
    assert generate_latest(_Fixed(ours)).decode() == reference


def test_process_metrics_render_as_prometheus_client_renders_them() -> None:
    """Same names, help, types and order; the values that cannot move between two reads agree."""
    theirs = prometheus_client.ProcessCollector(registry=None)
    ours_text = generate_latest(_Fixed(ProcessCollector().collect())).decode()
    their_text = prometheus_client.generate_latest(_Fixed(theirs.collect())).decode()
    moving = re.compile(
        r"^(process_(?:cpu_seconds_total|resident_memory_bytes|virtual_memory_bytes)) .*$", re.M
    )
    assert moving.sub(r"\1", ours_text) == moving.sub(r"\1", their_text)
    parsed = {f.name: f for f in text_string_to_metric_families(ours_text)}
    assert parsed["process_cpu_seconds"].type == "counter"


# -- the node does without it ------------------------------------------------------------------------


def test_a_node_with_metrics_on_never_imports_prometheus_client() -> None:
    """prometheus-client's package import costs a node ~3 MB of RSS (its HTTP servers come along)."""
    script = """
import sys
from kubelet_trio.metrics import KubeletMetrics, render_registry
from kubelet_trio.server.app import kubelet_api_app
from kubelet_trio.stats.cadvisor import CadvisorSnapshot, cadvisor_registry
from kubelet_trio.stats.resource_metrics import resource_metrics_registry

metrics = KubeletMetrics()
metrics.observe_runtime_operation("list_podsandbox", 0.01, False)
metrics.render()
metrics.render_probes()
render_registry(cadvisor_registry(CadvisorSnapshot(error=True)))
render_registry(resource_metrics_registry(None))
print(sorted(m for m in sys.modules if m.startswith("prometheus_client")))
"""
    out = subprocess.run(
        [sys.executable, "-c", script], check=True, capture_output=True, text=True, timeout=60
    )
    assert out.stdout.strip() == "[]"
