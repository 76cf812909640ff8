#compdef klog-broker

autoload -U is-at-least

_klog-broker() {
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
'--data-dir=[The data directory (created if missing)]:DIR:_files' \
'--listen=[Address to listen on; port 0 picks a free port. It serves klog'\''s protocol and Kafka'\''s (each connection'\''s first request says which)\: kcat -b 127.0.0.1 reaches a broker started with the defaults]:HOST:PORT:_default' \
'--kafka-listen=[Also listen on this address (both protocols too), and tell Kafka clients to connect here\: the Kafka wire protocol (produce, fetch, metadata, list offsets, consumer groups, admin) on the same logs and registry]:HOST:PORT:_default' \
'--kafka-advertised=[The address Kafka clients are told to connect to (default\: the --kafka-listen address, else the --listen one; needed when that is a wildcard such as 0.0.0.0)]:HOST:PORT:_default' \
'--metrics-listen=[Serve metrics for Prometheus at http\://HOST\:PORT/metrics\: requests and their latency per API, each partition'\''s offsets and in-sync replicas, groups'\'' lag, connections, flush times]:HOST:PORT:_default' \
'--partitions=[Partitions of a topic created on first produce]:N:_default' \
'--auto-create-topics=[Create a topic when a client first produces to it or asks for its metadata (Kafka'\''s auto.create.topics.enable). With false, such a client is told the topic does not exist; a create that names its partition count (an admin'\''s) is still made]:BOOL:(true false)' \
'--max-partitions=[Partition directories the data directory may hold, over all topics, counted on disk (served, offline or placed elsewhere\: each holds files the broker opens); a topic that would pass it is not created]:N:_default' \
'--segment-bytes=[Segment size at which a log rolls (at least 4KiB)]:SIZE:_default' \
'--segment-age=[A segment older than this rolls at the next append]:DURATION:_default' \
'--index-interval-bytes=[Bytes of log between two index entries]:SIZE:_default' \
'--retention=[Delete segments whose newest record was appended longer ago than this]:DURATION:_default' \
'--retention-bytes=[Delete the oldest segments while a partition is larger than this]:SIZE:_default' \
'--retention-check-interval=[How often retention runs]:DURATION:_default' \
'--log-cleanup-policy=[How topics without a cleanup.policy of their own let old records go\: delete (whole segments, by --retention and --retention-bytes), compact (keep each key'\''s latest record), or compact,delete]:POLICY:_default' \
'--log-cleaner-threads=[Threads that compact topics (0\: none)]:N:_default' \
'--log-cleaner-memory=[Memory of the cleaner'\''s key map, all threads together (24 bytes a key; a partition with more keys than fit is cleaned in several passes)]:SIZE:_default' \
'--log-cleaner-io-bytes-per-second=[Bytes a second the cleaner reads, at most (default\: no bound)]:SIZE:_default' \
'--log-cleaner-backoff=[How long a cleaner thread with nothing to clean waits before it looks again]:DURATION:_default' \
'--log-cleaner-delete-retention=[How long a compacted topic keeps a tombstone (a null value) after its segment was last written (topic config delete.retention.ms)]:DURATION:_default' \
'--log-cleaner-min-cleanable-ratio=[The dirty share of a compacted partition'\''s closed segments that makes it worth a clean (topic config min.cleanable.dirty.ratio)]:RATIO:_default' \
'--log-cleaner-min-compaction-lag=[Leave records younger than this uncompacted (topic config min.compaction.lag.ms)]:DURATION:_default' \
'--producer-id-expiration=[Forget an idempotent producer a partition has had no batch from for this long (Kafka'\''s producer.id.expiration.ms), by its batches'\'' timestamps and by the broker'\''s clock when it took them (records stamped long ago keep a producer that sends), at the retention checks\: its next batch starts it afresh, whatever its sequence]:DURATION:_default' \
'--scrub-interval=[Read every partition'\''s log back whole, each record'\''s CRC checked, this often (a new partition'\''s first an interval after it is made\: its batches were checked on their way in), and soon after an unclean stop or the first open of a log no scrub has noted (0\: never). Damage found in a replica is cut and refetched from its peers; in a single copy, it is reported]:DURATION:_default' \
'--scrub-rate=[Bytes a second the scrub reads, at most]:SIZE:_default' \
'--flush-messages=[Flush a partition after this many records. Without this and --flush-interval the broker flushes continuously, committing every group of appends with one fsync. Consumers see only flushed records]:N:_default' \
'--flush-interval=[Flush a partition when its oldest unflushed record is this old]:DURATION:_default' \
'--max-record-bytes=[Largest record accepted]:SIZE:_default' \
'--max-request-bytes=[Largest request accepted (checked before allocating)]:SIZE:_default' \
'--max-queued-request-bytes=[Request bytes held in memory at once over all connections (Kafka'\''s queued.max.request.bytes). A request larger than its connection'\''s 64KiB buffer takes its bytes from this bound as they arrive; while it is full the connection waits, unread, up to --request-timeout. A Kafka fetch'\''s records, read and converted, come from it too (at most half of it per answer). At least --max-request-bytes]:SIZE:_default' \
'--max-connections=[Connections served at once; one over the cap is closed at once]:N:_default' \
'--max-in-flight=[Requests of one connection whose answers wait (acks=all for an fsync, fetches for records); past it the broker stops reading that connection until they are answered. Answers that need no wait go out as requests are read]:N:_default' \
'--request-timeout=[A peer that starts a frame and does not finish it in this time is disconnected; the waits clients ask for (a fetch'\''s wait for records, an acks=all timeout) end by this time too]:DURATION:_default' \
'--idle-timeout=[A connection idle this long between requests is closed, so that idle sockets cannot hold every slot of --max-connections]:DURATION:_default' \
'--registry=[Join this registry\: register the broker and its topics there, for consumer groups (klog-consume -G) and clients with --registry to find. A directory (a cluster on one host) or a ZooKeeper ensemble, zk\://HOST\:PORT\[,HOST\:PORT...\]/CHROOT (many hosts; the chroot is created on first use)]:REGISTRY:_files' \
'--replication-factor=[Replicas of each partition of the topics this broker creates (needs --registry and as many live brokers)\: one leader and followers that copy its log; a partition survives the loss of any minority of its replicas with no acknowledged (acks=all) record lost]:N:_default' \
'--offsets-topic-partitions=[Partitions of the offsets topic (__consumer_offsets, where groups commit), when this broker is the one that creates it]:N:_default' \
'--offsets-topic-replication-factor=[Replicas of each partition of the offsets topic, when this broker creates it\: at most the live brokers (commits then need two in sync where there are two)]:N:_default' \
'--min-insync-replicas=[acks=all produces are refused (not_enough_replicas) while fewer replicas than this are in sync. Default\: 2, or 1 with --replication-factor 1]:N:_default' \
'--replica-lag-time=[A follower that has not caught up with its leader for this long leaves the in-sync replicas (it joins again once it catches up)]:DURATION:_default' \
'--session-timeout=[The broker'\''s session with the registry\: a broker silent this long (stopped, cut off) is taken for dead, its registration lapses and its partitions get new leaders; it registers again when it runs]:DURATION:_default' \
'--tls-cert=[This broker'\''s certificate chain (PEM)\: both listeners speak TLS only (Kafka clients\: security.protocol=ssl or sasl_ssl), and so do its connections to other brokers]:FILE:_files' \
'--tls-key=[The private key of --tls-cert (PEM)]:FILE:_files' \
'--tls-client-ca=[Require client certificates signed by this CA (PEM)\: mutual TLS; a client'\''s principal is User\: and its certificate'\''s subject (User\:CN=alice,O=Example). The broker then shows its own certificate to the brokers it fetches from]:FILE:_files' \
'--tls-ca=[The CA other brokers'\'' certificates are checked against when this one connects to them (default\: --tls-client-ca, else the system'\''s)]:FILE:_files' \
'--sasl-mechanisms=[Require a SASL login on both listeners, by these mechanisms (comma-separated\: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512); users are those of the registry (klog-broker user add). Needs --registry]:LIST:_default' \
'--sasl-username=[With --sasl-mechanisms in a cluster\: the user this broker logs in as on the other brokers (with the first mechanism)]:NAME:_default' \
'--sasl-password-file=[The password of --sasl-username, from the first line of FILE (never a flag\: flags are seen by every user of the host)]:FILE:_files' \
'*--super-users=[With --authorize\: principals allowed everything, separated by ; as Kafka'\''s super.users (User\:admin;User\:CN=ops,O=Example\: a certificate'\''s principal holds commas)]:LIST:_default' \
'--preallocate[Give new segments files of --segment-bytes zeros, written and synced ahead (32MiB a second, by a thread of their own), so that an fsync of appends commits no file system journal. Every segment is written twice; one spare is kept in DATA_DIR/preallocated (while the disk has twice its size free), and one more per partition near its roll or new]' \
'-q[Only print errors]' \
'--quiet[Only print errors]' \
'--authorize[Deny every request the registry'\''s ACLs do not allow (klog-broker acl add); ACL changes count on every broker within a second. Needs --registry]' \
'-h[Print help]' \
'--help[Print help]' \
'-V[Print version]' \
'--version[Print version]' \
":: :_klog-broker_commands" \
"*::: :->klog-broker" \
&& ret=0
    case $state in
    (klog-broker)
        words=($line[1] "${words[@]}")
        (( CURRENT += 1 ))
        curcontext="${curcontext%:*:*}:klog-broker-command-$line[1]:"
        case $line[1] in
            (user)
