complete -c klog-consume -s t -l topic -d 'Topic to read' -r
complete -c klog-consume -s p -l partition -d 'Partitions to read (default: all)' -r
complete -c klog-consume -s o -l offset -d 'Where to start in each partition: beginning, end, N, -N (N before its end), @TIMESTAMP (ms since the epoch, or RFC 3339), stored (with -G: the group\'s committed offsets, required). With -G, where a partition the group never committed starts' -r
complete -c klog-consume -s c -l count -d 'Stop after N records' -r
complete -c klog-consume -s f -l format -d 'Output format: %s value, %k key, %S value length, %K key length (-1 without a key), %R value length as 4 bytes big-endian (kcat\'s binary framing), %t topic, %p partition, %o offset, %T timestamp (ms), %F timestamp (RFC 3339), %h headers; escapes \\n \\t \\0 \\xNN. Default: %s\\n, or as -K and -D say' -r
complete -c klog-consume -s K -d 'Print each record\'s key, DELIM, then its value (kcat\'s -K: the default format becomes %k DELIM %s and -D)' -r
complete -c klog-consume -s D -d 'End each record with DELIM instead of a newline (kcat\'s -D; escapes \\n \\t \\0 \\xNN)' -r
complete -c klog-consume -s G -l group -d 'Consume as a member of this consumer group: the group\'s members share the topic\'s partitions, and resume at its committed offsets. The group lives in --registry, or else in the registry of the broker given by -b (a directory it names must be on this host)' -r
complete -c klog-consume -l registry -d 'The registry of consumer groups and brokers: a directory (one host) or a ZooKeeper ensemble, zk://HOST:PORT[,HOST:PORT...]/CHROOT (many hosts). Without -G, read each partition from its broker there' -r -F
complete -c klog-consume -l commit-interval -d 'With -G: commit offsets this often (and at rebalances and exit)' -r
complete -c klog-consume -l session-timeout -d 'With -G: a member silent for longer (stopped, stuck) loses its partitions to the others, and its late commits are refused; when it wakes it rejoins. Members renew their session and look at the registry ten times per timeout; a member that dies leaves at once' -r
complete -c klog-consume -l reset-offsets -d 'With -G: set the group\'s committed offsets of every partition of the topic to SPEC (beginning, end, N, -N, @TIMESTAMP, resolved against the brokers), print them (-J: as JSON), and exit without consuming; refused (exit 1) while the group has live members, like kafka-consumer-groups --reset-offsets' -r
complete -c klog-consume -s b -l broker -d 'The broker to read from' -r
complete -c klog-consume -l data-dir -d 'Embedded mode: read the logs in this data directory directly, with no broker (no lock is taken)' -r -F
complete -c klog-consume -l fetch-bytes -d 'Bytes fetched per partition per request (a batch larger than this still comes whole)' -r
complete -c klog-consume -l fetch-response-bytes -d 'Bytes of records per fetch answer, over all its partitions (the broker cuts this to its own maximum)' -r
complete -c klog-consume -l request-timeout -d 'A fetch a broker leaves unanswered this long past its wait for records (the broker hangs, or is stopped) gives that connection up: with --registry, its partitions\' leaders are looked up again and read from where they were; partitions of other brokers never wait for it' -r
complete -c klog-consume -s X -d 'A client setting by its Kafka property name, in Kafka\'s units (repeatable): bootstrap.servers (-b), group.id (-G), session.timeout.ms, auto.commit.interval.ms, enable.auto.commit (false: --no-commit), auto.offset.reset (earliest or latest: -o beginning or end), fetch.max.bytes (--fetch-response-bytes), max.partition.fetch.bytes (--fetch-bytes), request.timeout.ms (--request-timeout); client.id is accepted and ignored. Of a flag and a property for the same setting, the later on the command line wins' -r
complete -c klog-consume -s e -l exit -d 'Exit when every partition reaches the end offset it had at start'
complete -c klog-consume -s Z -d 'Print NULL for a null (absent) key, as kcat\'s -Z; an empty key or value stays empty (klog\'s records have no null value). -J always writes a missing key as null'
complete -c klog-consume -s J -l json -d 'One JSON envelope per line: topic, partition, offset, ts, headers, key, payload (bytes that are not UTF-8 in base64, marked by key_encoding, payload_encoding or headers_encoding)'
complete -c klog-consume -s u -l unbuffered -d 'Flush stdout after every record'
complete -c klog-consume -l no-commit -d 'With -G: commit nothing (-X enable.auto.commit=false): the group\'s committed offsets stay as they were, and whoever owns a partition next starts where they say'
complete -c klog-consume -s L -l list -d 'List the brokers, topics and partitions (leader, replicas, in-sync replicas, start and end offsets) and exit, like kcat -L: of the broker (-b), the cluster (--registry) or the data directory (--data-dir); -t for one topic, -J for JSON. With --registry, each partition\'s leader, replicas and in-sync replicas are those of its replication state, and its end offset the leader\'s high watermark; each leader gets 1s in all to answer (all asked at once): a silent one\'s partitions are unreachable and a % line on stderr names it'
complete -c klog-consume -s q -l quiet -d 'Only print errors'
complete -c klog-consume -s C -d 'kcat\'s consumer mode: accepted, as this tool consumes'
complete -c klog-consume -s P -d 'kcat\'s producer mode: refused, with the tool that produces'
complete -c klog-consume -s h -l help -d 'Print help'
complete -c klog-consume -s V -l version -d 'Print version'
