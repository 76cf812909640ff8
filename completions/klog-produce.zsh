#compdef klog-produce

autoload -U is-at-least

_klog-produce() {
    typeset -A opt_args
    typeset -a _arguments_options
    local ret=1

    if is-at-least 5.2; then
        _arguments_options=(-s -S -C)
    else
        _arguments_options=(-s -C)
    fi

    local context curcontext="$curcontext" state line
    _arguments "${_arguments_options[@]}" : \
'-t+[Topic to produce to (created on first use, with --partitions)]:TOPIC:_default' \
'--topic=[Topic to produce to (created on first use, with --partitions)]:TOPIC:_default' \
'-p+[Fixed partition (default\: hash of the key, round-robin without one)]:N:_default' \
'--partition=[Fixed partition (default\: hash of the key, round-robin without one)]:N:_default' \
'(-k --key -J --json)-K+[Split each record at the first DELIM into key and value]:DELIM:_default' \
'(-J --json)-k+[Fixed key for every record]:KEY:_default' \
'(-J --json)--key=[Fixed key for every record]:KEY:_default' \
'-D+[Record delimiter (escapes\: \\n \\t \\0 \\xNN)]:DELIM:_default' \
'*-H+[Header added to every record (repeatable)]:NAME=VALUE:_default' \
'-z+[Compress each batch with this codec, as kcat'\''s -z\: none, gzip, snappy, lz4 or zstd. Batches are stored as sent, compressed, and every consumer (klog'\''s and Kafka'\''s) reads them]:CODEC:_default' \
'--compression=[Compress each batch with this codec, as kcat'\''s -z\: none, gzip, snappy, lz4 or zstd. Batches are stored as sent, compressed, and every consumer (klog'\''s and Kafka'\''s) reads them]:CODEC:_default' \
'--compression-level=[The codec'\''s compression level (gzip 1 to 9, zstd 1 to 22; lz4 and snappy take none)\: -X compression.level]:N:_default' \
'--batch=[Records per batch at most (librdkafka'\''s batch.num.messages, and its default)\: with --batch-bytes, what one request carries. An idempotent producer has five batches of a partition in flight at most, so large batches keep it fast]:N:_default' \
'--batch-bytes=[Bytes per batch]:SIZE:_default' \
'--linger=[The most a batch waits after its first record before it is written, whatever the input does]:DURATION:_default' \
'--acks=[Acknowledgements\: 0 (none), 1 (appended), all (durable). With --registry, a batch refused because its partition'\''s leader moved (or has too few in-sync replicas), or whose connection broke, is sent again to the leader within --message-timeout\: with no idempotence, a record may then appear twice]:0|1|all:_default' \
'--message-timeout=[Delivery deadline\: a record the broker has not acknowledged this long after it was read counts as failed (connecting included; exit 1). SIGINT or SIGTERM gives what was sent half a second more, a second signal ends at once]:DURATION:_default' \
'--request-timeout=[A request a broker leaves unanswered this long (it hangs, or is stopped) gives that connection up\: its batches go again, to their partitions'\'' leaders looked up again, within --message-timeout (a record may then appear twice). The broker waits for acks=all no longer either. Batches of other brokers never wait for it]:DURATION:_default' \
'--metadata-refresh=[How often the topic'\''s partition count is asked again (of the broker, or the registry)\: once the topic grew (CreatePartitions), what was sent is delivered and the records that follow go over every partition (a key'\''s partition may then change, as in Kafka; not with --acks 0 nor -p)]:DURATION:_default' \
'--partitions=[Embedded mode\: partitions of a topic this command creates (with a broker, the broker'\''s --partitions applies)]:N:_default' \
'-b+[The broker to send to]:HOST[:PORT]:_default' \
'--broker=[The broker to send to]:HOST[:PORT]:_default' \
'--data-dir=[Embedded mode\: append to the logs in this data directory directly, with no broker (takes each partition'\''s writer lock)]:DIR:_files' \
'--registry=[Find each partition'\''s broker in this registry (a cluster of brokers) instead of sending everything to -b\: a directory (one host) or a ZooKeeper ensemble, zk\://HOST\:PORT\[,HOST\:PORT...\]/CHROOT (many hosts)]:REGISTRY:_files' \
'--segment-bytes=[Embedded mode\: segment size at which a log rolls]:SIZE:_default' \
'--max-record-bytes=[Largest record accepted]:SIZE:_default' \
'*-X+[A client setting by its Kafka property name, in Kafka'\''s units (repeatable)\: bootstrap.servers (-b), batch.num.messages (--batch), batch.size (--batch-bytes), linger.ms (--linger), acks (--acks), compression.type or compression.codec (-z), compression.level (--compression-level), message.timeout.ms or delivery.timeout.ms (--message-timeout), request.timeout.ms (--request-timeout), message.max.bytes (--max-record-bytes), topic.metadata.refresh.interval.ms or metadata.max.age.ms (--metadata-refresh); client.id is accepted and ignored. Of a flag and a property for the same setting, the later on the command line wins]:NAME=VALUE:_default' \
'--report=[Write each record a broker acknowledged to FILE as it is acknowledged, one JSON line each\: {"topic","partition","offset", "value"} (a value that is not UTF-8 in base64, with "value_encoding"\:"base64"), flushed with each answer. With --acks all, every record in FILE is stored on every in-sync replica at that offset. With -J, a record whose envelope names its topic, partition and offset has them in "source" (klog-consume --commit-from reads them\: a mirror that loses nothing). Needs a broker (-b or --registry) and --acks 1 or all]:FILE:_files' \
'(--data-dir)--audit-topic=[Audit (the paper'\''s)\: stamp every record with headers naming its origin (klog.host, klog.producer\: this run'\''s id) and its number (klog.seq), count the records per window of their timestamps, and publish each window'\''s count to TOPIC, one JSON record per window\: {"producer","host","topic","window","window_ms","count"}, at every window boundary and at the end (a window again when it grows). klog-consume --audit TOPIC reconciles them]:TOPIC:_default' \
'--audit-window=[The audit'\''s window, aligned to the wall clock (minutes, by default)]:DURATION:_default' \
'--transactional-id=[Transactional, exactly once (-X transactional.id)\: the batches go in transactions of this id, each committed every --transaction-interval and at the end, once all its records are on every in-sync replica; read_committed consumers see a transaction'\''s records all or none. Starting fences every earlier instance of the id and aborts its open transaction. With -J, each transaction also commits its records'\'' source offsets to the destination'\''s group of this name, and a record whose source offset a committed transaction holds is not sent again (a mirror that stores each record once; --report then says "stored_before"). The --report lists a record once its transaction committed. Needs --registry and --acks all; one instance per id]:ID:_default' \
'--transaction-interval=[How long a transaction stays open\: it commits this long after its first batch went (and sooner when its report lines pass 16 MiB)]:DURATION:_default' \
'--transaction-timeout=[A transaction the coordinator has seen open this long is aborted, and the producer fenced (-X transaction.timeout.ms; 1ms to 15m)]:DURATION:_default' \
'(-p --partition)--source-partition[With -J\: each record goes to the partition its envelope names (its source'\''s), as a mirror keeps partitions; a record whose envelope names none (topic, partition and offset), or a partition the topic lacks, is refused (% line N, exit 1 at the end)]' \
'-J[Input records are the JSON envelopes that klog-consume -J prints]' \
'--json[Input records are the JSON envelopes that klog-consume -J prints]' \
'-Z[Send an empty value as null, as kcat'\''s -Z\: a tombstone, which deletes its key from a compacted topic (\`key\:\` with -K). With -J, a null payload is always null]' \
'--no-idempotence[With --acks all the producer is idempotent (as Kafka'\''s since 3.0)\: it takes a producer id and numbers its batches, so that a batch sent again (a broken connection, a moved leader) is stored once, and batches keep their order. This turns that off (-X enable.idempotence=false)]' \
'-L[List the brokers, topics and partitions (leader, replicas, in-sync replicas, start and end offsets) and exit, like kcat -L\: of the broker (-b), the cluster (--registry) or the data directory (--data-dir); -t for one topic, -J for JSON. With --registry, each partition'\''s leader, replicas and in-sync replicas are those of its replication state, and its end offset the leader'\''s high watermark; each leader gets 1s in all to answer (all asked at once)\: a silent one'\''s partitions are unreachable and a % line on stderr names it]' \
'--list[List the brokers, topics and partitions (leader, replicas, in-sync replicas, start and end offsets) and exit, like kcat -L\: of the broker (-b), the cluster (--registry) or the data directory (--data-dir); -t for one topic, -J for JSON. With --registry, each partition'\''s leader, replicas and in-sync replicas are those of its replication state, and its end offset the leader'\''s high watermark; each leader gets 1s in all to answer (all asked at once)\: a silent one'\''s partitions are unreachable and a % line on stderr names it]' \
'-l[Send each FILE as one record, as kcat does with file arguments (without -l, FILEs are split at the delimiter like stdin, which is what kcat'\''s own -l does)]' \
'--file-per-record[Send each FILE as one record, as kcat does with file arguments (without -l, FILEs are split at the delimiter like stdin, which is what kcat'\''s own -l does)]' \
'-q[Only print errors]' \
'--quiet[Only print errors]' \
'-P[kcat'\''s producer mode\: accepted, as this tool produces]' \
'-C[kcat'\''s consumer mode\: refused, with the tool that consumes]' \
'-h[Print help]' \
'--help[Print help]' \
'-V[Print version]' \
'--version[Print version]' \
'*::files -- Files to read instead of stdin, split like stdin (with -l, each one record; an empty one is then skipped); "-" is stdin:_files' \
&& ret=0
}

(( $+functions[_klog-produce_commands] )) ||
_klog-produce_commands() {
    local commands; commands=()
    _describe -t commands 'klog-produce commands' commands "$@"
}

if [ "$funcstack[1]" = "_klog-produce" ]; then
    _klog-produce "$@"
else
    compdef _klog-produce klog-produce
fi
