#compdef klog-consume

autoload -U is-at-least

_klog-consume() {
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
'-t+[Topic to read]:TOPIC:_default' \
'--topic=[Topic to read]:TOPIC:_default' \
'*-p+[Partitions to read (default\: all)]:N[,N..]:_default' \
'*--partition=[Partitions to read (default\: all)]:N[,N..]:_default' \
'-o+[Where to start in each partition\: beginning, end, N, -N (N before its end), @TIMESTAMP (ms since the epoch, or RFC 3339), stored (with -G\: the group'\''s committed offsets, required). With -G, where a partition the group never committed starts]:SPEC:_default' \
'--offset=[Where to start in each partition\: beginning, end, N, -N (N before its end), @TIMESTAMP (ms since the epoch, or RFC 3339), stored (with -G\: the group'\''s committed offsets, required). With -G, where a partition the group never committed starts]:SPEC:_default' \
'-c+[Stop after N records]:N:_default' \
'--count=[Stop after N records]:N:_default' \
'(-J --json)-f+[Output format\: %s value, %k key, %S value length, %K key length (-1 without a key), %R value length as 4 bytes big-endian (kcat'\''s binary framing), %t topic, %p partition, %o offset, %T timestamp (ms), %F timestamp (RFC 3339), %h headers; escapes \\n \\t \\0 \\xNN. Default\: %s\\n, or as -K and -D say]:FORMAT:_default' \
'(-J --json)--format=[Output format\: %s value, %k key, %S value length, %K key length (-1 without a key), %R value length as 4 bytes big-endian (kcat'\''s binary framing), %t topic, %p partition, %o offset, %T timestamp (ms), %F timestamp (RFC 3339), %h headers; escapes \\n \\t \\0 \\xNN. Default\: %s\\n, or as -K and -D say]:FORMAT:_default' \
'(-f --format -J --json)-K+[Print each record'\''s key, DELIM, then its value (kcat'\''s -K\: the default format becomes %k DELIM %s and -D)]:DELIM:_default' \
'(-f --format -J --json)-D+[End each record with DELIM instead of a newline (kcat'\''s -D; escapes \\n \\t \\0 \\xNN)]:DELIM:_default' \
'(-p --partition)-G+[Consume as a member of this consumer group\: the group'\''s members share the topic'\''s partitions, and resume at its committed offsets. The group lives in --registry, or else in the registry of the broker given by -b (a directory it names must be on this host)]:GROUP:_default' \
'(-p --partition)--group=[Consume as a member of this consumer group\: the group'\''s members share the topic'\''s partitions, and resume at its committed offsets. The group lives in --registry, or else in the registry of the broker given by -b (a directory it names must be on this host)]:GROUP:_default' \
'--registry=[The registry of consumer groups and brokers\: a directory (one host) or a ZooKeeper ensemble, zk\://HOST\:PORT\[,HOST\:PORT...\]/CHROOT (many hosts). Without -G, read each partition from its broker there]:REGISTRY:_files' \
'--commit-interval=[With -G\: commit offsets this often (and at rebalances and exit)]:DURATION:_default' \
'(-G --group --reset-offsets -c --count -f --format -L --list -p --partition -o --offset)--audit=[Reconcile the audit (the paper'\''s)\: read the counts producers published to TOPIC (klog-produce --audit-topic), then every data topic they name (-t\: that one alone) to its end, and print per window, producer and topic what was sent, received, lost and duplicated, and its status (ok, lost, unaudited, open, expired)\: a table on a terminal, JSON lines otherwise (-J\: always). Exit 3 when a closed window is neither ok nor expired (retention cut it)]:TOPIC:_default' \
'--audit-grace=[With --audit\: a window closes this long after its end (late records, counts still on their way); an open window is shown, never a failure]:DURATION:_default' \
'(--no-commit)--commit-from=[With -G and -J\: commit a record'\''s offset only once a producer acknowledged the record made from it, as written by its \`klog-produce -J --report ACKS\` (a FIFO, or a file followed as it grows)\: a mirror that loses nothing. \`mkfifo acks; klog-consume --registry A -G mirror -t T -J --commit-from acks | klog-produce --registry B -t T -J --report acks\`. What was printed and not acknowledged is read again by the group (at least once; keep the producer'\''s --acks all). A million printed records are held at most; one waiting longer than 30s is named on stderr. On exit, stdout is closed and the acknowledgements are waited for (60s at most; a second signal ends at once)]:ACKS:_files' \
'--session-timeout=[With -G\: a member silent for longer (stopped, stuck) loses its partitions to the others, and its late commits are refused; when it wakes it rejoins. Members renew their session and look at the registry ten times per timeout; a member that dies leaves at once]:DURATION:_default' \
'--reset-offsets=[With -G\: set the group'\''s committed offsets of every partition of the topic to SPEC (beginning, end, N, -N, @TIMESTAMP, resolved against the brokers; end and -N count from the last stable offset unless --isolation-level read_uncommitted), print them (-J\: as JSON), and exit without consuming; refused (exit 1) while the group has live members, like kafka-consumer-groups --reset-offsets]:SPEC:_default' \
'-b+[The broker to read from]:HOST[:PORT]:_default' \
'--broker=[The broker to read from]:HOST[:PORT]:_default' \
'--data-dir=[Embedded mode\: read the logs in this data directory directly, with no broker (no lock is taken)]:DIR:_files' \
'--fetch-bytes=[Bytes fetched per partition per request (a batch larger than this still comes whole)]:SIZE:_default' \
'--fetch-response-bytes=[Bytes of records per fetch answer, over all its partitions (the broker cuts this to its own maximum)]:SIZE:_default' \
'--request-timeout=[A fetch a broker leaves unanswered this long past its wait for records (the broker hangs, or is stopped) gives that connection up\: with --registry, its partitions'\'' leaders are looked up again and read from where they were; partitions of other brokers never wait for it]:DURATION:_default' \
'--isolation-level=[Which records to read (Kafka'\''s isolation.level). read_committed (the default, as kcat'\''s)\: records of committed transactions and of none, each partition up to its last stable offset (the first offset of a transaction still open), which is also its end for -e, -o end and -o -N. read_uncommitted\: every record up to the high watermark, those of aborted and open transactions too. A data directory read directly (--data-dir) gives every record]:LEVEL:((read_committed\:"Records of committed transactions, and those of none"
read_uncommitted\:"Every record"))' \
'*-X+[A client setting by its Kafka property name, in Kafka'\''s units (repeatable)\: bootstrap.servers (-b), group.id (-G), session.timeout.ms, auto.commit.interval.ms, enable.auto.commit (false\: --no-commit), auto.offset.reset (earliest or latest\: -o beginning or end), fetch.max.bytes (--fetch-response-bytes), max.partition.fetch.bytes (--fetch-bytes), request.timeout.ms (--request-timeout), isolation.level (--isolation-level); client.id is accepted and ignored. Of a flag and a property for the same setting, the later on the command line wins]:NAME=VALUE:_default' \
'-e[Exit when every partition reaches the end offset it had at start]' \
'--exit[Exit when every partition reaches the end offset it had at start]' \
'-Z[Print NULL for a null key or value (a tombstone), as kcat'\''s -Z (%S of a null value is -1 either way); an empty key or value stays empty. -J always writes a null key or value as null]' \
'-J[One JSON envelope per line\: topic, partition, offset, ts, headers, key, payload (bytes that are not UTF-8 in base64, marked by key_encoding, payload_encoding or headers_encoding)]' \
'--json[One JSON envelope per line\: topic, partition, offset, ts, headers, key, payload (bytes that are not UTF-8 in base64, marked by key_encoding, payload_encoding or headers_encoding)]' \
'-u[Flush stdout after every record]' \
'--unbuffered[Flush stdout after every record]' \
'--no-commit[With -G\: commit nothing (-X enable.auto.commit=false)\: the group'\''s committed offsets stay as they were, and whoever owns a partition next starts where they say]' \
'-L[List the brokers, topics and partitions (leader, replicas, in-sync replicas, start and end offsets) and exit, like kcat -L\: of the broker (-b), the cluster (--registry) or the data directory (--data-dir); -t for one topic, -J for JSON. With --registry, each partition'\''s leader, replicas and in-sync replicas are those of its replication state, and its end offset the leader'\''s high watermark; each leader gets 1s in all to answer (all asked at once)\: a silent one'\''s partitions are unreachable and a % line on stderr names it]' \
'--list[List the brokers, topics and partitions (leader, replicas, in-sync replicas, start and end offsets) and exit, like kcat -L\: of the broker (-b), the cluster (--registry) or the data directory (--data-dir); -t for one topic, -J for JSON. With --registry, each partition'\''s leader, replicas and in-sync replicas are those of its replication state, and its end offset the leader'\''s high watermark; each leader gets 1s in all to answer (all asked at once)\: a silent one'\''s partitions are unreachable and a % line on stderr names it]' \
'-q[Only print errors]' \
'--quiet[Only print errors]' \
'-C[kcat'\''s consumer mode\: accepted, as this tool consumes]' \
'-P[kcat'\''s producer mode\: refused, with the tool that produces]' \
'-h[Print help (see more with '\''--help'\'')]' \
'--help[Print help (see more with '\''--help'\'')]' \
'-V[Print version]' \
'--version[Print version]' \
&& ret=0
}

(( $+functions[_klog-consume_commands] )) ||
_klog-consume_commands() {
    local commands; commands=()
    _describe -t commands 'klog-consume commands' commands "$@"
}

if [ "$funcstack[1]" = "_klog-consume" ]; then
    _klog-consume "$@"
else
    compdef _klog-consume klog-consume
fi
