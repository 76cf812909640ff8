"""kafka-python's transactional producer and read_committed consumer,
driven by tests/transactions.rs.

    python transactional_kp.py BOOTSTRAP TOPIC

One transaction of c-0..c-2 committed, one of a-0 and a-1 sent and then
aborted, then a
read_committed consumer of TOPIC from its beginning: prints each value it
reads, one a line (5 s without one ends it).
"""

import sys

from kafka import KafkaConsumer, KafkaProducer


def main(argv):
    bootstrap, topic = argv[0], argv[1]
    p = KafkaProducer(bootstrap_servers=bootstrap, transactional_id="kafka-python-1")
    p.init_transactions()
    p.begin_transaction()
    for i in range(3):
        p.send(topic, f"c-{i}".encode())
    p.commit_transaction()
    p.begin_transaction()
    for i in range(2):
        p.send(topic, f"a-{i}".encode())
    # In the log before the abort (kafka-python drops what it has not sent).
    p.flush()
    p.abort_transaction()
    p.close()
    c = KafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        isolation_level="read_committed",
        auto_offset_reset="earliest",
        consumer_timeout_ms=5000,
    )
    for m in c:
        print(m.value.decode(), flush=True)
    c.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
