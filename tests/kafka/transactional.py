"""confluent-kafka's transactional producer and read_committed consumer,
driven by tests/transactions.rs. KLOG_SECURITY (librdkafka's properties as
JSON) logs the producer in; an init_transactions refused prints
"refused: ERROR" and exits 1.

    python transactional.py BOOTSTRAP MODE TOPIC [ARGS...]

MODE:
  commit TXN PREFIX N    one transaction of N values PREFIX-0.. to TOPIC,
                         committed; prints "committed"
  abort TXN PREFIX N     the same, aborted; prints "aborted"
  zombie TXN             two producers of one transactional id: the first
                         begins a transaction, the second's init fences
                         it; prints "fenced: CODE" when the first's
                         commit is refused, and the second's commit then
                         goes through ("second committed")
  open TXN PREFIX N      begins a transaction of N values, flushes them,
                         prints "open", then sleeps (the test kills it)
  held TXN PREFIX N      as open, then commits once a line arrives on
                         stdin; prints "committed"
  overlap TXN T N        two producers, TXN-a and TXN-b, each with T
                         transactions of N values (a-T-I, b-T-I), the
                         two open together, their batches interleaved;
                         a aborts every third (the 2nd, 5th, ...), b
                         the 3rd, 6th, ...; the others commit; prints
                         "done"
  read N                 a read_committed consumer of TOPIC from its
                         beginning: prints each value read, one a line,
                         until N are read, or 20 s pass without one
"""

import json
import os
import sys
import time

from confluent_kafka import Consumer, KafkaException, Producer


def producer(bootstrap, txn):
    # The test may ask for a short timeout (TXN_TIMEOUT_MS).
    timeout = int(os.environ.get("TXN_TIMEOUT_MS", "60000"))
    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": txn,
            "transaction.timeout.ms": timeout,
            "linger.ms": 5,
            "topic.metadata.refresh.interval.ms": 500,
            # A login (KLOG_SECURITY, librdkafka's properties as JSON).
            **json.loads(os.environ.get("KLOG_SECURITY", "{}")),
        }
    )
    try:
        p.init_transactions(30)
    except KafkaException as e:
        print(f"refused: {e.args[0].name()}", flush=True)
        sys.exit(1)
    return p


def send(p, topic, prefix, n):
    for i in range(n):
        p.produce(topic, value=f"{prefix}-{i}".encode())
    p.flush(30)


def read(bootstrap, topic, n):
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"read-{time.time()}",
            "isolation.level": "read_committed",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    c.subscribe([topic])
    got = 0
    quiet_since = time.time()
    while got < n and time.time() - quiet_since < 20:
        m = c.poll(0.5)
        if m is None or m.error():
            continue
        print(m.value().decode(), flush=True)
        got += 1
        quiet_since = time.time()
    c.close()


def main(argv):
    bootstrap, mode, topic = argv[0], argv[1], argv[2]
    if mode in ("commit", "abort", "open", "held"):
        txn, prefix, n = argv[3], argv[4], int(argv[5])
        p = producer(bootstrap, txn)
        p.begin_transaction()
        send(p, topic, prefix, n)
        if mode == "commit":
            p.commit_transaction(30)
            print("committed", flush=True)
        elif mode == "abort":
            p.abort_transaction(30)
            print("aborted", flush=True)
        elif mode == "held":
            print("open", flush=True)
            sys.stdin.readline()
            p.commit_transaction(60)
            print("committed", flush=True)
        else:
            print("open", flush=True)
            time.sleep(600)
    elif mode == "overlap":
        txn, txns, n = argv[3], int(argv[4]), int(argv[5])
        a, b = producer(bootstrap, f"{txn}-a"), producer(bootstrap, f"{txn}-b")
        for t in range(txns):
            a.begin_transaction()
            b.begin_transaction()
            for half in (range(n // 2), range(n // 2, n)):
                for p, name in ((a, "a"), (b, "b")):
                    for i in half:
                        p.produce(topic, value=f"{name}-{t}-{i}".encode())
                    p.flush(30)
            (a.abort_transaction if t % 3 == 1 else a.commit_transaction)(30)
            (b.abort_transaction if t % 3 == 2 else b.commit_transaction)(30)
        print("done", flush=True)
    elif mode == "zombie":
        txn = argv[3]
        first = producer(bootstrap, txn)
        first.begin_transaction()
        send(first, topic, "zombie", 3)
        second = producer(bootstrap, txn)
        try:
            first.commit_transaction(30)
            print("zombie committed", flush=True)
        except KafkaException as e:
            print(f"fenced: {e.args[0].name()}", flush=True)
        second.begin_transaction()
        send(second, topic, "second", 2)
        second.commit_transaction(30)
        print("second committed", flush=True)
    elif mode == "read":
        read(bootstrap, topic, int(argv[3]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
