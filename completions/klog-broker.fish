# Print an optspec for argparse to handle cmd's options that are independent of any subcommand.
function __fish_klog_broker_global_optspecs
    string join \n data-dir= listen= kafka-listen= kafka-advertised= metrics-listen= partitions= auto-create-topics= max-partitions= segment-bytes= preallocate segment-age= index-interval-bytes= retention= retention-bytes= retention-check-interval= log-cleanup-policy= log-cleaner-threads= log-cleaner-memory= log-cleaner-io-bytes-per-second= log-cleaner-backoff= log-cleaner-delete-retention= log-cleaner-min-cleanable-ratio= log-cleaner-min-compaction-lag= producer-id-expiration= scrub-interval= scrub-rate= flush-messages= flush-interval= max-record-bytes= max-request-bytes= max-queued-request-bytes= max-connections= max-in-flight= request-timeout= idle-timeout= registry= replication-factor= offsets-topic-partitions= offsets-topic-replication-factor= min-insync-replicas= replica-lag-time= session-timeout= q/quiet tls-cert= tls-key= tls-client-ca= tls-ca= sasl-mechanisms= sasl-username= sasl-password-file= authorize super-users= h/help V/version
end

function __fish_klog_broker_needs_command
    # Figure out if the current invocation already has a command.
    set -l cmd (commandline -opc)
    set -e cmd[1]
    argparse -s (__fish_klog_broker_global_optspecs) -- $cmd 2>/dev/null
    or return
    if set -q argv[1]
        # Also print the command, so this can be used to figure out what it is.
        echo $argv[1]
        return 1
    end
    return 0
end

function __fish_klog_broker_using_subcommand
    set -l cmd (__fish_klog_broker_needs_command)
    test -z "$cmd"
    and return 1
    contains -- $cmd[1] $argv
end

