"""The pure parts of misses at pass-through cost: admission, the fill queue (bound, batches,
per-table bound, back-off), seen(s) and coverage, and the default memory budget."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

from proxy.config import resolve
from proxy.fillqueue import (
    MAX_KEEP,
    MIN_SAMPLES,
    PAYS,
    SAMPLE,
    YIELD_SECONDS,
    YIELD_WINDOW,
    ZERO_YIELD,
    Admission,
    FillPolicy,
    FillQueue,
)
from proxy.hitpath import TOTAL_BYTES, HitMemos
from proxy.misses import budgets, default_budget
from proxy.seen import MAX_IN_FLIGHT, NEVER, Coverage, Seen, covered, may_serve
from proxy.settings import Settings

UP = "postgresql://u@localhost/db"


def test_admission_on_the_second_read() -> None:
    doorkeeper = Admission("second")
    assert not doorkeeper.admit(("c", (1,)))
    assert not doorkeeper.admit(("c", (2,)))
    assert doorkeeper.admit(("c", (1,)))  # read again: admitted (and forgotten)
    assert not doorkeeper.admit(("c", (1,)))
    assert doorkeeper.refused == 3
    assert all(Admission("always").admit(("c", (k,))) for k in range(5))


def test_admission_wants_more_reads_while_fills_do_not_pay() -> None:
    """Fewer hits than fills over a window: a key needs twice as many refused reads (up to
    the admission's bound); many hits per fill: one fewer, down to the second read; in
    between the rule stays as it is."""
    doorkeeper = Admission("second")
    assert doorkeeper.reads == 2 and not doorkeeper.strict
    doorkeeper.observe(lambda: 10, fills=YIELD_WINDOW - 1, now=0.0)
    assert not doorkeeper.strict  # (not a whole window yet)
    doorkeeper.observe(lambda: 10, fills=YIELD_WINDOW, now=1.0)
    assert doorkeeper.strict and doorkeeper.reads == 3
    assert [doorkeeper.admit(("c", (1,))) for _ in range(4)] == [False, False, True, False]
    hits = 10
    for window in range(2, 20):  # no hits: twice as many each window, up to the bound
        doorkeeper.observe(lambda now=hits: now, fills=window * YIELD_WINDOW, now=window)
    assert doorkeeper.keep == MAX_KEEP and doorkeeper.raised == 3  # (1, 2, 4, 7)
    assert [doorkeeper.admit(("c", (2,))) for _ in range(MAX_KEEP + 1)] == \
        [False] * MAX_KEEP + [True]
    hits += 2 * YIELD_WINDOW  # two hits per fill: paid, not well: the rule stays
    doorkeeper.observe(lambda: hits, fills=20 * YIELD_WINDOW, now=20)
    assert doorkeeper.keep == MAX_KEEP
    hits += int(PAYS * YIELD_WINDOW)  # paid well: one read fewer
    doorkeeper.observe(lambda: hits, fills=21 * YIELD_WINDOW, now=21)
    assert doorkeeper.keep == MAX_KEEP - 1
    for window in range(22, 40):
        hits += int(PAYS * YIELD_WINDOW)
        doorkeeper.observe(lambda now=hits: now, fills=window * YIELD_WINDOW, now=window)
    assert doorkeeper.keep == 1 and not doorkeeper.strict  # (never below the second read)
    assert [doorkeeper.admit(("c", (3,))) for _ in range(2)] == [False, True]
    doorkeeper.keep = 3  # a key on its way keeps its reads: admitted after three in all
    assert [doorkeeper.admit(("c", (4,))) for _ in range(4)] == [False, False, False, True]
    assert Admission("always").reads == 0


def test_admission_looks_at_a_window_of_time_too() -> None:
    """A window is :data:`YIELD_WINDOW` fills and :data:`YIELD_SECONDS`, the first from the
    first miss: fills that all started within a few ms (a cold start) are judged once their
    hits had time to come."""
    doorkeeper = Admission("second")
    t0 = 100.0  # (the first miss: the host ran for a while before)
    doorkeeper.observe(lambda: 0, fills=0, now=t0)
    doorkeeper.observe(lambda: 0, fills=YIELD_WINDOW, now=t0 + YIELD_SECONDS / 2)
    assert doorkeeper.keep == 1  # (too soon: the fills' hits come after they install)
    doorkeeper.observe(lambda: 0, fills=4 * YIELD_WINDOW, now=t0 + YIELD_SECONDS / 2)
    assert doorkeeper.keep == 1
    doorkeeper.observe(lambda: 0, fills=4 * YIELD_WINDOW, now=t0 + YIELD_SECONDS)
    assert doorkeeper.keep == 2 and doorkeeper.raised == 1  # (one look: one step)
    asked: list[int] = []  # (the hits, a call into the lanes, asked for only when due)

    def hits() -> int:
        asked.append(1)
        return 0

    doorkeeper.observe(hits, fills=5 * YIELD_WINDOW, now=t0 + 1.5 * YIELD_SECONDS)
    doorkeeper.observe(hits, fills=5 * YIELD_WINDOW - 1, now=t0 + 3 * YIELD_SECONDS)
    assert not asked and doorkeeper.keep == 2
    doorkeeper.observe(hits, fills=5 * YIELD_WINDOW, now=t0 + 3 * YIELD_SECONDS)
    assert asked == [1] and doorkeeper.keep == 4


def test_auto_admission_fills_first_reads_while_keys_come_back() -> None:
    """``auto``: a cold cache admits a key on its first read (keep 0) but a sample of keys
    (one in :data:`SAMPLE` by hash) on its second. It goes to the second read (and on as
    ``second``) when a window's fills yield fewer than :data:`ZERO_YIELD` hits each, or
    once :data:`MIN_SAMPLES` sampled keys were read, fewer than :data:`COLD_RETURNS` of them
    were read again; back to the first read once fills pay well and most keys refused on
    their first read over a window came back for their second."""
    doorkeeper = Admission("auto")
    assert doorkeeper.keep == 0 and doorkeeper.reads == 1 and not doorkeeper.strict
    t, fills, hits = 0.0, 0, 0
    doorkeeper.observe(lambda: 0, fills=0, now=t)  # (the first miss)
    keys = range(100 * SAMPLE * MIN_SAMPLES)
    sampled = [k for k in keys if hash((k,)) % SAMPLE == 0][:MIN_SAMPLES + 10]
    others = [k for k in keys if hash((k,)) % SAMPLE][:100]
    assert all(doorkeeper.admit((k,)) for k in others) and doorkeeper.refused == 0
    few = sampled[:MIN_SAMPLES // 2]
    assert not any(doorkeeper.admit((k,)) for k in few)  # (the sample: refused once)
    assert doorkeeper.refused == len(few)
    for k in few[:len(few) // 5]:  # a fifth came back (a long tail)
        assert doorkeeper.admit((k,))
    t, fills, hits = t + 1.0, fills + YIELD_WINDOW, hits + int(2 * ZERO_YIELD * YIELD_WINDOW)
    doorkeeper.observe(lambda h=hits: h, fills=fills, now=t)  # (a cold start's lagging hits)
    assert doorkeeper.keep == 0  # (not judged before MIN_SAMPLES sampled keys)
    for k in sampled[len(few):]:
        assert not doorkeeper.admit((k,))
    assert doorkeeper.refused >= MIN_SAMPLES
    t, fills, hits = t + 1.0, fills + YIELD_WINDOW, hits + 10 * YIELD_WINDOW
    doorkeeper.observe(lambda h=hits: h, fills=fills, now=t)
    assert doorkeeper.keep == 1 and doorkeeper.raised == 1 and doorkeeper.reads == 2
    for k in range(10_000, 10_010):  # ten keys refused on their first read, two come back
        doorkeeper.admit((k,))
    assert doorkeeper.admit((10_000,)) and doorkeeper.admit((10_001,))
    t, fills, hits = t + 1.0, fills + YIELD_WINDOW, hits + 10 * YIELD_WINDOW
    doorkeeper.observe(lambda h=hits: h, fills=fills, now=t)
    assert doorkeeper.keep == 1  # (paid well, but most keys read once were not read again)
    for k in range(20_000, 20_010):  # ten refused, eight come back
        doorkeeper.admit((k,))
    assert all(doorkeeper.admit((k,)) for k in range(20_000, 20_008))
    t, fills, hits = t + 1.0, fills + YIELD_WINDOW, hits + 10 * YIELD_WINDOW
    doorkeeper.observe(lambda h=hits: h, fills=fills, now=t)
    assert doorkeeper.keep == 0 and doorkeeper.reads == 1
    for k in sampled:  # (a new stint at 0: its own sample; these keys come back)
        doorkeeper.admit((k,))
        doorkeeper.admit((k,))
    t, fills, hits = t + 1.0, fills + YIELD_WINDOW, hits + 10 * YIELD_WINDOW
    doorkeeper.observe(lambda h=hits: h, fills=fills, now=t)
    assert doorkeeper.keep == 0
    t, fills = t + 1.0, fills + YIELD_WINDOW  # one-off reads: no hits
    doorkeeper.observe(lambda h=hits: h, fills=fills, now=t)
    assert doorkeeper.keep == 1 and doorkeeper.raised == 2
    t, fills = t + 1.0, fills + YIELD_WINDOW
    doorkeeper.observe(lambda h=hits: h, fills=fills, now=t)
    assert doorkeeper.keep == 2  # (then doubling, as ``second``)
    assert Admission("second").keep == 1  # (``second`` never admits a first read)


def test_admission_of_keys_another_doorkeeper_saw_read_once() -> None:
    """The lanes' doorkeeper (``proxy.lane_misses``) counted a key's first reads: its next
    read comes after those (``seen_before``, or ``vouch`` before a read on the event loop);
    a key on its way to a later read stays there."""
    doorkeeper = Admission("second")
    assert doorkeeper.admit(("c", (1,)), seen_before=1)
    doorkeeper.vouch(("c", (2,)))
    assert doorkeeper.admit(("c", (2,)))
    assert not doorkeeper.admit(("c", (3,)))
    doorkeeper.keep = 2
    assert [doorkeeper.admit(("c", (4,)), seen_before=1) for _ in range(2)] == [False, True]
    assert doorkeeper.admit(("c", (5,)), seen_before=2)  # (the lanes kept two: the third)
    doorkeeper.keep = 3
    assert not doorkeeper.admit(("c", (6,)), seen_before=2)  # (told 2, needs 3 kept now)
    assert doorkeeper.admit(("c", (6,)), seen_before=2)
    assert doorkeeper.refused == 3


def test_admission_forgets_one_off_keys_past_its_capacity() -> None:
    doorkeeper = Admission("second", capacity=3)
    for k in range(3):
        doorkeeper.admit(k)
    doorkeeper.admit(99)  # the window starts over: 0..2 are one-off keys again
    assert not doorkeeper.admit(0)
    with pytest.raises(ValueError):
        Admission("sometimes")


def _queue(**policy: Any) -> FillQueue:
    return FillQueue(FillPolicy(**policy))


def test_queue_bound() -> None:
    q = _queue(max_queued=2)
    q.push("a", frozenset({1}), 0.0)
    assert not q.full
    q.push("b", frozenset({1}), 0.0)
    assert q.full


def test_batches_read_one_set_of_tables_and_respect_the_per_table_bound() -> None:
    q = _queue(batch=3, per_table=1)
    for name, tables in (("a", {1}), ("b", {2}), ("c", {1}), ("d", {1}), ("e", {1})):
        q.push(name, frozenset(tables), 0.0)
    batch, gone = q.take(0.0)
    assert [x.run for x in batch] == ["a", "c", "d"] and not gone  # table 1, at most 3
    batch2, _ = q.take(0.0)
    assert [x.run for x in batch2] == ["b"]  # table 1 is busy (per_table=1): e waits
    assert [x.run for x in q.waiting] == ["e"]
    assert q.take(0.0) == ([], [])
    q.finished(batch, True, 1.0)
    assert [x.run for x in q.take(1.0)[0]] == ["e"]


def test_a_failed_batch_backs_its_tables_off_exponentially() -> None:
    q = _queue(backoff=(1.0, 3.0))
    q.push("a", frozenset({1}), 0.0)
    batch, _ = q.take(0.0)
    q.finished(batch, False, 10.0)
    assert q.backing_off({1}, 10.5) and not q.backing_off({1}, 11.0)
    assert not q.backing_off({2}, 10.5)
    q.push("c", frozenset({1, 2}), 10.6)
    batch, gone = q.take(10.7)
    assert not batch and [x.run for x in gone] == ["c"]  # given up: its keys miss on
    q.push("d", frozenset({1}), 11.5)
    batch, _ = q.take(11.5)
    q.finished(batch, False, 12.0)
    assert q.backing_off({1}, 13.9) and not q.backing_off({1}, 14.0)  # doubled: 2 s
    q.push("e", frozenset({1}), 14.0)
    batch, _ = q.take(14.0)
    q.finished(batch, False, 20.0)
    assert q.backing_off({1}, 22.9) and not q.backing_off({1}, 23.0)  # at most 3 s
    q.push("f", frozenset({1}), 23.0)
    batch, _ = q.take(23.0)
    q.finished(batch, True, 24.0)
    assert not q.backing_off({1}, 24.0) and not q.busy


def test_seen_settles_at_the_next_cached_read() -> None:
    seen = Seen()
    assert may_serve(seen, NEVER)  # a session that never went upstream
    seen.upstream()
    assert not may_serve(seen, 100.0)  # not settled: the answer's time is not known yet
    assert seen.settle(5.0) == 5.0 and not seen.pending
    assert not may_serve(seen, 4.9) and may_serve(seen, 5.0)
    assert seen.settle(7.0) == 5.0  # nothing went upstream since


def test_coverage_coalesces_barriers_and_serves_every_session_it_follows() -> None:
    emitted: list[asyncio.Future[None]] = []

    async def emit(_on_pass: object) -> None:
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        emitted.append(fut)
        await fut

    async def scenario() -> None:
        cov = Coverage(emit)
        a, b = Seen(), Seen()
        a.upstream()
        b.upstream()
        assert not covered(a, cov, 1.0) and not covered(b, cov, 2.0)
        waits = [asyncio.create_task(cov.wait(a.at, 5.0)),
                 asyncio.create_task(cov.wait(b.at, 5.0))]
        await asyncio.sleep(0)
        assert len(emitted) == 1  # one barrier in flight for both
        cov.passed(3.0)  # a barrier sent at 3.0 (a fill marker, say) passed
        assert await asyncio.gather(*waits) == [True, True]
        assert covered(a, cov, 9.0) and covered(b, cov, 9.0)
        emitted[0].set_result(None)
        late = asyncio.create_task(cov.wait(time.monotonic() + 1000.0, 0.05))
        assert not await late  # not passed in time: the read goes upstream
        assert len(emitted) == 2  # (the next barrier was asked for)
        cov.stop()

    asyncio.run(scenario())


def test_coverage_calls_back_once_a_barrier_after_the_need_passed() -> None:
    """``Coverage.when`` (a session back to its lane after a miss, ``proxy.aftermiss``): a
    barrier is sent, the call runs once one sent at or after the need passed (not before),
    at once when covered already, never after the barriers failed."""
    emitted: list[asyncio.Future[None]] = []

    async def emit(_on_pass: object) -> None:
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        emitted.append(fut)
        await fut

    async def fail(_on_pass: object) -> None:
        raise ConnectionError("the stream is down")

    async def scenario() -> None:
        cov = Coverage(emit)
        calls: list[str] = []
        need = time.monotonic()
        cov.when(need, lambda: calls.append("a"))
        await asyncio.sleep(0)
        assert len(emitted) == 1 and calls == []  # a barrier sent after ``need`` is flying
        cov.passed(need - 1.0)  # an older marker: not enough
        assert calls == []
        emitted[0].set_result(None)
        for _ in range(3):
            await asyncio.sleep(0)
        assert calls == ["a"]
        cov.when(need, lambda: calls.append("b"))  # covered already: at once
        assert calls == ["a", "b"]
        failing = Coverage(fail)
        failing.when(time.monotonic(), lambda: calls.append("c"))
        for _ in range(3):
            await asyncio.sleep(0)
        assert calls == ["a", "b"] and not failing._then
        cov.stop()

    asyncio.run(scenario())


def test_coverage_sends_a_second_barrier_without_waiting_for_the_first() -> None:
    """A session that falls behind after the barrier in flight was sent gets its own at once
    (at most ``MAX_IN_FLIGHT`` in flight); one more waits for one to land, which then sends
    it."""
    emitted: list[asyncio.Future[None]] = []

    async def emit(_on_pass: object) -> None:
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        emitted.append(fut)
        await fut

    def later() -> float:  # a time after every earlier reading of the clock
        t = time.monotonic()
        while time.monotonic() == t:
            pass
        return time.monotonic()

    async def turns() -> None:  # let the tasks run up to their next wait
        for _ in range(5):
            await asyncio.sleep(0)

    async def scenario() -> None:
        cov = Coverage(emit)
        waits = []
        for n in range(1, MAX_IN_FLIGHT + 1):
            waits.append(asyncio.create_task(cov.wait(later(), 5.0)))
            await turns()
            assert len(emitted) == n  # not behind the earlier ones' landing
        last = asyncio.create_task(cov.wait(later(), 5.0))
        await turns()
        assert len(emitted) == MAX_IN_FLIGHT  # as many as may fly: the last one waits
        emitted[0].set_result(None)
        assert await waits[0]
        await turns()
        assert not waits[1].done() and len(emitted) == MAX_IN_FLIGHT + 1  # (sent by it)
        for fut, wait in zip(emitted[1:MAX_IN_FLIGHT], waits[1:], strict=True):
            fut.set_result(None)
            assert await wait
        await turns()
        assert not last.done()
        emitted[MAX_IN_FLIGHT].set_result(None)
        assert await last
        assert cov.barriers == MAX_IN_FLIGHT + 1
        cov.stop()

    asyncio.run(scenario())


def test_default_budget_from_the_cgroup_or_the_machine(tmp_path: Path) -> None:
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       8000000 kB\nMemFree: 1 kB\n")
    cgroup = tmp_path / "memory.max"
    cgroup.write_text("max\n")
    assert default_budget(str(meminfo), str(cgroup)) == 8000000 * 1024 // 4
    cgroup.write_text("1073741824\n")
    assert default_budget(str(meminfo), str(cgroup)) == 1073741824 // 4
    assert default_budget(str(tmp_path / "none"), str(tmp_path / "none")) is not None


def test_budgets_cover_the_memos_and_none_means_none() -> None:
    memos = HitMemos()
    assert budgets(Settings(upstream=UP, memory_budget=4_000_000), memos) == 3_000_000
    assert memos.limit == 1_000_000
    memos = HitMemos()
    assert budgets(Settings(upstream=UP, memory_budget=0), memos) is None
    assert memos.limit == TOTAL_BYTES
    memos = HitMemos()
    default = budgets(Settings(upstream=UP), memos)
    machine = default_budget()
    assert default is not None and machine is not None
    assert default + memos.limit == machine
    assert memos.limit == min(TOTAL_BYTES, machine // 4)


def test_memory_budget_none_from_a_flag() -> None:
    settings, _ = resolve({"upstream": UP, "memory_budget": "none"}, {}, {})
    assert settings.memory_budget == 0
    assert resolve({"upstream": UP}, {}, {})[0].memory_budget is None


def test_take_answers_as_a_whole_scan_would() -> None:
    """``FillQueue.take``'s shortcuts (no scan when every waiting fill's tables are at their
    bound; none past a full batch when nothing backs off) change nothing it returns."""
    import random

    rng = random.Random(5)
    for _ in range(200):
        q = _queue(batch=rng.randint(1, 4), per_table=rng.randint(1, 2))
        now, taken = 0.0, []
        for step in range(40):
            now += rng.random()
            action = rng.random()
            if action < 0.5:
                q.push(step, frozenset(rng.sample([1, 2, 3], rng.randint(1, 2))), now)
            elif action < 0.8:
                waiting = list(q.waiting)
                batch, gone = q.take(now)
                limit = q.policy.per_table
                want_gone = [x for x in waiting if q.backing_off(x.tables, now)]
                rest = [x for x in waiting if x not in want_gone]
                first = next((x for x in rest if all(
                    q.busy[t] - (t in (batch[0].tables if batch else ())) < limit
                    for t in x.tables)), None)
                want = [] if first is None else [first, *[
                    x for x in rest if x is not first and x.tables <= first.tables
                    and rest.index(x) > rest.index(first)][:q.policy.batch - 1]]
                assert gone == want_gone and batch == want
                assert list(q.waiting) == [x for x in rest if x not in want]
                assert sum(q.sets.values()) == len(q.waiting)
                if batch:
                    taken.append(batch)
            elif taken:
                q.finished(taken.pop(rng.randrange(len(taken))), rng.random() < 0.8, now)
