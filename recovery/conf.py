"""Kafka clusters and streaming jobs described in TOML files (``conf/examples/``, ``docs/fleet.md``).

A directory holds any number of ``*.toml`` files; each may define ``[cluster.NAME]`` and
``[job.NAME]`` tables (Burrow's named sections). Names are unique across the files, a job names its
cluster, and the files are read in name order::

    conf = load_conf("conf/examples")     # a directory of *.toml files, or one file
    conf.clusters["local"].kafka          # a KafkaConfig; secrets read from the environment
    conf.jobs["orders-to-delta"].checkpoint

Parsing is strict (pydantic v2: no unknown keys, no silent coercion, except client property
values, which librdkafka takes as strings anyway). Every problem is a :class:`ConfigError`
(exit 2) on one line that names the file, the key path and what is wrong::

    conf/jobs.toml: job.orders.isolation: Input should be 'read_uncommitted' or 'read_committed'

Secrets never sit in the files: a client property or storage option whose name looks secret
(:func:`recovery.kafka.config.is_secret`) must come from an environment variable
(``properties_env`` / ``storage_options_env``). Values read from the environment are never
shown: the values here and in every message say ``$NAME`` instead.
"""

from __future__ import annotations

import logging
import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

from recovery.checkpoint.options import StorageOptions
from recovery.core.model import GateMode, Isolation
from recovery.core.real_time import real_time_refusal
from recovery.core.runway import parse_runway_warn
from recovery.core.spark_lines import DEFAULT_LINE, spark_line
from recovery.errors import ConfigError, InvalidInput, OffsetSpecError
from recovery.kafka.config import (
    DEFAULT_TIMEOUT_S,
    REDACTED,
    KafkaConfig,
    is_secret,
    translate_java_properties,
)

log = logging.getLogger(__name__)

__all__ = ["ClusterConf", "FleetConf", "JobConf", "load_conf", "parse_duration_s"]

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")
_DURATION_PART = re.compile(r"(\d+)(ms|s|m|h|d|w)")
_UNIT_S = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


# -- values (what the rest of the toolkit uses) ----------------------------------------------------


@dataclass(frozen=True)
class ClusterConf:
    """A Kafka cluster: where it is defined, how to reach it, and what to show of its settings.

    ``kafka`` holds secrets (it is left out of ``repr``); ``shown`` is the client properties as
    they may be printed: literal values from the file, ``$NAME`` for values from the environment.
    """

    name: str
    file: str
    bootstrap_servers: str
    bootstrap_env: str | None  # the variable the bootstrap servers came from, if any
    shown: Mapping[str, str]
    kafka: KafkaConfig = field(repr=False)
    interval_s: float | None = None  # fleet serve: how often its jobs are checked (None: --interval)


@dataclass(frozen=True)
class JobConf:
    """A streaming query: its checkpoint, the cluster it reads, and how it is judged.

    ``storage_options`` may hold secrets (left out of ``repr``); ``storage_shown`` is printable.
    ``runway_warn_s``: a partition whose retention runway is shorter is AT_RISK (None: no threshold).
    ``hold_s``: opted in to retention holds, keeping its unread records that long (``fleet hold``,
    :func:`recovery.hold.hold_retention`; None: never held). ``delta_tables``: the table of each
    Delta source the checkpoint reads (source id -> path), so its Delta sources are judged too.
    """

    name: str
    file: str
    cluster: str
    checkpoint: str
    isolation: Isolation = Isolation.READ_UNCOMMITTED
    gate: GateMode = GateMode.FAIL
    sink: str | None = None
    runway_warn_s: float | None = None
    hold_s: float | None = None
    delta_tables: Mapping[str, str] = field(default_factory=dict)
    partition_metrics: bool = True  # fleet serve: per-partition series (False: the job's only)
    interval_s: float | None = None  # fleet serve: how often it is checked (None: its cluster's)
    spark_line: str = DEFAULT_LINE  # the Spark the query runs (recovery.core.spark_lines)
    real_time: bool = False  # the query runs in Real-Time Mode (recovery.core.real_time)
    storage_shown: StorageOptions = field(default_factory=dict)
    storage_options: StorageOptions = field(default_factory=dict, repr=False)


@dataclass(frozen=True)
class FleetConf:
    """Every cluster and job found in ``source`` (a directory or one file), by name."""

    source: str
    files: tuple[str, ...]
    clusters: Mapping[str, ClusterConf]
    jobs: Mapping[str, JobConf]

    def cluster_of(self, job: JobConf) -> ClusterConf:
        return self.clusters[job.cluster]


