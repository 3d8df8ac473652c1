"""Where an offset ledger is and how to read it: the ``[ledger]`` table of a TOML file
(``conf/ledger.example.toml``), validated with pydantic.

    conf = load_conf("conf/ledger.toml", pipeline="orders-hourly")
    conf = make_conf({"table": "/lake/ops/kafka_ledger", "pipeline": "orders-hourly"})
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from recovery.errors import ConfigError

# Columns a ledger may lack: left at their default name, they are simply absent from the table.
OPTIONAL_COLUMNS = ("start_offset", "committed_at", "written_by", "note")


class LedgerColumns(BaseModel):
    """Column names of a ledger table; ``None`` (or ``""``) for optional columns the table does not have."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    pipeline: str | None = "pipeline"
    batch_id: str = "batch_id"
    topic: str = "topic"
    partition: str = "partition"
    start_offset: str | None = "start_offset"
    end_offset: str = "end_offset"
    committed_at: str | None = "committed_at"
    written_by: str | None = "written_by"
    note: str | None = "note"


class LedgerConf(BaseModel):
    """Where a ledger is and how to read it (``conf/ledger.example.toml``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    table: str
    pipeline: str | None = None  # required when the table has a pipeline column
    columns: LedgerColumns = Field(default_factory=LedgerColumns)
    storage_options: dict[str, str] = Field(default_factory=dict)
    # The Delta table the pipeline appends to with txnAppId = pipeline (jobs/ledger_ingest.py): a
    # repair refuses while it records a batch the ledger does not (a run died between its appends).
    data_table: str | None = None

    @property
    def app_id(self) -> str:
        """The pipeline's ``txnAppId`` in the data table and the ledger (the table when unnamed)."""
        return self.pipeline or self.table


def load_conf(
    path: str | Path, *, table: str | None = None, pipeline: str | None = None, data_table: str | None = None
) -> LedgerConf:
    """Read the ``[ledger]`` table of a TOML file; ``table``/``pipeline``/``data_table`` override it."""
    try:
        data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read ({exc.strerror or exc})") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not TOML ({exc})") from None
    section = dict(data.get("ledger", {}))
    overrides = {"table": table, "pipeline": pipeline, "data_table": data_table}
    section.update({key: value for key, value in overrides.items() if value is not None})
    return make_conf(section, name=str(path))


def make_conf(
    values: Mapping[str, object], *, name: str = "values", pipeline_required: bool = True
) -> LedgerConf:
    """A validated conf; messages start with ``name`` (what ``values`` came from: a file, say).
    ``columns.pipeline`` set to ``""`` (or None) means the table has no pipeline column. With
    ``pipeline_required=False`` a missing pipeline is checked against the table itself when it is
    read (``read_ledger`` refuses a table whose pipeline column holds pipelines)."""
    try:
        conf = LedgerConf.model_validate(dict(values))
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors())
        raise ConfigError(f"{name}: {problems}") from None
    if pipeline_required and conf.columns.pipeline and conf.pipeline is None:
        raise ConfigError(
            f"{name}: the ledger has a pipeline column ({conf.columns.pipeline!r}); name the pipeline "
            '(the pipeline key), or set columns.pipeline to "" if the table holds one pipeline'
        )
    return conf
