"""Storage options for fsspec, typed and checked before any IO; secrets kept out of every message.

``--storage-option KEY=VALUE`` gives strings. :func:`typed_storage_options` turns them into what the
file system class expects, from its constructor's defaults (``anon=false`` -> ``False``,
``max_concurrency=4`` -> ``4``, ``client_kwargs={"region_name":"x"}`` -> a dict), refuses keys the
class does not take (with the closest ones it does) and an ``endpoint_url`` that is not an
http(s) URL. Every problem is :class:`~recovery.errors.ConfigError` (bad input, exit 2) and no
message shows a secret: values of secret-bearing keys (key, secret, token, password, credentials,
...) are never quoted, and credentials inside URLs are masked (:func:`redact`).
"""

from __future__ import annotations

import difflib
import inspect
import json
from collections.abc import Iterable, Mapping
from typing import Any, TypeAlias
from urllib.parse import urlsplit

from recovery.errors import ConfigError, mask_credentials

StorageOptions: TypeAlias = Mapping[str, Any]
"""fsspec storage options as a caller gives them: strings from ``--storage-option``, TOML values
from a fleet conf, anything the file system's constructor takes from Python. The toolkit reads them
only to type and check them (:func:`typed_storage_options`) and to find secrets, and hands them on
to fsspec; ``Any`` because what each key takes is the file system's to say."""

_SECRET_WORDS = ("secret", "password", "passwd", "token", "credential", "key", "sas", "signature", "auth")
# Keys fsspec itself takes on every file system (AbstractFileSystem / caching).
_COMMON = {
    "use_listings_cache": True,
    "listings_expiry_time": 0.0,
    "max_paths": 0,
    "skip_instance_cache": False,
    "asynchronous": False,
    "loop": None,
}
_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off"}


def is_secret_key(key: str) -> bool:
    """Whether the value of storage option ``key`` may be a credential (never printed)."""
    lowered = key.lower()
    return any(word in lowered for word in _SECRET_WORDS)


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` with credentials in URLs (``scheme://user:pass@``) and each of ``secrets`` masked."""
    out = mask_credentials(text)
    for secret in sorted({s for s in secrets if s and len(s) >= 3}, key=len, reverse=True):
        out = out.replace(secret, "***")
    return out


def secret_values(options: StorageOptions) -> tuple[str, ...]:
    """The string values to mask in messages: those of secret-bearing keys, and nested ones."""
    out: list[str] = []
    for key, value in options.items():
        if isinstance(value, Mapping):
            out.extend(secret_values(value))
        elif isinstance(value, str) and is_secret_key(key):
            out.append(value)
    return tuple(out)


def _parameters(fs_class: type) -> tuple[dict[str, object], bool]:
    """Named constructor parameters of ``fs_class`` (and its bases) with their defaults; whether it
    takes anything else (``**kwargs`` handed to a library we cannot see into)."""
    known: dict[str, object] = dict(_COMMON)
    for cls in reversed(fs_class.__mro__):
        init = cls.__dict__.get("__init__")
        if init is None:
            continue
        try:
            params = inspect.signature(init).parameters
        except (TypeError, ValueError):
            continue
        for name, p in params.items():
            if name != "self" and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY):
                known[name] = None if p.default is p.empty else p.default
    return known, False


def _typed(key: str, value: object, default: object) -> object:
    shown = "(value not shown)" if is_secret_key(key) else repr(value)
    if not isinstance(value, str):
        return value
    if isinstance(default, bool):
        lowered = value.strip().lower()
        if lowered in _TRUE:
            return True
        if lowered in _FALSE:
            return False
        raise ConfigError(f"storage option {key}: expected true or false, got {shown}")
    if isinstance(default, int):
        try:
            return int(value)
        except ValueError:
            raise ConfigError(f"storage option {key}: expected an integer, got {shown}") from None
    if isinstance(default, float):
        try:
            return float(value)
        except ValueError:
            raise ConfigError(f"storage option {key}: expected a number, got {shown}") from None
    if key.endswith("kwargs") or key.endswith("_options"):
        try:
            parsed = json.loads(value)
        except ValueError:
            parsed = None
        if not isinstance(parsed, dict):
            raise ConfigError(f'storage option {key}: expected a JSON object such as {{"a":1}}, got {shown}')
        return parsed
    return value


def _check_url(key: str, value: object) -> None:
    if not isinstance(value, str):
        raise ConfigError(f"storage option {key}: expected a URL")
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(
            f"storage option {key}: expected an http:// or https:// URL, got {redact(repr(value))}"
        )
    try:
        parts.port  # noqa: B018 - raises ValueError on a bad port
    except ValueError:
        raise ConfigError(f"storage option {key}: bad port in {redact(repr(value))}") from None


def typed_storage_options(fs_class: type, options: StorageOptions) -> StorageOptions:
    """``options`` typed for ``fs_class`` and checked (see the module docstring). Raises ConfigError."""
    known, _ = _parameters(fs_class)
    out: dict[str, object] = {}
    for key, value in options.items():
        if key not in known:
            close = difflib.get_close_matches(key, sorted(known), n=3)
            hint = f"; did you mean {', '.join(close)}?" if close else ""
            raise ConfigError(
                f"unknown storage option {key!r} for {fs_class.__name__}{hint} "
                f"(it takes: {', '.join(sorted(k for k in known if k != 'loop'))})"
            )
        out[key] = _typed(key, value, known[key])
        if key == "endpoint_url":
            _check_url(key, out[key])
    return out
