/*
 * Row kernels of ragbatch's compiled engine.
 *
 * Every function takes flat buffers: values (float64), offsets (int64, n_rows + 1
 * entries, already validated) and preallocated output buffers, and works row by
 * row with the GIL released. Buffers come through the buffer protocol, so
 * array.array, memoryview and NumPy arrays all work without copies.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#ifdef __linux__
#include <sys/mman.h>
#endif

typedef struct {
    Py_buffer view;
    int held;
} Buf;

static void release(Buf *b) {
    if (b->held) {
        PyBuffer_Release(&b->view);
        b->held = 0;
    }
}

/* Get a C-contiguous buffer whose items are 8 bytes of the given kind ('d' or 'q'). */
static int get(PyObject *obj, Buf *b, char kind, int writable, const char *what) {
    int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(obj, &b->view, flags) < 0) {
        return -1;
    }
    b->held = 1;
    const char *f = b->view.format ? b->view.format : "B";
    if (*f == '<' || *f == '=' || *f == '@') {
        f++;
    }
    int ok = b->view.itemsize == 8 &&
             (kind == 'd' ? (*f == 'd') : (*f == 'q' || *f == 'l' || *f == 'Q' || *f == 'L'));
    if (!ok || f[1] != '\0') {
        PyErr_Format(PyExc_TypeError, "%s must be a buffer of %s, not format '%s'", what,
                     kind == 'd' ? "float64" : "int64", b->view.format ? b->view.format : "B");
        release(b);
        return -1;
    }
    return 0;
}

#define N_ITEMS(b) ((b).view.len / 8)

/* The row loops are compiled twice where GCC can pick between copies at load time
 * (ifunc, on x86-64 Linux): for CPUs of x86-64-v3 (AVX2, FMA), whose vector exp (libmvec)
 * does four values at a time, and for any x86-64. The extension then runs at
 * AVX2 speed where the CPU has it and still loads where it does not. */
#if defined(__GNUC__) && __GNUC__ >= 12 && !defined(__clang__) && defined(__x86_64__) && \
    defined(__linux__)
#define FAST __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define FAST
#endif

/* The largest of x[a:b], for a < b. */
static double row_max(const double *x, int64_t a, int64_t b) {
    double top = x[a];
    for (int64_t i = a + 1; i < b; i++) if (x[i] > top) top = x[i];
    return top;
}

FAST static void softmax_rows(const double *x, const int64_t *off, Py_ssize_t rows, double *y) {
    for (Py_ssize_t r = 0; r < rows; r++) {
        int64_t a = off[r], b = off[r + 1];
        if (a == b) continue;
        double top = row_max(x, a, b);
        double total = 0.0;
        for (int64_t i = a; i < b; i++) { y[i] = exp(x[i] - top); total += y[i]; }
        double inv = 1.0 / total;
        for (int64_t i = a; i < b; i++) y[i] *= inv;
    }
}

/* softmax(values, offsets, out) */
static PyObject *softmax(PyObject *self, PyObject *args) {
    PyObject *v, *o, *out;
    Buf bv = {0}, bo = {0}, bout = {0};
    if (!PyArg_ParseTuple(args, "OOO", &v, &o, &out)) return NULL;
    if (get(v, &bv, 'd', 0, "values") || get(o, &bo, 'q', 0, "offsets") ||
        get(out, &bout, 'd', 1, "out")) {
        release(&bv); release(&bo); release(&bout);
        return NULL;
    }
    const double *x = bv.view.buf;
    const int64_t *off = bo.view.buf;
    double *y = bout.view.buf;
    Py_ssize_t rows = N_ITEMS(bo) - 1;
    Py_BEGIN_ALLOW_THREADS
    softmax_rows(x, off, rows, y);
    Py_END_ALLOW_THREADS
    release(&bv); release(&bo); release(&bout);
    Py_RETURN_NONE;
}

