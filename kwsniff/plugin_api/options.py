"""Plugin options: ``--plugin-opt NAME.KEY=VALUE`` and ``--plugin-config FILE`` (TOML).

Contract:

* :func:`parse_cli_option` turns ``"avro.schemas=schemas/"`` into
  ``("avro", "schemas", "schemas/")``; a malformed one raises :class:`OptionError`.
* :func:`load_config` reads a TOML file with one table per plugin
  (``[avro]`` ``schemas = "schemas/"``); values keep their TOML types (strings, numbers,
  booleans, arrays, tables). Relative paths in it resolve against the file's directory;
  those given on the command line against the current directory.
* :func:`collect_options` merges both (the command line wins) into
  ``{plugin: PluginOptions}``.
* :class:`PluginOptions` gives a plugin typed access (``get_str``, ``get_bool``,
  ``get_int``, ``get_path``, ``get_list``, ``get_map``); a value of the wrong shape
  raises :class:`OptionError` naming the plugin and the key.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from kwsniff.errors import UserError

_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_\-]*\Z")
_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off"})


class OptionError(UserError):
    """A plugin option that is malformed or has a value of the wrong shape."""


def parse_cli_option(text: str) -> tuple[str, str, str]:
    """``"NAME.KEY=VALUE"`` -> ``(name, key, value)``."""
    head, eq, value = text.partition("=")
    name, dot, key = head.strip().partition(".")
    if not eq or not dot or not _NAME_RE.match(name) or not key.strip():
        raise OptionError(f"--plugin-opt {text!r}: expected NAME.KEY=VALUE "
                          "(e.g. avro.schemas=schemas/)")
    return name, key.strip(), value


def load_config(path: str | Path) -> dict[str, dict[str, Any]]:
    """The plugin tables of a TOML config file."""
    import tomllib      # (here: ~6 ms of start-up for runs without a config file)

    p = Path(path)
    try:
        with p.open("rb") as fh:
            doc = tomllib.load(fh)
    except OSError as err:
        raise OptionError(f"--plugin-config {path}: {err.strerror or err}") from None
    except tomllib.TOMLDecodeError as err:
        raise OptionError(f"--plugin-config {path}: not valid TOML: {err}") from None
    out: dict[str, dict[str, Any]] = {}
    for name, table in doc.items():
        if not isinstance(table, dict):
            raise OptionError(f"--plugin-config {path}: {name!r} must be a table "
                              f"([{name}] followed by key = value lines)")
        out[name] = table
    return out


class PluginOptions:
    """The options of one plugin (see the module contract)."""

    def __init__(self, plugin: str, values: dict[str, Any] | None = None,
                 bases: dict[str, Path] | None = None) -> None:
        self.plugin = plugin
        self._values: dict[str, Any] = dict(values or {})
        self._bases: dict[str, Path] = dict(bases or {})

    def set(self, key: str, value: Any, base: Path | None = None) -> None:
        self._values[key] = value
        if base is not None:
            self._bases[key] = base
        else:
            self._bases.pop(key, None)

    def __contains__(self, key: object) -> bool:
        return key in self._values

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        return f"PluginOptions({self.plugin!r}, {self._values!r})"

    def as_dict(self) -> dict[str, Any]:
        return dict(self._values)

    def _error(self, key: str, what: str) -> OptionError:
        return OptionError(f"plugin {self.plugin}: option {key}: {what}")

    def get(self, key: str, default: Any = None) -> Any:
        return self._values.get(key, default)

    def get_str(self, key: str, default: str | None = None) -> str | None:
        value = self._values.get(key)
        if value is None:
            return default
        if isinstance(value, (dict, list)):
            raise self._error(key, f"expected a single value, got {value!r}")
        return str(value)

    def get_bool(self, key: str, default: bool = False) -> bool:
        value = self._values.get(key)
        if value is None:
            return default
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if text in _TRUE:
            return True
        if text in _FALSE:
            return False
        raise self._error(key, f"expected true or false, got {value!r}")

    def get_int(self, key: str, default: int | None = None) -> int | None:
        value = self._values.get(key)
        if value is None:
            return default
        if isinstance(value, bool):
            raise self._error(key, f"expected a number, got {value!r}")
        try:
            return int(value)
        except (TypeError, ValueError):
            raise self._error(key, f"expected a number, got {value!r}") from None

    def get_path(self, key: str, default: Path | None = None) -> Path | None:
        """A path; relative ones against the config file's directory (file options) or
        the current directory (command-line options). Not checked for existence."""
        text = self.get_str(key)
        if text is None:
            return default
        path = Path(text).expanduser()
        base = self._bases.get(key)
        if not path.is_absolute() and base is not None:
            path = base / path
        return path

    def get_paths(self, key: str) -> list[Path]:
        """Several paths (a list, or a comma-separated string), resolved as ``get_path``."""
        base = self._bases.get(key)
        out = []
        for text in self.get_list(key):
            path = Path(text).expanduser()
            out.append(base / path if not path.is_absolute() and base is not None else path)
        return out

    def get_list(self, key: str, default: Iterable[str] = ()) -> list[str]:
        """A list (TOML array) or a comma-separated string; items stripped, empty ones dropped."""
        value = self._values.get(key)
        if value is None:
            return list(default)
        if isinstance(value, dict):
            raise self._error(key, f"expected a list, got a table {value!r}")
        items = value if isinstance(value, list) else str(value).split(",")
        return [str(v).strip() for v in items if str(v).strip()]

    def get_map(self, key: str) -> dict[str, str]:
        """A TOML table, or ``"k1=v1,k2=v2"`` on the command line (order kept)."""
        value = self._values.get(key)
        if value is None:
            return {}
        if isinstance(value, dict):
            return {str(k): str(v) for k, v in value.items()}
        if isinstance(value, list):
            raise self._error(key, f"expected KEY=VALUE pairs, got a list {value!r}")
        out: dict[str, str] = {}
        for item in str(value).split(","):
            item = item.strip()
            if not item:
                continue
            k, eq, v = item.partition("=")
            if not eq or not k.strip() or not v.strip():
                raise self._error(key, f"expected KEY=VALUE pairs separated by commas, "
                                       f"got {item!r}")
            out[k.strip()] = v.strip()
        return out


def collect_options(cli: Iterable[str] = (), config: str | Path | None = None,
                    cwd: Path | None = None) -> dict[str, PluginOptions]:
    """Options of every plugin named in the config file or on the command line."""
    out: dict[str, PluginOptions] = {}
    if config is not None:
        base = Path(config).resolve().parent
        for name, table in load_config(config).items():
            opts = out.setdefault(name, PluginOptions(name))
            for key, value in table.items():
                opts.set(key, value, base)
    here = cwd or Path.cwd()
    for text in cli:
        name, key, value = parse_cli_option(text)
        out.setdefault(name, PluginOptions(name)).set(key, value, here)
    return out
