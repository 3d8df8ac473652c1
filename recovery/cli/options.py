"""Every option shared by several commands, declared once (sqlite-utils style decorators).

One meaning per flag name across commands. Each option hands the command a value of the library's
own vocabulary (``Isolation``, ``NoMatch``, ``TopicSelection``, ``TimeSpec``, a ``dict`` of storage
options ...), so a command never parses strings back into values. Bad values are usage errors
(exit 2) naming the option as the user typed it: a library parser called here is given the flag as
its ``name``.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Sequence
from enum import StrEnum
from typing import TypeVar

import click

from recovery.cli.flags import FLAGS
from recovery.core.model import Isolation, NoMatch, OnBeyondEnd, Policy, StrategyKind, TopicSelection
from recovery.core.runway import parse_runway_warn
from recovery.core.specs import TimeSpec, parse_time, parse_topic_partitions
from recovery.core.strategy import StrategyRequest
from recovery.errors import OffsetSpecError
from recovery.kafka.config import KafkaConfig

# A command's callback: each option below takes one and returns it (or a wrapper of it) with its
# Click parameters attached.
F = TypeVar("F", bound=Callable[..., object])


def stack(func: F, decorators: Sequence[Callable[[F], F]]) -> F:
    """Apply ``decorators`` to ``func`` as if written as ``@`` lines in this order (first = outermost),
    so a group of options can be one decorator."""
    for decorator in reversed(decorators):
        func = decorator(func)
    return func


class EnumChoice(click.Choice[str]):
    """A ``click.Choice`` over a ``StrEnum`` that hands the command the enum member."""

    def __init__(self, enum: type[StrEnum]) -> None:
        self.enum = enum
        super().__init__([member.value for member in enum])

    def convert(self, value: object, param: click.Parameter | None, ctx: click.Context | None) -> StrEnum:
        if isinstance(value, self.enum):
            return value
        return self.enum(super().convert(value, param, ctx))


class TimeSpecType(click.ParamType[TimeSpec]):
    """``earliest|latest|max-timestamp|-2|-1|-3|<epoch ms>|<ISO-8601>`` as a :class:`TimeSpec`."""

    name = "TIME"

    def convert(self, value: object, param: click.Parameter | None, ctx: click.Context | None) -> TimeSpec:
        if isinstance(value, TimeSpec):
            return value
        flag = max(param.opts, key=len) if param is not None and param.opts else "TIME"
        try:
            return parse_time(str(value), name=flag)
        except OffsetSpecError as exc:
            self.fail(str(exc), param, ctx)


def output_option(*formats: str, default: str = "table") -> Callable[[F], F]:
    """``--output table|json[|csv]``: how results are printed on stdout (table by default)."""
    choices = formats or ("table", "json")
    return click.option(
        "--output",
        "output",
        type=click.Choice(choices),
        default=default,
        show_default=True,
        help="How to print the result on stdout.",
    )


def kafka_options(func: F) -> F:
    """``-b/--bootstrap-server``, ``--command-config FILE``, ``-X prop=val``, ``--timeout``.

    The command receives one ``kafka: KafkaConfig`` argument instead of the four options.
    """

    @functools.wraps(func)
    def wrapper(
        *args: object,
        bootstrap_server: str,
        command_config: str | None,
        kafka_property: tuple[str, ...],
        kafka_timeout: float,
        **kwargs: object,
    ) -> object:
        kafka = KafkaConfig.from_options(
            bootstrap_server,
            command_config=command_config,
            overrides=kafka_property,
            timeout_s=kafka_timeout,
        )
        return func(*args, kafka=kafka, **kwargs)

    decorators = [
        click.option(
            "-b",
            "--bootstrap-server",
            "bootstrap_server",
            required=True,
            envvar="KAFKA_BOOTSTRAP_SERVERS",
            metavar="HOST:PORT[,...]",
            help="Kafka brokers to connect to (env KAFKA_BOOTSTRAP_SERVERS).",
        ),
        click.option(
            "--command-config",
            "command_config",
            type=click.Path(dir_okay=False),
            metavar="FILE",
            help="Kafka-style properties file of client settings (SASL/SSL), as for kafka-get-offsets.",
        ),
        click.option(
            "-X",
            "kafka_property",
            multiple=True,
            metavar="PROP=VAL",
            help="Set a client property (librdkafka name), as kcat -X; repeatable; wins over the file.",
        ),
        click.option(
            "--timeout",
            "kafka_timeout",
            type=click.FloatRange(min=0.1),
            default=30.0,
            show_default=True,
            metavar="SECONDS",
            help="Give up (exit 3) when Kafka has not answered within this time, retries included.",
        ),
    ]
    return stack(wrapper, decorators)  # type: ignore[return-value]


def isolation_option(help: str) -> Callable[[F], F]:
    """``--isolation read_uncommitted|read_committed`` (the consumer's ``isolation.level``) as an
    :class:`~recovery.core.model.Isolation`."""
    return click.option(
        "--isolation",
        type=EnumChoice(Isolation),
        default=Isolation.READ_UNCOMMITTED.value,
        show_default=True,
        help=help,
    )


def no_match_option(help: str, *, default: NoMatch = NoMatch.LATEST) -> Callable[[F], F]:
    """``--no-match latest|earliest|fail`` as a :class:`~recovery.core.model.NoMatch`. ``offsets`` fails
    by default (a lookup tool says when nothing matched); reset strategies take latest, as
    kafka-consumer-groups does."""
    return click.option(
        "--no-match",
        "no_match",
        type=EnumChoice(NoMatch),
        default=default.value,
        show_default=True,
        help=help,
    )


def on_beyond_end_option(help: str, *, default: OnBeyondEnd | None = None) -> Callable[[F], F]:
    """``--on-beyond-end latest|earliest`` as an :class:`~recovery.core.model.OnBeyondEnd`
    (None: not given)."""
    return click.option(
        "--on-beyond-end",
        "on_beyond_end",
        type=EnumChoice(OnBeyondEnd),
        default=default.value if default else None,
        show_default=default is not None,
        help=help,
    )


def _storage_options(ctx: click.Context, param: click.Parameter, pairs: tuple[str, ...]) -> dict[str, str]:
    out: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            # The argument is not echoed: it may hold a secret.
            raise click.BadParameter("expected KEY=VALUE (the value given is not shown)", ctx, param)
        out[key] = value
    return out


def storage_option(func: F) -> F:
    """``--storage-option KEY=VALUE`` (repeatable): the command receives ``storage_options: dict``."""
    return click.option(
        "--storage-option",
        "storage_options",
        multiple=True,
        metavar="KEY=VALUE",
        callback=_storage_options,
        help="fsspec storage option, e.g. endpoint_url=http://127.0.0.1:9000 (repeatable).",
    )(func)


def _topic_selection(
    ctx: click.Context, param: click.Parameter, specs: tuple[str, ...]
) -> TopicSelection | None:
    if not specs:
        return None
    try:
        parsed = [parse_topic_partitions(spec) for spec in specs]
    except OffsetSpecError as exc:
        raise click.BadParameter(str(exc), ctx, param) from None
    return TopicSelection(tuple(p for selection in parsed for p in selection.patterns))


TOPIC_HELP = (
    "Topics and partitions: TOPIC_REGEX[:N|N-M|N-|-M] or TOPIC:0,1,4 (the regex matches the whole "
    "name, so a plain topic name means that topic); repeatable."
)


def topic_option(help: str = TOPIC_HELP, *, alias: bool = False) -> Callable[[F], F]:
    """``-t/--topic SPEC`` (repeatable) as one :class:`~recovery.core.model.TopicSelection` (None: not
    given). The same grammar everywhere: ``kafka-get-offsets --topic-partitions``; with ``alias``
    that spelling is accepted too."""
    names = ["-t", "--topic", *(["--topic-partitions"] if alias else [])]
    return click.option(
        *names,
        "topics",
        multiple=True,
        metavar="SPEC",
        callback=_topic_selection,
        help=help,
    )


def exclude_internal_option(func: F) -> F:
    """``--exclude-internal-topics``: leave internal topics out of a regex selection."""
    return click.option(
        "--exclude-internal-topics",
        is_flag=True,
        help="Leave out internal topics (__consumer_offsets, __transaction_state).",
    )(func)


def selection_from(topics: TopicSelection | None, exclude_internal: bool) -> TopicSelection:
    """The ``--topic`` selection (required by the Kafka commands), without internal topics if asked."""
    if topics is None:
        raise click.UsageError("give the partitions to look at with --topic SPEC (e.g. --topic orders)")
    return dataclasses.replace(topics, exclude_internal=exclude_internal) if exclude_internal else topics


def checkpoint_write_options(func: F) -> F:
    """``--force``, ``--active-within SECONDS``, ``--backup-dir URL``: how a command that rewrites a
    checkpoint guards it (``repair``, ``delta-source repair``)."""
    decorators = [
        click.option(
            "--force", is_flag=True, help="Write even if the checkpoint looks in use by a running query."
        ),
        click.option(
            "--active-within",
            type=click.FloatRange(min=0),
            default=300.0,
            show_default=True,
            metavar="SECONDS",
            help="A checkpoint whose newest batch file is younger than this looks in use.",
        ),
        click.option(
            "--backup-dir",
            metavar="URL",
            help="Where the backup set goes (default <checkpoint>/_recovery/backups).",
        ),
    ]
    return stack(func, decorators)


def execute_option(func: F) -> F:
    """``--dry-run/--execute``: every writing command prints what it would do unless ``--execute``;
    the command receives ``dry_run: bool``."""
    return click.option(
        "--dry-run/--execute",
        "dry_run",
        default=True,
        help="Print what would change (default), or apply it.",
    )(func)


def strategy_options(func: F) -> F:
    """The reset strategies, their values, scope and loss budget (``repair``, ``ledger repair``).

    The command receives ``request: StrategyRequest`` (what was asked, unresolved) and
    ``policy: Policy``; :func:`recovery.core.strategy.resolve_strategy` turns the request into a Strategy.
    """

    @functools.wraps(func)
    def wrapper(
        *args: object,
        strategy: str | None,
        on_beyond_end: OnBeyondEnd | None,
        to_datetime: str | None,
        by_duration: str | None,
        shift_by: int | None,
        to_offset: int | None,
        from_file: str | None,
        no_match: NoMatch,
        topics: TopicSelection | None,
        max_loss_records: int | None,
        max_loss_per_partition: int | None,
        **kwargs: object,
    ) -> object:
        request = StrategyRequest(
            kind=StrategyKind(strategy) if strategy else None,
            on_beyond_end=on_beyond_end,
            to_datetime=to_datetime,
            by_duration=by_duration,
            shift_by=shift_by,
            to_offset=to_offset,
            from_file=from_file,
            no_match=no_match,
            scope=topics,
        )
        request.chosen_kind(names=FLAGS)  # options that do not fit, refused in flag words
        policy = Policy(max_loss_records, max_loss_per_partition)
        return func(*args, request=request, policy=policy, **kwargs)

    decorators = [
        click.option(
            "--strategy",
            type=click.Choice([kind.value for kind in StrategyKind]),
            default=None,
            help="How to choose new offsets (default clamp: below the log start -> log start, beyond "
            "the log end -> --on-beyond-end). A value option below implies its strategy.",
        ),
        on_beyond_end_option(
            "clamp: where a position past the log end goes: latest (default, follower-style) or "
            "earliest (re-reads a recreated topic)."
        ),
        click.option(
            "--to-datetime", metavar="ISO-8601|EPOCH-MS", help="First offset at or after this time."
        ),
        click.option("--by-duration", metavar="PnDTnHnMnS", help="First offset at or after now minus this."),
        click.option("--shift-by", type=int, metavar="N", help="Move every position by N (negative: back)."),
        click.option(
            "--to-offset", type=int, metavar="N", help="Move every position to N (clamped into the log)."
        ),
        click.option(
            "--from-file", type=click.Path(dir_okay=False), metavar="CSV", help="topic,partition,offset rows."
        ),
        no_match_option("Time strategies: the offset of a partition with no record at or after the time."),
        topic_option(
            "Limit the repair to these partitions: TOPIC_REGEX[:N|N-M|N-|-M] or TOPIC:0,1,4 (a plain "
            "topic name means that topic); repeatable."
        ),
        click.option(
            "--max-loss-records", type=click.IntRange(min=0), help="Refuse if more records are lost in all."
        ),
        click.option(
            "--max-loss-per-partition",
            type=click.IntRange(min=0),
            help="Refuse if a partition loses more records.",
        ),
    ]
    return stack(wrapper, decorators)  # type: ignore[return-value]


def accept_sink_skip_option(func: F) -> F:
    """``--accept-sink-skip``: write even though the ``--sink`` table would skip the changed batches."""
    return click.option(
        "--accept-sink-skip",
        is_flag=True,
        help="--execute even though the --sink table would skip batches (their records never reach it).",
    )(func)


def sink_option(help: str = "") -> Callable[[F], F]:
    """``--sink TABLE``: the query's Delta sink table (path or URL)."""
    return click.option(
        "--sink",
        "sink",
        metavar="TABLE",
        help=help
        or "The query's Delta sink table: warn when it would skip batches it believes it wrote "
        "(its txn appId is the query id).",
    )


def _duration_s(ctx: click.Context, param: click.Parameter, text: str | None) -> float | None:
    """A DURATION option's seconds (ISO-8601 or compact, as ``--runway-warn``)."""
    if text is None:
        return None
    try:
        # No name: click's "Invalid value for '--runway-warn':" names the flag already.
        return parse_runway_warn(text, name="") / 1000
    except OffsetSpecError as exc:
        raise click.BadParameter(str(exc).strip(), ctx, param) from None


RUNWAY_WARN_HELP = (
    "Verdict AT_RISK (exit 1) for a partition Spark resumes cleanly whose unread records retention "
    "may delete within DURATION (ISO-8601 PT6H, or 6h, 1h30m, 2d). Default: no threshold; the RUNWAY "
    "column is shown anyway."
)


def runway_warn_option(help: str = RUNWAY_WARN_HELP) -> Callable[[F], F]:
    """``--runway-warn DURATION``: the command receives ``runway_warn_s: float | None``."""
    return click.option("--runway-warn", "runway_warn_s", metavar="DURATION", callback=_duration_s, help=help)


SPARK_VERSION_HELP = (
    "The Spark the query runs (3.5, 4.0, 4.1, 4.2 or a full version): SPARK-ON-RESTART gives that "
    "version's words; JSON keeps the version-neutral spark_error beside them.  [default: 4.2]"
)


def spark_version_option(help: str = SPARK_VERSION_HELP) -> Callable[[F], F]:
    """``--spark-version VERSION``: the command receives ``spark_version: str | None``."""
    return click.option("--spark-version", "spark_version", metavar="VERSION", help=help)


REAL_TIME_HELP = (
    "The query runs in Real-Time Mode (trigger(realTime=...), Spark 4.1 and 4.2; a checkpoint does not "
    "say so): a position below the log start fails with OffsetOutOfRangeException, failOnDataLoss=false "
    "too; other failures are not predicted."
)


def real_time_option(help: str = REAL_TIME_HELP) -> Callable[[F], F]:
    """``--real-time``: the command receives ``real_time: bool``."""
    return click.option("--real-time", "real_time", is_flag=True, help=help)


def duration_option(flag: str, dest: str, help: str, *, default: str | None = None) -> Callable[[F], F]:
    """A ``DURATION`` option (PT6H, 6h, 1h30m, 2d): the command receives ``dest`` in seconds; with no
    ``default`` it is required."""
    # No default= at all when required: click takes an explicit None as a given value.
    if default is None:
        return click.option(flag, dest, metavar="DURATION", callback=_duration_s, help=help, required=True)
    return click.option(
        flag, dest, metavar="DURATION", callback=_duration_s, help=help, default=default, show_default=True
    )