/* row_sum(values, offsets, out, mean): sums, or means (NaN for empty rows) */
static PyObject *row_reduce(PyObject *self, PyObject *args) {
    PyObject *v, *o, *out;
    int mean;
    Buf bv = {0}, bo = {0}, bout = {0};
    if (!PyArg_ParseTuple(args, "OOOp", &v, &o, &out, &mean)) return NULL;
    if (get(v, &bv, 'd', 0, "values") || get(o, &bo, 'q', 0, "offsets") ||
        get(out, &bout, 'd', 1, "out")) {
        release(&bv); release(&bo); release(&bout);
        return NULL;
    }
    const double *x = bv.view.buf;
    const int64_t *off = bo.view.buf;
    double *y = bout.view.buf;
    Py_ssize_t rows = N_ITEMS(bo) - 1;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t r = 0; r < rows; r++) {
        double total = 0.0;
        for (int64_t i = off[r]; i < off[r + 1]; i++) total += x[i];
        int64_t n = off[r + 1] - off[r];
        y[r] = mean ? (n ? total / (double)n : NAN) : total;
    }
    Py_END_ALLOW_THREADS
    release(&bv); release(&bo); release(&bout);
    Py_RETURN_NONE;
}

/* topk_offsets(offsets, k, out_offsets) -> total number of kept entries */
static PyObject *topk_offsets(PyObject *self, PyObject *args) {
    PyObject *o, *out;
    long long k;
    Buf bo = {0}, bout = {0};
    if (!PyArg_ParseTuple(args, "OLO", &o, &k, &out)) return NULL;
    if (get(o, &bo, 'q', 0, "offsets") || get(out, &bout, 'q', 1, "out_offsets")) {
        release(&bo); release(&bout);
        return NULL;
    }
    const int64_t *off = bo.view.buf;
    int64_t *y = bout.view.buf;
    Py_ssize_t rows = N_ITEMS(bo) - 1;
    y[0] = 0;
    for (Py_ssize_t r = 0; r < rows; r++) {
        int64_t n = off[r + 1] - off[r];
        y[r + 1] = y[r] + (n < k ? n : k);
    }
    long long total = y[rows];
    release(&bo); release(&bout);
    return PyLong_FromLongLong(total);
}

typedef struct {
    double value;
    int64_t index;
} Entry;

/* Larger values first; equal values in index order. */
static int before(const Entry *p, const Entry *q) {
    return p->value > q->value || (p->value == q->value && p->index < q->index);
}

static int compare(const void *a, const void *b) {
    const Entry *p = a, *q = b;
    return before(p, q) ? -1 : (before(q, p) ? 1 : 0);
}

/* Up to this many kept values a row, top-k inserts into a short sorted list even
 * in short rows; above, a row of fewer than 8 times as many values is sorted whole. */
#define FEW 16

/* Enters (value, index) into best[0:*have], which is sorted and holds at most `keep`
 * entries: the last one drops out of a full list. Row by row, values come in row
 * order, and once the list is full only those larger than its last one. */
static inline void enter(Entry *best, int64_t *have, int64_t keep, double value,
                         int64_t index) {
    Entry e = {value, index};
    int64_t at = *have < keep ? (*have)++ : keep - 1;
    while (at > 0 && before(&e, &best[at - 1])) { best[at] = best[at - 1]; at--; }
    best[at] = e;
}

/* Top-k's few-kept path bounds a row with the maxima of this many lanes (values i
 * with the same i % LANES): up to LANES kept values a row. */
#define LANES 8

/* The `keep` largest entries of x[0:n], in order, into best[0:keep], for
 * 1 <= keep <= min(n, LANES). `cand` has room for n indices.
 *
 * The time of a top-k goes to the values that (nearly) enter the list of the best
 * so far: each costs a branch the CPU mispredicts. Scanning a row in order, about
 * keep * (1 + ln(n / keep)) values enter. So first a bound, below which no value
 * can be kept: the keep-th largest of the lanes' maxima (a loop the compiler
 * vectorizes). Each of the `keep` lanes whose maximum is at least the bound has a
 * value that is, so at least `keep` values are >= the bound. Then the indices of the
 * values >= the bound (in the benchmark's random rows of about 100 values, 6.4 on
 * average for k = 5) are collected without a branch, and only they are inserted,
 * in row order, into a sorted list; once the list is full, a value enters only if
 * larger than its last one (an equal value comes later in the row, so it loses the
 * tie). */
