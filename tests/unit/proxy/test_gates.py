"""The gates' privilege-change and shape checks (``proxy.gates``), over the small
``CacheSide`` they need of the service: a pure cache side, a real session core."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pgwire.events import Phase
from proxy.gates import Gates
from proxy.session import SessionState


@dataclass
class Host:
    lag: float = 0.0
    distrusted: list[Callable[[], bool] | None] = field(default_factory=list)

    @property
    def pool(self) -> Any:
        raise AssertionError("no check runs here")

    def distrust(self, until: Callable[[], bool] | None = None) -> None:
        self.distrusted.append(until)

    def staleness(self) -> float:
        return self.lag


@dataclass
class Lanes:
    bumps: int = 0

    def bump(self) -> None:
        self.bumps += 1


@dataclass
class Side:
    host: Host | None = field(default_factory=Host)
    lanes: Lanes | None = field(default_factory=Lanes)
    registry: Any = None
    current: set[str] = field(default_factory=set)
    identity_functions: tuple[str, ...] = ()

    def is_current(self, entry: Any) -> bool:
        return entry.name in self.current


@dataclass(frozen=True)
class Entry:
    name: str


def test_shape_reason_says_why_a_held_statement_is_described_upstream() -> None:
    side = Side(current={"c"})
    gates = Gates(side, bound=5.0)
    assert gates.shape_reason(None) is None
    assert gates.shape_known(Entry("c"))
    assert "cache d was dropped" in (gates.shape_reason(Entry("d")) or "")
    assert side.host is not None
    side.host.lag = 6.0
    assert "exceeds the staleness bound" in (gates.shape_reason(Entry("c")) or "")
    assert not gates.shape_known(Entry("c"))
    side.host = None  # not started: nothing is known of the cache
    assert "was dropped" in (gates.shape_reason(Entry("c")) or "")


def test_a_privilege_change_forgets_verdicts_now_and_when_its_transaction_ends() -> None:
    side = Side()
    gates = Gates(side, bound=5.0)
    state = SessionState(Phase.READY)
    state.transaction_status = "T"  # the GRANT ran inside a transaction block
    gates.grants[("alice", "c")] = (True, float("inf"))
    gates.wrote(b"INSERT", state)  # a write that changes no privilege
    assert gates.granted("alice", "c") is True
    assert side.lanes is not None and side.lanes.bumps == 0
    gates.wrote(b"GRANT", state)
    assert gates.granted("alice", "c") is None and side.lanes.bumps == 1
    assert side.host is not None and side.host.distrusted == []  # not DDL
    gates.grants[("alice", "c")] = (True, float("inf"))  # checked again, meanwhile
    gates.transaction_ended()  # still in its block: nothing more forgotten
    assert gates.granted("alice", "c") is True
    state.transaction_status = "I"
    gates.transaction_ended()
    assert gates.granted("alice", "c") is None and side.lanes.bumps == 2


def test_ddl_distrusts_the_caches_until_its_transaction_ended() -> None:
    side = Side()
    gates = Gates(side, bound=5.0)
    state = SessionState(Phase.READY)
    state.transaction_status = "T"
    gates.wrote(b"ALTER ", state)
    assert side.host is not None and len(side.host.distrusted) == 1
    until = side.host.distrusted[0]
    assert until is not None and not until()
    state.transaction_status = "I"
    assert until()
