"""A Kafka consumer that counts records and prints none (librdkafka, through
confluent-kafka), against a running broker's Kafka listener:

    python examples/kafka_consume_bench.py BOOTSTRAP TOPIC RECORDS

Reads TOPIC from its start (partition 0, no group) until RECORDS records
have come, in batches of up to 10,000 (`consume`), checking nothing but
their count, and prints records/s on one line. Set beside `klog-consume
-e -q TOPIC > /dev/null` of the same records, it tells what the Kafka
listener costs a consumer that does not print (kcat's own printing is most
of what `kcat -C` costs). The virtual environment `bash .ci/test` makes
has confluent-kafka: target/kafka-venv/bin/python.
"""

import sys
import time

from confluent_kafka import Consumer, TopicPartition


def main():
    if len(sys.argv) != 4:
        sys.exit("usage: kafka_consume_bench.py BOOTSTRAP TOPIC RECORDS")
    bootstrap, topic, records = sys.argv[1], sys.argv[2], int(sys.argv[3])
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "kafka-consume-bench",
            "enable.auto.commit": False,
            "fetch.max.bytes": 64 << 20,
            "max.partition.fetch.bytes": 8 << 20,
            "queued.max.messages.kbytes": 256 << 10,
        }
    )
    c.assign([TopicPartition(topic, 0, 0)])
    seen, start, idle = 0, None, 0
    while seen < records:
        batch = c.consume(10000, 1.0)
        if not batch:
            idle += 1
            if idle > 30:
                sys.exit(f"only {seen} of {records} records in 30 s")
            continue
        idle = 0
        if start is None:
            start = time.time()
        for m in batch:
            if m.error() is not None:
                sys.exit(f"consume: {m.error()}")
        seen += len(batch)
    took = time.time() - start
    c.close()
    print(f"{seen} records consumed, {seen / took:.1f} records/sec")


if __name__ == "__main__":
    main()
