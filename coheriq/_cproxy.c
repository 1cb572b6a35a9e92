/* coheriq._cproxy: the function proxy as a type written in C, with vectorcall.
 *
 * The reference is the Python proxy in coheriq/_call/proxy.py: a function generated
 * with the candidate's parameters that reads names of its domain's namespace. This proxy
 * reads the same state, kept where C reads it without a lookup: the domain's Board
 * (the flag, the finder, its context variable, what a context without a block finds)
 * and the candidate's Cell (the settled implementation), both written by
 * coheriq._call.proxy.Switchboard beside the namespace.
 *
 *     if board.scoped:                           # a block, profile, unsettled domain
 *         finder = board.variable.get if board.variable else board.current
 *         scope = finder(board.missing)          # missing: None, or "not chosen yet"
 *         if scope is not None:
 *             return scope.members[candidate](*args, **kwargs)
 *     return cell.value(*args, **kwargs)         # the settled implementation
 *
 * The caller's arguments are passed on untouched (vectorcall in, vectorcall out),
 * and no Python frame of coheriq's is pushed: a warning's stacklevel, a traceback
 * and the recursion limit count the library's frames as if it were unmarked.
 *
 * "receiver" proxies stand as a marked class's metaclass __call__: they are called
 * with the class first (Py_TPFLAGS_METHOD_DESCRIPTOR, so CPython does not bind a
 * method object for it) and do not pass it on.
 *
 * Free-threaded CPython (built with Py_GIL_DISABLED) runs this module without the GIL
 * (Py_MOD_GIL_NOT_USED). A steady-state call then reads what another thread may be
 * replacing: the proxy's board and cell, the board's fields, the cell's value. Each is
 * read with an atomic load, and an object replaced there is not released but kept by
 * its holder (keep_replaced) until the holder is freed, so that a call uses what it
 * read without a reference of its own: a reference count that every thread writes on
 * every call would make threads queue on it. What a holder keeps is bounded by the
 * implementations it ever held (an engine's members are made once per engine start).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stddef.h>

#ifdef Py_GIL_DISABLED
#  define LOAD(field) _Py_atomic_load_ptr_acquire(&(field))
#  define STORE(field, value) _Py_atomic_store_ptr_release(&(field), (value))
#  define LOAD_FLAG(field) _Py_atomic_load_int_relaxed(&(field))
#  define STORE_FLAG(field, value) _Py_atomic_store_int_relaxed(&(field), (value))
/* What a call reads through a proxy stays alive while its holder does (see above). */
#  define BORROWED 1
#else
#  define LOAD(field) (field)
#  define STORE(field, value) ((field) = (value))
#  define LOAD_FLAG(field) (field)
#  define STORE_FLAG(field, value) ((field) = (value))
#  define BORROWED 0
#endif

/* Keep ``old``, replaced in a field its holder reads at call time, in the holder's list
 * ``*kept`` (made when first needed; each object once), on a free-threaded build. */
static void
keep_replaced(PyObject **kept, PyObject *old)
{
#ifdef Py_GIL_DISABLED
    if (old == NULL || old == Py_None) {
        Py_XDECREF(old);
        return;
    }
    if (*kept == NULL && (*kept = PyList_New(0)) == NULL) {
        PyErr_Clear();
        return;  /* not released: a call may still read it */
    }
    int found = 0;
    Py_BEGIN_CRITICAL_SECTION(*kept);
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(*kept); i++) {
        if (PyList_GET_ITEM(*kept, i) == old) {
            found = 1;
            break;
        }
    }
    Py_END_CRITICAL_SECTION();
    if (found) {
        Py_DECREF(old);
    }
    else if (PyList_Append(*kept, old) == 0) {
        Py_DECREF(old);
    }
    else {
        PyErr_Clear();  /* kept by leaking it: a call may still read it */
    }
#else
    (void)kept;
    Py_XDECREF(old);
#endif
}

/* ``*field = value`` (a new reference is taken), for a field read at call time. */
static void
replace(PyObject **kept, PyObject **field, PyObject *value)
{
    PyObject *old = *field;
    STORE(*field, Py_XNewRef(value));
    keep_replaced(kept, old);
}

/* -- Board: what every proxy of one domain reads ---------------------------------- */

typedef struct {
    PyObject_HEAD
    int scoped;           /* look at the context before calling */
    PyObject *current;    /* current(missing): this context's scope, or missing */
    PyObject *variable;   /* the context variable current() only reads, or None */
    PyObject *missing;    /* what a context without a block finds (None: the slot) */
    PyObject *scope_type; /* the class of a block (coheriq._choice.blocks.Scope), or None */
    PyObject *members;    /* scope_type's "members" descriptor, or None */
    PyObject *kept;       /* what the fields held before (free-threaded: keep_replaced) */
} BoardObject;

static PyObject *
board_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    if (PyTuple_GET_SIZE(args) != 0 || (kwargs != NULL && PyDict_GET_SIZE(kwargs) != 0)) {
        PyErr_SetString(PyExc_TypeError, "Board() takes no arguments.");
        return NULL;
    }
    BoardObject *self = PyObject_GC_New(BoardObject, type);
    if (self == NULL) {
        return NULL;
    }
    self->scoped = 1;  /* until the domain settles, every call looks */
    self->current = Py_NewRef(Py_None);
    self->variable = Py_NewRef(Py_None);
    self->missing = Py_NewRef(Py_None);
    self->scope_type = Py_NewRef(Py_None);
    self->members = Py_NewRef(Py_None);
    self->kept = NULL;
    PyObject_GC_Track(self);
    return (PyObject *)self;
}