_arguments "${_arguments_options[@]}" : \
'-h[Print help]' \
'--help[Print help]' \
":: :_klog-broker__subcmd__user_commands" \
"*::: :->user" \
&& ret=0

    case $state in
    (user)
        words=($line[1] "${words[@]}")
        (( CURRENT += 1 ))
        curcontext="${curcontext%:*:*}:klog-broker-user-command-$line[1]:"
        case $line[1] in
            (add)
_arguments "${_arguments_options[@]}" : \
'--password-file=[Read the password from the first line of FILE instead of standard input]:FILE:_files' \
'--iterations=[PBKDF2 iterations]:N:_default' \
'-h[Print help]' \
'--help[Print help]' \
':name -- The user'\''s name (letters, digits, . _ -):_default' \
&& ret=0
;;
(remove)
_arguments "${_arguments_options[@]}" : \
'-h[Print help]' \
'--help[Print help]' \
':name -- The user'\''s name:_default' \
&& ret=0
;;
(list)
_arguments "${_arguments_options[@]}" : \
'-h[Print help]' \
'--help[Print help]' \
&& ret=0
;;
(help)
_arguments "${_arguments_options[@]}" : \
":: :_klog-broker__subcmd__user__subcmd__help_commands" \
"*::: :->help" \
&& ret=0

    case $state in
    (help)
        words=($line[1] "${words[@]}")
        (( CURRENT += 1 ))
        curcontext="${curcontext%:*:*}:klog-broker-user-help-command-$line[1]:"
        case $line[1] in
            (add)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