# -- the file format (pydantic, internal) ------------------------------------------------------------


def _property_value(value: object) -> object:
    """Client properties are strings to librdkafka: TOML ``5`` and ``true`` mean ``"5"`` and ``"true"``."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    return value


def _duration(value: object) -> float:
    if not isinstance(value, str):
        raise ValueError('expected a duration such as "30s", "6h" or "1h30m"')
    return parse_duration_s(value)


def _runway_duration(value: object) -> float:
    """``runway_warn``: ``"6h"``/``"1h30m"`` as every duration here, or ISO-8601 ``"PT6H"`` as
    ``--runway-warn`` takes it."""
    if isinstance(value, str) and value.strip()[:1] in ("P", "p"):
        try:
            return parse_runway_warn(value) / 1000
        except OffsetSpecError:
            raise ValueError(f'expected a duration such as "6h", "1h30m" or "PT6H", not {value!r}') from None
    return _duration(value)


def _spark_line(value: object) -> str:
    if not isinstance(value, str):
        raise ValueError(f'expected a Spark version as a string, such as "3.5" or "4.2.0", not {value!r}')
    return spark_line(value)


_STRICT = ConfigDict(extra="forbid", frozen=True, strict=True)
PropertyValue = Annotated[str, BeforeValidator(_property_value)]
Duration = Annotated[float, BeforeValidator(_duration)]
RunwayDuration = Annotated[float, BeforeValidator(_runway_duration)]
SparkLine = Annotated[str, BeforeValidator(_spark_line)]


class _Cluster(BaseModel):
    model_config = _STRICT

    bootstrap_servers: str | None = None
    bootstrap_servers_env: str | None = None
    properties: dict[str, PropertyValue] = Field(default_factory=dict)
    properties_env: dict[str, str] = Field(default_factory=dict)
    timeout: Duration = DEFAULT_TIMEOUT_S
    interval: Duration | None = None


class _Job(BaseModel):
    model_config = _STRICT

    cluster: str
    checkpoint: str
    storage_options: dict[str, Any] = Field(default_factory=dict)  # the TOML table, any TOML values
    storage_options_env: dict[str, str] = Field(default_factory=dict)
    isolation: Annotated[Isolation, Field(strict=False)] = Isolation.READ_UNCOMMITTED
    sink: str | None = None
    gate: Annotated[GateMode, Field(strict=False)] = GateMode.FAIL
    runway_warn: RunwayDuration | None = None
    hold: RunwayDuration | None = None
    delta_tables: dict[str, str] = Field(default_factory=dict)
    partition_metrics: bool = True
    interval: Duration | None = None
    spark_version: SparkLine = DEFAULT_LINE
    real_time: bool = False


class _File(BaseModel):
    model_config = _STRICT

    cluster: dict[str, _Cluster] = Field(default_factory=dict)
    job: dict[str, _Job] = Field(default_factory=dict)


_KEYS = {
    (): sorted(_File.model_fields),
    ("cluster",): sorted(_Cluster.model_fields),
    ("job",): sorted(_Job.model_fields),
}


def parse_duration_s(text: str) -> float:
    """``"6h"``, ``"30s"``, ``"1h30m"``, ``"500ms"``, ``"2d"``, ``"1w"`` in seconds.

    >>> parse_duration_s("1h30m")
    5400.0
    """
    compact = text.strip().replace(" ", "")
    if not compact or _DURATION_PART.sub("", compact):
        raise ValueError(f'expected a duration such as "30s", "6h" or "1h30m", not {text!r}')
    seconds = float(sum(int(n) * _UNIT_S[unit] for n, unit in _DURATION_PART.findall(compact)))
    if seconds <= 0:
        raise ValueError(f"a duration must be positive, not {text!r}")
    return seconds


# -- loading -----------------------------------------------------------------------------------------


def load_conf(path: str | Path, *, environ: Mapping[str, str] | None = None) -> FleetConf:
    """Read every ``*.toml`` file of directory ``path`` (or the one file ``path``) into a
    :class:`FleetConf`, taking ``*_env`` values from ``environ`` (default: ``os.environ``).

    Raises :class:`ConfigError` (one line: file, key path, what is wrong) on the first bad file.

    Example: ``load_conf("conf/examples").jobs["orders-to-delta"].checkpoint``
    """
    env = os.environ if environ is None else environ
    root = Path(path)
    if root.is_dir():
        files = sorted(p for p in root.glob("*.toml") if p.is_file())
        if not files:
            raise ConfigError(f"{root}: no *.toml files here")
    elif root.is_file():
        files = [root]
    else:
        raise ConfigError(f"{root}: no such file or directory")
    clusters: dict[str, ClusterConf] = {}
    jobs: dict[str, JobConf] = {}
    for file in files:
        parsed = _parse_file(file)
        for name, cluster in parsed.cluster.items():
            _check_name(file, "cluster", name, clusters)
            clusters[name] = _cluster(file, name, cluster, env)
        for name, job in parsed.job.items():
            _check_name(file, "job", name, jobs)
            jobs[name] = _job(file, name, job, env)
    for conf in jobs.values():
        if conf.cluster not in clusters:
            known = ", ".join(sorted(clusters)) or "none"
            raise ConfigError(
                f"{conf.file}: {_path('job', conf.name, 'cluster')}: no cluster {conf.cluster!r} "
                f"(defined: {known})"
            )
    log.debug("read %d clusters and %d jobs from %d files in %s", len(clusters), len(jobs), len(files), root)
    return FleetConf(str(root), tuple(str(f) for f in files), clusters, jobs)


def _parse_file(file: Path) -> _File:
    try:
        data = tomllib.loads(file.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"{file}: cannot read ({exc.strerror or exc})") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{file}: not UTF-8 text (byte {exc.start})") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{file}: not valid TOML: {exc}") from None
    try:
        return _File.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(f"{file}: {_problems(exc)}") from None


def _problems(exc: ValidationError, limit: int = 3) -> str:
    """Pydantic's errors as ``key.path: what is wrong``; never the input (it may be a secret)."""
    lines = []
    for error in exc.errors(include_input=False, include_url=False):
        loc = tuple(str(part) for part in error["loc"])
        lines.append(f"{_path(*loc)}: {_message(error['type'], error['msg'], loc)}")
    more = f"; and {len(lines) - limit} more" if len(lines) > limit else ""
    return "; ".join(lines[:limit]) + more


