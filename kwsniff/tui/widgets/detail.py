"""The detail tree of the selected exchange and the description of the focused field.

Contract:

* :class:`DetailTree` shows the :class:`~kwsniff.output.tree.TreeNode` tree that
  ``decode -V`` prints (built by :func:`~kwsniff.output.tree.build_tree` with byte
  spans), creating Textual nodes lazily when a branch is first expanded, so a Fetch
  response with thousands of records opens at once.
* :meth:`DetailTree.focus_offset` puts the cursor on the deepest field of a message
  that covers a frame byte (expanding its ancestors): the reverse link from the hex
  view. :func:`deepest_at` is the pure lookup.
* :func:`describe_node` is the text of the field panel under the tree: the field, its
  value, its description from Kafka's message definitions (``about``), its byte range,
  and its schema type (``field_info`` / ``struct_field_info``).
"""

from __future__ import annotations

import io
from typing import Any

from rich.console import Console
from rich.text import Text
from textual.widgets import Tree
from textual.widgets.tree import TreeNode as UINode

from kwsniff.kafka.model import Exchange
from kwsniff.kafka.protocol import field_info, struct_field_info
from kwsniff.output.tree import TreeNode

LABEL_VALUE_CHARS = 240
CONTINUATION_INDENT = 2      # wrapped lines of a long problem start this much further in


def node_label(node: TreeNode) -> Text:
    """The one-line label of a tree node: name, value, colours by style."""
    text = Text()
    if node.style == "warn":
        text.append(node.label, style="bold yellow")
    elif node.style == "error" and not node.value:
        text.append(node.label, style="bold red")
    else:
        text.append(node.label, style="bold")
    if node.value:
        value = node.value
        if len(value) > LABEL_VALUE_CHARS:
            value = value[:LABEL_VALUE_CHARS - 1] + "…"
        text.append(": ")
        text.append(value, style="red" if node.style == "error" else "")
    return text


def wrap_label(label: Text, width: int, min_width: int = 24) -> list[Text]:
    """``label`` as lines of at most ``width`` cells (words kept whole where they fit);
    one line when it fits or ``width`` is under ``min_width`` (pane not laid out yet)."""
    if width < min_width or label.cell_len <= width:
        return [label]
    console = Console(width=width, file=io.StringIO())
    return list(label.wrap(console, width, overflow="fold"))


def parents_of(root: TreeNode) -> dict[int, TreeNode]:
    """``id(child) -> parent`` for every node under ``root``."""
    out: dict[int, TreeNode] = {}
    stack = [root]
    while stack:
        node = stack.pop()
        for child in node.children:
            out[id(child)] = node
            stack.append(child)
    return out


def deepest_at(root: TreeNode, message: str, offset: int) -> TreeNode | None:
    """The deepest (then narrowest) node of ``message`` whose byte range holds ``offset``."""
    best: TreeNode | None = None
    best_key = (-1, 0)
    for depth, node in root.walk():
        if node.message != message or node.start is None or node.length is None:
            continue
        if node.start <= offset < node.start + node.length:
            key = (depth, -node.length)
            if key > best_key:
                best, best_key = node, key
    return best


def field_schema(exchange: Exchange | None, node: TreeNode) -> Any:
    """The :class:`~kwsniff.kafka.protocol.FieldInfo` of a node, when it is a schema field."""
    if exchange is None or not node.path or node.message not in ("request", "response"):
        return None
    msg = exchange.request if node.message == "request" else exchange.response
    if msg is None or msg.api_key is None or exchange.protocol != "kafka":
        return None
    section, *rest = node.path
    path = tuple(rest)
    if not path:
        return None
    try:
        if section == "header":
            name = "RequestHeader" if msg.kind == "request" else "ResponseHeader"
            return struct_field_info(name, msg.header_version or 0, path)
        if section == "body":
            version = msg.header.get("_body_version", msg.api_version) \
                if isinstance(msg.header, dict) else msg.api_version
            if version is None:
                return None
            return field_info(msg.api_key, msg.kind, version, path)
    except Exception:  # noqa: BLE001 - schema metadata is decoration
        return None
    return None


