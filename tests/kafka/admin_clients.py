"""Kafka admin clients managing groups and topics, driven by
tests/kafka_admin_groups.rs and tests/kafka_admin_topics.rs.

    python admin_clients.py LIB BOOTSTRAP list
    python admin_clients.py LIB BOOTSTRAP describe GROUP
    python admin_clients.py LIB BOOTSTRAP delete GROUP
    python admin_clients.py LIB BOOTSTRAP delete-offsets GROUP TOPIC PARTITION
    python admin_clients.py LIB BOOTSTRAP create TOPIC PARTITIONS REPLICAS [validate] [NAME=VALUE...]
    python admin_clients.py LIB BOOTSTRAP configs TOPIC
    python admin_clients.py LIB BOOTSTRAP alter TOPIC [NAME=VALUE...]
    python admin_clients.py LIB BOOTSTRAP set TOPIC NAME=VALUE|-NAME...
    python admin_clients.py LIB BOOTSTRAP delete-topic TOPIC [TIMEOUT_MS]
    python admin_clients.py confluent-kafka BOOTSTRAP topics
    python admin_clients.py LIB BOOTSTRAP delete-records TOPIC PARTITION OFFSET
    python admin_clients.py LIB BOOTSTRAP add-partitions TOPIC COUNT [validate]
    python admin_clients.py confluent-kafka BOOTSTRAP partitions TOPIC
    python admin_clients.py LIB BOOTSTRAP broker-set NODE NAME=VALUE|-NAME...
    python admin_clients.py confluent-kafka BOOTSTRAP sources broker|topic NAME
    python admin_clients.py confluent-kafka BOOTSTRAP produce TOPIC PARTITION BYTES
    python admin_clients.py LIB BOOTSTRAP cluster
    python admin_clients.py confluent-kafka BOOTSTRAP produce-at TOPIC TS,TS,...
    python admin_clients.py confluent-kafka BOOTSTRAP list-offsets TOPIC SPEC...

LIB is confluent-kafka, kafka-python or aiokafka (no delete or
delete-offsets; confluent-kafka has no delete-offsets). `list` prints each
group's id, sorted; `describe` a line "STATE MEMBERS", then "CLIENT_ID
TOPIC:P,P..." per member (its assignment as the client decodes it,
sorted); `delete`, `delete-offsets` and `create` "ok" or "error NAME" (the
Kafka error's name), `create` with the configs given; `alter` replaces the
topic's configs (AlterConfigs) and `set` sets or (-NAME) deletes each
(IncrementalAlterConfigs; not aiokafka), each printing "ok" or "error
NAME"; `configs` each of the topic's configs as "NAME=VALUE", sorted,
followed by " dynamic" for the topic's own (not aiokafka);
`delete-topic` prints "ok" or "error NAME"; `topics` each topic's name,
sorted (Metadata for every topic); `delete-records` "ok START"
(the partition's new start) or "error NAME";
`broker-set` changes the configs of broker NODE ("" for every broker's
default; not confluent-kafka, whose librdkafka names a broker by its
id) with IncrementalAlterConfigs (kafka-python, confluent-kafka)
or AlterConfigs (aiokafka: its names replace the entry's) and prints
"ok" or "error NAME"; `sources` prints each config of a broker (NODE,
"" for the one answering) or a topic as "NAME=VALUE SOURCE", sorted;
`add-partitions` (CreatePartitions) prints "ok" or "error NAME";
`partitions` each partition of the topic as "P LEADER" (its leader's
node id, -1 for none) from Metadata;
`produce` writes one record of BYTES bytes with acks=all and no retries
and prints "ok" or "error NAME"; `cluster` each broker as "HOST:PORT";
`produce-at` writes a record per timestamp to partition 0 and prints
"ok"; `list-offsets` asks partition 0 for each SPEC (earliest, latest, max
or a time in ms) and prints "SPEC OFFSET TIMESTAMP LEADER_EPOCH".
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


def pairs(args):
    """The NAME=VALUE arguments, as a dict."""
    return dict(a.split("=", 1) for a in args if "=" in a)


def confluent_topics(bootstrap, command, args):
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry,
                                       ConfigResource, ConfigSource, NewTopic, ResourceType)

    admin = AdminClient({"bootstrap.servers": bootstrap})

    def outcome(future):
        try:
            future.result(30)
            return ["ok"]
        except KafkaException as e:
            return [f"error {e.args[0].name()}"]

    if command == "create":
        topic = NewTopic(args[0], int(args[1]), int(args[2]), config=pairs(args[3:]))
        return outcome(admin.create_topics([topic], validate_only="validate" in args[3:])[args[0]])
    if command == "configs":
        resource = ConfigResource(ResourceType.TOPIC, args[0])
        try:
            configs = admin.describe_configs([resource])[resource].result(30)
        except KafkaException as e:
            return [f"error {e.args[0].name()}"]
        dynamic = ConfigSource.DYNAMIC_TOPIC_CONFIG.value
        return sorted(f"{k}={v.value}" + (" dynamic" if v.source == dynamic else "")
                      for k, v in configs.items())
    if command == "alter":
        resource = ConfigResource(ResourceType.TOPIC, args[0], set_config=pairs(args[1:]))
        return outcome(admin.alter_configs([resource])[resource])
    if command == "topics":
        return sorted(admin.list_topics(timeout=30).topics)
    if command == "delete-records":
        from confluent_kafka import TopicPartition
        tp = TopicPartition(args[0], int(args[1]), int(args[2]))
        try:
            deleted = admin.delete_records([tp])[tp].result(30)
            return [f"ok {deleted.low_watermark}"]
        except KafkaException as e:
            return [f"error {e.args[0].name()}"]
    if command == "delete-topic":
        timeout = int(args[1]) / 1000 if args[1:] else 30
        return outcome(admin.delete_topics([args[0]], operation_timeout=timeout)[args[0]])
    if command == "set":
        entries = [ConfigEntry(a[1:], None, incremental_operation=AlterConfigOpType.DELETE)
                   if a.startswith("-") else
                   ConfigEntry(*a.split("=", 1), incremental_operation=AlterConfigOpType.SET)
                   for a in args[1:]]
        resource = ConfigResource(ResourceType.TOPIC, args[0], incremental_configs=entries)
        return outcome(admin.incremental_alter_configs([resource])[resource])
    if command == "produce":
        from confluent_kafka import Producer
        producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "retries": 0})
        errors = []
        producer.produce(args[0], value=b"x" * int(args[2]), partition=int(args[1]),
                         on_delivery=lambda err, _msg: errors.append(err))
        producer.flush(30)
        if errors == [None]:
            return ["ok"]
        if not errors:
            return ["error unsent"]
        try:
            return [f"error {errors[0].name()}"]
        except SystemError:
            # Some errors' name() fails (confluent-kafka 2.16): their constant's.
            from confluent_kafka import KafkaError
            names = {v: k for k, v in vars(KafkaError).items() if isinstance(v, int)}
            return [f"error {names.get(errors[0].code(), errors[0].code())}"]
    if command == "cluster":
        return sorted(f"{n.host}:{n.port}" for n in admin.describe_cluster().result(30).nodes)
    if command == "broker-set":
        entries = [ConfigEntry(a[1:], None, incremental_operation=AlterConfigOpType.DELETE)
                   if a.startswith("-") else
                   ConfigEntry(*a.split("=", 1), incremental_operation=AlterConfigOpType.SET)
                   for a in args[1:]]
        resource = ConfigResource(ResourceType.BROKER, args[0], incremental_configs=entries)
        return outcome(admin.incremental_alter_configs([resource])[resource])
    if command == "sources":
        kind = ResourceType.BROKER if args[0] == "broker" else ResourceType.TOPIC
        name = args[1]
        if kind == ResourceType.BROKER and not name:
            # The broker answering: librdkafka names a broker by its id.
            nodes = admin.describe_cluster().result(30).nodes
            name = next(str(n.id) for n in nodes if f"{n.host}:{n.port}" == bootstrap)
        resource = ConfigResource(kind, name)
        try:
            configs = admin.describe_configs([resource])[resource].result(30)
        except KafkaException as e:
            return [f"error {e.args[0].name()}"]
        return sorted(f"{k}={v.value} {ConfigSource(v.source).name}" for k, v in configs.items())
    if command == "add-partitions":
        from confluent_kafka.admin import NewPartitions
        asked = NewPartitions(args[0], int(args[1]))
        return outcome(admin.create_partitions([asked], validate_only="validate" in args[2:])[args[0]])
    if command == "partitions":
        topic = admin.list_topics(args[0], timeout=30).topics[args[0]]
        if topic.error is not None:
            return [f"error {topic.error.name()}"]
        return [f"{p} {topic.partitions[p].leader}" for p in sorted(topic.partitions)]
    if command == "produce-at":
        # One record per timestamp, in order, to partition 0.
        from confluent_kafka import Producer
        producer = Producer({"bootstrap.servers": bootstrap})
        for ts in args[1].split(","):
            producer.produce(args[0], value=ts.encode(), partition=0, timestamp=int(ts))
        left = producer.flush(30)
        return ["ok" if left == 0 else f"error {left} unsent"]
    if command == "list-offsets":
        # Partition 0 of the topic: earliest, latest, max or a time.
        from confluent_kafka import TopicPartition
        from confluent_kafka.admin import OffsetSpec
        specs = {"earliest": OffsetSpec.earliest(), "latest": OffsetSpec.latest(),
                 "max": OffsetSpec.max_timestamp()}
        lines = []
        for spec in args[1:]:
            tp = TopicPartition(args[0], 0)
            asked = specs.get(spec) or OffsetSpec.for_timestamp(int(spec))
            info = admin.list_offsets({tp: asked})[tp].result(30)
            lines.append(f"{spec} {info.offset} {info.timestamp} {info.leader_epoch}")
        return lines
    fail(f"no {command}")


def kafka_python_topics(bootstrap, command, args):
    from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient, NewTopic
    from kafka.errors import KafkaError

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    if command == "create":
        topic = NewTopic(args[0], int(args[1]), int(args[2]), topic_configs=pairs(args[3:]))
        try:
            admin.create_topics([topic], validate_only="validate" in args[3:])
            return ["ok"]
        except KafkaError as e:
            return [f"error {kafka_name(type(e).__name__)}"]
    if command == "configs":
        resource = ConfigResource(ConfigResourceType.TOPIC, args[0])
        found = admin.describe_configs([resource], config_filter="all")
        configs = found["topic"][args[0]]
        return sorted(f"{k}={v['value']}"
                      + (" dynamic" if v["config_source"] == "DYNAMIC_TOPIC_CONFIG" else "")
                      for k, v in configs.items())
    if command == "delete-records":
        from kafka import TopicPartition
        tp = TopicPartition(args[0], int(args[1]))
        try:
            result = admin.delete_records({tp: int(args[2])})
        except KafkaError as e:
            return [f"error {kafka_name(type(e).__name__)}"]
        return [f"ok {result[tp]['low_watermark']}"]
    if command == "delete-topic":
        timeout = int(args[1]) if args[1:] else 30000
        try:
            admin.delete_topics([args[0]], timeout_ms=timeout)
            return ["ok"]
        except KafkaError as e:
            return [f"error {kafka_name(type(e).__name__)}"]
    if command in ("alter", "set", "broker-set"):
        changes = {a[1:]: ("DELETE", None) for a in args[1:] if a.startswith("-")}
        changes.update(pairs(args[1:]))
        kind = ConfigResourceType.BROKER if command == "broker-set" else ConfigResourceType.TOPIC
        resource = ConfigResource(kind, args[0], configs=changes)
        try:
            result = admin.alter_configs([resource], incremental=command != "alter")
        except KafkaError as e:
            return [f"error {kafka_name(type(e).__name__)}"]
        # 'OK', or "[Error 40] InvalidConfigurationError: why".
        said = result["broker" if command == "broker-set" else "topic"][args[0]]
        if said == "OK":
            return ["ok"]
        import re
        name = re.search(r"\] (\w+)", said).group(1)
        return [f"error {kafka_name(name)}"]
    if command == "cluster":
        return sorted(f"{b['host']}:{b['port']}" for b in admin.describe_cluster()["brokers"])
    if command == "add-partitions":
        try:
            admin.create_partitions({args[0]: int(args[1])},
                                    validate_only="validate" in args[2:])
            return ["ok"]
        except KafkaError as e:
            return [f"error {kafka_name(type(e).__name__)}"]
    fail(f"no {command}")


def aiokafka_topics(bootstrap, command, args):
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic
    from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
    from aiokafka.errors import for_code

    async def run():
        admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
        await admin.start()
        try:
            if command == "create":
                topic = NewTopic(args[0], int(args[1]), int(args[2]),
                                 topic_configs=pairs(args[3:]))
                response = await admin.create_topics(
                    [topic], validate_only="validate" in args[3:])
                # (name, error_code, error_message, ...)
                (result,) = response.topic_errors
                if result[1] == 0:
                    return ["ok"]
                return [f"error {kafka_name(for_code(result[1]).__name__)}"]
            if command == "delete-records":
                from aiokafka.admin import RecordsToDelete
                from aiokafka.errors import KafkaError
                from aiokafka.structs import TopicPartition
                tp = TopicPartition(args[0], int(args[1]))
                try:
                    starts = await admin.delete_records({tp: RecordsToDelete(int(args[2]))})
                except KafkaError as e:
                    return [f"error {kafka_name(type(e).__name__)}"]
                return [f"ok {starts[tp]}"]
            if command == "delete-topic":
                timeout = int(args[1]) if args[1:] else 30000
                response = await admin.delete_topics([args[0]], timeout_ms=timeout)
                # (name, error_code, ...)
                (result,) = response.topic_error_codes
                if result[1] == 0:
                    return ["ok"]
                return [f"error {kafka_name(for_code(result[1]).__name__)}"]
            if command in ("alter", "broker-set"):
                kind = (ConfigResourceType.BROKER if command == "broker-set"
                        else ConfigResourceType.TOPIC)
                resource = ConfigResource(kind, args[0], pairs(args[1:]))
                # One response per broker asked (a broker's resource goes to
                # that broker), each of (error_code, error_message, type, name).
                responses = await admin.alter_configs([resource])
                codes = [r[0] for response in responses for r in response.resources]
                failed = [c for c in codes if c != 0]
                if codes and not failed:
                    return ["ok"]
                return [f"error {kafka_name(for_code(failed[0]).__name__)}" if failed
                        else "error no answer"]
            if command == "configs":
                resource = ConfigResource(ConfigResourceType.TOPIC, args[0])
                (response,) = await admin.describe_configs([resource])
                (result,) = response.resources
                # (error_code, error_message, type, name, configs)
                return sorted(f"{c[0]}={c[1]}" for c in result[4])
            if command == "add-partitions":
                from aiokafka.admin import NewPartitions
                from aiokafka.errors import KafkaError
                try:
                    await admin.create_partitions({args[0]: NewPartitions(int(args[1]))},
                                                  validate_only="validate" in args[2:])
                    return ["ok"]
                except KafkaError as e:
                    return [f"error {kafka_name(type(e).__name__)}"]
            if command == "cluster":
                cluster = await admin.describe_cluster()
                return sorted(f"{b['host']}:{b['port']}" for b in cluster["brokers"])
            fail(f"no {command}")
        finally:
            await admin.close()

    return asyncio.run(run())



TOPIC_COMMANDS = ("create", "configs", "alter", "set", "produce", "cluster", "produce-at",
                  "list-offsets", "delete-topic", "delete-records", "topics", "add-partitions",
                  "partitions", "broker-set", "sources")


def main(argv):
    if len(argv) < 4:
        fail(__doc__)
    lib, bootstrap, command, args = argv[1], argv[2], argv[3], argv[4:]
    groups = {"confluent-kafka": confluent, "kafka-python": kafka_python, "aiokafka": aiokafka}
    topics = {"confluent-kafka": confluent_topics, "kafka-python": kafka_python_topics,
              "aiokafka": aiokafka_topics}
    run = (topics if command in TOPIC_COMMANDS else groups)[lib]
    for line in run(bootstrap, command, args):
        print(line, flush=True)


if __name__ == "__main__":
    main(sys.argv)
