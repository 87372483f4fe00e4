"""Group error signals by cause (never by severity); single-member clusters are kept."""

from __future__ import annotations

from collections.abc import Iterable

from harnessevolve.core.signals import Cluster, ErrorSignal


def cluster_signals(signals: Iterable[ErrorSignal]) -> list[Cluster]:
    """Clusters, largest and most severe first."""
    groups: dict[str, list[ErrorSignal]] = {}
    for signal in signals:
        groups.setdefault(signal.cause, []).append(signal)
    clusters = [
        Cluster(cause=members[0].cause, signals=tuple(sorted(members, key=lambda s: -s.severity)))
        for members in groups.values()
    ]
    return sorted(clusters, key=lambda c: (-c.size, -c.severity, c.cause.value))