def _message(kind: str, msg: str, loc: tuple[str, ...]) -> str:
    if kind == "missing":
        return "missing (required)"
    if kind == "extra_forbidden":
        # the table the unknown key sits in: the file, a cluster or a job
        table = () if len(loc) == 1 else (loc[0],) if len(loc) == 3 else None
        expected = _KEYS.get(table) if table is not None else None
        return "unknown key" + (f" (expected {', '.join(expected)})" if expected else "")
    if kind in ("model_type", "dict_type"):
        return "expected a table"
    return msg.removeprefix("Value error, ")


def _path(*parts: str) -> str:
    """A TOML key path: ``job.orders.properties."client.id"``."""
    return ".".join(p if _BARE_KEY.match(p) else f'"{p}"' for p in parts)


def _check_name(file: Path, kind: str, name: str, seen: Mapping[str, ClusterConf | JobConf]) -> None:
    if not _NAME.match(name):
        raise ConfigError(
            f"{file}: {_path(kind, name)}: a name is letters, digits, '.', '_' and '-', starting with a "
            "letter or digit"
        )
    if name in seen:
        raise ConfigError(f"{file}: {_path(kind, name)}: already defined in {seen[name].file}")


def _from_env(file: Path, key: str, variable: str, env: Mapping[str, str]) -> str:
    if not _ENV_NAME.match(variable):
        raise ConfigError(f"{file}: {key}: {variable!r} is not an environment variable name")
    value = env.get(variable)
    if value is None:
        raise ConfigError(f"{file}: {key}: environment variable {variable} is not set")
    return value


def _refuse_secrets(file: Path, base: tuple[str, ...], values: Mapping[str, object], env_key: str) -> None:
    """A secret-looking key written in the file itself: it belongs in the environment."""
    for key, value in values.items():
        if is_secret(key):
            raise ConfigError(
                f"{file}: {_path(*base, key)}: a secret must not be written in the file; name the "
                f"environment variable that holds it in {_path(*base[:-1], env_key)}"
            )
        if isinstance(value, Mapping):
            _refuse_secrets(file, (*base, key), value, env_key)


