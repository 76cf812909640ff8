"""Kafka admin clients listing, describing and deleting consumer groups,
driven by tests/kafka_admin_groups.rs.

    python admin_groups.py LIB BOOTSTRAP list
    python admin_groups.py LIB BOOTSTRAP describe GROUP
    python admin_groups.py LIB BOOTSTRAP delete GROUP
    python admin_groups.py LIB BOOTSTRAP delete-offsets GROUP TOPIC PARTITION

LIB is confluent-kafka, kafka-python or aiokafka (list and describe only;
confluent-kafka has no delete-offsets). `list` prints each group's id,
sorted; `describe` a line "STATE MEMBERS", then "CLIENT_ID TOPIC:P,P..."
per member (its assignment as the client decodes it, sorted); `delete`
and `delete-offsets` "ok" or "error NAME" (the Kafka error's name).
"""

import asyncio
import sys


def fail(message):
    print(f"error: {message}", file=sys.stderr, flush=True)
    sys.exit(1)


def assigned(pairs):
    """TOPIC:P,P... of (topic, partition) pairs, sorted."""
    topics = {}
    for topic, p in pairs:
        topics.setdefault(topic, []).append(p)
    return " ".join(f"{t}:{','.join(map(str, sorted(ps)))}" for t, ps in sorted(topics.items()))


def confluent(bootstrap, command, args):
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    if command == "list":
        result = admin.list_consumer_groups().result(30)
        if result.errors:
            fail(result.errors)
        return sorted(g.group_id for g in result.valid)
    if command == "describe":
        group = admin.describe_consumer_groups([args[0]])[args[0]].result(30)
        state = group.state.name.title().replace("_", "")
        lines = [f"{STATES.get(state, state)} {len(group.members)}"]
        for m in group.members:
            tps = [(tp.topic, tp.partition) for tp in m.assignment.topic_partitions]
            lines.append(f"{m.client_id} {assigned(tps)}")
        return lines
    if command == "delete":
        try:
            admin.delete_consumer_groups([args[0]])[args[0]].result(30)
            return ["ok"]
        except KafkaException as e:
            return [f"error {e.args[0].name()}"]
    fail(f"confluent-kafka: no {command}")


# confluent-kafka's names of the states Kafka's brokers send.
STATES = {"Preparingrebalance": "PreparingRebalance", "Empty": "Empty", "Stable": "Stable",
          "Dead": "Dead"}


def kafka_name(class_name):
    """Kafka's name of a kafka-python error class: NonEmptyGroupError is
    NON_EMPTY_GROUP."""
    name = class_name.removesuffix("Error")
    return "".join("_" + c if c.isupper() and i else c for i, c in enumerate(name)).upper()


def kafka_python(bootstrap, command, args):
    from kafka import TopicPartition
    from kafka.admin import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    if command == "list":
        return sorted(g["group_id"] for g in admin.list_groups())
    if command == "describe":
        group = admin.describe_groups([args[0]])[args[0]]
        members = group["members"]
        lines = [f"{group['group_state']} {len(members)}"]
        for m in members:
            assignment = m["member_assignment"] or {}
            tps = [(t["topic"], p) for t in assignment.get("assigned_partitions", [])
                   for p in t["partitions"]]
            lines.append(f"{m['client_id']} {assigned(tps)}")
        return lines
    if command == "delete":
        result = admin.delete_groups([args[0]])[args[0]]
        return ["ok" if result == "OK" else f"error {kafka_name(result)}"]
    if command == "delete-offsets":
        group, topic, partition = args[0], args[1], int(args[2])
        try:
            result = admin.delete_group_offsets(group, [TopicPartition(topic, partition)])
        except Exception as e:
            return [f"error {kafka_name(type(e).__name__)}"]
        error = result[TopicPartition(topic, partition)]
        return ["ok" if error.errno == 0 else f"error {kafka_name(error.__name__)}"]
    fail(f"kafka-python: no {command}")


def aiokafka(bootstrap, command, args):
    from aiokafka.admin import AIOKafkaAdminClient

    async def run():
        admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
        await admin.start()
        try:
            if command == "list":
                return sorted(g[0] for g in await admin.list_consumer_groups())
            if command == "describe":
                (response,) = await admin.describe_consumer_groups([args[0]])
                (group,) = response.groups
                # (error_code, group_id, state, protocol_type, protocol, members, ...)
                members = group[5]
                return [f"{group[2]} {len(members)}"] + [f"{m[1]}" for m in members]
            fail(f"aiokafka: no {command}")
        finally:
            await admin.close()

    return asyncio.run(run())


def main(argv):
    if len(argv) < 4:
        fail(__doc__)
    lib, bootstrap, command, args = argv[1], argv[2], argv[3], argv[4:]
    run = {"confluent-kafka": confluent, "kafka-python": kafka_python, "aiokafka": aiokafka}[lib]
    for line in run(bootstrap, command, args):
        print(line, flush=True)


if __name__ == "__main__":
    main(sys.argv)
