"""confluent-kafka's AdminClient managing SCRAM users and ACLs, driven by
tests/kafka_admin.rs.

    python admin.py BOOTSTRAP upsert-user NAME MECHANISM ITERATIONS PASSWORD
    python admin.py BOOTSTRAP delete-user NAME MECHANISM
    python admin.py BOOTSTRAP describe-users [NAME...]
    python admin.py BOOTSTRAP create-acl TYPE NAME PATTERN PRINCIPAL OPERATION PERMISSION [HOST]
    python admin.py BOOTSTRAP describe-acls
    python admin.py BOOTSTRAP delete-acls TYPE NAME PATTERN PRINCIPAL
    python admin.py BOOTSTRAP topic-operations TOPIC

MECHANISM is SCRAM-SHA-256 or SCRAM-SHA-512; TYPE topic, group or cluster;
PATTERN literal, prefixed (or, for delete-acls, any or match); OPERATION and
PERMISSION by their Kafka names (write, allow...). Each prints one line
per result: "ok", "error NAME" with the Kafka error's name, or what was
described or deleted as "TYPE NAME PATTERN PRINCIPAL HOST OPERATION
PERMISSION" (ACLs) or "NAME MECHANISM ITERATIONS" (users);
topic-operations prints the operations the client may do on TOPIC
(Metadata's authorized operations), sorted, one line. A client
that cannot reach the broker within the deadline exits 1.

KLOG_SECURITY, when set, is a JSON object of librdkafka's security
properties, as for client.py.
"""

import json
import os
import sys

from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)

DEADLINE_S = 30


def admin(bootstrap):
    security = json.loads(os.environ.get("KLOG_SECURITY", "{}"))
    return AdminClient({"bootstrap.servers": bootstrap, **security})


def enum(kind, name):
    # confluent-kafka calls the cluster resource BROKER.
    if kind is ResourceType and name == "cluster":
        name = "broker"
    return kind[name.upper().replace("-", "_")]


def outcome(future):
    """The future's result, or the line that says its error."""
    try:
        return future.result(timeout=DEADLINE_S)
    except KafkaException as e:
        error = e.args[0]
        print(f"error {error.name()}")
        return None


def binding_line(b):
    return " ".join(
        str(x).lower()
        for x in (
            "cluster" if b.restype == ResourceType.BROKER else b.restype.name,
            b.name,
            b.resource_pattern_type.name,
            b.principal,
            b.host,
            b.operation.name,
            b.permission_type.name,
        )
    )


def main(argv):
    bootstrap, command, args = argv[1], argv[2], argv[3:]
    client = admin(bootstrap)
    if command == "upsert-user":
        name, mechanism, iterations, password = args
        info = ScramCredentialInfo(enum(ScramMechanism, mechanism), int(iterations))
        upsertion = UserScramCredentialUpsertion(name, info, password.encode())
        for future in client.alter_user_scram_credentials([upsertion]).values():
            if outcome(future) is None and future.exception() is None:
                print("ok")
    elif command == "delete-user":
        name, mechanism = args
        deletion = UserScramCredentialDeletion(name, enum(ScramMechanism, mechanism))
        for future in client.alter_user_scram_credentials([deletion]).values():
            if outcome(future) is None and future.exception() is None:
                print("ok")
    elif command == "describe-users":
        futures = client.describe_user_scram_credentials(args or None)
        if not isinstance(futures, dict):
            found = outcome(futures) or {}
        else:
            found = {}
            for name, future in futures.items():
                description = outcome(future)
                if description is not None:
                    found[name] = description
        for name, description in sorted(found.items()):
            for info in description.scram_credential_infos:
                print(f"{name} {info.mechanism.name} {info.iterations}")
    elif command == "create-acl":
        rtype, name, pattern, principal, operation, permission = args[:6]
        host = args[6] if len(args) > 6 else "*"
        binding = AclBinding(
            enum(ResourceType, rtype),
            name,
            enum(ResourcePatternType, pattern),
            principal,
            host,
            enum(AclOperation, operation),
            enum(AclPermissionType, permission),
        )
        for future in client.create_acls([binding]).values():
            if outcome(future) is None and future.exception() is None:
                print("ok")
    elif command == "describe-acls":
        match = AclBindingFilter(
            ResourceType.ANY,
            None,
            ResourcePatternType.ANY,
            None,
            None,
            AclOperation.ANY,
            AclPermissionType.ANY,
        )
        for binding in sorted(outcome(client.describe_acls(match)) or [], key=binding_line):
            print(binding_line(binding))
    elif command == "delete-acls":
        rtype, name, pattern, principal = args
        match = AclBindingFilter(
            enum(ResourceType, rtype),
            name,
            enum(ResourcePatternType, pattern),
            principal,
            None,
            AclOperation.ANY,
            AclPermissionType.ANY,
        )
        for future in client.delete_acls([match]).values():
            for binding in sorted(outcome(future) or [], key=binding_line):
                print(binding_line(binding))
    elif command == "topic-operations":
        from confluent_kafka import TopicCollection
        futures = client.describe_topics(
            TopicCollection([args[0]]), request_timeout=DEADLINE_S,
            include_authorized_operations=True)
        described = outcome(futures[args[0]])
        if described is not None:
            ops = described.authorized_operations or []
            print(" ".join(sorted(op.name for op in ops)))
    else:
        print(f"unknown command {command}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main(sys.argv)