static int
board_traverse(BoardObject *self, visitproc visit, void *arg)
{
    Py_VISIT(self->current);
    Py_VISIT(self->variable);
    Py_VISIT(self->missing);
    Py_VISIT(self->scope_type);
    Py_VISIT(self->members);
    Py_VISIT(self->kept);
    return 0;
}

static int
board_clear(BoardObject *self)
{
    Py_CLEAR(self->current);
    Py_CLEAR(self->variable);
    Py_CLEAR(self->missing);
    Py_CLEAR(self->scope_type);
    Py_CLEAR(self->members);
    Py_CLEAR(self->kept);
    return 0;
}

static void
board_dealloc(BoardObject *self)
{
    PyObject_GC_UnTrack(self);
    board_clear(self);
    PyObject_GC_Del(self);
}

static PyObject *
board_get_scoped(BoardObject *self, void *Py_UNUSED(closure))
{
    return PyBool_FromLong(LOAD_FLAG(self->scoped));
}

static int
board_set_scoped(BoardObject *self, PyObject *value, void *Py_UNUSED(closure))
{
    int scoped = value != NULL ? PyObject_IsTrue(value) : 0;
    if (scoped < 0) {
        return -1;
    }
    STORE_FLAG(self->scoped, scoped);
    return 0;
}

/* The board's object fields, by their offset: read as a member would be (NULL is None). */
static PyObject *
board_get_field(BoardObject *self, void *offset)
{
    PyObject *value = LOAD(*(PyObject **)((char *)self + (size_t)offset));
    return Py_NewRef(value != NULL ? value : Py_None);
}

static int
board_set_field(BoardObject *self, PyObject *value, void *offset)
{
    replace(&self->kept, (PyObject **)((char *)self + (size_t)offset),
            value != NULL ? value : Py_None);
    return 0;
}

#define BOARD_FIELD(name, doc) \
    {#name, (getter)board_get_field, (setter)board_set_field, doc, \
     (void *)offsetof(BoardObject, name)}

static PyGetSetDef board_getset[] = {
    {"scoped", (getter)board_get_scoped, (setter)board_set_scoped,
     "Whether proxies look at the context before calling.", NULL},
    BOARD_FIELD(current, "current(missing): the current context's scope, or missing."),
    BOARD_FIELD(variable, "The context variable that current only reads, or None."),
    BOARD_FIELD(missing, "What a context without a block finds; None for the slot."),
    BOARD_FIELD(scope_type,
                "The class of a block, whose members descriptor is read directly, or None."),
    BOARD_FIELD(members, "scope_type's 'members' descriptor (a __slots__ member), or None."),
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject BoardType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "coheriq._cproxy.Board",
    .tp_doc = PyDoc_STR("What every compiled proxy of one domain reads at call time."),
    .tp_basicsize = sizeof(BoardObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_new = board_new,
    .tp_dealloc = (destructor)board_dealloc,
    .tp_traverse = (traverseproc)board_traverse,
    .tp_clear = (inquiry)board_clear,
    .tp_getset = board_getset,
};

/* -- Cell: a candidate's settled implementation ------------------------------------ */

typedef struct {
    PyObject_HEAD
    PyObject *value;
    PyObject *kept;  /* what value held before (free-threaded: keep_replaced) */
} CellObject;

static PyObject *
cell_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    PyObject *value = Py_None;
    static char *keywords[] = {"value", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|O:Cell", keywords, &value)) {
        return NULL;
    }
    CellObject *self = PyObject_GC_New(CellObject, type);
    if (self == NULL) {
        return NULL;
    }
    self->value = Py_NewRef(value);
    self->kept = NULL;
    PyObject_GC_Track(self);
    return (PyObject *)self;
}

static int
cell_traverse(CellObject *self, visitproc visit, void *arg)
{
    Py_VISIT(self->value);
    Py_VISIT(self->kept);
    return 0;
}

static int
cell_clear(CellObject *self)
{
    Py_CLEAR(self->value);
    Py_CLEAR(self->kept);
    return 0;
}

static void
cell_dealloc(CellObject *self)
{
    PyObject_GC_UnTrack(self);
    cell_clear(self);
    PyObject_GC_Del(self);
}

static PyObject *
cell_get_value(CellObject *self, void *Py_UNUSED(closure))
{
    PyObject *value = LOAD(self->value);
    return Py_NewRef(value != NULL ? value : Py_None);
}

static int
cell_set_value(CellObject *self, PyObject *value, void *Py_UNUSED(closure))
{
    replace(&self->kept, &self->value, value != NULL ? value : Py_None);
    return 0;
}