(remove)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
(list)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
(help)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
        esac
    ;;
esac
;;
        esac
    ;;
esac
;;
(acl)
_arguments "${_arguments_options[@]}" : \
'-h[Print help]' \
'--help[Print help]' \
":: :_klog-broker__subcmd__acl_commands" \
"*::: :->acl" \
&& ret=0

    case $state in
    (acl)
        words=($line[1] "${words[@]}")
        (( CURRENT += 1 ))
        curcontext="${curcontext%:*:*}:klog-broker-acl-command-$line[1]:"
        case $line[1] in
            (add)
_arguments "${_arguments_options[@]}" : \
'--allow=[Allow PRINCIPAL (User\:NAME, User\:CN=..., or User\:* for everyone)]:PRINCIPAL:_default' \
'--deny=[Deny PRINCIPAL, whatever allows it]:PRINCIPAL:_default' \
'--operation=[read, write, create, describe, alter, delete, cluster_action or all]:OP:_default' \
'--topic=[A topic (* for every topic)]:NAME:_default' \
'--group=[A consumer group (* for every group)]:NAME:_default' \
'--transactional-id=[A transactional producer'\''s transactional.id (* for every one)\: write lets it run transactions, describe find its coordinator]:NAME:_default' \
'--cluster[The cluster (creating topics; brokers'\'' cluster_action)]' \
'--prefixed[The name is a prefix\: every topic, group or transactional id whose name starts with it]' \
'-h[Print help]' \
'--help[Print help]' \
&& ret=0
;;
(remove)
_arguments "${_arguments_options[@]}" : \
'--allow=[Allow PRINCIPAL (User\:NAME, User\:CN=..., or User\:* for everyone)]:PRINCIPAL:_default' \
'--deny=[Deny PRINCIPAL, whatever allows it]:PRINCIPAL:_default' \
'--operation=[read, write, create, describe, alter, delete, cluster_action or all]:OP:_default' \
'--topic=[A topic (* for every topic)]:NAME:_default' \
'--group=[A consumer group (* for every group)]:NAME:_default' \
'--transactional-id=[A transactional producer'\''s transactional.id (* for every one)\: write lets it run transactions, describe find its coordinator]:NAME:_default' \
'--cluster[The cluster (creating topics; brokers'\'' cluster_action)]' \
'--prefixed[The name is a prefix\: every topic, group or transactional id whose name starts with it]' \
'-h[Print help]' \
'--help[Print help]' \
&& ret=0
;;
(clear)
_arguments "${_arguments_options[@]}" : \
'--topic=[A topic (* for every topic)]:NAME:_default' \
'--group=[A consumer group (* for every group)]:NAME:_default' \
'--transactional-id=[A transactional producer'\''s transactional.id (* for every one)\: write lets it run transactions, describe find its coordinator]:NAME:_default' \
'--cluster[The cluster (creating topics; brokers'\'' cluster_action)]' \
'--prefixed[The name is a prefix\: every topic, group or transactional id whose name starts with it]' \
'-h[Print help]' \
'--help[Print help]' \
&& ret=0
;;
(list)
_arguments "${_arguments_options[@]}" : \
'-h[Print help]' \
'--help[Print help]' \
&& ret=0
;;
(help)
_arguments "${_arguments_options[@]}" : \
":: :_klog-broker__subcmd__acl__subcmd__help_commands" \
"*::: :->help" \
&& ret=0

    case $state in
    (help)
        words=($line[1] "${words[@]}")
        (( CURRENT += 1 ))
        curcontext="${curcontext%:*:*}:klog-broker-acl-help-command-$line[1]:"
        case $line[1] in
            (add)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
