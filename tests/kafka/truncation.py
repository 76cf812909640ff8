"""A librdkafka consumer (confluent-kafka) placed at `offset` of partition
0 of `topic` as if its last record there were of leader epoch `epoch`,
with `auto.offset.reset` `reset`: prints the offsets (and their leader
epochs) it reads, one a line, until it has read `count` records, is told
an error (its name, printed, ends the run) or 20 s pass.

    truncation.py BOOTSTRAP TOPIC OFFSET EPOCH RESET COUNT
"""
import sys
import time

from confluent_kafka import Consumer, TopicPartition


def main(argv):
    if len(argv) != 7:
        sys.exit(__doc__)
    bootstrap, topic, offset, epoch, reset, count = argv[1:]
    consumer = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": "truncation",
        "enable.auto.commit": False,
        "auto.offset.reset": reset,
    })
    consumer.assign([TopicPartition(topic, 0, int(offset), leader_epoch=int(epoch))])
    read = 0
    deadline = time.time() + 20
    while read < int(count) and time.time() < deadline:
        message = consumer.poll(0.5)
        if message is None:
            continue
        if message.error():
            print("error", message.error().name(), message.error().str(), flush=True)
            break
        print("offset", message.offset(), message.leader_epoch(), flush=True)
        read += 1
    consumer.close()


if __name__ == "__main__":
    main(sys.argv)
