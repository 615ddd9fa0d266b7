"""Prometheus metrics and their text exposition format 0.0.4, as the Go kubelet (client_golang) serves it.

Our own rather than prometheus-client: importing that package loads its HTTP exposition servers
(``http.server``, ``wsgiref``, ``urllib.request``, ``email``...), about 3 MB of RSS on a node whose budget is
45 MB, and the node needs only counters, gauges, histograms, families built at scrape time and the text.

What the node's exposition relies on, as prometheus-client writes it:

- A family is ``# HELP`` (``\\`` and newline escaped) and ``# TYPE``, then its samples; a family with no
  samples (a labelled metric with no series yet) keeps its two comment lines.
- A name is written as given: a counter's name is Go's (``kubelet_runtime_operations_total``, and
  ``kubelet_evictions`` without ``_total``); there are no ``*_created`` series (Go never sends them).
- Labels are sorted by name (a histogram's ``le`` among them), values escaped (``\\``, ``"``, newline).
- Numbers as prometheus-client writes them, Go's way where a scraper sees it (``1.0``, ``1e+06``,
  ``+Inf``): :func:`format_float`.
- A histogram's buckets are cumulative and end with ``le="+Inf"``, then ``_count`` and ``_sum``.
- A sample's timestamp, when it has one, in whole milliseconds.

Not thread-safe: the node updates and renders its metrics on its Trio thread only.
"""

from __future__ import annotations

import bisect
import math
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import ClassVar, Generic, NamedTuple, Protocol, TypeVar

__all__ = [
    "CollectorRegistry",
    "Counter",
    "CounterMetricFamily",
    "Gauge",
    "GaugeMetricFamily",
    "Histogram",
    "Metric",
    "ProcessCollector",
    "Sample",
    "format_float",
    "generate_latest",
]


class Sample(NamedTuple):
    name: str
    labels: Mapping[str, str]
    value: float
    timestamp: float | None = None  # seconds since the epoch


class Metric:
    """A metric family: what a collector yields and :func:`generate_latest` writes."""

    __slots__ = ("documentation", "name", "samples", "type")

    def __init__(self, name: str, documentation: str, type: str) -> None:
        self.name = name
        self.documentation = documentation
        self.type = type  # counter, gauge or histogram
        self.samples: list[Sample] = []

    def add_sample(
        self, name: str, labels: Mapping[str, str], value: float, timestamp: float | None = None
    ) -> None:
        self.samples.append(Sample(name, labels, value, timestamp))


class _ScrapeFamily(Metric):
    """A family built at scrape time by a custom collector, its samples named as the family."""

    __slots__ = ("labelnames",)
    TYPE: ClassVar[str]

    def __init__(
        self, name: str, documentation: str, value: float | None = None, labels: Sequence[str] = ()
    ) -> None:
        super().__init__(name, documentation, self.TYPE)
        self.labelnames = tuple(labels)
        if value is not None:
            self.add_metric((), value)

    def add_metric(self, labels: Sequence[str], value: float, timestamp: float | None = None) -> None:
        """One series: ``labels`` are the values of the family's label names, in their order."""
        self.add_sample(self.name, dict(zip(self.labelnames, labels, strict=True)), value, timestamp)


class CounterMetricFamily(_ScrapeFamily):
    __slots__ = ()
    TYPE = "counter"


class GaugeMetricFamily(_ScrapeFamily):
    __slots__ = ()
    TYPE = "gauge"


class Collector(Protocol):
    def collect(self) -> Iterable[Metric]: ...


class CollectorRegistry:
    """The collectors of one endpoint, written in the order they were registered."""

    def __init__(self) -> None:
        self._collectors: list[Collector] = []

    def register(self, collector: Collector) -> None:
        self._collectors.append(collector)

    def collect(self) -> Iterator[Metric]:
        for collector in self._collectors:
            yield from collector.collect()


# -- metrics updated as things happen ----------------------------------------------------------------


