"""Benchmark: ``stream-recovery group show`` against ``kafka-consumer-groups --describe``.

Run by hand (not a test)::

    .venv/bin/python benchmarks/group_vs_consumer_groups.py [--topics 20] [--partitions 100] [--rounds 9]

1. starts the embedded broker (request logger at DEBUG), creates ``--topics`` × ``--partitions``
   partitions (1-7 records each, every third log start moved by DeleteRecords) and commits an
   offset for every partition to an inactive group (AdminClient.alter_consumer_group_offsets);
2. checks once that both tools list every partition of the group;
3. runs, side by side and alternating A B / B A, ``--rounds`` times each:
   ``stream-recovery group show GROUP -b HOST:PORT --output csv`` and ``java -cp
   '.cache/jars/kafka/*' org.apache.kafka.tools.consumer.group.ConsumerGroupCommand
   --bootstrap-server HOST:PORT --describe --group GROUP`` (the class behind
   kafka-consumer-groups.sh); both show committed offset, log end and lag per partition;
4. prints medians (min-max), the ratio of the wall-time medians and the requests per run; writes
   ``benchmarks/results/group_show.json``.
"""

from __future__ import annotations

import argparse
import time

from _rig import STREAM_RECOVERY, RequestLog, alternate, broker, java_tool, make_topics, summarize

GROUP = "bench-group"


def commit(bootstrap: str, names: list[str], partitions: int) -> None:
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    offsets = [TopicPartition(name, p, 1) for name in names for p in range(partitions)]
    deadline = time.monotonic() + 120
    while True:  # a fresh broker creates __consumer_offsets on the first commit: wait until it reads back
        request = [ConsumerGroupTopicPartitions(GROUP, offsets)]
        for future in admin.alter_consumer_group_offsets(request).values():
            future.result(60)
        fetched = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(GROUP)])[GROUP].result(60)
        if sum(1 for tp in fetched.topic_partitions or () if tp.offset >= 0) == len(offsets):
            return
        if time.monotonic() > deadline:
            raise SystemExit(f"the group's {len(offsets)} offsets do not read back")
        time.sleep(1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--topics", type=int, default=20)
    parser.add_argument("--partitions", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=9)
    args = parser.parse_args()
    total = args.topics * args.partitions

    with broker() as started:
        bootstrap = started.bootstrap_servers
        names = make_topics(bootstrap, args.topics, args.partitions)
        commit(bootstrap, names, args.partitions)
        ours = "stream-recovery group show"
        theirs = "kafka-consumer-groups --describe"
        tools = {
            ours: [STREAM_RECOVERY, "group", "show", GROUP, "-b", bootstrap, "--output", "csv"],
            theirs: java_tool("org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
                              "--bootstrap-server", bootstrap, "--describe", "--group", GROUP),
        }  # fmt: skip

        def check(name: str, out: str) -> None:
            rows = [line for line in out.splitlines() if line.startswith("bench-") or " bench-" in line]
            if len(rows) != total:
                raise SystemExit(f"{name} listed {len(rows)} partitions, not {total}:\n{out[:1000]}")

        runs = alternate(tools, args.rounds, log=RequestLog(started.log_path), check=check)
        summarize(
            "group_show",
            f"group show vs kafka-consumer-groups --describe, a group with {total:,} partitions",
            runs,
            ours,
            theirs,
            {"partitions": total},
        )


if __name__ == "__main__":
    main()
