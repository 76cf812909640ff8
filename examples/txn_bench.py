"""Transactional produce beside plain produce, with confluent-kafka, against
a running broker's Kafka listener (issue 25's figure):

    python examples/txn_bench.py BOOTSTRAP [RECORDS] [COMMIT_MS]

Sends RECORDS values of 100 bytes (default 200,000) with acks=all, first
with an idempotent producer (topic bench-plain), then with a transactional
one that commits every COMMIT_MS milliseconds (default 100; topic
bench-txn), and prints records/s and commits for each. The virtual
environment `bash .ci/test` makes has confluent-kafka:
target/kafka-venv/bin/python.
"""

import sys
import time

from confluent_kafka import Producer

VALUE = b"x" * 100


def send(p, topic):
    """One value to `topic`, waiting for room in the producer's queue."""
    while True:
        try:
            p.produce(topic, VALUE)
            break
        except BufferError:
            p.poll(0.01)
    p.poll(0)


def plain(bootstrap, records):
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    start = time.time()
    for _ in range(records):
        send(p, "bench-plain")
    p.flush(120)
    return time.time() - start, 0


def transactional(bootstrap, records, commit_ms):
    p = Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": "bench", "linger.ms": 5}
    )
    p.init_transactions(30)
    start = time.time()
    p.begin_transaction()
    last = time.time()
    commits = 0
    for _ in range(records):
        send(p, "bench-txn")
        if (time.time() - last) * 1000 >= commit_ms:
            p.commit_transaction(60)
            commits += 1
            p.begin_transaction()
            last = time.time()
    p.commit_transaction(60)
    return time.time() - start, commits + 1


def main(argv):
    bootstrap = argv[0]
    records = int(argv[1]) if len(argv) > 1 else 200_000
    commit_ms = int(argv[2]) if len(argv) > 2 else 100
    for name, run in [
        ("plain (idempotent, acks=all)", lambda: plain(bootstrap, records)),
        (f"transactional, a commit every {commit_ms} ms", lambda: transactional(bootstrap, records, commit_ms)),
    ]:
        took, commits = run()
        extra = f", {commits} commits" if commits else ""
        print(f"{name}: {records / took:,.0f} records/s ({took:.2f} s{extra})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
