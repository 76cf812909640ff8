"""Kafka admin clients creating topics and describing configs and the
cluster, driven by tests/kafka_admin_topics.rs.

    python admin_topics.py LIB BOOTSTRAP create TOPIC PARTITIONS REPLICAS [validate]
    python admin_topics.py LIB BOOTSTRAP configs TOPIC
    python admin_topics.py LIB BOOTSTRAP cluster

LIB is confluent-kafka, kafka-python or aiokafka. `create` prints "ok" or
"error NAME" (the Kafka error's name); `configs` each of the topic's
configs as "NAME=VALUE", sorted; `cluster` each broker as "HOST:PORT".
"""

import asyncio
import sys


def fail(message):
    print(f"error: {message}", file=sys.stderr, flush=True)
    sys.exit(1)


def kafka_name(class_name):
    """Kafka's name of a kafka-python error class: TopicAlreadyExistsError
    is TOPIC_ALREADY_EXISTS."""
    name = class_name.removesuffix("Error")
    return "".join("_" + c if c.isupper() and i else c for i, c in enumerate(name)).upper()


def confluent(bootstrap, command, args):
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic, ResourceType

    admin = AdminClient({"bootstrap.servers": bootstrap})
    if command == "create":
        topic = NewTopic(args[0], int(args[1]), int(args[2]))
        future = admin.create_topics([topic], validate_only=args[3:] == ["validate"])[args[0]]
        try:
            future.result(30)
            return ["ok"]
        except KafkaException as e:
            return [f"error {e.args[0].name()}"]
    if command == "configs":
        resource = ConfigResource(ResourceType.TOPIC, args[0])
        configs = admin.describe_configs([resource])[resource].result(30)
        return sorted(f"{k}={v.value}" for k, v in configs.items())
    if command == "cluster":
        return sorted(f"{n.host}:{n.port}" for n in admin.describe_cluster().result(30).nodes)
    fail(f"no {command}")


def kafka_python(bootstrap, command, args):
    from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient, NewTopic
    from kafka.errors import KafkaError

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    if command == "create":
        topic = NewTopic(args[0], int(args[1]), int(args[2]))
        try:
            admin.create_topics([topic], validate_only=args[3:] == ["validate"])
            return ["ok"]
        except KafkaError as e:
            return [f"error {kafka_name(type(e).__name__)}"]
    if command == "configs":
        resource = ConfigResource(ConfigResourceType.TOPIC, args[0])
        found = admin.describe_configs([resource], config_filter="all")
        configs = found["topic"][args[0]]
        return sorted(f"{k}={v['value']}" for k, v in configs.items())
    if command == "cluster":
        return sorted(f"{b['host']}:{b['port']}" for b in admin.describe_cluster()["brokers"])
    fail(f"no {command}")


def aiokafka(bootstrap, command, args):
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic
    from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
    from aiokafka.errors import for_code

    async def run():
        admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
        await admin.start()
        try:
            if command == "create":
                topic = NewTopic(args[0], int(args[1]), int(args[2]))
                response = await admin.create_topics(
                    [topic], validate_only=args[3:] == ["validate"])
                # (name, error_code, error_message, ...)
                (result,) = response.topic_errors
                if result[1] == 0:
                    return ["ok"]
                return [f"error {kafka_name(for_code(result[1]).__name__)}"]
            if command == "configs":
                resource = ConfigResource(ConfigResourceType.TOPIC, args[0])
                (response,) = await admin.describe_configs([resource])
                (result,) = response.resources
                # (error_code, error_message, type, name, configs)
                return sorted(f"{c[0]}={c[1]}" for c in result[4])
            if command == "cluster":
                cluster = await admin.describe_cluster()
                return sorted(f"{b['host']}:{b['port']}" for b in cluster["brokers"])
            fail(f"no {command}")
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