static PyGetSetDef cell_getset[] = {
    {"value", (getter)cell_get_value, (setter)cell_set_value,
     "What a call of the candidate runs while its proxies need not look at the context.",
     NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject CellType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "coheriq._cproxy.Cell",
    .tp_doc = PyDoc_STR("A candidate's settled implementation, read by its compiled proxies."),
    .tp_basicsize = sizeof(CellObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_new = cell_new,
    .tp_dealloc = (destructor)cell_dealloc,
    .tp_traverse = (traverseproc)cell_traverse,
    .tp_clear = (inquiry)cell_clear,
    .tp_getset = cell_getset,
};

/* -- Proxy ------------------------------------------------------------------------- */

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    BoardObject *board;
    CellObject *cell;
    PyObject *candidate;    /* str: the candidate's name in scope.members */
    int receiver;           /* drop the first positional argument (a class) */
    /* What a function has as slots, checked as funcobject.c checks them. */
    PyObject *name;         /* str */
    PyObject *qualname;     /* str */
    PyObject *module;       /* anything; None when deleted */
    PyObject *doc;          /* anything; None when deleted */
    PyObject *annotations;  /* dict, made on first read; NULL when deleted */
    PyObject *annotate;     /* 3.14+: what computes them (PEP 649); NULL for none */
    PyObject *dict;         /* __dict__: __wrapped__, a library's own attributes */
    PyObject *weakreflist;
    /* For the proxy a code-swapped function dispatches through (set_dispatcher): the
     * defaults its candidate fills in itself, a tuple and a dict copy (NULL for none),
     * set by _coheriq_expect_defaults. */
    PyObject *defaults;
    PyObject *kwdefaults;
    PyObject *kept;  /* what the fields a call reads held before (keep_replaced) */
} ProxyObject;

static PyObject *str_members;   /* "members" */

/* The scope this call finds: a new reference, None for the settled implementation. */
static PyObject *
find_scope(BoardObject *board)
{
    PyObject *variable = LOAD(board->variable);
    PyObject *missing = LOAD(board->missing);
    if (missing == NULL) {
        missing = Py_None;
    }
    if (variable != NULL && PyContextVar_CheckExact(variable)) {
        PyObject *scope = NULL;
        if (PyContextVar_Get(variable, missing, &scope) < 0) {
            return NULL;
        }
        return scope != NULL ? scope : Py_NewRef(Py_None);
    }
    PyObject *current = LOAD(board->current);
    if (current == NULL || current == Py_None) {
        PyErr_SetString(PyExc_RuntimeError,
                        "coheriq: a compiled proxy's domain has no finder; this is a bug "
                        "in coheriq, please report it.");
        return NULL;
    }
#if !BORROWED
    Py_INCREF(current);  /* the finder may replace itself */
    Py_INCREF(missing);
#endif
    PyObject *scope = PyObject_CallOneArg(current, missing);
#if !BORROWED
    Py_DECREF(missing);
    Py_DECREF(current);
#endif
    return scope;
}

/* scope.members, a new reference. For a block (the board's scope_type exactly) the
 * descriptor that attribute lookup would find is asked directly: the lookup through
 * the type's MRO is most of what reading an attribute costs. */
static PyObject *
members_of(BoardObject *board, PyObject *scope)
{
    PyObject *descriptor = LOAD(board->members);
    if ((PyObject *)Py_TYPE(scope) == LOAD(board->scope_type) && descriptor != NULL
        && Py_TYPE(descriptor)->tp_descr_get != NULL) {
#if !BORROWED
        Py_INCREF(descriptor);
#endif
        PyObject *members = Py_TYPE(descriptor)->tp_descr_get(descriptor, scope,
                                                              (PyObject *)Py_TYPE(scope));
#if !BORROWED
        Py_DECREF(descriptor);
#endif
        return members;
    }
    return PyObject_GetAttr(scope, str_members);
}

/* What a call finds in this context: the implementation, a new reference where
 * ``*owned`` is set, else one its cell keeps alive (a free-threaded build's). */
static PyObject *
implementation(ProxyObject *self, int *owned)
{
    BoardObject *board = LOAD(self->board);
    PyObject *candidate = LOAD(self->candidate);
    *owned = 1;
    if (LOAD_FLAG(board->scoped)) {
        PyObject *scope = find_scope(board);
        if (scope == NULL) {
            return NULL;
        }
        if (scope != Py_None) {
            PyObject *members = members_of(board, scope);
            Py_DECREF(scope);
            if (members == NULL) {
                return NULL;
            }
            PyObject *impl;
            if (PyDict_CheckExact(members)) {  /* an open block's table */
#ifdef Py_GIL_DISABLED
                /* A strong reference: another thread may replace the entry. */
                if (PyDict_GetItemRef(members, candidate, &impl) == 0) {
                    PyErr_SetObject(PyExc_KeyError, candidate);
                }
#else
                impl = PyDict_GetItemWithError(members, candidate);
                if (impl == NULL && !PyErr_Occurred()) {
                    PyErr_SetObject(PyExc_KeyError, candidate);
                }
                Py_XINCREF(impl);
#endif
            }
            else {  /* a block that ended, a watcher's view */
                impl = PyObject_GetItem(members, candidate);
            }
            Py_DECREF(members);
            return impl;
        }
        Py_DECREF(scope);
    }
    CellObject *cell = LOAD(self->cell);
    PyObject *impl = LOAD(cell->value);
    if (impl == NULL) {
        PyErr_Format(PyExc_RuntimeError,
                     "coheriq: candidate %R has no implementation; this is a bug in "
                     "coheriq, please report it.", candidate);
        return NULL;
    }
    *owned = !BORROWED;
    return *owned ? Py_NewRef(impl) : impl;
}

/* CPython's own vectorcall of functions, read off a new function (cproxy_exec). */
static vectorcallfunc function_vectorcall;

/* Whether calling ``callable`` pushes a frame of its own: a Python function whose
 * calls run its code (not a code-swapped function that dispatches from C: see
 * set_dispatcher below). */
static int
pushes_a_frame(PyObject *callable)
{
    return PyFunction_Check(callable)
           && ((PyFunctionObject *)callable)->vectorcall == function_vectorcall;
}

static PyObject *
proxy_vectorcall(PyObject *op, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    ProxyObject *self = (ProxyObject *)op;
    if (self->receiver) {
        Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
        if (nargs < 1) {
            PyErr_Format(PyExc_TypeError,
                         "the constructor of candidate %R must be called with the class "
                         "first.", self->candidate);
            return NULL;
        }
        /* Without PY_VECTORCALL_ARGUMENTS_OFFSET: args[-1] is now the caller's. */
        args += 1;
        nargsf = (size_t)(nargs - 1);
    }
    int owned;
    PyObject *impl = implementation(self, &owned);
    if (impl == NULL) {
        return NULL;
    }
    PyObject *result;
    if (pushes_a_frame(impl)
        || (PyMethod_Check(impl) && pushes_a_frame(PyMethod_GET_FUNCTION(impl)))) {
        /* A Python function, or a method of one (an engine's override, read from its
         * instance): the interpreter counts the function's frame against the recursion
         * limit. Counting this call too would reach the limit at half the depth. */
        result = PyObject_Vectorcall(impl, args, nargsf, kwnames);
    }
    else {
        /* A callable written in C (another candidate's proxy, a partial of one) pushes
         * no frame: a loop of them would overflow the C stack instead of raising
         * RecursionError, as the Python proxy's frames would. */
        if (Py_EnterRecursiveCall(" while calling a coheriq candidate")) {
            if (owned) {
                Py_DECREF(impl);
            }
            return NULL;
        }
        result = PyObject_Vectorcall(impl, args, nargsf, kwnames);
        Py_LeaveRecursiveCall();
    }
    if (owned) {
        Py_DECREF(impl);
    }
    return result;
}

static int
set_state(ProxyObject *self, PyObject *board, PyObject *cell, PyObject *candidate,
          int receiver)
{
    if (!PyObject_TypeCheck(board, &BoardType) || !PyObject_TypeCheck(cell, &CellType)
        || !PyUnicode_Check(candidate)) {
        PyErr_SetString(PyExc_TypeError,
                        "Proxy(board, cell, candidate, receiver) takes a Board, a Cell "
                        "and the candidate's name.");
        return -1;
    }
    replace(&self->kept, (PyObject **)&self->board, board);
    replace(&self->kept, (PyObject **)&self->cell, cell);
    replace(&self->kept, &self->candidate, candidate);
    self->receiver = receiver;
    return 0;
}

static PyObject *
proxy_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    static char *keywords[] = {"board", "cell", "candidate", "receiver", NULL};
    PyObject *board, *cell, *candidate;
    int receiver = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOO|p:Proxy", keywords, &board, &cell,
                                     &candidate, &receiver)) {
        return NULL;
    }
    ProxyObject *self = PyObject_GC_New(ProxyObject, type);
    if (self == NULL) {
        return NULL;
    }
    self->vectorcall = proxy_vectorcall;
    self->board = NULL;
    self->cell = NULL;
    self->candidate = self->dict = self->weakreflist = self->kept = NULL;
    self->receiver = 0;
    self->name = Py_NewRef(candidate);
    self->qualname = Py_NewRef(candidate);
    self->module = Py_NewRef(Py_None);
    self->doc = Py_NewRef(Py_None);
    self->annotations = self->annotate = NULL;
    self->defaults = self->kwdefaults = NULL;
    PyObject_GC_Track(self);
    if (set_state(self, board, cell, candidate, receiver) < 0) {
        Py_DECREF(self);
        return NULL;
    }
    return (PyObject *)self;
}