(remove)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
(clear)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
(list)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
(help)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
        esac
    ;;
esac
;;
        esac
    ;;
esac
;;
(help)
_arguments "${_arguments_options[@]}" : \
":: :_klog-broker__subcmd__help_commands" \
"*::: :->help" \
&& ret=0

    case $state in
    (help)
        words=($line[1] "${words[@]}")
        (( CURRENT += 1 ))
        curcontext="${curcontext%:*:*}:klog-broker-help-command-$line[1]:"
        case $line[1] in
            (user)
_arguments "${_arguments_options[@]}" : \
":: :_klog-broker__subcmd__help__subcmd__user_commands" \
"*::: :->user" \
&& ret=0

    case $state in
    (user)
        words=($line[1] "${words[@]}")
        (( CURRENT += 1 ))
        curcontext="${curcontext%:*:*}:klog-broker-help-user-command-$line[1]:"
        case $line[1] in
            (add)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
(remove)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
(list)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
        esac
    ;;
esac
;;
(acl)
_arguments "${_arguments_options[@]}" : \
":: :_klog-broker__subcmd__help__subcmd__acl_commands" \
"*::: :->acl" \
&& ret=0

    case $state in
    (acl)
        words=($line[1] "${words[@]}")
        (( CURRENT += 1 ))
        curcontext="${curcontext%:*:*}:klog-broker-help-acl-command-$line[1]:"
        case $line[1] in
            (add)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
