"""kwsniff: a Wireshark-style decoder for Apache Kafka wire traffic."""

from kwsniff import _compiled

__version__ = "0.1.0"

# before any submodule: a compiled module runs only if built from the source beside it
_compiled.install()
