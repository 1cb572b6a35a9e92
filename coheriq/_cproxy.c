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
 * Free-threaded CPython is not supported: a steady-state call reads the Board and
 * the Cell without a lock, which is only safe under the GIL. The build leaves the
 * extension out there, and coheriq uses its Python proxy.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <stddef.h>

#ifdef Py_GIL_DISABLED
#error "coheriq._cproxy does not support free-threaded CPython; coheriq uses its Python proxy there."
#endif

/* -- Board: what every proxy of one domain reads ---------------------------------- */

typedef struct {
    PyObject_HEAD
    char scoped;          /* look at the context before calling */
    PyObject *current;    /* current(missing): this context's scope, or missing */
    PyObject *variable;   /* the context variable current() only reads, or None */
    PyObject *missing;    /* what a context without a block finds (None: the slot) */
    PyObject *scope_type; /* the class of a block (coheriq._choice.blocks.Scope), or None */
    PyObject *members;    /* scope_type's "members" descriptor, or None */
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
    return 0;
}

static void
board_dealloc(BoardObject *self)
{
    PyObject_GC_UnTrack(self);
    board_clear(self);
    PyObject_GC_Del(self);
}

static PyMemberDef board_members[] = {
    {"scoped", T_BOOL, offsetof(BoardObject, scoped), 0,
     "Whether proxies look at the context before calling."},
    {"current", T_OBJECT, offsetof(BoardObject, current), 0,
     "current(missing): the current context's scope, or missing."},
    {"variable", T_OBJECT, offsetof(BoardObject, variable), 0,
     "The context variable that current only reads, or None."},
    {"missing", T_OBJECT, offsetof(BoardObject, missing), 0,
     "What a context without a block finds; None for the slot."},
    {"scope_type", T_OBJECT, offsetof(BoardObject, scope_type), 0,
     "The class of a block, whose members descriptor is read directly, or None."},
    {"members", T_OBJECT, offsetof(BoardObject, members), 0,
     "scope_type's 'members' descriptor (a __slots__ member), or None."},
    {NULL, 0, 0, 0, NULL},
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
    .tp_members = board_members,
};

/* -- Cell: a candidate's settled implementation ------------------------------------ */

typedef struct {
    PyObject_HEAD
    PyObject *value;
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
    PyObject_GC_Track(self);
    return (PyObject *)self;
}

static int
cell_traverse(CellObject *self, visitproc visit, void *arg)
{
    Py_VISIT(self->value);
    return 0;
}

static int
cell_clear(CellObject *self)
{
    Py_CLEAR(self->value);
    return 0;
}

static void
cell_dealloc(CellObject *self)
{
    PyObject_GC_UnTrack(self);
    cell_clear(self);
    PyObject_GC_Del(self);
}

static PyMemberDef cell_members[] = {
    {"value", T_OBJECT, offsetof(CellObject, value), 0,
     "What a call of the candidate runs while its proxies need not look at the context."},
    {NULL, 0, 0, 0, NULL},
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
    .tp_members = cell_members,
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
} ProxyObject;

static PyObject *str_members;   /* "members" */

/* The scope this call finds: a new reference, None for the settled implementation. */
static PyObject *
find_scope(BoardObject *board)
{
    PyObject *variable = board->variable;
    PyObject *missing = board->missing != NULL ? board->missing : Py_None;
    if (variable != NULL && PyContextVar_CheckExact(variable)) {
        PyObject *scope = NULL;
        if (PyContextVar_Get(variable, missing, &scope) < 0) {
            return NULL;
        }
        return scope != NULL ? scope : Py_NewRef(Py_None);
    }
    PyObject *current = board->current;
    if (current == NULL || current == Py_None) {
        PyErr_SetString(PyExc_RuntimeError,
                        "coheriq: a compiled proxy's domain has no finder; this is a bug "
                        "in coheriq, please report it.");
        return NULL;
    }
    Py_INCREF(current);  /* the finder may replace itself */
    Py_INCREF(missing);
    PyObject *scope = PyObject_CallOneArg(current, missing);
    Py_DECREF(missing);
    Py_DECREF(current);
    return scope;
}