FAST static void select_few(const double *x, int64_t n, int64_t keep, int64_t *cand,
                            Entry *best) {
    /* An empty lane (a row of fewer than LANES values) has no maximum: -DBL_MAX is
     * below every value, and there are at least `keep` lanes that are not empty. */
    double lane_max[LANES];
    for (int l = 0; l < LANES; l++) lane_max[l] = l < n ? x[l] : -DBL_MAX;
    int64_t whole = n / LANES * LANES;
    for (int64_t i = LANES; i < whole; i += LANES)
        for (int l = 0; l < LANES; l++)
            lane_max[l] = x[i + l] > lane_max[l] ? x[i + l] : lane_max[l];
    for (int64_t i = whole > LANES ? whole : LANES; i < n; i++)
        lane_max[i % LANES] = x[i] > lane_max[i % LANES] ? x[i] : lane_max[i % LANES];
    /* The largest lane maximum that at least `keep` lane maxima reach. */
    double bound = -DBL_MAX;
    for (int j = 0; j < LANES; j++) {
        int reach = 0;
        for (int l = 0; l < LANES; l++) reach += lane_max[l] >= lane_max[j];
        bound = reach >= keep && lane_max[j] > bound ? lane_max[j] : bound;
    }
    int64_t m = 0;
    for (int64_t i = 0; i < n; i++) {
        cand[m] = i;
        m += x[i] >= bound;
    }
    int64_t have = 0;
    double worst = 0.0;
    for (int64_t c = 0; c < m; c++) {
        int64_t i = cand[c];
        if (have == keep && !(x[i] > worst)) continue;
        enter(best, &have, keep, x[i], i);
        worst = best[have - 1].value;
    }
}

/* The `keep` largest entries of x[0:n], in order, into best[0:keep], for keep <= n:
 * inserted in row order into a sorted list of the best so far (as select_few does,
 * without its bound). */
static void select_by_insertion(const double *x, int64_t n, int64_t keep, Entry *best) {
    int64_t have = 0;
    double worst = 0.0;
    for (int64_t i = 0; i < n; i++) {
        if (have == keep && !(x[i] > worst)) continue;
        enter(best, &have, keep, x[i], i);
        worst = best[have - 1].value;
    }
}

/* The kept entries of each row. ``best`` and ``cand`` have room for the widest row. */
FAST static void topk_rows(const double *x, const int64_t *off, Py_ssize_t rows,
                           const int64_t *noff, Entry *best, int64_t *cand, int64_t *idx,
                           double *prob) {
    for (Py_ssize_t r = 0; r < rows; r++) {
        int64_t a = off[r], n = off[r + 1] - off[r], keep = noff[r + 1] - noff[r];
        if (n == 0) continue;
        if (keep > FEW && keep * 8 >= n) {
            /* Many kept: sort the whole row. */
            for (int64_t i = 0; i < n; i++) { best[i].value = x[a + i]; best[i].index = i; }
            qsort(best, (size_t)n, sizeof(Entry), compare);
        } else {
            if (keep <= LANES) select_few(x + a, n, keep, cand, best);
            else select_by_insertion(x + a, n, keep, best);
        }
        /* The row's largest value is the first kept one (keep >= 1 as n >= 1). */
        double top = best[0].value, total = 0.0;
        for (int64_t i = 0; i < n; i++) total += exp(x[a + i] - top);
        for (int64_t j = 0; j < keep; j++) {
            idx[noff[r] + j] = best[j].index;
            prob[noff[r] + j] = exp(best[j].value - top) / total;
        }
    }
}

/* topk(values, offsets, k, new_offsets, out_indices, out_probabilities) */
static PyObject *topk(PyObject *self, PyObject *args) {
    PyObject *v, *o, *no, *oi, *op;
    long long k;
    Buf bv = {0}, bo = {0}, bno = {0}, boi = {0}, bop = {0};
    if (!PyArg_ParseTuple(args, "OOLOOO", &v, &o, &k, &no, &oi, &op)) return NULL;
    if (get(v, &bv, 'd', 0, "values") || get(o, &bo, 'q', 0, "offsets") ||
        get(no, &bno, 'q', 0, "new_offsets") || get(oi, &boi, 'q', 1, "out_indices") ||
        get(op, &bop, 'd', 1, "out_probabilities")) {
        release(&bv); release(&bo); release(&bno); release(&boi); release(&bop);
        return NULL;
    }
    const double *x = bv.view.buf;
    const int64_t *off = bo.view.buf, *noff = bno.view.buf;
    int64_t *idx = boi.view.buf;
    double *prob = bop.view.buf;
    Py_ssize_t rows = N_ITEMS(bo) - 1;
    int64_t widest = 0;
    for (Py_ssize_t r = 0; r < rows; r++)
        if (off[r + 1] - off[r] > widest) widest = off[r + 1] - off[r];
    Entry *best = malloc(sizeof(Entry) * (size_t)(widest > 0 ? widest : 1));
    int64_t *cand = malloc(sizeof(int64_t) * (size_t)(widest > 0 ? widest : 1));
    if (!best || !cand) {
        free(best); free(cand);
        release(&bv); release(&bo); release(&bno); release(&boi); release(&bop);
        return PyErr_NoMemory();
    }
    Py_BEGIN_ALLOW_THREADS
    topk_rows(x, off, rows, noff, best, cand, idx, prob);
    Py_END_ALLOW_THREADS
    free(best); free(cand);
    release(&bv); release(&bo); release(&bno); release(&boi); release(&bop);
    Py_RETURN_NONE;
}

