complete -c klog-produce -s t -l topic -d 'Topic to produce to (created on first use, with --partitions)' -r
complete -c klog-produce -s p -l partition -d 'Fixed partition (default: hash of the key, round-robin without one)' -r
complete -c klog-produce -s K -d 'Split each record at the first DELIM into key and value' -r
complete -c klog-produce -s k -l key -d 'Fixed key for every record' -r
complete -c klog-produce -s D -d 'Record delimiter (escapes: \\n \\t \\0 \\xNN)' -r
complete -c klog-produce -s H -d 'Header added to every record (repeatable)' -r
complete -c klog-produce -s z -l compression -d 'Compress each batch with this codec, as kcat\'s -z: none, gzip, snappy, lz4 or zstd. Batches are stored as sent, compressed, and every consumer (klog\'s and Kafka\'s) reads them' -r
complete -c klog-produce -l compression-level -d 'The codec\'s compression level (gzip 1 to 9, zstd 1 to 22; lz4 and snappy take none): -X compression.level' -r
complete -c klog-produce -l batch -d 'Records per batch at most (librdkafka\'s batch.num.messages, and its default): with --batch-bytes, what one request carries. An idempotent producer has five batches of a partition in flight at most, so large batches keep it fast' -r
complete -c klog-produce -l batch-bytes -d 'Bytes per batch' -r
complete -c klog-produce -l linger -d 'The most a batch waits after its first record before it is written, whatever the input does' -r
complete -c klog-produce -l acks -d 'Acknowledgements: 0 (none), 1 (appended), all (durable). With --registry, a batch refused because its partition\'s leader moved (or has too few in-sync replicas), or whose connection broke, is sent again to the leader within --message-timeout: with no idempotence, a record may then appear twice' -r
complete -c klog-produce -l message-timeout -d 'Delivery deadline: a record the broker has not acknowledged this long after it was read counts as failed (connecting included; exit 1). SIGINT or SIGTERM gives what was sent half a second more, a second signal ends at once' -r
complete -c klog-produce -l request-timeout -d 'A request a broker leaves unanswered this long (it hangs, or is stopped) gives that connection up: its batches go again, to their partitions\' leaders looked up again, within --message-timeout (a record may then appear twice). The broker waits for acks=all no longer either. Batches of other brokers never wait for it' -r
complete -c klog-produce -l metadata-refresh -d 'How often the topic\'s partition count is asked again (of the broker, or the registry): once the topic grew (CreatePartitions), what was sent is delivered and the records that follow go over every partition (a key\'s partition may then change, as in Kafka; not with --acks 0 nor -p)' -r
complete -c klog-produce -l partitions -d 'Embedded mode: partitions of a topic this command creates (with a broker, the broker\'s --partitions applies)' -r
complete -c klog-produce -s b -l broker -d 'The broker to send to' -r
complete -c klog-produce -l data-dir -d 'Embedded mode: append to the logs in this data directory directly, with no broker (takes each partition\'s writer lock)' -r -F
complete -c klog-produce -l registry -d 'Find each partition\'s broker in this registry (a cluster of brokers) instead of sending everything to -b: a directory (one host) or a ZooKeeper ensemble, zk://HOST:PORT[,HOST:PORT...]/CHROOT (many hosts)' -r -F
complete -c klog-produce -l segment-bytes -d 'Embedded mode: segment size at which a log rolls' -r
complete -c klog-produce -l max-record-bytes -d 'Largest record accepted' -r
complete -c klog-produce -s X -d 'A client setting by its Kafka property name, in Kafka\'s units (repeatable): bootstrap.servers (-b), batch.num.messages (--batch), batch.size (--batch-bytes), linger.ms (--linger), acks (--acks), compression.type or compression.codec (-z), compression.level (--compression-level), message.timeout.ms or delivery.timeout.ms (--message-timeout), request.timeout.ms (--request-timeout), message.max.bytes (--max-record-bytes), topic.metadata.refresh.interval.ms or metadata.max.age.ms (--metadata-refresh); client.id is accepted and ignored. Of a flag and a property for the same setting, the later on the command line wins' -r
complete -c klog-produce -l report -d 'Write each record a broker acknowledged to FILE as it is acknowledged, one JSON line each: {"topic","partition","offset", "value"} (a value that is not UTF-8 in base64, with "value_encoding":"base64"), flushed with each answer. With --acks all, every record in FILE is stored on every in-sync replica at that offset. With -J, a record whose envelope names its topic, partition and offset has them in "source" (klog-consume --commit-from reads them: a mirror that loses nothing). Needs a broker (-b or --registry) and --acks 1 or all' -r -F
complete -c klog-produce -s J -l json -d 'Input records are the JSON envelopes that klog-consume -J prints'
complete -c klog-produce -s Z -d 'Send an empty value as null, as kcat\'s -Z: a tombstone, which deletes its key from a compacted topic (`key:` with -K). With -J, a null payload is always null'
complete -c klog-produce -l no-idempotence -d 'With --acks all the producer is idempotent (as Kafka\'s since 3.0): it takes a producer id and numbers its batches, so that a batch sent again (a broken connection, a moved leader) is stored once, and batches keep their order. This turns that off (-X enable.idempotence=false)'
complete -c klog-produce -s L -l list -d 'List the brokers, topics and partitions (leader, replicas, in-sync replicas, start and end offsets) and exit, like kcat -L: of the broker (-b), the cluster (--registry) or the data directory (--data-dir); -t for one topic, -J for JSON. With --registry, each partition\'s leader, replicas and in-sync replicas are those of its replication state, and its end offset the leader\'s high watermark; each leader gets 1s in all to answer (all asked at once): a silent one\'s partitions are unreachable and a % line on stderr names it'
complete -c klog-produce -s l -l file-per-record -d 'Send each FILE as one record, as kcat does with file arguments (without -l, FILEs are split at the delimiter like stdin, which is what kcat\'s own -l does)'
complete -c klog-produce -s q -l quiet -d 'Only print errors'
complete -c klog-produce -s P -d 'kcat\'s producer mode: accepted, as this tool produces'
complete -c klog-produce -s C -d 'kcat\'s consumer mode: refused, with the tool that consumes'
complete -c klog-produce -s h -l help -d 'Print help'
complete -c klog-produce -s V -l version -d 'Print version'