complete -c klog-broker -n "__fish_klog_broker_needs_command" -l data-dir -d 'The data directory (created if missing)' -r -F
complete -c klog-broker -n "__fish_klog_broker_needs_command" -l listen -d 'Address to listen on; port 0 picks a free port. It serves klog\'s protocol and Kafka\'s (each connection\'s first request says which): kcat -b 127.0.0.1 reaches a broker started with the defaults' -r
complete -c klog-broker -n "__fish_klog_broker_needs_command" -l kafka-listen -d 'Also listen on this address (both protocols too), and tell Kafka clients to connect here: the Kafka wire protocol (produce, fetch, metadata, list offsets, consumer groups, admin) on the same logs and registry' -r
complete -c klog-broker -n "__fish_klog_broker_needs_command" -l kafka-advertised -d 'The address Kafka clients are told to connect to (default: the --kafka-listen address, else the --listen one; needed when that is a wildcard such as 0.0.0.0)' -r
complete -c klog-broker -n "__fish_klog_broker_needs_command" -l metrics-listen -d 'Serve metrics for Prometheus at http://HOST:PORT/metrics: requests and their latency per API, each partition\'s offsets and in-sync replicas, groups\' lag, connections, flush times' -r
complete -c klog-broker -n "__fish_klog_broker_needs_command" -l partitions -d 'Partitions of a topic created on first produce' -r
complete -c klog-broker -n "__fish_klog_broker_needs_command" -l auto-create-topics -d 'Create a topic when a client first produces to it or asks for its metadata (Kafka\'s auto.create.topics.enable). With false, such a client is told the topic does not exist; a create that names its partition count (an admin\'s) is still made' -r -f -a "true\t''
false\t''"
complete -c klog-broker -n "__fish_klog_broker_needs_command" -l max-partitions -d 'Partition directories the data directory may hold, over all topics, counted on disk (served, offline or placed elsewhere: each holds files the broker opens); a topic that would pass it is not created' -r
complete -c klog-broker -n "__fish_klog_broker_needs_command" -l segment-bytes -d 'Segment size at which a log rolls (at least 4KiB)' -r
complete -c klog-broker -n "__fish_klog_broker_needs_command" -l segment-age -d 'A segment older than this rolls at the next append' -r
complete -c klog-broker -n "__fish_klog_broker_needs_command" -l index-interval-bytes -d 'Bytes of log between two index entries' -r
complete -c klog-broker -n "__fish_klog_broker_needs_command" -l retention -d 'Delete segments whose newest record was appended longer ago than this' -r
complete -c klog-broker -n "__fish_klog_broker_needs_command" -l retention-bytes -d 'Delete the oldest segments while a partition is larger than this' -r
complete -c klog-broker -n "__fish_klog_broker_needs_command" -l retention-check-interval -d 'How often retention runs' -r
complete -c klog-broker -n "__fish_klog_broker_needs_command" -l log-cleanup-policy -d 'How topics without a cleanup.policy of their own let old records go: delete (whole segments, by --retention and --retention-bytes), compact (keep each key\'s latest record), or compact,delete' -r
complete -c klog-broker -n "__fish_klog_broker_needs_command" -l log-cleaner-threads -d 'Threads that compact topics (0: none)' -r
complete -c klog-broker -n "__fish_klog_broker_needs_command" -l log-cleaner-memory -d 'Memory of the cleaner\'s key map, all threads together (24 bytes a key; a partition with more keys than fit is cleaned in several passes)' -r
complete -c klog-broker -n "__fish_klog_broker_needs_command" -l log-cleaner-io-bytes-per-second -d 'Bytes a second the cleaner reads, at most (default: no bound)' -r
complete -c klog-broker -n "__fish_klog_broker_needs_command" -l log-cleaner-backoff -d 'How long a cleaner thread with nothing to clean waits before it looks again' -r
complete -c klog-broker -n "__fish_klog_broker_needs_command" -l log-cleaner-delete-retention -d 'How long a compacted topic keeps a tombstone (a null value) after its segment was last written (topic config delete.retention.ms)' -r
complete -c klog-broker -n "__fish_klog_broker_needs_command" -l log-cleaner-min-cleanable-ratio -d 'The dirty share of a compacted partition\'s closed segments that makes it worth a clean (topic config min.cleanable.dirty.ratio)' -r
complete -c klog-broker -n "__fish_klog_broker_needs_command" -l log-cleaner-min-compaction-lag -d 'Leave records younger than this uncompacted (topic config min.compaction.lag.ms)' -r
complete -c klog-broker -n "__fish_klog_broker_needs_command" -l producer-id-expiration -d 'Forget an idempotent producer a partition has had no batch from for this long (Kafka\'s producer.id.expiration.ms), by its batches\' timestamps and by the broker\'s clock when it took them (records stamped long ago keep a producer that sends), at the retention checks: its next batch starts it afresh, whatever its sequence' -r
complete -c klog-broker -n "__fish_klog_broker_needs_command" -l scrub-interval -d 'Read every partition\'s log back whole, each record\'s CRC checked, this often (a new partition\'s first an interval after it is made: its batches were checked on their way in), and soon after an unclean stop or the first open of a log no scrub has noted (0: never). Damage found in a replica is cut and refetched from its peers; in a single copy, it is reported' -r
complete -c klog-broker -n "__fish_klog_broker_needs_command" -l scrub-rate -d 'Bytes a second the scrub reads, at most' -r
complete -c klog-broker -n "__fish_klog_broker_needs_command" -l flush-messages -d 'Flush a partition after this many records. Without this and --flush-interval the broker flushes continuously, committing every group of appends with one fsync. Consumers see only flushed records' -r
complete -c klog-broker -n "__fish_klog_broker_needs_command" -l flush-interval -d 'Flush a partition when its oldest unflushed record is this old' -r
complete -c klog-broker -n "__fish_klog_broker_needs_command" -l max-record-bytes -d 'Largest record accepted' -r
complete -c klog-broker -n "__fish_klog_broker_needs_command" -l max-request-bytes -d 'Largest request accepted (checked before allocating)' -r
complete -c klog-broker -n "__fish_klog_broker_needs_command" -l max-queued-request-bytes -d 'Request bytes held in memory at once over all connections (Kafka\'s queued.max.request.bytes). A request larger than its connection\'s 64KiB buffer takes its bytes from this bound as they arrive; while it is full the connection waits, unread, up to --request-timeout. A Kafka fetch\'s records, read and converted, come from it too (at most half of it per answer). At least --max-request-bytes' -r
complete -c klog-broker -n "__fish_klog_broker_needs_command" -l max-connections -d 'Connections served at once; one over the cap is closed at once' -r
complete -c klog-broker -n "__fish_klog_broker_needs_command" -l max-in-flight -d 'Requests of one connection whose answers wait (acks=all for an fsync, fetches for records); past it the broker stops reading that connection until they are answered. Answers that need no wait go out as requests are read' -r
complete -c klog-broker -n "__fish_klog_broker_needs_command" -l request-timeout -d 'A peer that starts a frame and does not finish it in this time is disconnected; the waits clients ask for (a fetch\'s wait for records, an acks=all timeout) end by this time too' -r
complete -c klog-broker -n "__fish_klog_broker_needs_command" -l idle-timeout -d 'A connection idle this long between requests is closed, so that idle sockets cannot hold every slot of --max-connections' -r
complete -c klog-broker -n "__fish_klog_broker_needs_command" -l registry -d 'Join this registry: register the broker and its topics there, for consumer groups (klog-consume -G) and clients with --registry to find. A directory (a cluster on one host) or a ZooKeeper ensemble, zk://HOST:PORT[,HOST:PORT...]/CHROOT (many hosts; the chroot is created on first use)' -r -F
complete -c klog-broker -n "__fish_klog_broker_needs_command" -l replication-factor -d 'Replicas of each partition of the topics this broker creates (needs --registry and as many live brokers): one leader and followers that copy its log; a partition survives the loss of any minority of its replicas with no acknowledged (acks=all) record lost' -r
complete -c klog-broker -n "__fish_klog_broker_needs_command" -l offsets-topic-partitions -d 'Partitions of the offsets topic (__consumer_offsets, where groups commit), when this broker is the one that creates it' -r
complete -c klog-broker -n "__fish_klog_broker_needs_command" -l offsets-topic-replication-factor -d 'Replicas of each partition of the offsets topic, when this broker creates it: at most the live brokers (commits then need two in sync where there are two)' -r
complete -c klog-broker -n "__fish_klog_broker_needs_command" -l min-insync-replicas -d 'acks=all produces are refused (not_enough_replicas) while fewer replicas than this are in sync. Default: 2, or 1 with --replication-factor 1' -r
complete -c klog-broker -n "__fish_klog_broker_needs_command" -l replica-lag-time -d 'A follower that has not caught up with its leader for this long leaves the in-sync replicas (it joins again once it catches up)' -r
complete -c klog-broker -n "__fish_klog_broker_needs_command" -l session-timeout -d 'The broker\'s session with the registry: a broker silent this long (stopped, cut off) is taken for dead, its registration lapses and its partitions get new leaders; it registers again when it runs' -r
complete -c klog-broker -n "__fish_klog_broker_needs_command" -l tls-cert -d 'This broker\'s certificate chain (PEM): both listeners speak TLS only (Kafka clients: security.protocol=ssl or sasl_ssl), and so do its connections to other brokers' -r -F
complete -c klog-broker -n "__fish_klog_broker_needs_command" -l tls-key -d 'The private key of --tls-cert (PEM)' -r -F
complete -c klog-broker -n "__fish_klog_broker_needs_command" -l tls-client-ca -d 'Require client certificates signed by this CA (PEM): mutual TLS; a client\'s principal is User: and its certificate\'s subject (User:CN=alice,O=Example). The broker then shows its own certificate to the brokers it fetches from' -r -F
complete -c klog-broker -n "__fish_klog_broker_needs_command" -l tls-ca -d 'The CA other brokers\' certificates are checked against when this one connects to them (default: --tls-client-ca, else the system\'s)' -r -F
complete -c klog-broker -n "__fish_klog_broker_needs_command" -l sasl-mechanisms -d 'Require a SASL login on both listeners, by these mechanisms (comma-separated: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512); users are those of the registry (klog-broker user add). Needs --registry' -r
complete -c klog-broker -n "__fish_klog_broker_needs_command" -l sasl-username -d 'With --sasl-mechanisms in a cluster: the user this broker logs in as on the other brokers (with the first mechanism)' -r
complete -c klog-broker -n "__fish_klog_broker_needs_command" -l sasl-password-file -d 'The password of --sasl-username, from the first line of FILE (never a flag: flags are seen by every user of the host)' -r -F
complete -c klog-broker -n "__fish_klog_broker_needs_command" -l super-users -d 'With --authorize: principals allowed everything, separated by ; as Kafka\'s super.users (User:admin;User:CN=ops,O=Example: a certificate\'s principal holds commas)' -r
complete -c klog-broker -n "__fish_klog_broker_needs_command" -l preallocate -d 'Give new segments files of --segment-bytes zeros, written and synced ahead (32MiB a second, by a thread of their own), so that an fsync of appends commits no file system journal. Every segment is written twice; one spare is kept in DATA_DIR/preallocated (while the disk has twice its size free), and one more per partition near its roll or new'
complete -c klog-broker -n "__fish_klog_broker_needs_command" -s q -l quiet -d 'Only print errors'
complete -c klog-broker -n "__fish_klog_broker_needs_command" -l authorize -d 'Deny every request the registry\'s ACLs do not allow (klog-broker acl add); ACL changes count on every broker within a second. Needs --registry'
complete -c klog-broker -n "__fish_klog_broker_needs_command" -s h -l help -d 'Print help'
complete -c klog-broker -n "__fish_klog_broker_needs_command" -s V -l version -d 'Print version'
complete -c klog-broker -n "__fish_klog_broker_needs_command" -f -a "user" -d 'Add, remove or list SASL users (SCRAM credentials in --registry)'
complete -c klog-broker -n "__fish_klog_broker_needs_command" -f -a "acl" -d 'Add, remove or list ACLs (in --registry; they count with --authorize)'
complete -c klog-broker -n "__fish_klog_broker_needs_command" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c klog-broker -n "__fish_klog_broker_using_subcommand user; and not __fish_seen_subcommand_from add remove list help" -s h -l help -d 'Print help'
complete -c klog-broker -n "__fish_klog_broker_using_subcommand user; and not __fish_seen_subcommand_from add remove list help" -f -a "add" -d 'Add a user, or set a user\'s password: SCRAM-SHA-256 and -512 credentials, salted; the password is read from the first line of standard input, or of --password-file'
complete -c klog-broker -n "__fish_klog_broker_using_subcommand user; and not __fish_seen_subcommand_from add remove list help" -f -a "remove" -d 'Remove a user'
complete -c klog-broker -n "__fish_klog_broker_using_subcommand user; and not __fish_seen_subcommand_from add remove list help" -f -a "list" -d 'List the users and their mechanisms'
complete -c klog-broker -n "__fish_klog_broker_using_subcommand user; and not __fish_seen_subcommand_from add remove list help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c klog-broker -n "__fish_klog_broker_using_subcommand user; and __fish_seen_subcommand_from add" -l password-file -d 'Read the password from the first line of FILE instead of standard input' -r -F
complete -c klog-broker -n "__fish_klog_broker_using_subcommand user; and __fish_seen_subcommand_from add" -l iterations -d 'PBKDF2 iterations' -r
complete -c klog-broker -n "__fish_klog_broker_using_subcommand user; and __fish_seen_subcommand_from add" -s h -l help -d 'Print help'
complete -c klog-broker -n "__fish_klog_broker_using_subcommand user; and __fish_seen_subcommand_from remove" -s h -l help -d 'Print help'
complete -c klog-broker -n "__fish_klog_broker_using_subcommand user; and __fish_seen_subcommand_from list" -s h -l help -d 'Print help'
complete -c klog-broker -n "__fish_klog_broker_using_subcommand user; and __fish_seen_subcommand_from help" -f -a "add" -d 'Add a user, or set a user\'s password: SCRAM-SHA-256 and -512 credentials, salted; the password is read from the first line of standard input, or of --password-file'
complete -c klog-broker -n "__fish_klog_broker_using_subcommand user; and __fish_seen_subcommand_from help" -f -a "remove" -d 'Remove a user'
complete -c klog-broker -n "__fish_klog_broker_using_subcommand user; and __fish_seen_subcommand_from help" -f -a "list" -d 'List the users and their mechanisms'
complete -c klog-broker -n "__fish_klog_broker_using_subcommand user; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c klog-broker -n "__fish_klog_broker_using_subcommand acl; and not __fish_seen_subcommand_from add remove clear list help" -s h -l help -d 'Print help'
complete -c klog-broker -n "__fish_klog_broker_using_subcommand acl; and not __fish_seen_subcommand_from add remove clear list help" -f -a "add" -d 'Add a rule'
complete -c klog-broker -n "__fish_klog_broker_using_subcommand acl; and not __fish_seen_subcommand_from add remove clear list help" -f -a "remove" -d 'Remove a rule'
complete -c klog-broker -n "__fish_klog_broker_using_subcommand acl; and not __fish_seen_subcommand_from add remove clear list help" -f -a "clear" -d 'Remove every rule of a resource, even an entry that does not parse'
complete -c klog-broker -n "__fish_klog_broker_using_subcommand acl; and not __fish_seen_subcommand_from add remove clear list help" -f -a "list" -d 'List every rule: resource, pattern, principal, operation, permission, tab-separated'
complete -c klog-broker -n "__fish_klog_broker_using_subcommand acl; and not __fish_seen_subcommand_from add remove clear list help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c klog-broker -n "__fish_klog_broker_using_subcommand acl; and __fish_seen_subcommand_from add" -l allow -d 'Allow PRINCIPAL (User:NAME, User:CN=..., or User:* for everyone)' -r
complete -c klog-broker -n "__fish_klog_broker_using_subcommand acl; and __fish_seen_subcommand_from add" -l deny -d 'Deny PRINCIPAL, whatever allows it' -r
complete -c klog-broker -n "__fish_klog_broker_using_subcommand acl; and __fish_seen_subcommand_from add" -l operation -d 'read, write, create, describe, alter, delete, cluster_action or all' -r
complete -c klog-broker -n "__fish_klog_broker_using_subcommand acl; and __fish_seen_subcommand_from add" -l topic -d 'A topic (* for every topic)' -r
complete -c klog-broker -n "__fish_klog_broker_using_subcommand acl; and __fish_seen_subcommand_from add" -l group -d 'A consumer group (* for every group)' -r
complete -c klog-broker -n "__fish_klog_broker_using_subcommand acl; and __fish_seen_subcommand_from add" -l transactional-id -d 'A transactional producer\'s transactional.id (* for every one): write lets it run transactions, describe find its coordinator' -r
complete -c klog-broker -n "__fish_klog_broker_using_subcommand acl; and __fish_seen_subcommand_from add" -l cluster -d 'The cluster (creating topics; brokers\' cluster_action)'
complete -c klog-broker -n "__fish_klog_broker_using_subcommand acl; and __fish_seen_subcommand_from add" -l prefixed -d 'The name is a prefix: every topic, group or transactional id whose name starts with it'
complete -c klog-broker -n "__fish_klog_broker_using_subcommand acl; and __fish_seen_subcommand_from add" -s h -l help -d 'Print help'
complete -c klog-broker -n "__fish_klog_broker_using_subcommand acl; and __fish_seen_subcommand_from remove" -l allow -d 'Allow PRINCIPAL (User:NAME, User:CN=..., or User:* for everyone)' -r
complete -c klog-broker -n "__fish_klog_broker_using_subcommand acl; and __fish_seen_subcommand_from remove" -l deny -d 'Deny PRINCIPAL, whatever allows it' -r
complete -c klog-broker -n "__fish_klog_broker_using_subcommand acl; and __fish_seen_subcommand_from remove" -l operation -d 'read, write, create, describe, alter, delete, cluster_action or all' -r
complete -c klog-broker -n "__fish_klog_broker_using_subcommand acl; and __fish_seen_subcommand_from remove" -l topic -d 'A topic (* for every topic)' -r
complete -c klog-broker -n "__fish_klog_broker_using_subcommand acl; and __fish_seen_subcommand_from remove" -l group -d 'A consumer group (* for every group)' -r
complete -c klog-broker -n "__fish_klog_broker_using_subcommand acl; and __fish_seen_subcommand_from remove" -l transactional-id -d 'A transactional producer\'s transactional.id (* for every one): write lets it run transactions, describe find its coordinator' -r
complete -c klog-broker -n "__fish_klog_broker_using_subcommand acl; and __fish_seen_subcommand_from remove" -l cluster -d 'The cluster (creating topics; brokers\' cluster_action)'
complete -c klog-broker -n "__fish_klog_broker_using_subcommand acl; and __fish_seen_subcommand_from remove" -l prefixed -d 'The name is a prefix: every topic, group or transactional id whose name starts with it'
complete -c klog-broker -n "__fish_klog_broker_using_subcommand acl; and __fish_seen_subcommand_from remove" -s h -l help -d 'Print help'
complete -c klog-broker -n "__fish_klog_broker_using_subcommand acl; and __fish_seen_subcommand_from clear" -l topic -d 'A topic (* for every topic)' -r
complete -c klog-broker -n "__fish_klog_broker_using_subcommand acl; and __fish_seen_subcommand_from clear" -l group -d 'A consumer group (* for every group)' -r
complete -c klog-broker -n "__fish_klog_broker_using_subcommand acl; and __fish_seen_subcommand_from clear" -l transactional-id -d 'A transactional producer\'s transactional.id (* for every one): write lets it run transactions, describe find its coordinator' -r
complete -c klog-broker -n "__fish_klog_broker_using_subcommand acl; and __fish_seen_subcommand_from clear" -l cluster -d 'The cluster (creating topics; brokers\' cluster_action)'
complete -c klog-broker -n "__fish_klog_broker_using_subcommand acl; and __fish_seen_subcommand_from clear" -l prefixed -d 'The name is a prefix: every topic, group or transactional id whose name starts with it'
complete -c klog-broker -n "__fish_klog_broker_using_subcommand acl; and __fish_seen_subcommand_from clear" -s h -l help -d 'Print help'
complete -c klog-broker -n "__fish_klog_broker_using_subcommand acl; and __fish_seen_subcommand_from list" -s h -l help -d 'Print help'
complete -c klog-broker -n "__fish_klog_broker_using_subcommand acl; and __fish_seen_subcommand_from help" -f -a "add" -d 'Add a rule'
complete -c klog-broker -n "__fish_klog_broker_using_subcommand acl; and __fish_seen_subcommand_from help" -f -a "remove" -d 'Remove a rule'
complete -c klog-broker -n "__fish_klog_broker_using_subcommand acl; and __fish_seen_subcommand_from help" -f -a "clear" -d 'Remove every rule of a resource, even an entry that does not parse'
complete -c klog-broker -n "__fish_klog_broker_using_subcommand acl; and __fish_seen_subcommand_from help" -f -a "list" -d 'List every rule: resource, pattern, principal, operation, permission, tab-separated'
complete -c klog-broker -n "__fish_klog_broker_using_subcommand acl; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c klog-broker -n "__fish_klog_broker_using_subcommand help; and not __fish_seen_subcommand_from user acl help" -f -a "user" -d 'Add, remove or list SASL users (SCRAM credentials in --registry)'
complete -c klog-broker -n "__fish_klog_broker_using_subcommand help; and not __fish_seen_subcommand_from user acl help" -f -a "acl" -d 'Add, remove or list ACLs (in --registry; they count with --authorize)'
complete -c klog-broker -n "__fish_klog_broker_using_subcommand help; and not __fish_seen_subcommand_from user acl help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c klog-broker -n "__fish_klog_broker_using_subcommand help; and __fish_seen_subcommand_from user" -f -a "add" -d 'Add a user, or set a user\'s password: SCRAM-SHA-256 and -512 credentials, salted; the password is read from the first line of standard input, or of --password-file'
complete -c klog-broker -n "__fish_klog_broker_using_subcommand help; and __fish_seen_subcommand_from user" -f -a "remove" -d 'Remove a user'
complete -c klog-broker -n "__fish_klog_broker_using_subcommand help; and __fish_seen_subcommand_from user" -f -a "list" -d 'List the users and their mechanisms'
complete -c klog-broker -n "__fish_klog_broker_using_subcommand help; and __fish_seen_subcommand_from acl" -f -a "add" -d 'Add a rule'
complete -c klog-broker -n "__fish_klog_broker_using_subcommand help; and __fish_seen_subcommand_from acl" -f -a "remove" -d 'Remove a rule'
complete -c klog-broker -n "__fish_klog_broker_using_subcommand help; and __fish_seen_subcommand_from acl" -f -a "clear" -d 'Remove every rule of a resource, even an entry that does not parse'
complete -c klog-broker -n "__fish_klog_broker_using_subcommand help; and __fish_seen_subcommand_from acl" -f -a "list" -d 'List every rule: resource, pattern, principal, operation, permission, tab-separated'
