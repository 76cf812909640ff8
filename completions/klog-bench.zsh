#compdef klog-bench

autoload -U is-at-least

_klog-bench() {
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
'-h[Print help]' \
'--help[Print help]' \
'-V[Print version]' \
'--version[Print version]' \
":: :_klog-bench_commands" \
"*::: :->klog-bench" \
&& ret=0
    case $state in
    (klog-bench)
        words=($line[1] "${words[@]}")
        (( CURRENT += 1 ))
        curcontext="${curcontext%:*:*}:klog-bench-command-$line[1]:"
        case $line[1] in
            (produce)
_arguments "${_arguments_options[@]}" : \
'-n+[Records to send]:RECORDS:_default' \
'--records=[Records to send]:RECORDS:_default' \
'-s+[Bytes per record value]:SIZE:_default' \
'--record-size=[Bytes per record value]:SIZE:_default' \
'--batch=[Records per batch (one request each)]:N:_default' \
'--acks=[Acknowledgements\: 0, 1 or all]:0|1|all:_default' \
'--in-flight=[Requests in flight per producer]:N:_default' \
'--producers=[Producers, each on its own connection and thread]:N:_default' \
'-b+[The broker to measure (default\: start one in a temporary directory)]:HOST[:PORT]:_default' \
'--broker=[The broker to measure (default\: start one in a temporary directory)]:HOST[:PORT]:_default' \
'--brokers=[Start a cluster of N brokers of its own (klog-broker processes sharing a directory registry, all in a temporary directory) and measure through each partition'\''s leader, once every partition has its leader and all its replicas in sync]:N:_default' \
'--replication-factor=[Replicas of each partition of the cluster'\''s topics (needs --brokers; default 1)]:N:_default' \
'--min-insync-replicas=[The cluster'\''s brokers refuse acks=all while a partition has fewer in-sync replicas (default\: 2, or the replication factor if lower)]:N:_default' \
'-t+[Topic to use (default\: a fresh one per run)]:TOPIC:_default' \
'--topic=[Topic to use (default\: a fresh one per run)]:TOPIC:_default' \
'--partitions=[Partitions of a topic the run creates (default 1; fanout 64, one producer each; roll 2)]:N:_default' \
'--json[One JSON object on stdout instead of Kafka'\''s final line]' \
'-q[No progress on stderr]' \
'--quiet[No progress on stderr]' \
'-h[Print help]' \
'--help[Print help]' \
&& ret=0
;;
(consume)
_arguments "${_arguments_options[@]}" : \
'-n+[Records to read]:RECORDS:_default' \
'--records=[Records to read]:RECORDS:_default' \
'-s+[Bytes per record value (of the records it fills in)]:SIZE:_default' \
'--record-size=[Bytes per record value (of the records it fills in)]:SIZE:_default' \
'--fetch-size=[Bytes fetched per partition per request]:SIZE:_default' \
'--prefetch=[Fetch responses read ahead of the consumer (prefetch)]:N:_default' \
'-b+[The broker to measure (default\: start one in a temporary directory)]:HOST[:PORT]:_default' \
'--broker=[The broker to measure (default\: start one in a temporary directory)]:HOST[:PORT]:_default' \
'--brokers=[Start a cluster of N brokers of its own (klog-broker processes sharing a directory registry, all in a temporary directory) and measure through each partition'\''s leader, once every partition has its leader and all its replicas in sync]:N:_default' \
'--replication-factor=[Replicas of each partition of the cluster'\''s topics (needs --brokers; default 1)]:N:_default' \
'--min-insync-replicas=[The cluster'\''s brokers refuse acks=all while a partition has fewer in-sync replicas (default\: 2, or the replication factor if lower)]:N:_default' \
'-t+[Topic to use (default\: a fresh one per run)]:TOPIC:_default' \
'--topic=[Topic to use (default\: a fresh one per run)]:TOPIC:_default' \
'--partitions=[Partitions of a topic the run creates (default 1; fanout 64, one producer each; roll 2)]:N:_default' \
'--json[One JSON object on stdout instead of Kafka'\''s final line]' \
'-q[No progress on stderr]' \
'--quiet[No progress on stderr]' \
'-h[Print help]' \
'--help[Print help]' \
&& ret=0
;;
(latency)
_arguments "${_arguments_options[@]}" : \
'-n+[Records to send]:RECORDS:_default' \
'--records=[Records to send]:RECORDS:_default' \
'-s+[Bytes per record value (at least 8\: the send time)]:SIZE:_default' \
'--record-size=[Bytes per record value (at least 8\: the send time)]:SIZE:_default' \
'--rate=[Records per second]:N:_default' \
'-b+[The broker to measure (default\: start one in a temporary directory)]:HOST[:PORT]:_default' \
'--broker=[The broker to measure (default\: start one in a temporary directory)]:HOST[:PORT]:_default' \
'--brokers=[Start a cluster of N brokers of its own (klog-broker processes sharing a directory registry, all in a temporary directory) and measure through each partition'\''s leader, once every partition has its leader and all its replicas in sync]:N:_default' \
'--replication-factor=[Replicas of each partition of the cluster'\''s topics (needs --brokers; default 1)]:N:_default' \
'--min-insync-replicas=[The cluster'\''s brokers refuse acks=all while a partition has fewer in-sync replicas (default\: 2, or the replication factor if lower)]:N:_default' \
'-t+[Topic to use (default\: a fresh one per run)]:TOPIC:_default' \
'--topic=[Topic to use (default\: a fresh one per run)]:TOPIC:_default' \
'--partitions=[Partitions of a topic the run creates (default 1; fanout 64, one producer each; roll 2)]:N:_default' \
'--json[One JSON object on stdout instead of Kafka'\''s final line]' \
'-q[No progress on stderr]' \
'--quiet[No progress on stderr]' \
'-h[Print help (see more with '\''--help'\'')]' \
'--help[Print help (see more with '\''--help'\'')]' \
&& ret=0
;;
(fanout)
_arguments "${_arguments_options[@]}" : \
'-n+[Records to send, in all]:RECORDS:_default' \
'--records=[Records to send, in all]:RECORDS:_default' \
'-s+[Bytes per record value]:SIZE:_default' \
'--record-size=[Bytes per record value]:SIZE:_default' \
'--batch=[Records per batch (one request each)]:N:_default' \
'--in-flight=[Requests in flight per producer]:N:_default' \
'-b+[The broker to measure (default\: start one in a temporary directory)]:HOST[:PORT]:_default' \
'--broker=[The broker to measure (default\: start one in a temporary directory)]:HOST[:PORT]:_default' \
'--brokers=[Start a cluster of N brokers of its own (klog-broker processes sharing a directory registry, all in a temporary directory) and measure through each partition'\''s leader, once every partition has its leader and all its replicas in sync]:N:_default' \
'--replication-factor=[Replicas of each partition of the cluster'\''s topics (needs --brokers; default 1)]:N:_default' \
'--min-insync-replicas=[The cluster'\''s brokers refuse acks=all while a partition has fewer in-sync replicas (default\: 2, or the replication factor if lower)]:N:_default' \
'-t+[Topic to use (default\: a fresh one per run)]:TOPIC:_default' \
'--topic=[Topic to use (default\: a fresh one per run)]:TOPIC:_default' \
'--partitions=[Partitions of a topic the run creates (default 1; fanout 64, one producer each; roll 2)]:N:_default' \
'--json[One JSON object on stdout instead of Kafka'\''s final line]' \
'-q[No progress on stderr]' \
'--quiet[No progress on stderr]' \
'-h[Print help]' \
'--help[Print help]' \
&& ret=0
;;
(roll)
_arguments "${_arguments_options[@]}" : \
'-n+[Records to send to partition 0 (one a request, one request in flight)]:RECORDS:_default' \
'--records=[Records to send to partition 0 (one a request, one request in flight)]:RECORDS:_default' \
'-s+[Bytes per record value]:SIZE:_default' \
'--record-size=[Bytes per record value]:SIZE:_default' \
'--acks=[Acknowledgements of the measured producer\: 0, 1 or all]:0|1|all:_default' \
'--background-rate=[Bytes a second written to partition 1 (acks=1, 64 KiB requests)]:SIZE:_default' \
'--segment-bytes=[Segment size of the benchmark'\''s own broker (with -b, the broker'\''s own --segment-bytes decides)]:SIZE:_default' \
'-b+[The broker to measure (default\: start one in a temporary directory)]:HOST[:PORT]:_default' \
'--broker=[The broker to measure (default\: start one in a temporary directory)]:HOST[:PORT]:_default' \
'--brokers=[Start a cluster of N brokers of its own (klog-broker processes sharing a directory registry, all in a temporary directory) and measure through each partition'\''s leader, once every partition has its leader and all its replicas in sync]:N:_default' \
'--replication-factor=[Replicas of each partition of the cluster'\''s topics (needs --brokers; default 1)]:N:_default' \
'--min-insync-replicas=[The cluster'\''s brokers refuse acks=all while a partition has fewer in-sync replicas (default\: 2, or the replication factor if lower)]:N:_default' \
'-t+[Topic to use (default\: a fresh one per run)]:TOPIC:_default' \
'--topic=[Topic to use (default\: a fresh one per run)]:TOPIC:_default' \
'--partitions=[Partitions of a topic the run creates (default 1; fanout 64, one producer each; roll 2)]:N:_default' \
'--json[One JSON object on stdout instead of Kafka'\''s final line]' \
'-q[No progress on stderr]' \
'--quiet[No progress on stderr]' \
'-h[Print help]' \
'--help[Print help]' \
&& ret=0
;;
(fsync)
_arguments "${_arguments_options[@]}" : \
'-n+[fsyncs to time (with --rate\: writes)]:N:_default' \
'--count=[fsyncs to time (with --rate\: writes)]:N:_default' \
'-s+[Bytes appended before each fsync (10KiB\: one batch of 50 records of 200 bytes; with --rate\: by each write)]:SIZE:_default' \
'--append-size=[Bytes appended before each fsync (10KiB\: one batch of 50 records of 200 bytes; with --rate\: by each write)]:SIZE:_default' \
'--dir=[Directory of the file measured (default\: the temporary directory, where the benchmark'\''s own brokers keep their data)]:DIR:_files' \
'--rate=[Write N times a second instead (-n writes of --append-size; -s 208 is about one record of \`latency\`), a second thread fsyncing back to back as a broker'\''s group commit does, and time each write from its append to the end of the first fdatasync begun after it\: the floor this disk puts under \`latency\` at that rate]:N:_default' \
'--overwrite[Write over zeros written and synced first (as many bytes as the run writes) instead of appending\: an fsync that changes no file size or block map, as in a segment whose blocks were written ahead]' \
'--json[One JSON object on stdout instead of the result line]' \
'-h[Print help]' \
'--help[Print help]' \
&& ret=0
;;
(paper)
_arguments "${_arguments_options[@]}" : \
'-n+[Records per experiment (the paper\: 10 million)]:RECORDS:_default' \
'--records=[Records per experiment (the paper\: 10 million)]:RECORDS:_default' \
'-b+[The broker to measure (default\: start one in a temporary directory)]:HOST[:PORT]:_default' \
'--broker=[The broker to measure (default\: start one in a temporary directory)]:HOST[:PORT]:_default' \
'--brokers=[Start a cluster of N brokers of its own (klog-broker processes sharing a directory registry, all in a temporary directory) and measure through each partition'\''s leader, once every partition has its leader and all its replicas in sync]:N:_default' \
'--replication-factor=[Replicas of each partition of the cluster'\''s topics (needs --brokers; default 1)]:N:_default' \
'--min-insync-replicas=[The cluster'\''s brokers refuse acks=all while a partition has fewer in-sync replicas (default\: 2, or the replication factor if lower)]:N:_default' \
'-t+[Topic to use (default\: a fresh one per run)]:TOPIC:_default' \
'--topic=[Topic to use (default\: a fresh one per run)]:TOPIC:_default' \
'--partitions=[Partitions of a topic the run creates (default 1; fanout 64, one producer each; roll 2)]:N:_default' \
'--json[One JSON object on stdout instead of Kafka'\''s final line]' \
'-q[No progress on stderr]' \
'--quiet[No progress on stderr]' \
'-h[Print help]' \
'--help[Print help]' \
&& ret=0
;;
(help)
_arguments "${_arguments_options[@]}" : \
":: :_klog-bench__subcmd__help_commands" \
"*::: :->help" \
&& ret=0

    case $state in
    (help)
        words=($line[1] "${words[@]}")
        (( CURRENT += 1 ))
        curcontext="${curcontext%:*:*}:klog-bench-help-command-$line[1]:"
        case $line[1] in
            (produce)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
(consume)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
(latency)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
(fanout)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
(roll)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
(fsync)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
(paper)
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
}

(( $+functions[_klog-bench_commands] )) ||
_klog-bench_commands() {
    local commands; commands=(
'produce:Producer throughput and acknowledgement latency' \
'consume:Consumer throughput from the start of a topic (filled first when the benchmark runs its own broker)' \
'latency:End-to-end latency, produce to consume, at a steady rate (acks=1)' \
'fanout:acks=all across many partitions, one producer pinned to each\: every acknowledgement waits for an fsync of its own partition' \
'roll:acks=all produce latency on partition 0 while partition 1 is written in the background and rolls a segment every --segment-bytes' \
'fsync:This machine'\''s disk\: the time of one fdatasync after each append, the floor under every acks=all answer and every record a consumer sees (no broker)' \
'paper:The 2011 paper'\''s experiments, beside its published figures' \
'help:Print this message or the help of the given subcommand(s)' \
    )
    _describe -t commands 'klog-bench commands' commands "$@"
}
(( $+functions[_klog-bench__subcmd__consume_commands] )) ||
_klog-bench__subcmd__consume_commands() {
    local commands; commands=()
    _describe -t commands 'klog-bench consume commands' commands "$@"
}
(( $+functions[_klog-bench__subcmd__fanout_commands] )) ||
_klog-bench__subcmd__fanout_commands() {
    local commands; commands=()
    _describe -t commands 'klog-bench fanout commands' commands "$@"
}
(( $+functions[_klog-bench__subcmd__fsync_commands] )) ||
_klog-bench__subcmd__fsync_commands() {
    local commands; commands=()
    _describe -t commands 'klog-bench fsync commands' commands "$@"
}
(( $+functions[_klog-bench__subcmd__help_commands] )) ||
_klog-bench__subcmd__help_commands() {
    local commands; commands=(
'produce:Producer throughput and acknowledgement latency' \
'consume:Consumer throughput from the start of a topic (filled first when the benchmark runs its own broker)' \
'latency:End-to-end latency, produce to consume, at a steady rate (acks=1)' \
'fanout:acks=all across many partitions, one producer pinned to each\: every acknowledgement waits for an fsync of its own partition' \
'roll:acks=all produce latency on partition 0 while partition 1 is written in the background and rolls a segment every --segment-bytes' \
'fsync:This machine'\''s disk\: the time of one fdatasync after each append, the floor under every acks=all answer and every record a consumer sees (no broker)' \
'paper:The 2011 paper'\''s experiments, beside its published figures' \
'help:Print this message or the help of the given subcommand(s)' \
    )
    _describe -t commands 'klog-bench help commands' commands "$@"
}
(( $+functions[_klog-bench__subcmd__help__subcmd__consume_commands] )) ||
_klog-bench__subcmd__help__subcmd__consume_commands() {
    local commands; commands=()
    _describe -t commands 'klog-bench help consume commands' commands "$@"
}
(( $+functions[_klog-bench__subcmd__help__subcmd__fanout_commands] )) ||
_klog-bench__subcmd__help__subcmd__fanout_commands() {
    local commands; commands=()
    _describe -t commands 'klog-bench help fanout commands' commands "$@"
}
(( $+functions[_klog-bench__subcmd__help__subcmd__fsync_commands] )) ||
_klog-bench__subcmd__help__subcmd__fsync_commands() {
    local commands; commands=()
    _describe -t commands 'klog-bench help fsync commands' commands "$@"
}
(( $+functions[_klog-bench__subcmd__help__subcmd__help_commands] )) ||
_klog-bench__subcmd__help__subcmd__help_commands() {
    local commands; commands=()
    _describe -t commands 'klog-bench help help commands' commands "$@"
}
(( $+functions[_klog-bench__subcmd__help__subcmd__latency_commands] )) ||
_klog-bench__subcmd__help__subcmd__latency_commands() {
    local commands; commands=()
    _describe -t commands 'klog-bench help latency commands' commands "$@"
}
(( $+functions[_klog-bench__subcmd__help__subcmd__paper_commands] )) ||
_klog-bench__subcmd__help__subcmd__paper_commands() {
    local commands; commands=()
    _describe -t commands 'klog-bench help paper commands' commands "$@"
}
(( $+functions[_klog-bench__subcmd__help__subcmd__produce_commands] )) ||
_klog-bench__subcmd__help__subcmd__produce_commands() {
    local commands; commands=()
    _describe -t commands 'klog-bench help produce commands' commands "$@"
}
(( $+functions[_klog-bench__subcmd__help__subcmd__roll_commands] )) ||
_klog-bench__subcmd__help__subcmd__roll_commands() {
    local commands; commands=()
    _describe -t commands 'klog-bench help roll commands' commands "$@"
}
(( $+functions[_klog-bench__subcmd__latency_commands] )) ||
_klog-bench__subcmd__latency_commands() {
    local commands; commands=()
    _describe -t commands 'klog-bench latency commands' commands "$@"
}
(( $+functions[_klog-bench__subcmd__paper_commands] )) ||
_klog-bench__subcmd__paper_commands() {
    local commands; commands=()
    _describe -t commands 'klog-bench paper commands' commands "$@"
}
(( $+functions[_klog-bench__subcmd__produce_commands] )) ||
_klog-bench__subcmd__produce_commands() {
    local commands; commands=()
    _describe -t commands 'klog-bench produce commands' commands "$@"
}
(( $+functions[_klog-bench__subcmd__roll_commands] )) ||
_klog-bench__subcmd__roll_commands() {
    local commands; commands=()
    _describe -t commands 'klog-bench roll commands' commands "$@"
}

if [ "$funcstack[1]" = "_klog-bench" ]; then
    _klog-bench "$@"
else
    compdef _klog-bench klog-bench
fi
