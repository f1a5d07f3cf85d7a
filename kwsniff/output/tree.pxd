# Cython declarations augmenting tree.py (pure-Python mode): the -V tree's node as an
# extension type (one per line of every tree) and its plain renderer typed. tree.py
# stays the one source.
cimport cython
from kwsniff.kafka.records cimport Batch, Record, Records
from kwsniff.kafka.model cimport Exchange, KafkaMessage

cdef class TreeNode:
    cdef public object label
    cdef public object value
    cdef public object children
    cdef public object start
    cdef public object length
    cdef public object message
    cdef public object about
    cdef public object path
    cdef public object style

@cython.locals(pad=str, node=TreeNode)
cdef _emit_plain(list nodes, Py_ssize_t depth, list pads, str indent, list out)

@cython.locals(table=dict)
cdef str _escaped(str text)
cdef str _line(str label, str value)
cdef str _plain_line(str label, str value)

cdef str _as_shown(str text)

cdef class _Builder:
    cdef public object msg
    cdef public object protocol
    cdef public object value_chars
    cdef public object kind
    cdef public object version
    cdef public bint modern
    cdef public bint lean
    cdef public tuple _schema
    cdef public dict spans

    cpdef TreeNode node(self, label, value, section, tuple path, about=*, style=*)
    cpdef info(self, section, tuple names)
    cpdef fields(self, TreeNode parent, dict obj, section, tuple path, struct_info=*,
                 tuple names=*)
    @cython.locals(meta=bint, fast=bint, lean=bint, children=list, known=dict, about_enum=tuple,
                   prefix=tuple, key=str)
    cpdef _fields(self, TreeNode parent, dict obj, section, tuple path, struct_info=*,
                  tuple names=*)
    cpdef tuple _learn(self, dict known, key, section, tuple names, struct_info)
    @cython.locals(tables=dict, ck=tuple)
    cpdef dict _known(self, section, tuple names, struct_info)
    @cython.locals(node=TreeNode)
    cpdef value(self, TreeNode parent, key, value, section, tuple path, about, enum,
                holder, struct_info=*, names=*, bint meta=*)
    @cython.locals(node=TreeNode)
    cpdef records(self, TreeNode parent, key, Records records, section, tuple path, about)
    @cython.locals(node=TreeNode, lean=bint, children=list)
    cpdef batch(self, TreeNode parent, index, Batch b, Records records, base, tuple path)
    @cython.locals(node=TreeNode, kids=list, lean=bint)
    cpdef record(self, TreeNode parent, index, Record r, Records records, base)
    @cython.locals(node=TreeNode, child=TreeNode)
    cpdef array(self, TreeNode parent, key, list value, section, tuple path, about, enum,
                struct_info, tuple names)

cdef object _leaf(bint lean, label, value, message, style=*)
cdef object _plain_leaf(bint lean, label, value, message, style=*)

@cython.locals(node=TreeNode)
cdef TreeNode _new(label, value, children, start, length, message, about, tuple path,
                   style)

# helpers called for many nodes: C calls inside the module (still callable from Python)
cpdef _quote(text)
cpdef _hex_preview(data)
cpdef _scalar(name, value, enum, protocol)
cpdef _builtin_text(data, limit)
@cython.locals(views=dict)
cpdef _view(data, limit)
@cython.locals(d=dict)
cpdef _item_hint(item)
cpdef _all_dicts(items)
cpdef _plain_value(v)

# (one call per message of every tree: its fields read as C struct fields)
@cython.locals(b=_Builder, top=TreeNode, header=TreeNode, body=TreeNode, known=dict,
               lean=bint)
cpdef TreeNode _message_node(KafkaMessage msg, Exchange exchange, bint spans, value_chars,
                             bint lean=*)