def describe_node(node: TreeNode | None, exchange: Exchange | None = None) -> Text:
    """The field panel text for ``node`` (see the module contract)."""
    if node is None:
        return Text("Select an exchange, then a field: its description shows here.",
                    style="dim")
    text = Text()
    text.append(node.label, style="bold")
    if node.value:
        text.append(": ")
        text.append(node.value, style="red" if node.style == "error" else "")
    info = field_schema(exchange, node)
    about = node.about or (info.about if info is not None else None)
    if about:
        text.append("\n")
        text.append(about, style="italic")
    facts = []
    if node.start is not None and node.length is not None:
        facts.append(f"{node.message} bytes {node.start}-{node.start + node.length} "
                     f"({node.length} byte{'s' if node.length != 1 else ''})")
    if info is not None:
        kind = f"type {info.type}"
        if info.nullable:
            kind += ", nullable"
        if info.tag is not None:
            kind += f", tagged field {info.tag}"
        if info.default not in (None, ""):
            kind += f", default {info.default}"
        facts.append(kind)
        if info.entity:
            facts.append(f"entity {info.entity}")
    if facts:
        text.append("\n")
        text.append(" · ".join(facts), style="dim")
    return text


class DetailTree(Tree[TreeNode]):
    """See the module contract."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__("No exchange selected", id=id)
        self.guide_depth = 3
        self.auto_expand = True
        self.root_node: TreeNode | None = None
        self._parents: dict[int, TreeNode] = {}
        self._ui: dict[int, UINode[TreeNode]] = {}
        self._populated: set[int] = set()

    def show_tree(self, root: TreeNode | None, *, expand_messages: bool = True) -> None:
        """Show ``root`` (None: empty); expands the exchange and its messages."""
        self.clear()
        self.root_node = root
        self._parents = {}
        self._ui = {}
        self._populated = set()
        if root is None:
            self.root.set_label("No exchange selected")
            self.root.data = None
            return
        self._parents = parents_of(root)
        self.root.set_label(node_label(root))
        self.root.data = root
        self._ui[id(root)] = self.root
        self.populate(self.root)
        self.root.expand()
        if expand_messages:
            for child in self.root.children:
                data = child.data
                if data is not None and data.children and data.label.startswith("Kafka "):
                    self.populate(child)
                    child.expand()
        self.move_cursor(self.root)

    def populate(self, ui: UINode[TreeNode]) -> None:
        """Create the Textual children of ``ui`` (once)."""
        node = ui.data
        if node is None or id(node) in self._populated:
            return
        self._populated.add(id(node))
        depth = 0
        parent = ui
        while parent.parent is not None:
            depth += 1
            parent = parent.parent
        # the children's text starts after the guides of their depth
        width = self.scrollable_content_region.width - (depth + 1) * self.guide_depth - 2
        for child in node.children:
            if child.children:
                added = ui.add(node_label(child), data=child, allow_expand=True)
            else:
                lines = wrap_label(node_label(child), width - CONTINUATION_INDENT) \
                    if child.style in ("warn", "error") else []
                if len(lines) > 1:
                    added = ui.add_leaf(lines[0], data=child)
                    for line in lines[1:]:
                        ui.add_leaf(Text(" " * CONTINUATION_INDENT) + line, data=child)
                else:
                    added = ui.add_leaf(node_label(child), data=child)
            self._ui[id(child)] = added

    def on_tree_node_expanded(self, event: Tree.NodeExpanded[TreeNode]) -> None:
        self.populate(event.node)

    def ui_node(self, node: TreeNode) -> UINode[TreeNode] | None:
        """The Textual node showing ``node``, expanding (and creating) its ancestors."""
        chain = [node]
        parent = self._parents.get(id(node))
        while parent is not None:
            chain.append(parent)
            parent = self._parents.get(id(parent))
        chain.reverse()
        ui: UINode[TreeNode] | None = None
        for item in chain:
            ui = self._ui.get(id(item))
            if ui is None:
                return None
            if item is not node:
                self.populate(ui)
                if not ui.is_expanded:
                    ui.expand()
        return ui

    def focus_node(self, node: TreeNode) -> bool:
        """Put the cursor on ``node`` (expanding its ancestors); False if not shown."""
        ui = self.ui_node(node)
        if ui is None:
            return False
        self.last_line  # noqa: B018 - rebuilds the line table so the node has its line
        self.move_cursor(ui)
        return True

    def focus_offset(self, message: str, offset: int) -> TreeNode | None:
        """Focus the deepest field of ``message`` holding frame byte ``offset``."""
        if self.root_node is None:
            return None
        node = deepest_at(self.root_node, message, offset)
        if node is not None and self.focus_node(node):
            return node
        return None

    @property
    def focused_data(self) -> TreeNode | None:
        node = self.cursor_node
        return node.data if node is not None else None