static int
proxy_traverse(ProxyObject *self, visitproc visit, void *arg)
{
    Py_VISIT(self->board);
    Py_VISIT(self->cell);
    Py_VISIT(self->module);
    Py_VISIT(self->doc);
    Py_VISIT(self->annotations);
    Py_VISIT(self->annotate);
    Py_VISIT(self->dict);
    Py_VISIT(self->defaults);
    Py_VISIT(self->kwdefaults);
    Py_VISIT(self->kept);
    return 0;
}

static int
proxy_clear(ProxyObject *self)
{
    Py_CLEAR(self->dict);
    Py_CLEAR(self->defaults);
    Py_CLEAR(self->kwdefaults);
    Py_CLEAR(self->annotations);
    Py_CLEAR(self->annotate);
    Py_SETREF(self->module, Py_NewRef(Py_None));
    Py_SETREF(self->doc, Py_NewRef(Py_None));
    return 0;
}

static void
proxy_dealloc(ProxyObject *self)
{
    PyObject_GC_UnTrack(self);
    if (self->weakreflist != NULL) {
        PyObject_ClearWeakRefs((PyObject *)self);
    }
    proxy_clear(self);
    Py_CLEAR(self->module);
    Py_CLEAR(self->doc);
    Py_CLEAR(self->board);
    Py_CLEAR(self->cell);
    Py_CLEAR(self->candidate);
    Py_CLEAR(self->name);
    Py_CLEAR(self->qualname);
    Py_CLEAR(self->kept);
    PyObject_GC_Del(self);
}

/* Bound like a function where it is put in a class body. */
static PyObject *
proxy_descr_get(PyObject *self, PyObject *obj, PyObject *type)
{
    if (obj == NULL || obj == Py_None) {
        return Py_NewRef(self);
    }
    return PyMethod_New(self, obj);
}

static PyObject *
proxy_repr(ProxyObject *self)
{
    return PyUnicode_FromFormat("<function %U at %p>", self->qualname, self);
}

/* Pickled by reference, as functions are: the object pickle finds at
 * __module__.__qualname__ (copy.copy and copy.deepcopy return it). */
static PyObject *
proxy_reduce(ProxyObject *self, PyObject *Py_UNUSED(ignored))
{
    return Py_NewRef(self->qualname);
}

/* -- the attributes a function has as slots ---------------------------------------- */

static PyObject *
get_name(ProxyObject *self, void *Py_UNUSED(closure))
{
    return Py_NewRef(self->name);
}

