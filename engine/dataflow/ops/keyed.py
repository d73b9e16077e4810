"""Shared machinery of the stateful operators whose state is partial by key.

Owns: ``KeyedNode`` - the present set of state keys ``d`` (a projection of the group ``g``),
the ``d -> groups`` index, pulls that replay into holes (a pull that determines ``d`` fills
``d`` from the input and installs it; one that does not computes transiently), eviction of a
key (its output rows plus a *key row*: the key columns known, everything else ``UNKNOWN``,
so that downstream keys that depended on the key's absence of rows are evicted too), and
eviction rows from the input.

Invariant K: a key ``d`` is present iff every group with that ``d`` is in the state with all
of its input rows accounted; deltas for groups whose ``d`` is not present are dropped; a group
is in the state only while its ``d`` is present or the node is full (the aggregate's twin
skips the present check for a group it finds).

Full mode: a pull whose columns do not determine ``d`` (a key without provenance - e.g. a
reader keyed on an aggregate's output, or a join driven through this node by a non-key
column) can only be answered by state that holds *every* group, so the node replays its whole
input once and becomes full (every ``d`` present, ``FULL`` in the LRU). Evicting anything from
a full node empties it and evicts everything downstream (the key row is all UNKNOWN).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence

from engine.dataflow.node import Cols, Node, PullCtx, Runtime
from engine.dataflow.records import UNKNOWN, Row, has_unknown, key_of

#: The LRU key of a node in full mode.
FULL: Row = ("<full>",)


class KeyedNode(Node):
    stateful = True

    def __init__(self, nid: int, source: Node, width: int, group: Cols, key_pos: Cols,
                 key_out: Cols, runtime: Runtime) -> None:
        super().__init__(nid, (source,), width)
        self.group = group  # input positions forming the group g
        self.key_pos = key_pos  # positions in g forming the state key d
        self.key_out = key_out  # output positions of the key columns
        self.key_in = tuple(group[i] for i in key_pos)  # input positions of the key
        self.rt = runtime
        self.present: set[Row] = set()
        self.by_d: dict[Row, set[Row]] = {}
        self.full = False
        self.d_is_g = key_pos == tuple(range(len(group)))

    def has(self, d: Row) -> bool:
        return self.full or d in self.present

    def prefetch_columns(self) -> tuple[Node, list[int | None]] | None:
        """A missing key ``d`` is filled by pulling the input on ``key_in = d`` (``pull``):
        over a chain of filters and projections of a base node, the key's output columns
        trace to the base columns of ``key_in`` (the eager aggregate of a join's right side,
        ``engine.plan.rules.eager_aggs``, gets its votes prefetched with the stories)."""
        below = self.inputs[0].base_columns()
        if below is None:
            return None
        base, cols = below
        out: list[int | None] = [None] * self.width
        for o, i in zip(self.key_out, self.key_in, strict=True):
            out[o] = cols[i]
        return base, out

    # -- subclass hooks ----------------------------------------------------------------
    def output_rows(self, g: Row) -> list[Row]:
        raise NotImplementedError

    def drop_group(self, g: Row) -> None:
        raise NotImplementedError

    def build(self, rows: Iterable[Row]) -> dict[Row, object]:
        """Fresh group states from complete input rows."""
        raise NotImplementedError

    def adopt(self, g: Row, state: object) -> None:
        raise NotImplementedError

    def d_of(self, g: Row) -> Row:
        return g if self.d_is_g else key_of(g, self.key_pos)

    def note_group(self, g: Row) -> None:
        self.by_d.setdefault(self.d_of(g), set()).add(g)

    def forget_group(self, g: Row) -> None:
        d = self.d_of(g)
        gs = self.by_d.get(d)
        if gs is not None:
            gs.discard(g)
            if not gs:
                del self.by_d[d]

    def key_row(self, d: Row) -> Row:
        row: list[object] = [UNKNOWN] * self.width
        for p, v in zip(self.key_out, d, strict=True):
            row[p] = v
        return tuple(row)

    def install(self, d: Row, rows: Iterable[Row]) -> None:
        for g, state in self.build(rows).items():
            self.adopt(g, state)
            self.note_group(g)
        self.present.add(d)
        self.rt.touch(self.nid, d)

    def evict_key(self, key: Hashable) -> list[Row]:
        d: Row = key  # type: ignore[assignment]
        if self.full:
            return self._empty_full()
        if d not in self.present:
            return []
        self.present.discard(d)
        self.rt.forget(self.nid, d)
        out: list[Row] = []
        for g in self.by_d.pop(d, set()):
            out.extend(self.output_rows(g))
            self.drop_group(g)
        out.append(self.key_row(d))
        return out

    def _empty_full(self) -> list[Row]:
        self.full = False
        self.rt.forget(self.nid, FULL)
        out = [r for gs in self.by_d.values() for g in gs for r in self.output_rows(g)]
        for gs in list(self.by_d.values()):
            for g in gs:
                self.drop_group(g)
        self.by_d.clear()
        self.present.clear()
        out.append((UNKNOWN,) * self.width)
        return out

    def evict_all(self) -> list[Row]:
        if self.full:
            return self._empty_full()
        out: list[Row] = []
        for d in list(self.present):
            out.extend(self.evict_key(d))
        return out

    def evict_rows(self, rows: list[list[Row]]) -> list[Row]:
        out: list[Row] = []
        for row in rows[0]:
            d = key_of(row, self.key_in)
            if has_unknown(d):
                return out + self.evict_all()
            out.extend(self.evict_key(d))
        return out

    def clear(self) -> None:
        for d in list(self.present):
            self.rt.forget(self.nid, d)
        self.rt.forget(self.nid, FULL)
        self.full = False
        self.present.clear()
        self.by_d.clear()

    def pull(self, cols: Cols, key: Row, ctx: PullCtx) -> list[Row] | None:
        if None in key:
            return []
        if cols == self.key_out and (self.full or key in self.present):
            self._touch(key, ctx)
            output_rows = self.output_rows
            return [r for g in self.by_d.get(key, ()) for r in output_rows(g)]
        bound = dict(zip(cols, key, strict=True))
        if all(p in bound for p in self.key_out):
            d = tuple(bound[p] for p in self.key_out)
            if not self.has(d):
                if ctx.partial:
                    return []
                if ctx.probe:
                    return None
                rows = self.inputs[0].pull(self.key_in, d, ctx)
                if rows is None:
                    return None
                self.install(d, rows)
            self._touch(d, ctx)
            found = [r for g in self.by_d.get(d, ()) for r in self.output_rows(g)]
            return _filter(found, bound)
        if not self.full and ctx.probe:
            return None
        if not self.full and not ctx.partial and not self._become_full(ctx):
            return None
        if self.full:
            self._touch(FULL, ctx)
        found = [r for gs in self.by_d.values() for g in gs for r in self.output_rows(g)]
        return _filter(found, bound)

    def count(self, cols: Cols, key: Row, ctx: PullCtx) -> int | None:
        if cols == self.key_out and (self.full or key in self.present) and None not in key:
            if not ctx.lookup:
                self._touch(key, ctx)
            gs = self.by_d.get(key)
            if not gs:
                return 0
            if self.d_is_g:  # the one group is the key
                return len(self.output_rows(key))
            output_rows = self.output_rows
            return sum([len(output_rows(g)) for g in gs])
        return super().count(cols, key, ctx)

    def _touch(self, d: Row, ctx: PullCtx) -> None:
        if ctx.lookup or ctx.probe or ctx.partial:
            return
        key = FULL if self.full else d
        self.rt.touch(self.nid, key)
        ctx.used.add((self.nid, key))

    def _become_full(self, ctx: PullCtx) -> bool:
        rows = self.inputs[0].pull((), (), ctx)
        if rows is None:
            return False
        for d in list(self.present):  # present keys are replaced by the complete state
            self.rt.forget(self.nid, d)
            for g in self.by_d.pop(d, set()):
                self.drop_group(g)
        self.present.clear()
        self.by_d.clear()
        for g, state in self.build(rows).items():
            self.adopt(g, state)
            self.note_group(g)
        self.full = True
        self.rt.touch(self.nid, FULL)
        return True


def _filter(rows: Sequence[Row], bound: dict[int, object]) -> list[Row]:
    return [r for r in rows if all(r[p] == v or r[p] is UNKNOWN for p, v in bound.items())]
