"""A Kafka client driven by tests/kafka_clients.rs and tests/kafka_groups.rs.

    python client.py LIB produce  BOOTSTRAP TOPIC FROM TO [COMPRESSION]
    python client.py LIB consume  BOOTSTRAP TOPIC COUNT [GROUP]

LIB is kafka-python or confluent-kafka. `produce` sends records FROM..=TO
(key "kN", value "vN", headers h=x and n=N), each acknowledged, with the
library's default producer settings (but COMPRESSION, one of gzip, snappy,
lz4, zstd: the producer's compression type). `consume` prints COUNT records as
"PARTITION OFFSET KEY VALUE HEADERS" lines (headers "name=value,..."):
without GROUP it assigns every partition and reads from the beginning; with
GROUP it subscribes as a member, stops after COUNT records, commits exactly
what it printed (the next offset of each partition) and leaves. Fewer than
COUNT records within the deadline, or any error, exits 1.

KLOG_SECURITY, when set, is a JSON object of librdkafka's security
properties (security.protocol, ssl.ca.location, ssl.certificate.location,
ssl.key.location, sasl.mechanisms, sasl.username, sasl.password): given to
confluent-kafka as they are, and to kafka-python by its own names.
"""

import json
import os
import sys
import time


def security():
    return json.loads(os.environ.get("KLOG_SECURITY", "{}"))


def kafka_python_security():
    names = {
        "security.protocol": "security_protocol",
        "ssl.ca.location": "ssl_cafile",
        "ssl.certificate.location": "ssl_certfile",
        "ssl.key.location": "ssl_keyfile",
        "sasl.mechanisms": "sasl_mechanism",
        "sasl.username": "sasl_plain_username",
        "sasl.password": "sasl_plain_password",
    }
    out = {names[k]: v for k, v in security().items()}
    if "security_protocol" in out:
        out["security_protocol"] = out["security_protocol"].upper()
    return out

# KLOG_DEADLINE_S shortens it where a test expects a refusal.
DEADLINE_S = int(os.environ.get("KLOG_DEADLINE_S", "40"))


def fail(message):
    print(f"error: {message}", file=sys.stderr, flush=True)
    sys.exit(1)


def line(partition, offset, key, value, headers):
    shown = ",".join(f"{n}={(v or b'').decode()}" for n, v in headers or [])
    key = key.decode() if key is not None else "NULL"
    return f"{partition} {offset} {key} {value.decode()} {shown}"


def records(first, last):
    for i in range(first, last + 1):
        yield f"k{i}".encode(), f"v{i}".encode(), [("h", b"x"), ("n", str(i).encode())]


class KafkaPython:
    def __init__(self, bootstrap):
        import kafka

        self.kafka = kafka
        self.bootstrap = bootstrap

    def produce(self, topic, first, last, compression=None):
        producer = self.kafka.KafkaProducer(
            bootstrap_servers=self.bootstrap,
            compression_type=compression,
            **kafka_python_security(),
        )
        futures = [
            producer.send(topic, key=k, value=v, headers=h) for k, v, h in records(first, last)
        ]
        producer.flush(timeout=DEADLINE_S)
        for future in futures:
            future.get(timeout=DEADLINE_S)
        producer.close(timeout=10)

    def consume(self, topic, count, group):
        from kafka import TopicPartition
        from kafka.structs import OffsetAndMetadata

        consumer = self.kafka.KafkaConsumer(
            bootstrap_servers=self.bootstrap,
            group_id=group,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            **kafka_python_security(),
        )
        if group is None:
            deadline = time.monotonic() + DEADLINE_S
            partitions = consumer.partitions_for_topic(topic)
            while not partitions and time.monotonic() < deadline:
                time.sleep(0.1)
                partitions = consumer.partitions_for_topic(topic)
            if not partitions:
                fail(f"no partitions of {topic}")
            tps = [TopicPartition(topic, p) for p in sorted(partitions)]
            consumer.assign(tps)
            consumer.seek_to_beginning(*tps)
        else:
            consumer.subscribe([topic])
        printed, nexts = 0, {}
        deadline = time.monotonic() + DEADLINE_S
        while printed < count and time.monotonic() < deadline:
            for tp, messages in consumer.poll(timeout_ms=200).items():
                for m in messages:
                    if printed == count:
                        break
                    print(line(m.partition, m.offset, m.key, m.value, m.headers), flush=True)
                    printed += 1
                    nexts[tp] = m.offset + 1
        if printed < count:
            fail(f"only {printed} of {count} records within {DEADLINE_S}s")
        if group is not None:
            def at(offset):
                try:
                    return OffsetAndMetadata(offset, "", -1)
                except TypeError:  # kafka-python 2: (offset, metadata)
                    return OffsetAndMetadata(offset, "")

            consumer.commit({tp: at(o) for tp, o in nexts.items()})
        consumer.close(autocommit=False)


class Confluent:
    def __init__(self, bootstrap):
        import confluent_kafka

        self.ck = confluent_kafka
        self.bootstrap = bootstrap

    def produce(self, topic, first, last, compression=None):
        config = {"bootstrap.servers": self.bootstrap, **security()}
        if compression is not None:
            config["compression.type"] = compression
        producer = self.ck.Producer(config)
        errors = []

        def delivered(err, _msg):
            if err is not None:
                errors.append(err)

        for k, v, h in records(first, last):
            producer.produce(topic, key=k, value=v, headers=h, on_delivery=delivered)
            producer.poll(0)
        left = producer.flush(DEADLINE_S)
        if left or errors:
            fail(f"{left} records undelivered, errors {errors[:3]}")

    def consume(self, topic, count, group):
        ck = self.ck
        consumer = ck.Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                # librdkafka wants a group id even to assign partitions.
                "group.id": group or "assign-only-no-commit",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                **security(),
            }
        )
        if group is None:
            metadata = consumer.list_topics(topic, timeout=DEADLINE_S).topics[topic]
            if metadata.error is not None:
                fail(f"{topic}: {metadata.error}")
            consumer.assign(
                [ck.TopicPartition(topic, p, ck.OFFSET_BEGINNING) for p in sorted(metadata.partitions)]
            )
        else:
            consumer.subscribe([topic])
        printed, nexts = 0, {}
        deadline = time.monotonic() + DEADLINE_S
        while printed < count and time.monotonic() < deadline:
            for m in consumer.consume(num_messages=count - printed, timeout=0.2):
                if m.error() is not None:
                    fail(f"consume: {m.error()}")
                print(line(m.partition(), m.offset(), m.key(), m.value(), m.headers()), flush=True)
                printed += 1
                nexts[m.partition()] = m.offset() + 1
        if printed < count:
            fail(f"only {printed} of {count} records within {DEADLINE_S}s")
        if group is not None:
            offsets = [ck.TopicPartition(topic, p, o) for p, o in nexts.items()]
            for tp in consumer.commit(offsets=offsets, asynchronous=False):
                if tp.error is not None:
                    fail(f"commit {tp}: {tp.error}")
        consumer.close()


def main(argv):
    if len(argv) < 5:
        fail(__doc__)
    lib, command, bootstrap, topic = argv[1:5]
    client = {"kafka-python": KafkaPython, "confluent-kafka": Confluent}[lib](bootstrap)
    if command == "produce":
        client.produce(topic, int(argv[5]), int(argv[6]), argv[7] if len(argv) > 7 else None)
    elif command == "consume":
        client.consume(topic, int(argv[5]), argv[6] if len(argv) > 6 else None)
    else:
        fail(f"unknown command {command}")


if __name__ == "__main__":
    main(sys.argv)