def _cluster(file: Path, name: str, raw: _Cluster, env: Mapping[str, str]) -> ClusterConf:
    base = ("cluster", name)
    if (raw.bootstrap_servers is None) == (raw.bootstrap_servers_env is None):
        raise ConfigError(
            f"{file}: {_path(*base)}: give exactly one of bootstrap_servers (HOST:PORT[,HOST:PORT...]) "
            "and bootstrap_servers_env (the environment variable that holds them)"
        )
    if raw.bootstrap_servers_env is not None:
        key = _path(*base, "bootstrap_servers_env")
        bootstrap = _from_env(file, key, raw.bootstrap_servers_env, env)
    else:
        assert raw.bootstrap_servers is not None
        key, bootstrap = _path(*base, "bootstrap_servers"), raw.bootstrap_servers
    if not bootstrap.strip():
        raise ConfigError(f"{file}: {key}: empty; expected HOST:PORT[,HOST:PORT...]")
    _refuse_secrets(file, (*base, "properties"), raw.properties, "properties_env")
    both = set(raw.properties) & set(raw.properties_env)
    for prop in (*raw.properties, *raw.properties_env):
        if prop == "bootstrap.servers":
            section = "properties" if prop in raw.properties else "properties_env"
            raise ConfigError(
                f"{file}: {_path(*base, section, prop)}: "
                "set bootstrap_servers or bootstrap_servers_env instead"
            )
    if both:
        raise ConfigError(
            f"{file}: {_path(*base, 'properties_env', sorted(both)[0])}: also set in properties; keep one"
        )
    properties = dict(raw.properties)
    shown = {k: (REDACTED if is_secret(k) else v) for k, v in raw.properties.items()}
    for prop, variable in raw.properties_env.items():
        properties[prop] = _from_env(file, _path(*base, "properties_env", prop), variable, env)
        shown[prop] = f"${variable}"
    try:
        kafka = KafkaConfig(bootstrap.strip(), translate_java_properties(properties), raw.timeout)
    except InvalidInput as exc:  # messages of config.py never carry secret values
        # a ConfigError, or a bad bootstrap_servers named as the key it is here, not as a flag
        raise ConfigError(f"{file}: {_path(*base)}: {exc}") from None
    return ClusterConf(
        name, str(file), kafka.bootstrap_servers, raw.bootstrap_servers_env, shown, kafka, raw.interval
    )


def _job(file: Path, name: str, raw: _Job, env: Mapping[str, str]) -> JobConf:
    base = ("job", name)
    if not raw.checkpoint.strip():
        raise ConfigError(f"{file}: {_path(*base, 'checkpoint')}: empty; expected a path or URL")
    if raw.sink is not None and not raw.sink.strip():
        raise ConfigError(f"{file}: {_path(*base, 'sink')}: empty; expected a Delta table path or URL")
    if raw.real_time and (refused := real_time_refusal(raw.spark_version)):
        raise ConfigError(f"{file}: {_path(*base, 'real_time')}: {refused} (its spark_version)")
    _refuse_secrets(file, (*base, "storage_options"), raw.storage_options, "storage_options_env")
    both = set(raw.storage_options) & set(raw.storage_options_env)
    if both:
        raise ConfigError(
            f"{file}: {_path(*base, 'storage_options_env', sorted(both)[0])}: also set in storage_options; "
            "keep one"
        )
    options = dict(raw.storage_options)
    shown: dict[str, object] = dict(raw.storage_options)
    for key, variable in raw.storage_options_env.items():
        options[key] = _from_env(file, _path(*base, "storage_options_env", key), variable, env)
        shown[key] = f"${variable}"
    return JobConf(
        name=name,
        file=str(file),
        cluster=raw.cluster,
        checkpoint=_location(file, raw.checkpoint.strip()),
        isolation=raw.isolation,
        gate=raw.gate,
        sink=_location(file, raw.sink.strip()) if raw.sink is not None else None,
        runway_warn_s=raw.runway_warn,
        hold_s=raw.hold,
        delta_tables={k: _location(file, v.strip()) for k, v in raw.delta_tables.items()},
        partition_metrics=raw.partition_metrics,
        interval_s=raw.interval,
        spark_line=raw.spark_version,
        real_time=raw.real_time,
        storage_shown=shown,
        storage_options=options,
    )


def _location(file: Path, location: str) -> str:
    """A URL as written; a relative local path is relative to the file that names it."""
    if "://" in location or os.path.isabs(location):
        return location
    return os.path.normpath(file.parent / location)
