"""confluent-kafka consumers rebalancing cooperatively: tests/kafka_assignors.rs.

    python cooperative.py BOOTSTRAP TOPIC GROUP COUNT

Member A joins GROUP (partition.assignment.strategy=cooperative-sticky)
and reads; member B joins once A has read a third of COUNT records and
from every partition; A
leaves once the two have read two thirds, and B goes on alone to COUNT.
Both are polled in this one thread, so each incremental assign and
revoke is seen in order: after every one, no partition may be owned by
both. Each member commits what it read before it gives a partition up
(as the rebalance callbacks let it) and when it leaves. Prints one JSON
line: the partitions each member owned over time, and every record read
as [partition, offset, value]. Any error, a partition owned twice, or
fewer than COUNT records by the deadline exits 1.
"""

import json
import sys
import time

from confluent_kafka import Consumer, TopicPartition


def fail(message):
    print(f"error: {message}", file=sys.stderr, flush=True)
    sys.exit(1)


class Member:
    def __init__(self, name, bootstrap, group, topic, owners, history):
        self.name = name
        self.topic = topic
        self.closing = False
        self.owned = set()
        self.positions = {}
        self.owners = owners
        self.history = history
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "partition.assignment.strategy": "cooperative-sticky",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                "session.timeout.ms": 10000,
                "heartbeat.interval.ms": 500,
            }
        )
        self.consumer.subscribe([topic], on_assign=self.assigned, on_revoke=self.revoked)

    def assigned(self, consumer, partitions):
        for tp in partitions:
            other = self.owners.get(tp.partition)
            if other is not None and other != self.name:
                fail(f"{self.name} was given partition {tp.partition}, which {other} owns")
            self.owners[tp.partition] = self.name
            self.owned.add(tp.partition)
        consumer.incremental_assign(partitions)
        self.history.append([self.name, "assign", sorted(tp.partition for tp in partitions)])

    def revoked(self, consumer, partitions):
        # At close the member committed already: librdkafka sends a commit
        # made here after its LeaveGroup (Kafka too answers that one
        # UNKNOWN_MEMBER_ID).
        if not self.closing:
            self.commit([tp.partition for tp in partitions])
        for tp in partitions:
            self.owned.discard(tp.partition)
            if self.owners.get(tp.partition) == self.name:
                del self.owners[tp.partition]
        consumer.incremental_unassign(partitions)
        self.history.append([self.name, "revoke", sorted(tp.partition for tp in partitions)])

    def commit(self, partitions):
        offsets = [
            TopicPartition(self.topic, p, self.positions[p])
            for p in partitions
            if p in self.positions
        ]
        if offsets:
            for tp in self.consumer.commit(offsets=offsets, asynchronous=False):
                if tp.error is not None:
                    fail(f"{self.name}: commit {tp}: {tp.error}")

    def poll(self, records):
        msg = self.consumer.poll(0.1)
        if msg is None:
            return
        if msg.error():
            fail(f"{self.name}: {msg.error()}")
        if msg.partition() not in self.owned:
            fail(f"{self.name} read partition {msg.partition()}, which it does not own")
        records.append([msg.partition(), msg.offset(), msg.value().decode()])
        self.positions[msg.partition()] = msg.offset() + 1

    def close(self):
        self.commit(sorted(self.owned))
        self.closing = True
        self.consumer.close()
        for p in list(self.owners):
            if self.owners[p] == self.name:
                del self.owners[p]
        self.owned.clear()


def main(argv):
    if len(argv) != 5:
        fail(__doc__)
    bootstrap, topic, group, count = argv[1], argv[2], argv[3], int(argv[4])
    owners, history, records = {}, [], []
    a = Member("a", bootstrap, group, topic, owners, history)
    members = [a]
    b = None
    deadline = time.monotonic() + 90
    while len({(p, o) for p, o, _ in records}) < count:
        if time.monotonic() > deadline:
            fail(f"read {len(records)} of {count} records by the deadline; {history}")
        for m in members:
            m.poll(records)
        read = len({(p, o) for p, o, _ in records})
        # A has read from every partition it owns: it commits each one
        # it gives up.
        read_all = a.owned and set(a.positions) >= a.owned
        if b is None and read >= count // 3 and read_all:
            b = Member("b", bootstrap, group, topic, owners, history)
            members.append(b)
        if a in members and b is not None and b.owned and read >= 2 * count // 3:
            a.close()
            members.remove(a)
    for m in members:
        m.close()
    print(json.dumps({"history": history, "records": records}), flush=True)


if __name__ == "__main__":
    main(sys.argv)
