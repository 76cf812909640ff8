"""An idempotent confluent-kafka producer, driven by tests/idempotence.rs.

    python idempotent.py BOOTSTRAP TOPIC COUNT IDEMPOTENCE

Sends the values 0..COUNT-1 (as decimal text) to partition 0 of TOPIC, a
few hundred a second, with acks=all and librdkafka's idempotence
(`enable.idempotence`) on or off (IDEMPOTENCE is "true" or "false"); five
requests may be in flight, and a request sent again after a broken
connection or a moved leader keeps its producer id and sequence. Prints
"acked N" on stdout as each value is acknowledged, "progress N" on stderr
every 100 values sent, and exits 0 once every value is acknowledged, 1 if
one fails (or the deadline passes).
"""

import sys
import time

from confluent_kafka import Producer


def main(argv):
    bootstrap, topic, count, idempotence = argv[0], argv[1], int(argv[2]), argv[3]
    failed = []

    def done(err, msg):
        if err is not None:
            failed.append(f"{msg.value().decode()}: {err}")
        else:
            print(f"acked {msg.value().decode()}", flush=True)

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "enable.idempotence": idempotence == "true",
            "acks": "all",
            "linger.ms": 5,
            "max.in.flight.requests.per.connection": 5,
            "message.timeout.ms": 90000,
            "retry.backoff.ms": 50,
            "topic.metadata.refresh.interval.ms": 500,
        }
    )
    for i in range(count):
        while True:
            try:
                producer.produce(topic, value=str(i).encode(), partition=0, on_delivery=done)
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
        if i % 100 == 99:
            print(f"progress {i + 1}", file=sys.stderr, flush=True)
        time.sleep(0.003)
    left = producer.flush(120)
    if left or failed:
        print(f"error: {left} not delivered, failed: {failed[:5]}", file=sys.stderr, flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