(remove)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
(clear)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
(list)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
        esac
    ;;
esac
;;
(help)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
        esac
    ;;
esac
;;
        esac
    ;;
esac
}

(( $+functions[_klog-broker_commands] )) ||
_klog-broker_commands() {
    local commands; commands=(
'user:Add, remove or list SASL users (SCRAM credentials in --registry)' \
'acl:Add, remove or list ACLs (in --registry; they count with --authorize)' \
'help:Print this message or the help of the given subcommand(s)' \
    )
    _describe -t commands 'klog-broker commands' commands "$@"
}
(( $+functions[_klog-broker__subcmd__acl_commands] )) ||
_klog-broker__subcmd__acl_commands() {
    local commands; commands=(
'add:Add a rule' \
'remove:Remove a rule' \
'clear:Remove every rule of a resource, even an entry that does not parse' \
'list:List every rule\: resource, pattern, principal, operation, permission, tab-separated' \
'help:Print this message or the help of the given subcommand(s)' \
    )
    _describe -t commands 'klog-broker acl commands' commands "$@"
}
(( $+functions[_klog-broker__subcmd__acl__subcmd__add_commands] )) ||
_klog-broker__subcmd__acl__subcmd__add_commands() {
    local commands; commands=()
    _describe -t commands 'klog-broker acl add commands' commands "$@"
}
(( $+functions[_klog-broker__subcmd__acl__subcmd__clear_commands] )) ||
_klog-broker__subcmd__acl__subcmd__clear_commands() {
    local commands; commands=()
    _describe -t commands 'klog-broker acl clear commands' commands "$@"
}
(( $+functions[_klog-broker__subcmd__acl__subcmd__help_commands] )) ||
_klog-broker__subcmd__acl__subcmd__help_commands() {
    local commands; commands=(
'add:Add a rule' \
'remove:Remove a rule' \
'clear:Remove every rule of a resource, even an entry that does not parse' \
'list:List every rule\: resource, pattern, principal, operation, permission, tab-separated' \
'help:Print this message or the help of the given subcommand(s)' \
    )
    _describe -t commands 'klog-broker acl help commands' commands "$@"
}
(( $+functions[_klog-broker__subcmd__acl__subcmd__help__subcmd__add_commands] )) ||
_klog-broker__subcmd__acl__subcmd__help__subcmd__add_commands() {
    local commands; commands=()
    _describe -t commands 'klog-broker acl help add commands' commands "$@"
}
(( $+functions[_klog-broker__subcmd__acl__subcmd__help__subcmd__clear_commands] )) ||
_klog-broker__subcmd__acl__subcmd__help__subcmd__clear_commands() {
    local commands; commands=()
    _describe -t commands 'klog-broker acl help clear commands' commands "$@"
}
(( $+functions[_klog-broker__subcmd__acl__subcmd__help__subcmd__help_commands] )) ||
_klog-broker__subcmd__acl__subcmd__help__subcmd__help_commands() {
    local commands; commands=()
    _describe -t commands 'klog-broker acl help help commands' commands "$@"
}
(( $+functions[_klog-broker__subcmd__acl__subcmd__help__subcmd__list_commands] )) ||
_klog-broker__subcmd__acl__subcmd__help__subcmd__list_commands() {
    local commands; commands=()
    _describe -t commands 'klog-broker acl help list commands' commands "$@"
}
(( $+functions[_klog-broker__subcmd__acl__subcmd__help__subcmd__remove_commands] )) ||
_klog-broker__subcmd__acl__subcmd__help__subcmd__remove_commands() {
    local commands; commands=()
    _describe -t commands 'klog-broker acl help remove commands' commands "$@"
}
(( $+functions[_klog-broker__subcmd__acl__subcmd__list_commands] )) ||
_klog-broker__subcmd__acl__subcmd__list_commands() {
    local commands; commands=()
    _describe -t commands 'klog-broker acl list commands' commands "$@"
}
(( $+functions[_klog-broker__subcmd__acl__subcmd__remove_commands] )) ||
_klog-broker__subcmd__acl__subcmd__remove_commands() {
    local commands; commands=()
    _describe -t commands 'klog-broker acl remove commands' commands "$@"
}
(( $+functions[_klog-broker__subcmd__help_commands] )) ||
_klog-broker__subcmd__help_commands() {
    local commands; commands=(
'user:Add, remove or list SASL users (SCRAM credentials in --registry)' \
'acl:Add, remove or list ACLs (in --registry; they count with --authorize)' \
'help:Print this message or the help of the given subcommand(s)' \
    )
    _describe -t commands 'klog-broker help commands' commands "$@"
}
(( $+functions[_klog-broker__subcmd__help__subcmd__acl_commands] )) ||
_klog-broker__subcmd__help__subcmd__acl_commands() {
    local commands; commands=(
'add:Add a rule' \
'remove:Remove a rule' \
'clear:Remove every rule of a resource, even an entry that does not parse' \
'list:List every rule\: resource, pattern, principal, operation, permission, tab-separated' \
    )
    _describe -t commands 'klog-broker help acl commands' commands "$@"
}
(( $+functions[_klog-broker__subcmd__help__subcmd__acl__subcmd__add_commands] )) ||
_klog-broker__subcmd__help__subcmd__acl__subcmd__add_commands() {
    local commands; commands=()
    _describe -t commands 'klog-broker help acl add commands' commands "$@"
}
(( $+functions[_klog-broker__subcmd__help__subcmd__acl__subcmd__clear_commands] )) ||
_klog-broker__subcmd__help__subcmd__acl__subcmd__clear_commands() {
    local commands; commands=()
    _describe -t commands 'klog-broker help acl clear commands' commands "$@"
}
(( $+functions[_klog-broker__subcmd__help__subcmd__acl__subcmd__list_commands] )) ||
_klog-broker__subcmd__help__subcmd__acl__subcmd__list_commands() {
    local commands; commands=()
    _describe -t commands 'klog-broker help acl list commands' commands "$@"
}
(( $+functions[_klog-broker__subcmd__help__subcmd__acl__subcmd__remove_commands] )) ||
_klog-broker__subcmd__help__subcmd__acl__subcmd__remove_commands() {
    local commands; commands=()
    _describe -t commands 'klog-broker help acl remove commands' commands "$@"
}
(( $+functions[_klog-broker__subcmd__help__subcmd__help_commands] )) ||
_klog-broker__subcmd__help__subcmd__help_commands() {
    local commands; commands=()
    _describe -t commands 'klog-broker help help commands' commands "$@"
}
(( $+functions[_klog-broker__subcmd__help__subcmd__user_commands] )) ||
_klog-broker__subcmd__help__subcmd__user_commands() {
    local commands; commands=(
'add:Add a user, or set a user'\''s password\: SCRAM-SHA-256 and -512 credentials, salted; the password is read from the first line of standard input, or of --password-file' \
'remove:Remove a user' \
'list:List the users and their mechanisms' \
    )
    _describe -t commands 'klog-broker help user commands' commands "$@"
}
(( $+functions[_klog-broker__subcmd__help__subcmd__user__subcmd__add_commands] )) ||
_klog-broker__subcmd__help__subcmd__user__subcmd__add_commands() {
    local commands; commands=()
    _describe -t commands 'klog-broker help user add commands' commands "$@"
}
(( $+functions[_klog-broker__subcmd__help__subcmd__user__subcmd__list_commands] )) ||
_klog-broker__subcmd__help__subcmd__user__subcmd__list_commands() {
    local commands; commands=()
    _describe -t commands 'klog-broker help user list commands' commands "$@"
}
(( $+functions[_klog-broker__subcmd__help__subcmd__user__subcmd__remove_commands] )) ||
_klog-broker__subcmd__help__subcmd__user__subcmd__remove_commands() {
    local commands; commands=()
    _describe -t commands 'klog-broker help user remove commands' commands "$@"
}
(( $+functions[_klog-broker__subcmd__user_commands] )) ||
_klog-broker__subcmd__user_commands() {
    local commands; commands=(
'add:Add a user, or set a user'\''s password\: SCRAM-SHA-256 and -512 credentials, salted; the password is read from the first line of standard input, or of --password-file' \
'remove:Remove a user' \
'list:List the users and their mechanisms' \
'help:Print this message or the help of the given subcommand(s)' \
    )
    _describe -t commands 'klog-broker user commands' commands "$@"
}
(( $+functions[_klog-broker__subcmd__user__subcmd__add_commands] )) ||
_klog-broker__subcmd__user__subcmd__add_commands() {
    local commands; commands=()
    _describe -t commands 'klog-broker user add commands' commands "$@"
}
(( $+functions[_klog-broker__subcmd__user__subcmd__help_commands] )) ||
_klog-broker__subcmd__user__subcmd__help_commands() {
    local commands; commands=(
'add:Add a user, or set a user'\''s password\: SCRAM-SHA-256 and -512 credentials, salted; the password is read from the first line of standard input, or of --password-file' \
'remove:Remove a user' \
'list:List the users and their mechanisms' \
'help:Print this message or the help of the given subcommand(s)' \
    )
    _describe -t commands 'klog-broker user help commands' commands "$@"
}
(( $+functions[_klog-broker__subcmd__user__subcmd__help__subcmd__add_commands] )) ||
_klog-broker__subcmd__user__subcmd__help__subcmd__add_commands() {
    local commands; commands=()
    _describe -t commands 'klog-broker user help add commands' commands "$@"
}
(( $+functions[_klog-broker__subcmd__user__subcmd__help__subcmd__help_commands] )) ||
_klog-broker__subcmd__user__subcmd__help__subcmd__help_commands() {
    local commands; commands=()
    _describe -t commands 'klog-broker user help help commands' commands "$@"
}
(( $+functions[_klog-broker__subcmd__user__subcmd__help__subcmd__list_commands] )) ||
_klog-broker__subcmd__user__subcmd__help__subcmd__list_commands() {
    local commands; commands=()
    _describe -t commands 'klog-broker user help list commands' commands "$@"
}
(( $+functions[_klog-broker__subcmd__user__subcmd__help__subcmd__remove_commands] )) ||
_klog-broker__subcmd__user__subcmd__help__subcmd__remove_commands() {
    local commands; commands=()
    _describe -t commands 'klog-broker user help remove commands' commands "$@"
}
(( $+functions[_klog-broker__subcmd__user__subcmd__list_commands] )) ||
_klog-broker__subcmd__user__subcmd__list_commands() {
    local commands; commands=()
    _describe -t commands 'klog-broker user list commands' commands "$@"
}
(( $+functions[_klog-broker__subcmd__user__subcmd__remove_commands] )) ||
_klog-broker__subcmd__user__subcmd__remove_commands() {
    local commands; commands=()
    _describe -t commands 'klog-broker user remove commands' commands "$@"
}

if [ "$funcstack[1]" = "_klog-broker" ]; then
    _klog-broker "$@"
else
    compdef _klog-broker klog-broker
fi