static int
set_string(PyObject **field, PyObject *value, const char *attribute)
{
    if (value == NULL || !PyUnicode_Check(value)) {
        PyErr_Format(PyExc_TypeError, "%s must be set to a string object", attribute);
        return -1;
    }
    Py_SETREF(*field, Py_NewRef(value));
    return 0;
}

static int
set_name(ProxyObject *self, PyObject *value, void *Py_UNUSED(closure))
{
    return set_string(&self->name, value, "__name__");
}

static PyObject *
get_qualname(ProxyObject *self, void *Py_UNUSED(closure))
{
    return Py_NewRef(self->qualname);
}

static int
set_qualname(ProxyObject *self, PyObject *value, void *Py_UNUSED(closure))
{
    return set_string(&self->qualname, value, "__qualname__");
}

static PyObject *
get_module(ProxyObject *self, void *Py_UNUSED(closure))
{
    return Py_NewRef(self->module);
}

static int
set_module(ProxyObject *self, PyObject *value, void *Py_UNUSED(closure))
{
    Py_SETREF(self->module, Py_NewRef(value != NULL ? value : Py_None));
    return 0;
}

static PyObject *
get_doc(ProxyObject *self, void *Py_UNUSED(closure))
{
    return Py_NewRef(self->doc);
}

static int
set_doc(ProxyObject *self, PyObject *value, void *Py_UNUSED(closure))
{
    Py_SETREF(self->doc, Py_NewRef(value != NULL ? value : Py_None));
    return 0;
}

static PyObject *
get_annotations(ProxyObject *self, void *Py_UNUSED(closure))
{
    /* As a function's: computed by __annotate__ on first read (3.14+), kept after. */
    if (self->annotations == NULL && self->annotate != NULL) {
        PyObject *computed = PyObject_CallFunction(self->annotate, "i", 1);  /* VALUE */
        if (computed == NULL) {
            return NULL;
        }
        if (!PyDict_Check(computed)) {
            PyErr_Format(PyExc_TypeError, "__annotate__ returned non-dict of type '%.100s'",
                         Py_TYPE(computed)->tp_name);
            Py_DECREF(computed);
            return NULL;
        }
        self->annotations = computed;
    }
    if (self->annotations == NULL) {
        self->annotations = PyDict_New();
    }
    return Py_XNewRef(self->annotations);
}

static int
set_annotations(ProxyObject *self, PyObject *value, void *Py_UNUSED(closure))
{
    if (value == Py_None) {
        value = NULL;
    }
    if (value != NULL && !PyDict_Check(value)) {
        PyErr_SetString(PyExc_TypeError, "__annotations__ must be set to a dict object");
        return -1;
    }
    Py_XSETREF(self->annotations, Py_XNewRef(value));
    Py_CLEAR(self->annotate);  /* as for a function: the dict set is what they are */
    return 0;
}

#if PY_VERSION_HEX >= 0x030E0000
static PyObject *
get_annotate(ProxyObject *self, void *Py_UNUSED(closure))
{
    return Py_NewRef(self->annotate != NULL ? self->annotate : Py_None);
}

static int
set_annotate(ProxyObject *self, PyObject *value, void *Py_UNUSED(closure))
{
    if (value == NULL) {
        PyErr_SetString(PyExc_TypeError, "__annotate__ cannot be deleted");
        return -1;
    }
    if (value == Py_None) {
        Py_CLEAR(self->annotate);
        return 0;
    }
    if (!PyCallable_Check(value)) {
        PyErr_SetString(PyExc_TypeError, "__annotate__ must be callable or None");
        return -1;
    }
    Py_XSETREF(self->annotate, Py_NewRef(value));
    Py_CLEAR(self->annotations);  /* computed again, by the new one, on the next read */
    return 0;
}
#endif

/* Make this proxy dispatch as ``other`` does: a module run again regenerated it. */
static PyObject *
proxy_take_over(ProxyObject *self, PyObject *other)
{
    if (!PyObject_TypeCheck(other, Py_TYPE(self))) {
        PyErr_SetString(PyExc_TypeError, "a proxy takes over only from another proxy.");
        return NULL;
    }
    ProxyObject *from = (ProxyObject *)other;
    if (set_state(self, (PyObject *)from->board, (PyObject *)from->cell, from->candidate,
                  from->receiver) < 0) {
        return NULL;
    }
    Py_SETREF(self->name, Py_NewRef(from->name));
    Py_SETREF(self->qualname, Py_NewRef(from->qualname));
    Py_SETREF(self->module, Py_NewRef(from->module));
    Py_SETREF(self->doc, Py_NewRef(from->doc));
    Py_XSETREF(self->annotations,
               from->annotations != NULL ? PyDict_Copy(from->annotations) : NULL);
    Py_XSETREF(self->annotate, Py_XNewRef(from->annotate));
    replace(&self->kept, &self->defaults, from->defaults);
    replace(&self->kept, &self->kwdefaults, from->kwdefaults);
    Py_RETURN_NONE;
}

/* _coheriq_expect_defaults(defaults, kwdefaults): the defaults the candidate fills in
 * itself (see dispatching_vectorcall). */
static PyObject *
proxy_expect_defaults(ProxyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2 || (args[0] != Py_None && !PyTuple_Check(args[0]))
        || (args[1] != Py_None && !PyDict_Check(args[1]))) {
        PyErr_SetString(PyExc_TypeError,
                        "_coheriq_expect_defaults() takes a tuple or None and a dict or None.");
        return NULL;
    }
    PyObject *kwdefaults = NULL;
    if (args[1] != Py_None && (kwdefaults = PyDict_Copy(args[1])) == NULL) {
        return NULL;
    }
    replace(&self->kept, &self->defaults, args[0] != Py_None ? args[0] : NULL);
    replace(&self->kept, &self->kwdefaults, kwdefaults);
    Py_XDECREF(kwdefaults);
    Py_RETURN_NONE;
}

