# cython: language_level=3
"""Twins of ``engine.dataflow.state.base``: ``apply_changes``, a base store's apply loop, and
``present_rows``, the lookup of a present index key (same contracts, parity-tested). Inserts, deletes and updates of a table with a primary key are
applied here, directly on the store's rows and partial indexes; everything else (tables
without a primary key, TRUNCATE, rows with UNKNOWN columns) is handed to the store's own
methods.

Imports nothing from the project: ``configure`` receives the change kinds, the sentinels and
the index class.
"""

from cython_ext.records cimport row_size
from cython_ext.rowkeys cimport key_of as _key

cdef object INSERT = None, UPDATE = None, DELETE = None, TOAST = None, UNKNOWN = None
cdef object Index = None, consolidate = None


def configure(insert, update, delete, toast, unknown, index, consolidate_fn):
    global INSERT, UPDATE, DELETE, TOAST, UNKNOWN, Index, consolidate
    INSERT, UPDATE, DELETE, TOAST, UNKNOWN, Index = insert, update, delete, toast, unknown, index
    consolidate = consolidate_fn


cdef inline bint _has(tuple row, object marker):
    cdef object v
    for v in row:
        if v is marker:
            return True
    return False


cdef class _Tables:
    """The store's structures (kept on the store, ``BaseStore.twin``: its row dictionary and
    an index's sets are never replaced; rebuilt when an index is added)."""
    cdef dict rows
    cdef list indexes  # [(cols, present, by_key)]
    cdef tuple pk
    cdef Py_ssize_t bytes
    cdef Py_ssize_t nindexes

    def __init__(self, store):
        cdef object idx
        self.rows = store.rows
        self.pk = store.pk
        self.indexes = [(<tuple>idx.cols, <set>idx.present, <dict>idx.by_key)
                        for idx in store.indexes.values()]
        self.bytes = 0
        self.nindexes = len(<dict>store.indexes)

    cdef object unstore(self, tuple ident):
        cdef list entry = self.rows.get(ident)
        cdef tuple row, item
        cdef set idents
        cdef object key
        if entry is None:
            return None
        row = entry[0]
        del self.rows[ident]
        self.bytes -= <Py_ssize_t>entry[2]
        for item in self.indexes:
            key = _key(row, <tuple>item[0])
            idents = (<dict>item[2]).get(key)
            if idents is not None:
                idents.discard(ident)
                if not idents:
                    del (<dict>item[2])[key]
        return row

    cdef bint covered(self, tuple row):
        cdef tuple item
        cdef set present
        for item in self.indexes:
            present = item[1]
            if present and _key(row, <tuple>item[0]) in present:
                return True
        return False

    cdef void store(self, tuple row):
        cdef tuple ident = _key(row, self.pk), item
        cdef Py_ssize_t size
        cdef object key
        cdef set idents
        if ident in self.rows:
            return
        size = row_size(row)
        self.rows[ident] = [row, 1, size]
        self.bytes += size
        for item in self.indexes:
            key = _key(row, <tuple>item[0])
            idents = (<dict>item[2]).get(key)
            if idents is None:
                (<dict>item[2])[key] = {ident}
            else:
                idents.add(ident)


cdef _Tables _tables(object store):
    """The store's ``_Tables`` with a zero byte count (made anew if an index was added)."""
    cdef object t = store.twin
    if t is None or (<_Tables>t).nindexes != len(<dict>store.indexes) \
            or (<_Tables>t).rows is not store.rows:
        t = store.twin = _Tables(store)
    (<_Tables>t).bytes = 0
    return <_Tables>t


def apply_changes(object store, object changes):
    if not store.pk or store.spans:  # (filled intervals: the store's own coverage test)
        return _fallback(store, changes)
    cdef list delta = [], evictions = []
    cdef _Tables t = _tables(store)
    cdef object change, kind, old, new, stored, ident
    cdef set seen = set()  # identities changed: all distinct (and no update) = consolidated
    cdef bint distinct = True
    for change in changes:
        kind = change.kind
        new = change.new
        if kind is INSERT:
            stored = None
            if distinct and new is not None:
                ident = _key(<tuple>new, t.pk)
                distinct = ident not in seen
                seen.add(ident)
        elif kind is DELETE or kind is UPDATE:
            old = change.old
            if old is None:
                old = new
            ident = _key(<tuple>old, t.pk)
            if distinct:
                distinct = kind is DELETE and ident not in seen
                seen.add(ident)
            stored = t.unstore(ident)
            if stored is not None:
                delta.append((stored, -1))
            if kind is DELETE:
                continue
            if _has(<tuple>new, TOAST):
                new = tuple([(stored[i] if stored is not None else UNKNOWN) if v is TOAST
                             else v for i, v in enumerate(new)])
        else:  # TRUNCATE: the store's own method (it may change the index set)
            distinct = False
            store.bytes += t.bytes
            d, e = store.apply(change)
            delta.extend(d)
            evictions.extend(e)
            t = _tables(store)
            continue
        if _has(<tuple>new, UNKNOWN):  # evicts index keys: the store's own method
            store.bytes += t.bytes
            d, e = store._arrive(new, [])
            delta.extend(d)
            evictions.extend(e)
            t = _tables(store)
        elif t.covered(<tuple>new):
            t.store(<tuple>new)
            delta.append((new, 1))
        else:
            evictions.append(new)
    store.bytes += t.bytes
    return (delta if distinct else consolidate(delta)), evictions


cdef tuple _fallback(object store, object changes):
    cdef list delta = [], evictions = []
    for change in changes:
        d, e = store.apply(change)
        delta.extend(d)
        evictions.extend(e)
    return consolidate(delta), evictions


def present_rows(object store, tuple cols, tuple key):
    cdef object idx = (<dict>store.indexes).get(cols), ident
    cdef object idents
    cdef dict rows
    cdef list out, entry
    if idx is None or key not in <set>idx.present:
        return None
    idents = (<dict>idx.by_key).get(key)
    if not idents:
        return []
    rows = store.rows
    out = []
    if store.pk:  # one row per identity
        for ident in <set>idents:
            out.append((<list>rows[ident])[0])
        return out
    for ident in <set>idents:
        entry = rows[ident]
        out.extend([entry[0]] * <Py_ssize_t>entry[1])
    return out
