# cython: language_level=3
"""Twins of the hot aggregate accumulators of ``engine.dataflow.ops.accumulators``:
CountStar, Count, IntSum, NumericSum, NumericAvg (same contracts, parity-tested).

Imports nothing from the project: ``configure`` receives the wide decimal context, the
SUM/AVG finishing functions and the numeric type's oid from the pure module when it loads
this twin (a numeric SUM finishes here: NULL over no values, else its exact total).
Declarations are in ``accumulators.pxd`` (the aggregate's twin calls these classes directly).
"""

from decimal import Decimal

cdef object CTX = None
cdef object _ADD = None, _SUB = None, _MUL = None  # CTX's bound methods
cdef object FINISH_SUM = None
cdef object FINISH_AVG = None
cdef object ZERO = Decimal(0)
cdef object _IS_FINITE = Decimal.is_finite  # the unbound method: no lookup per value
cdef int NUMERIC = -1


def configure(ctx, finish_sum, finish_avg, int numeric_oid):
    global CTX, FINISH_SUM, FINISH_AVG, _ADD, _SUB, _MUL, NUMERIC
    CTX, FINISH_SUM, FINISH_AVG, NUMERIC = ctx, finish_sum, finish_avg, numeric_oid
    _ADD, _SUB, _MUL = ctx.add, ctx.subtract, ctx.multiply


cpdef Py_ssize_t decimal_scale(object value) except -1:
    cdef str text = str(value)
    cdef Py_ssize_t n = len(text), i, dot = -1, e = -1, frac
    cdef Py_UCS4 ch
    for i in range(n):  # one pass over the characters: the point, then an exponent
        ch = text[i]
        if ch == u'.':
            dot = i
        elif ch == u'E':
            e = i
            break
    if e < 0:
        return 0 if dot < 0 else n - dot - 1
    frac = 0 if dot < 0 else e - dot - 1
    frac -= int(text[e + 1:])
    return frac if frac > 0 else 0


cdef class CountStar:
    def __init__(self, int oid):
        self.oid = oid
        self.n = 0

    cpdef add(self, object value, object weight):
        self.n += weight

    cpdef value(self):
        return self.n


cdef class Count(CountStar):
    cpdef add(self, object value, object weight):
        if value is not None:
            self.n += weight


cdef class IntSum:
    def __init__(self, int oid):
        self.oid = oid
        self.total = 0
        self.nonnull = 0

    cpdef add(self, object value, object weight):
        if value is not None:
            self.total += value * weight
            self.nonnull += weight

    cpdef value(self):
        return FINISH_SUM(self.total, self.nonnull, self.oid)


cdef class NumericSum:
    def __init__(self, int oid):
        self.oid = oid
        self.total = ZERO
        self.nonnull = self.finite = self.nan = self.pinf = self.ninf = 0
        self.scales = {}
        self.maxscale = self.seen = 0
        self.max_ok = True

    cpdef add(self, object value, object weight):
        cdef Py_ssize_t scale = 0
        cdef long long w = weight, n
        cdef object count
        if value is None:
            return
        self.nonnull += w
        if type(value) is Decimal:
            if not _IS_FINITE(value):
                if value.is_nan():
                    self.nan += w
                elif value > 0:
                    self.pinf += w
                else:
                    self.ninf += w
                return
            scale = decimal_scale(value)
        if w == 1:
            self.total = _ADD(self.total, value)
        elif w == -1:
            self.total = _SUB(self.total, value)
        else:
            self.total = _ADD(self.total, _MUL(value, weight))
        self.finite += w
        count = self.scales.get(scale)
        n = w if count is None else <long long>count + w
        if n:
            self.scales[scale] = n
            if scale > self.maxscale:
                self.maxscale = scale
        else:
            del self.scales[scale]
            self.max_ok = False
        if scale > self.seen:
            self.seen = scale
        if not self.finite:
            self.total = ZERO
            self.seen = self.maxscale = 0
            self.max_ok = True

    cpdef exact_total(self):
        if self.nan or (self.pinf and self.ninf):
            return Decimal("NaN")
        if self.pinf or self.ninf:
            return Decimal("Infinity" if self.pinf else "-Infinity")
        if not self.max_ok:
            self.maxscale = max(self.scales) if self.scales else 0
            self.max_ok = True
        if self.seen == self.maxscale:
            return self.total
        return self.total.quantize(Decimal(1).scaleb(-self.maxscale), context=CTX)

    cpdef value(self):
        if self.oid == NUMERIC:  # pgmath.finish_sum of a Decimal total into numeric
            return None if self.nonnull == 0 else self.exact_total()
        return FINISH_SUM(self.exact_total(), self.nonnull, self.oid)


cdef class NumericAvg(NumericSum):
    cpdef value(self):
        return FINISH_AVG(self.exact_total(), self.nonnull, self.oid)