class _CounterValue:
    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value = 0.0

    def inc(self, amount: float = 1.0) -> None:
        if amount < 0:
            raise ValueError(f"a counter only goes up (inc by {amount})")
        self.value += amount

    def samples(self, family: Metric, labels: dict[str, str]) -> None:
        family.add_sample(family.name, labels, self.value)


class _GaugeValue:
    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value = 0.0

    def set(self, value: float) -> None:
        self.value = float(value)

    def samples(self, family: Metric, labels: dict[str, str]) -> None:
        family.add_sample(family.name, labels, self.value)


class _HistogramValue:
    __slots__ = ("bounds", "counts", "sum")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds  # ascending, +Inf last
        self.counts = [0] * len(bounds)  # per bucket, not cumulative
        self.sum = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect.bisect_left(self.bounds, value)] += 1  # the first bound >= value
        self.sum += value

    def samples(self, family: Metric, labels: dict[str, str]) -> None:
        total = 0
        for bound, count in zip(self.bounds, self.counts, strict=True):
            total += count
            family.add_sample(f"{family.name}_bucket", {**labels, "le": format_float(bound)}, total)
        family.add_sample(f"{family.name}_count", labels, total)
        family.add_sample(f"{family.name}_sum", labels, self.sum)


_Value = TypeVar("_Value", _CounterValue, _GaugeValue, _HistogramValue)


class _Vector(Generic[_Value]):
    """A metric with one series per label values (one series, always written, without label names)."""

    TYPE: ClassVar[str]

    def __init__(
        self,
        name: str,
        documentation: str,
        labelnames: Sequence[str] = (),
        *,
        registry: CollectorRegistry | None = None,
    ) -> None:
        self.name = name
        self.documentation = documentation
        self.labelnames = tuple(labelnames)
        self._series: dict[tuple[str, ...], _Value] = {}
        if not self.labelnames:
            self._series[()] = self._new_value()
        if registry is not None:
            registry.register(self)

    def _new_value(self) -> _Value:
        raise NotImplementedError

    def labels(self, *values: str) -> _Value:
        """The series of these label values (made on first use)."""
        series = self._series.get(values)
        if series is None:
            if len(values) != len(self.labelnames):
                raise ValueError(f"{self.name} has labels {self.labelnames}, not the values {values}")
            series = self._series[values] = self._new_value()
        return series

    def remove(self, *values: str) -> None:
        """Drop one series (nothing when it does not exist)."""
        if self.labelnames:
            self._series.pop(values, None)

    def clear(self) -> None:
        """Drop every series."""
        if self.labelnames:
            self._series.clear()

    def collect(self) -> Iterator[Metric]:
        family = Metric(self.name, self.documentation, self.TYPE)
        for values, series in self._series.items():
            series.samples(family, dict(zip(self.labelnames, values, strict=True)))
        yield family


class Counter(_Vector[_CounterValue]):
    TYPE = "counter"

    def _new_value(self) -> _CounterValue:
        return _CounterValue()


class Gauge(_Vector[_GaugeValue]):
    TYPE = "gauge"

    def _new_value(self) -> _GaugeValue:
        return _GaugeValue()

    def set(self, value: float) -> None:
        self.labels().set(value)


class Histogram(_Vector[_HistogramValue]):
    TYPE = "histogram"

    def __init__(
        self,
        name: str,
        documentation: str,
        labelnames: Sequence[str] = (),
        *,
        buckets: Sequence[float],
        registry: CollectorRegistry | None = None,
    ) -> None:
        bounds = sorted(float(b) for b in buckets)
        self._bounds = tuple(bounds if bounds and bounds[-1] == math.inf else [*bounds, math.inf])
        super().__init__(name, documentation, labelnames, registry=registry)

    def _new_value(self) -> _HistogramValue:
        return _HistogramValue(self._bounds)

    def observe(self, value: float) -> None:
        self.labels().observe(value)


# -- the process -------------------------------------------------------------------------------------


