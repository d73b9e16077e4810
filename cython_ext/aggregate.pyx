# cython: language_level=3
"""Twin of ``engine.dataflow.ops.aggregate.fold``: the aggregate's per-row loop (same contract,
parity-tested). Reads the node's state attributes (groups, present, full, d_is_g, group,
key_pos, args, arg_cols) and calls its ``new_group``, ``drop_group`` and ``forget_group``
hooks; an argument that is a plain column is read directly (``arg_cols``). A group's state is
``[count, accumulators, output row or STALE, bytes]``.

Imports nothing from the project: ``configure`` receives the evaluation error class and
``records.same_print``. The accumulator twins (``cython_ext.accumulators``) are called
directly; any other accumulator (the pure ones, in parity tests) through ``add``/``value``.
"""

from cpython.ref cimport Py_INCREF
from cpython.tuple cimport PyTuple_New, PyTuple_SET_ITEM

from cython_ext.accumulators cimport CountStar, NumericSum
from cython_ext.rowkeys cimport key_of as _key

cdef object EvalError = None
cdef object same_print = None
cdef object STALE = None


def configure(eval_error, same_print_fn, stale):
    global EvalError, same_print, STALE
    EvalError, same_print, STALE = eval_error, same_print_fn, stale


cdef object _result(tuple g, object st, bint grouped):
    cdef list accs
    cdef object acc, v, res
    cdef Py_ssize_t n = len(g), i
    if st is None or (grouped and (<list>st)[0] == 0):
        return None
    accs = (<list>st)[1]
    res = PyTuple_New(n + len(accs))  # g + values, filled in place
    for i in range(n):
        v = g[i]
        Py_INCREF(v)
        PyTuple_SET_ITEM(res, i, v)
    for acc in accs:
        if type(acc) is NumericSum:
            v = (<NumericSum>acc).value()
        elif type(acc) is CountStar:
            v = (<CountStar>acc).n
        else:
            v = acc.value()
        Py_INCREF(v)
        PyTuple_SET_ITEM(res, n, v)
        n += 1
    return res


cdef inline _add(object acc, object v, object w):
    if type(acc) is NumericSum:
        (<NumericSum>acc).add(v, w)
    elif type(acc) is CountStar:
        (<CountStar>acc).n = (<CountStar>acc).n + w
    else:
        acc.add(v, w)


def fold(object node, list delta):
    cdef dict touched = {}, groups = node.groups
    cdef set errors = set(), present = node.present
    cdef bint full = node.full, d_is_g = node.d_is_g
    cdef tuple gcols = node.group, kpos = node.key_pos, arg_cols = node.arg_cols
    cdef bint grouped = len(gcols) > 0
    cdef list args = node.args, accs, out = []
    cdef Py_ssize_t nacc = len(args), i, c
    cdef object row, w, g, d, st, old, new, v, fn, entry
    for row, w in delta:
        g = _key(<tuple>row, gcols)
        d = g if d_is_g else _key(<tuple>g, kpos)
        entry = touched.get(g)  # [old output row, group state] once touched in this batch
        st = groups.get(g) if entry is None else (<list>entry)[1]
        # a group exists only while its key is present (invariant K): no set lookup then
        if (st is None and not (full or d in present)) or (errors and d in errors):
            continue
        try:
            if entry is None:
                old = STALE if st is None else (<list>st)[2]
                if old is STALE:
                    old = _result(<tuple>g, st, grouped)
                if st is None:
                    st = node.new_group(g)
                touched[g] = [old, st]
            (<list>st)[0] = (<list>st)[0] + w
            accs = (<list>st)[1]
            for i in range(nacc):
                c = <Py_ssize_t>arg_cols[i]
                if c >= 0:
                    v = (<tuple>row)[c]
                else:
                    fn = args[i]
                    v = fn(row) if fn is not None else None
                _add(accs[i], v, w)
        except EvalError:
            errors.add(d)
    for g, entry in touched.items():
        if errors:
            d = g if d_is_g else _key(<tuple>g, kpos)
            if d in errors:
                continue
        old = (<list>entry)[0]
        st = (<list>entry)[1]
        try:
            new = _result(<tuple>g, st, grouped)
        except EvalError:
            errors.add(g if d_is_g else _key(<tuple>g, kpos))
            continue
        (<list>st)[2] = new
        if grouped and (<list>st)[0] == 0:
            node.drop_group(g)
            node.forget_group(g)
        if old != new or (old is not None and new is not None and not same_print(old, new)):
            if old is not None:
                out.append((old, -1))
            if new is not None:
                out.append((new, 1))
    return out, errors
