"""A consume-transform-produce loop with confluent-kafka: the exactly-once
pattern of Kafka's transactions, driven by tests/transactional_offsets.rs.

    python ctp.py CONSUMER_BOOTSTRAP PRODUCER_BOOTSTRAP IN OUT GROUP TXN TOTAL [CRASH_AFTER]

The consumer and the producer start from brokers of their own, so that
the group's coordinator and the transaction's are likely two brokers.
Reads IN in group GROUP (read_committed, no auto commit) and, for each
batch, writes "out-VALUE" to OUT and the batch's offsets to the group in
one transaction of TXN. A transaction refused in a way that needs an
abort is aborted and the consumer rewinds to the group's committed
offsets (what a new instance would do). Prints "committed N" after each
commit (N: this run's transactions). Stops, printing "done", once every
partition of IN is its own and read to an end offset of TOTAL in all.
With CRASH_AFTER, ends the process after that many commits without
closing anything (a crash: the group's member is left to time out); a
transaction stuck for 20 s ends it too, with status 3. CTP_DEBUG=1 in the
environment turns on librdkafka's debug lines (stderr).
"""

import faulthandler
import os
import sys
import threading
import time

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaException,
    Producer,
    TopicPartition,
)


def clients(consumer_bootstrap, producer_bootstrap, group, txn):
    c = Consumer(
        {
            "bootstrap.servers": consumer_bootstrap,
            "group.id": group,
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 500,
            "topic.metadata.refresh.interval.ms": 500,
            **({"debug": "cgrp,fetch"} if os.environ.get("CTP_DEBUG") else {}),
        }
    )
    p = Producer(
        {
            "bootstrap.servers": producer_bootstrap,
            "transactional.id": txn,
            "transaction.timeout.ms": 10000,
            **({"debug": "eos"} if os.environ.get("CTP_DEBUG") else {}),
            "linger.ms": 5,
            "topic.metadata.refresh.interval.ms": 500,
        }
    )
    p.init_transactions(60)
    return c, p


def rewind(c):
    """Seek every partition back to the group's committed offset."""
    for tp in c.committed(c.assignment(), timeout=60):
        if tp.offset < 0:
            tp.offset = OFFSET_BEGINNING
        c.seek(tp)


def transact(c, p, out, batch):
    """One batch in one transaction: whether it committed."""
    next_offsets = {}
    p.begin_transaction()
    for m in batch:
        p.produce(out, value=b"out-" + m.value())
        next_offsets[(m.topic(), m.partition())] = m.offset() + 1
    offsets = [TopicPartition(t, part, o) for (t, part), o in next_offsets.items()]
    try:
        p.send_offsets_to_transaction(offsets, c.consumer_group_metadata(), 60)
        while True:
            try:
                p.commit_transaction(60)
                return True
            except KafkaException as e:
                print(f"commit: {e.args[0]}", file=sys.stderr, flush=True)
                if not e.args[0].retriable():
                    raise
    except KafkaException as e:
        print(f"transaction: {e.args[0]}", file=sys.stderr, flush=True)
        if not e.args[0].txn_requires_abort():
            raise
        print(f"aborting: {e.args[0].name()}", file=sys.stderr, flush=True)
        p.abort_transaction(60)
        rewind(c)
        return False


def finished(c, total):
    """Whether every partition is ours and the group committed `total`
    records of them (the position is unknown after a rebalance that gave
    back partitions read to their end)."""
    assigned = c.assignment()
    if not assigned:
        return False
    topic = assigned[0].topic
    parts = c.list_topics(topic, timeout=30).topics[topic].partitions
    if len(assigned) != len(parts):
        return False
    committed = c.committed(assigned, timeout=30)
    return sum(max(tp.offset, 0) for tp in committed) >= total


def stuck():
    print("stuck in a transaction: ending", file=sys.stderr, flush=True)
    os._exit(3)


def main(argv):
    # Where it is, every 20 s, for a test that fails waiting on it.
    faulthandler.dump_traceback_later(20, repeat=True)
    consumer_bootstrap, producer_bootstrap, src, out, group, txn, total = argv[:7]
    crash_after = int(argv[7]) if len(argv) > 7 else None
    c, p = clients(consumer_bootstrap, producer_bootstrap, group, txn)
    def said(what):
        return lambda _, parts: print(
            f"{what} {[(tp.partition) for tp in parts]}", file=sys.stderr, flush=True
        )

    c.subscribe([src], on_assign=said("assigned"), on_revoke=said("revoked"))
    commits = 0
    deadline = time.time() + 240
    while time.time() < deadline:
        batch = [m for m in c.consume(10, 0.5) if not m.error()]
        if not batch:
            if finished(c, int(total)):
                print("done", flush=True)
                c.close()
                return 0
            continue
        # A transaction stuck past its timeout (librdkafka 2.16 can wait for
        # ever on a group coordinator that left the cluster, its issue
        # 5511) ends the process, as a liveness check would: the next
        # instance fences this one and resumes from the committed offsets.
        watchdog = threading.Timer(20, stuck)
        watchdog.start()
        committed = transact(c, p, out, batch)
        watchdog.cancel()
        if committed:
            commits += 1
            print(f"committed {commits}", flush=True)
            if crash_after is not None and commits >= crash_after:
                os._exit(0)
    print("gave up", flush=True)
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