/* first_bad_offset(offsets, n_values) -> -1 if valid, else the index of the first problem */
static PyObject *first_bad_offset(PyObject *self, PyObject *args) {
    PyObject *o;
    long long n;
    Buf bo = {0};
    if (!PyArg_ParseTuple(args, "OL", &o, &n)) return NULL;
    if (get(o, &bo, 'q', 0, "offsets")) return NULL;
    const int64_t *off = bo.view.buf;
    Py_ssize_t count = N_ITEMS(bo);
    long long bad = -1;
    if (count == 0 || off[0] != 0) bad = 0;
    for (Py_ssize_t i = 1; bad < 0 && i < count; i++)
        if (off[i] < off[i - 1]) bad = i;
    if (bad < 0 && off[count - 1] != n) bad = count - 1;
    release(&bo);
    return PyLong_FromLongLong(bad);
}

/* empty(n_bytes) -> a bytearray of n_bytes left uninitialized, for a kernel to fill.
 * bytearray(n) would zero it first: for large results that costs more than the
 * kernel that then overwrites every byte. A large buffer is also offered huge
 * pages where the kernel allows them on request (as NumPy does for its arrays):
 * the kernel's first writes then fault in 2 MiB at a time, not 4 KiB. */
static PyObject *empty(PyObject *self, PyObject *args) {
    Py_ssize_t n;
    if (!PyArg_ParseTuple(args, "n", &n)) return NULL;
    if (n < 0) {
        PyErr_Format(PyExc_ValueError, "empty() needs a size of at least 0 bytes, not %zd", n);
        return NULL;
    }
    PyObject *buffer = PyByteArray_FromStringAndSize(NULL, n);
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    if (buffer && n >= (1 << 22)) {
        uintptr_t start = (uintptr_t)PyByteArray_AS_STRING(buffer);
        uintptr_t page = 4096, first = (start + page - 1) / page * page;
        (void)madvise((void *)first, (size_t)(start + (uintptr_t)n - first), MADV_HUGEPAGE);
    }
#endif
    return buffer;
}

static PyMethodDef methods[] = {
    {"empty", empty, METH_VARARGS,
     "empty(n_bytes) -> bytearray: uninitialized, for a kernel to overwrite in full."},
    {"softmax", softmax, METH_VARARGS, "softmax(values, offsets, out): per-row softmax."},
    {"row_reduce", row_reduce, METH_VARARGS,
     "row_reduce(values, offsets, out, mean): per-row sums or means."},
    {"topk_offsets", topk_offsets, METH_VARARGS,
     "topk_offsets(offsets, k, out_offsets) -> total: offsets of the top-k result."},
    {"topk", topk, METH_VARARGS,
     "topk(values, offsets, k, new_offsets, out_indices, out_probabilities)."},
    {"first_bad_offset", first_bad_offset, METH_VARARGS,
     "first_bad_offset(offsets, n_values) -> -1, or where the offsets go wrong."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_kernels", "Row kernels of ragbatch's compiled engine.", -1, methods,
};

PyMODINIT_FUNC PyInit__kernels(void) {
    PyObject *m = PyModule_Create(&module);
#ifdef Py_GIL_DISABLED
    /* Safe without the GIL: no state of its own, each call reads and writes only the
       buffers it is given. Without this, importing it turns the GIL back on. */
    if (m != NULL && PyUnstable_Module_SetGIL(m, Py_MOD_GIL_NOT_USED) < 0) {
        Py_DECREF(m);
        return NULL;
    }
#endif
    return m;
}
