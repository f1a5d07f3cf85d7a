"""kwsniff's plugin API: teach kwsniff about your payloads, vendor APIs and fields.

A plugin is a Python module (``NAME.py`` or a ``NAME/`` package in the shipped
``plugins/`` directory or a ``--plugins DIR``, or an installed distribution's entry point
named NAME in the group ``"kwsniff.plugins"``) with a ``register(api)`` function; NAME is
the plugin's name (its options are ``--plugin-opt NAME.KEY=VALUE``)::

    # orders.py
    OPTIONS = {"topics": "topics whose values are orders"}

    def register(api):
        topics = api.options.get_list("topics", ["orders"])
        api.payload_decoder(decode_order, topics=topics, parts=("value",))

    def decode_order(data, where):
        ...               # -> a JSON-like object, or None when not an order

``api`` is a :class:`PluginContext`: ``payload_decoder``, ``vendor_api``,
``exchange_field``, ``digest``, ``report``, ``options``. A plugin that fails (import
error, exception in a hook, bad return value) is reported once with its name and
skipped; decoding never stops. The full guide is docs/plugins.md.
"""

from __future__ import annotations

from kwsniff.plugin_api.cli import active_manager, add_plugin_arguments, plugin_session
from kwsniff.plugin_api.context import (
    PayloadProblem,
    PayloadWhere,
    PluginContext,
    PluginError,
)
from kwsniff.plugin_api.helpers import (
    KafkaReader,
    TopicMap,
    TruncatedError,
    confluent_frame,
    exchange_records,
    per_exchange,
    protobuf_message_indexes,
    topic_pattern,
)
from kwsniff.plugin_api.manager import (
    ENTRY_POINT_GROUP,
    SHIPPED_DIR,
    LoadedPlugin,
    PluginManager,
)
from kwsniff.plugin_api.options import OptionError, PluginOptions, collect_options

__all__ = [
    "ENTRY_POINT_GROUP", "SHIPPED_DIR", "KafkaReader", "LoadedPlugin", "OptionError",
    "PayloadProblem", "PayloadWhere", "PluginContext", "PluginError", "PluginManager",
    "PluginOptions", "TopicMap", "TruncatedError", "active_manager", "add_plugin_arguments",
    "collect_options", "confluent_frame", "exchange_records", "per_exchange",
    "plugin_session", "protobuf_message_indexes", "topic_pattern",
]