/* What a call of the proxy here would run: for a trampoline that calls it itself (3.11,
 * which inlines a Python function's call only from Python code). */
static PyObject *
proxy_implementation(PyObject *self, PyObject *Py_UNUSED(ignored))
{
    int owned;
    PyObject *impl = implementation((ProxyObject *)self, &owned);
    return impl != NULL && !owned ? Py_NewRef(impl) : impl;
}

static PyMethodDef proxy_methods[] = {
    {"_coheriq_implementation", proxy_implementation, METH_NOARGS,
     "What a call of the proxy in this context would run."},
    {"__reduce__", (PyCFunction)proxy_reduce, METH_NOARGS,
     "Pickle by reference: the proxy's __module__ and __qualname__."},
    {"_coheriq_take_over", (PyCFunction)proxy_take_over, METH_O,
     "Dispatch as another proxy does, in place (a module marked its candidate again)."},
    {"_coheriq_expect_defaults", (PyCFunction)(void (*)(void))proxy_expect_defaults,
     METH_FASTCALL,
     "The defaults a code-swapped function dispatching through this proxy must have for "
     "its calls to go through the proxy directly."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef proxy_getset[] = {
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, NULL, NULL},
    {"__name__", (getter)get_name, (setter)set_name, NULL, NULL},
    {"__qualname__", (getter)get_qualname, (setter)set_qualname, NULL, NULL},
    {"__module__", (getter)get_module, (setter)set_module, NULL, NULL},
    {"__doc__", (getter)get_doc, (setter)set_doc, NULL, NULL},
    {"__annotations__", (getter)get_annotations, (setter)set_annotations, NULL, NULL},
#if PY_VERSION_HEX >= 0x030E0000
    {"__annotate__", (getter)get_annotate, (setter)set_annotate, NULL, NULL},
#endif
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject ProxyType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "coheriq._cproxy.Proxy",
    .tp_doc = PyDoc_STR(
        "A candidate's proxy: calls what the candidate's domain runs in this context.\n\n"
        "Made by coheriq._call.proxy.Switchboard; see coheriq/_call/proxy.py for the Python "
        "reference."),
    .tp_basicsize = sizeof(ProxyObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL
                | Py_TPFLAGS_METHOD_DESCRIPTOR,
    .tp_new = proxy_new,
    .tp_dealloc = (destructor)proxy_dealloc,
    .tp_traverse = (traverseproc)proxy_traverse,
    .tp_clear = (inquiry)proxy_clear,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(ProxyObject, vectorcall),
    .tp_descr_get = proxy_descr_get,
    .tp_repr = (reprfunc)proxy_repr,
    .tp_methods = proxy_methods,
    .tp_getset = proxy_getset,
    .tp_dictoffset = offsetof(ProxyObject, dict),
    .tp_weaklistoffset = offsetof(ProxyObject, weakreflist),
};

/* -- the code-swapped function's calls (coheriq/_call/swapped.py) ----------------- */

/* A marked plain function is a function whose code is swapped: its candidate's own
 * code on the reference, a generated trampoline otherwise. These two functions are
 * the compiled part's swaps, which a call then costs less through:
 *
 * set_code(function, code): ``function.__code__ = code``, and calls of it are
 * specialized as calls of a function that a ``def`` of ``code`` made. CPython 3.13
 * and later specialize a call by the function's version, which MAKE_FUNCTION takes
 * from the code (co_version) and which assigning ``__code__`` clears for good, so a
 * swapped function's calls would stay generic (about 1.2x a specialized call). A
 * version stands for a code: every function MAKE_FUNCTION makes of one code carries
 * its co_version, whatever its defaults and closure. Giving the function its new
 * code's version makes it one more such function, and a call site specialized on
 * the old version fails its guard, as after any assignment. The function stays out
 * of the interpreter's version cache, which only serves the optional JIT (it finds
 * the function MAKE_FUNCTION made of that code, or none). Done only on the CPythons
 * this was read against (3.13 to 3.15); 3.11 and 3.12 version an assigned function
 * again by themselves.
 *
 * set_dispatcher(function, code): ``function.__code__ = code``, a trampoline that
 * calls a compiled Proxy, the code's last constant; and calls of the function call
 * that Proxy from C, with no frame of the trampoline's. From 3.12 on, calls of a
 * Python function run its vectorcall wherever it is not CPython's own (the
 * interpreter inlines only calls whose vectorcall is CPython's; the version guard
 * of a specialized call fails, since setting a vectorcall clears the version), so
 * the trampoline runs only if something calls the code past the function, or when
 * the function's defaults are no longer its candidate's (the proxy passes a call on
 * as it is, leaving the implementation to fill in its own): the trampoline then fills
 * in the function's, as a call of it unmarked would. 3.11 inlines every call of a
 * function whatever its vectorcall, so the module has no set_dispatcher there, and
 * swapped.py keeps its trampolines. */
#define HAS_DISPATCHER (PY_VERSION_HEX >= 0x030C0000)
/* Free-threaded 3.13 specializes no call at all, so a version would give nothing. */
#if PY_VERSION_HEX >= 0x030D0000 && PY_VERSION_HEX < 0x03100000 \
    && !(defined(Py_GIL_DISABLED) && PY_VERSION_HEX < 0x030E0000)
#  define VERSION_BY_CODE 1
#  if PY_VERSION_HEX >= 0x030E0000
#    define FIRST_VALID_VERSION 2u  /* 0: never set, 1: cleared (pycore_function.h) */
#  else
#    define FIRST_VALID_VERSION 1u  /* 0: never set or cleared */
#  endif
#else
#  define VERSION_BY_CODE 0
#endif

static void
set_function_vectorcall(PyFunctionObject *f, vectorcallfunc vectorcall)
{
#if HAS_DISPATCHER
    PyFunction_SetVectorcall(f, vectorcall);  /* clears the version too */
#else
    f->vectorcall = vectorcall;
#endif
}

/* The Proxy that a dispatching trampoline holds as its last constant, or NULL. */
static PyObject *
dispatcher_of(PyObject *code)
{
    PyObject *consts = ((PyCodeObject *)code)->co_consts;
    Py_ssize_t n = PyTuple_GET_SIZE(consts);
    PyObject *last = n > 0 ? PyTuple_GET_ITEM(consts, n - 1) : NULL;
    return last != NULL && Py_IS_TYPE(last, &ProxyType) ? last : NULL;
}

/* Whether the function's defaults are the ones its candidate fills in itself: the
 * same objects (a dict's values by key), whatever tuple or dict holds them. */
static int
defaults_unchanged(PyFunctionObject *f, ProxyObject *proxy)
{
    PyObject *now = f->func_defaults, *was = LOAD(proxy->defaults);
    if (now != was) {
        Py_ssize_t n = now != NULL ? PyTuple_GET_SIZE(now) : 0;
        if (n != (was != NULL ? PyTuple_GET_SIZE(was) : 0)) {
            return 0;
        }
        for (Py_ssize_t i = 0; i < n; i++) {
            if (PyTuple_GET_ITEM(now, i) != PyTuple_GET_ITEM(was, i)) {
                return 0;
            }
        }
    }
    now = f->func_kwdefaults;
    was = LOAD(proxy->kwdefaults);
    Py_ssize_t n = now != NULL ? PyDict_GET_SIZE(now) : 0;
    if (n != (was != NULL ? PyDict_GET_SIZE(was) : 0)) {
        return 0;
    }
    Py_ssize_t pos = 0;
    PyObject *key, *value;
    while (n > 0 && PyDict_Next(was, &pos, &key, &value)) {
        /* A lookup that fails (a key of the user's whose __eq__ raises) counts as a
         * change: the trampoline then binds the call as CPython does. */
        if (PyDict_GetItemWithError(now, key) != value) {
            PyErr_Clear();
            return 0;
        }
    }
    return 1;
}

static PyObject *
dispatching_vectorcall(PyObject *func, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    PyObject *proxy = dispatcher_of(LOAD(((PyFunctionObject *)func)->func_code));
    /* Another code was assigned since, or the function's defaults are not its
     * candidate's (which the proxy passes calls on to without them): run the code, a
     * trampoline that fills them in, as CPython would. */
    if (proxy == NULL || !defaults_unchanged((PyFunctionObject *)func, (ProxyObject *)proxy)) {
        return function_vectorcall(func, args, nargsf, kwnames);
    }
    return ((ProxyObject *)proxy)->vectorcall(proxy, args, nargsf, kwnames);
}

static int
parse_swap(const char *name, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2 || !PyFunction_Check(args[0]) || !PyCode_Check(args[1])) {
        PyErr_Format(PyExc_TypeError, "%s() takes a function and a code object.", name);
        return -1;
    }
    return 0;
}

static PyObject *
set_code(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (parse_swap("set_code", args, nargs) < 0) {
        return NULL;
    }
    PyFunctionObject *f = (PyFunctionObject *)args[0];
    PyObject *code = args[1];
    if (PyObject_SetAttrString((PyObject *)f, "__code__", code) < 0) {
        return NULL;  /* the code's free variables are not the closure's: a ValueError */
    }
    if (f->vectorcall == dispatching_vectorcall) {
        set_function_vectorcall(f, function_vectorcall);
    }
#if VERSION_BY_CODE
    uint32_t version = ((PyCodeObject *)code)->co_version;
    if (f->func_version < FIRST_VALID_VERSION && version >= FIRST_VALID_VERSION) {
#  ifdef Py_GIL_DISABLED
        /* Read by other threads' calls as the interpreter writes it: atomically. The
         * code was assigned first, so a call that finds the version runs the code. */
        _Py_atomic_store_uint32_release(&f->func_version, version);
#  else
        f->func_version = version;
#  endif
    }
#endif
    Py_RETURN_NONE;
}

#if HAS_DISPATCHER
static PyObject *
set_dispatcher(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (parse_swap("set_dispatcher", args, nargs) < 0) {
        return NULL;
    }
    PyFunctionObject *f = (PyFunctionObject *)args[0];
    PyObject *code = args[1];
    if (dispatcher_of(code) == NULL) {
        PyErr_SetString(PyExc_TypeError,
                        "set_dispatcher() takes a code whose last constant is a Proxy.");
        return NULL;
    }
    if (PyObject_SetAttrString((PyObject *)f, "__code__", code) < 0) {
        return NULL;
    }
    if (f->vectorcall != dispatching_vectorcall) {
        set_function_vectorcall(f, dispatching_vectorcall);
    }
    Py_RETURN_NONE;
}
#endif

#ifdef Py_GIL_DISABLED
/* share(obj): let every thread use ``obj`` (an engine's instance or member, which the
 * calling thread just made) without writing its reference count, which threads would
 * otherwise queue on: the interpreter's deferred reference counting, after which the
 * garbage collector alone frees obj. From 3.14 on, its API. Free-threaded 3.13 has
 * none for extensions: this does what its _PyObject_SetDeferredRefcount does to a
 * module's functions and classes. Until a second thread starts, the object is
 * deferred (freed by the collector); the interpreter then makes every deferred
 * object immortal, for good, and one shared after that is made immortal at once. Only
 * an object this thread owns, tracked by the collector, whose reference no other
 * thread has counted. Returns whether it did anything. */
static PyObject *
share(PyObject *module, PyObject *obj)
{
#  if PY_VERSION_HEX >= 0x030E0000
    (void)module;
    return PyBool_FromLong(PyUnstable_Object_EnableDeferredRefcount(obj));
#  else
    const uint8_t deferred = 64;  /* _PyGC_BITS_DEFERRED of 3.13's pycore_gc.h */
    if (!PyObject_IS_GC(obj) || !PyObject_GC_IsTracked(obj) || _Py_IsImmortal(obj)
        || !_Py_IsOwnedByCurrentThread(obj)
        || _Py_atomic_load_ssize_relaxed(&obj->ob_ref_shared) != 0
        || (_Py_atomic_load_uint8_relaxed(&obj->ob_gc_bits) & deferred)) {
        Py_RETURN_FALSE;
    }
    /* A module is deferred when made: immortal once a second thread has started.
     * (No thread can start meanwhile: that stops every thread, this one included.) */
    if (_Py_IsImmortal(module)) {
        PyObject_GC_UnTrack(obj);  /* as _Py_SetImmortal: the collector skips it */
        _Py_atomic_store_uint32_relaxed(&obj->ob_ref_local, _Py_IMMORTAL_REFCNT_LOCAL);
        _Py_atomic_store_uintptr_relaxed(&obj->ob_tid, 0);
        _Py_atomic_store_ssize_relaxed(&obj->ob_ref_shared, 0);
    }
    else {
        uint8_t bits = _Py_atomic_load_uint8_relaxed(&obj->ob_gc_bits);
        _Py_atomic_store_uint8_relaxed(&obj->ob_gc_bits, bits | deferred);
        obj->ob_ref_local += 1;  /* the reference the collector discounts */
        _Py_atomic_store_ssize_relaxed(&obj->ob_ref_shared, _Py_REF_QUEUED);
    }
    Py_RETURN_TRUE;
#  endif
}
#endif

static PyMethodDef cproxy_functions[] = {
    {"set_code", (PyCFunction)(void (*)(void))set_code, METH_FASTCALL,
     "set_code(function, code): function.__code__ = code, and its calls specialize again."},
#if HAS_DISPATCHER
    {"set_dispatcher", (PyCFunction)(void (*)(void))set_dispatcher, METH_FASTCALL,
     "set_dispatcher(function, code): function.__code__ = code, and its calls call the "
     "Proxy that is the code's last constant, from C."},
#endif
#ifdef Py_GIL_DISABLED
    {"share", share, METH_O,
     "share(obj): let every thread use obj without contending on its reference count "
     "(a free-threaded build's; obj just made by this thread)."},
#endif
    {NULL, NULL, 0, NULL},
};

/* CPython's own vectorcall of functions, from a function made here. */
static int
read_function_vectorcall(void)
{
    PyObject *code = Py_CompileString("None", "<coheriq._cproxy>", Py_eval_input);
    if (code == NULL) {
        return -1;
    }
    PyObject *globals = PyDict_New();
    PyObject *function = globals != NULL ? PyFunction_New(code, globals) : NULL;
    Py_DECREF(code);
    Py_XDECREF(globals);
    if (function == NULL) {
        return -1;
    }
    function_vectorcall = ((PyFunctionObject *)function)->vectorcall;
    Py_DECREF(function);
    return 0;
}

static int
cproxy_exec(PyObject *module)
{
    if (str_members == NULL) {
        str_members = PyUnicode_InternFromString("members");
    }
    if (str_members == NULL) {
        return -1;
    }
    if (function_vectorcall == NULL && read_function_vectorcall() < 0) {
        return -1;
    }
    /* proxy.py uses this module only if it is the version it was written for: an
     * editable install whose extension was built from older source falls back. */
    if (PyModule_AddIntConstant(module, "VERSION", 9) < 0) {
        return -1;
    }
    PyTypeObject *types[] = {&BoardType, &CellType, &ProxyType};
    const char *names[] = {"Board", "Cell", "Proxy"};
    for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
        if (PyType_Ready(types[i]) < 0) {
            return -1;
        }
        Py_INCREF(types[i]);
        if (PyModule_AddObject(module, names[i], (PyObject *)types[i]) < 0) {
            Py_DECREF(types[i]);
            return -1;
        }
    }
    return 0;
}

static PyModuleDef_Slot cproxy_slots[] = {
    {Py_mod_exec, cproxy_exec},
#if PY_VERSION_HEX >= 0x030D0000
    {Py_mod_gil, Py_MOD_GIL_NOT_USED},  /* see the top of this file */
#endif
    {0, NULL},
};

static struct PyModuleDef cproxy_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "coheriq._cproxy",
    .m_doc = "coheriq's optional compiled proxy (see coheriq/_call/proxy.py for the reference).",
    .m_size = 0,
    .m_methods = cproxy_functions,
    .m_slots = cproxy_slots,
};

PyMODINIT_FUNC
PyInit__cproxy(void)
{
    return PyModuleDef_Init(&cproxy_module);
}