/* scope.members, a new reference. For a block (the board's scope_type exactly) the
 * descriptor that attribute lookup would find is asked directly: the lookup through
 * the type's MRO is most of what reading an attribute costs. */
static PyObject *
members_of(BoardObject *board, PyObject *scope)
{
    PyObject *descriptor = board->members;
    if ((PyObject *)Py_TYPE(scope) == board->scope_type && descriptor != NULL
        && Py_TYPE(descriptor)->tp_descr_get != NULL) {
        Py_INCREF(descriptor);
        PyObject *members = Py_TYPE(descriptor)->tp_descr_get(descriptor, scope,
                                                              (PyObject *)Py_TYPE(scope));
        Py_DECREF(descriptor);
        return members;
    }
    return PyObject_GetAttr(scope, str_members);
}

/* What a call finds in this context: a new reference to the implementation. */
static PyObject *
implementation(ProxyObject *self)
{
    if (self->board->scoped) {
        PyObject *scope = find_scope(self->board);
        if (scope == NULL) {
            return NULL;
        }
        if (scope != Py_None) {
            PyObject *members = members_of(self->board, scope);
            Py_DECREF(scope);
            if (members == NULL) {
                return NULL;
            }
            PyObject *impl;
            if (PyDict_CheckExact(members)) {  /* an open block's table */
                impl = PyDict_GetItemWithError(members, self->candidate);
                if (impl == NULL && !PyErr_Occurred()) {
                    PyErr_SetObject(PyExc_KeyError, self->candidate);
                }
                Py_XINCREF(impl);
            }
            else {  /* a block that ended, a watcher's view */
                impl = PyObject_GetItem(members, self->candidate);
            }
            Py_DECREF(members);
            return impl;
        }
        Py_DECREF(scope);
    }
    PyObject *impl = self->cell->value;
    if (impl == NULL) {
        PyErr_Format(PyExc_RuntimeError,
                     "coheriq: candidate %R has no implementation; this is a bug in "
                     "coheriq, please report it.", self->candidate);
        return NULL;
    }
    return Py_NewRef(impl);
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
    PyObject *impl = implementation(self);
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
            Py_DECREF(impl);
            return NULL;
        }
        result = PyObject_Vectorcall(impl, args, nargsf, kwnames);
        Py_LeaveRecursiveCall();
    }
    Py_DECREF(impl);
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
    Py_XSETREF(self->board, (BoardObject *)Py_NewRef(board));
    Py_XSETREF(self->cell, (CellObject *)Py_NewRef(cell));
    Py_XSETREF(self->candidate, Py_NewRef(candidate));
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
    self->candidate = self->dict = self->weakreflist = NULL;
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
    Py_XSETREF(self->defaults, Py_XNewRef(from->defaults));
    Py_XSETREF(self->kwdefaults, Py_XNewRef(from->kwdefaults));
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
    Py_XSETREF(self->defaults, args[0] != Py_None ? Py_NewRef(args[0]) : NULL);
    Py_XSETREF(self->kwdefaults, kwdefaults);
    Py_RETURN_NONE;
}

/* What a call of the proxy here would run: for a trampoline that calls it itself (3.11,
 * which inlines a Python function's call only from Python code). */
static PyObject *
proxy_implementation(PyObject *self, PyObject *Py_UNUSED(ignored))
{
    return implementation((ProxyObject *)self);
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
#if PY_VERSION_HEX >= 0x030D0000 && PY_VERSION_HEX < 0x03100000
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
    PyObject *now = f->func_defaults, *was = proxy->defaults;
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
    was = proxy->kwdefaults;
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
    PyObject *proxy = dispatcher_of(PyFunction_GET_CODE(func));
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
        f->func_version = version;
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

static PyMethodDef cproxy_functions[] = {
    {"set_code", (PyCFunction)(void (*)(void))set_code, METH_FASTCALL,
     "set_code(function, code): function.__code__ = code, and its calls specialize again."},
#if HAS_DISPATCHER
    {"set_dispatcher", (PyCFunction)(void (*)(void))set_dispatcher, METH_FASTCALL,
     "set_dispatcher(function, code): function.__code__ = code, and its calls call the "
     "Proxy that is the code's last constant, from C."},
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
    if (PyModule_AddIntConstant(module, "VERSION", 8) < 0) {
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