class ProcessCollector:
    """``process_*`` of this process from ``/proc``, as Go's and prometheus-client's process collectors
    (nothing where ``/proc`` cannot be read)."""

    def __init__(self, proc: str = "/proc") -> None:
        self._proc = proc
        self._boot_time: float | None = None

    def _read_boot_time(self) -> float:
        with open(os.path.join(self._proc, "stat"), "rb") as stat:
            for line in stat:
                if line.startswith(b"btime "):
                    return float(line.split()[1])
        raise OSError("no btime in /proc/stat")

    def collect(self) -> Iterator[Metric]:
        try:
            if self._boot_time is None:
                self._boot_time = self._read_boot_time()
            with open(os.path.join(self._proc, "self", "stat"), "rb") as stat:
                fields = stat.read().rpartition(b")")[2].split()  # after the command, which may hold spaces
        except OSError:
            return
        ticks = os.sysconf("SC_CLK_TCK")
        # fields[n] is stat's field n + 3 (proc(5)): vsize, rss (pages), starttime, utime and stime (ticks)
        yield GaugeMetricFamily(
            "process_virtual_memory_bytes", "Virtual memory size in bytes.", float(fields[20])
        )
        yield GaugeMetricFamily(
            "process_resident_memory_bytes",
            "Resident memory size in bytes.",
            float(fields[21]) * os.sysconf("SC_PAGE_SIZE"),
        )
        yield GaugeMetricFamily(
            "process_start_time_seconds",
            "Start time of the process since unix epoch in seconds.",
            float(fields[19]) / ticks + self._boot_time,
        )
        yield CounterMetricFamily(
            "process_cpu_seconds_total",
            "Total user and system CPU time spent in seconds.",
            float(fields[11]) / ticks + float(fields[12]) / ticks,
        )
        try:
            open_fds = len(os.listdir(os.path.join(self._proc, "self", "fd")))
            with open(os.path.join(self._proc, "self", "limits"), "rb") as limits:
                max_fds = next(float(line.split()[3]) for line in limits if line.startswith(b"Max open file"))
        except (OSError, ValueError, StopIteration):  # "unlimited" is no number
            return
        yield GaugeMetricFamily("process_open_fds", "Number of open file descriptors.", open_fds)
        yield GaugeMetricFamily("process_max_fds", "Maximum number of open file descriptors.", max_fds)


# -- the text format ---------------------------------------------------------------------------------


def format_float(value: float) -> str:
    """``value`` as Go writes a sample value or bucket bound: Python's shortest repr, except ``+Inf``,
    ``-Inf``, ``NaN`` and, for positive numbers of 7 to 16 integer digits (which Python writes out in
    full), Go's exponent form: ``1234567.0`` -> ``1.234567e+06``."""
    value = float(value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    text = repr(value)
    integer, dot, fraction = text.partition(".")
    if value <= 0 or not dot or len(integer) <= 6:
        return text
    digits = (integer[1:] + fraction).rstrip("0")
    return f"{integer[0]}{'.' if digits else ''}{digits}e+{len(integer) - 1:02d}"


def _escape_help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def _escape_label_value(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _sample_line(sample: Sample) -> str:
    labels = ""
    if sample.labels:
        pairs = ",".join(f'{k}="{_escape_label_value(v)}"' for k, v in sorted(sample.labels.items()))
        labels = "{" + pairs + "}"
    timestamp = f" {int(sample.timestamp * 1000)}" if sample.timestamp is not None else ""
    return f"{sample.name}{labels} {format_float(sample.value)}{timestamp}\n"


def generate_latest(registry: Collector) -> bytes:
    """The text exposition format 0.0.4 of everything ``registry`` collects."""
    out: list[str] = []
    for family in registry.collect():
        out.append(f"# HELP {family.name} {_escape_help(family.documentation)}\n")
        out.append(f"# TYPE {family.name} {family.type}\n")
        out.extend(_sample_line(sample) for sample in family.samples)
    return "".join(out).encode()
