# Print an optspec for argparse to handle cmd's options that are independent of any subcommand.
function __fish_klog_bench_global_optspecs
    string join \n h/help V/version
end

function __fish_klog_bench_needs_command
    # Figure out if the current invocation already has a command.
    set -l cmd (commandline -opc)
    set -e cmd[1]
    argparse -s (__fish_klog_bench_global_optspecs) -- $cmd 2>/dev/null
    or return
    if set -q argv[1]
        # Also print the command, so this can be used to figure out what it is.
        echo $argv[1]
        return 1
    end
    return 0
end

function __fish_klog_bench_using_subcommand
    set -l cmd (__fish_klog_bench_needs_command)
    test -z "$cmd"
    and return 1
    contains -- $cmd[1] $argv
end

complete -c klog-bench -n "__fish_klog_bench_needs_command" -s h -l help -d 'Print help'
complete -c klog-bench -n "__fish_klog_bench_needs_command" -s V -l version -d 'Print version'
complete -c klog-bench -n "__fish_klog_bench_needs_command" -f -a "produce" -d 'Producer throughput and acknowledgement latency'
complete -c klog-bench -n "__fish_klog_bench_needs_command" -f -a "consume" -d 'Consumer throughput from the start of a topic (filled first when the benchmark runs its own broker)'
complete -c klog-bench -n "__fish_klog_bench_needs_command" -f -a "latency" -d 'End-to-end latency, produce to consume, at a steady rate (acks=1)'
complete -c klog-bench -n "__fish_klog_bench_needs_command" -f -a "fanout" -d 'acks=all across many partitions, one producer pinned to each: every acknowledgement waits for an fsync of its own partition'
complete -c klog-bench -n "__fish_klog_bench_needs_command" -f -a "roll" -d 'acks=all produce latency on partition 0 while partition 1 is written in the background and rolls a segment every --segment-bytes'
complete -c klog-bench -n "__fish_klog_bench_needs_command" -f -a "fsync" -d 'This machine\'s disk: the time of one fdatasync after each append, the floor under every acks=all answer and every record a consumer sees (no broker)'
complete -c klog-bench -n "__fish_klog_bench_needs_command" -f -a "paper" -d 'The 2011 paper\'s experiments, beside its published figures'
complete -c klog-bench -n "__fish_klog_bench_needs_command" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c klog-bench -n "__fish_klog_bench_using_subcommand produce" -s n -l records -d 'Records to send' -r
complete -c klog-bench -n "__fish_klog_bench_using_subcommand produce" -s s -l record-size -d 'Bytes per record value' -r
complete -c klog-bench -n "__fish_klog_bench_using_subcommand produce" -l batch -d 'Records per batch (one request each)' -r
complete -c klog-bench -n "__fish_klog_bench_using_subcommand produce" -l acks -d 'Acknowledgements: 0, 1 or all' -r
complete -c klog-bench -n "__fish_klog_bench_using_subcommand produce" -l in-flight -d 'Requests in flight per producer' -r
complete -c klog-bench -n "__fish_klog_bench_using_subcommand produce" -l producers -d 'Producers, each on its own connection and thread' -r
complete -c klog-bench -n "__fish_klog_bench_using_subcommand produce" -s b -l broker -d 'The broker to measure (default: start one in a temporary directory)' -r
complete -c klog-bench -n "__fish_klog_bench_using_subcommand produce" -l brokers -d 'Start a cluster of N brokers of its own (klog-broker processes sharing a directory registry, all in a temporary directory) and measure through each partition\'s leader, once every partition has its leader and all its replicas in sync' -r
complete -c klog-bench -n "__fish_klog_bench_using_subcommand produce" -l replication-factor -d 'Replicas of each partition of the cluster\'s topics (needs --brokers; default 1)' -r
complete -c klog-bench -n "__fish_klog_bench_using_subcommand produce" -l min-insync-replicas -d 'The cluster\'s brokers refuse acks=all while a partition has fewer in-sync replicas (default: 2, or the replication factor if lower)' -r
complete -c klog-bench -n "__fish_klog_bench_using_subcommand produce" -s t -l topic -d 'Topic to use (default: a fresh one per run)' -r
complete -c klog-bench -n "__fish_klog_bench_using_subcommand produce" -l partitions -d 'Partitions of a topic the run creates (default 1; fanout 64, one producer each; roll 2)' -r
complete -c klog-bench -n "__fish_klog_bench_using_subcommand produce" -l json -d 'One JSON object on stdout instead of Kafka\'s final line'
complete -c klog-bench -n "__fish_klog_bench_using_subcommand produce" -s q -l quiet -d 'No progress on stderr'
complete -c klog-bench -n "__fish_klog_bench_using_subcommand produce" -s h -l help -d 'Print help'
complete -c klog-bench -n "__fish_klog_bench_using_subcommand consume" -s n -l records -d 'Records to read' -r
complete -c klog-bench -n "__fish_klog_bench_using_subcommand consume" -s s -l record-size -d 'Bytes per record value (of the records it fills in)' -r
complete -c klog-bench -n "__fish_klog_bench_using_subcommand consume" -l fetch-size -d 'Bytes fetched per partition per request' -r
complete -c klog-bench -n "__fish_klog_bench_using_subcommand consume" -l prefetch -d 'Fetch responses read ahead of the consumer (prefetch)' -r
complete -c klog-bench -n "__fish_klog_bench_using_subcommand consume" -s b -l broker -d 'The broker to measure (default: start one in a temporary directory)' -r
complete -c klog-bench -n "__fish_klog_bench_using_subcommand consume" -l brokers -d 'Start a cluster of N brokers of its own (klog-broker processes sharing a directory registry, all in a temporary directory) and measure through each partition\'s leader, once every partition has its leader and all its replicas in sync' -r
complete -c klog-bench -n "__fish_klog_bench_using_subcommand consume" -l replication-factor -d 'Replicas of each partition of the cluster\'s topics (needs --brokers; default 1)' -r
complete -c klog-bench -n "__fish_klog_bench_using_subcommand consume" -l min-insync-replicas -d 'The cluster\'s brokers refuse acks=all while a partition has fewer in-sync replicas (default: 2, or the replication factor if lower)' -r
complete -c klog-bench -n "__fish_klog_bench_using_subcommand consume" -s t -l topic -d 'Topic to use (default: a fresh one per run)' -r
complete -c klog-bench -n "__fish_klog_bench_using_subcommand consume" -l partitions -d 'Partitions of a topic the run creates (default 1; fanout 64, one producer each; roll 2)' -r
complete -c klog-bench -n "__fish_klog_bench_using_subcommand consume" -l json -d 'One JSON object on stdout instead of Kafka\'s final line'
complete -c klog-bench -n "__fish_klog_bench_using_subcommand consume" -s q -l quiet -d 'No progress on stderr'
complete -c klog-bench -n "__fish_klog_bench_using_subcommand consume" -s h -l help -d 'Print help'
complete -c klog-bench -n "__fish_klog_bench_using_subcommand latency" -s n -l records -d 'Records to send' -r
complete -c klog-bench -n "__fish_klog_bench_using_subcommand latency" -s s -l record-size -d 'Bytes per record value (at least 8: the send time)' -r
complete -c klog-bench -n "__fish_klog_bench_using_subcommand latency" -l rate -d 'Records per second' -r
complete -c klog-bench -n "__fish_klog_bench_using_subcommand latency" -s b -l broker -d 'The broker to measure (default: start one in a temporary directory)' -r
complete -c klog-bench -n "__fish_klog_bench_using_subcommand latency" -l brokers -d 'Start a cluster of N brokers of its own (klog-broker processes sharing a directory registry, all in a temporary directory) and measure through each partition\'s leader, once every partition has its leader and all its replicas in sync' -r
complete -c klog-bench -n "__fish_klog_bench_using_subcommand latency" -l replication-factor -d 'Replicas of each partition of the cluster\'s topics (needs --brokers; default 1)' -r
complete -c klog-bench -n "__fish_klog_bench_using_subcommand latency" -l min-insync-replicas -d 'The cluster\'s brokers refuse acks=all while a partition has fewer in-sync replicas (default: 2, or the replication factor if lower)' -r
complete -c klog-bench -n "__fish_klog_bench_using_subcommand latency" -s t -l topic -d 'Topic to use (default: a fresh one per run)' -r
complete -c klog-bench -n "__fish_klog_bench_using_subcommand latency" -l partitions -d 'Partitions of a topic the run creates (default 1; fanout 64, one producer each; roll 2)' -r
complete -c klog-bench -n "__fish_klog_bench_using_subcommand latency" -l json -d 'One JSON object on stdout instead of Kafka\'s final line'
complete -c klog-bench -n "__fish_klog_bench_using_subcommand latency" -s q -l quiet -d 'No progress on stderr'
complete -c klog-bench -n "__fish_klog_bench_using_subcommand latency" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c klog-bench -n "__fish_klog_bench_using_subcommand fanout" -s n -l records -d 'Records to send, in all' -r
complete -c klog-bench -n "__fish_klog_bench_using_subcommand fanout" -s s -l record-size -d 'Bytes per record value' -r
complete -c klog-bench -n "__fish_klog_bench_using_subcommand fanout" -l batch -d 'Records per batch (one request each)' -r
complete -c klog-bench -n "__fish_klog_bench_using_subcommand fanout" -l in-flight -d 'Requests in flight per producer' -r
complete -c klog-bench -n "__fish_klog_bench_using_subcommand fanout" -s b -l broker -d 'The broker to measure (default: start one in a temporary directory)' -r
complete -c klog-bench -n "__fish_klog_bench_using_subcommand fanout" -l brokers -d 'Start a cluster of N brokers of its own (klog-broker processes sharing a directory registry, all in a temporary directory) and measure through each partition\'s leader, once every partition has its leader and all its replicas in sync' -r
complete -c klog-bench -n "__fish_klog_bench_using_subcommand fanout" -l replication-factor -d 'Replicas of each partition of the cluster\'s topics (needs --brokers; default 1)' -r
complete -c klog-bench -n "__fish_klog_bench_using_subcommand fanout" -l min-insync-replicas -d 'The cluster\'s brokers refuse acks=all while a partition has fewer in-sync replicas (default: 2, or the replication factor if lower)' -r
complete -c klog-bench -n "__fish_klog_bench_using_subcommand fanout" -s t -l topic -d 'Topic to use (default: a fresh one per run)' -r
complete -c klog-bench -n "__fish_klog_bench_using_subcommand fanout" -l partitions -d 'Partitions of a topic the run creates (default 1; fanout 64, one producer each; roll 2)' -r
complete -c klog-bench -n "__fish_klog_bench_using_subcommand fanout" -l json -d 'One JSON object on stdout instead of Kafka\'s final line'
complete -c klog-bench -n "__fish_klog_bench_using_subcommand fanout" -s q -l quiet -d 'No progress on stderr'
complete -c klog-bench -n "__fish_klog_bench_using_subcommand fanout" -s h -l help -d 'Print help'
complete -c klog-bench -n "__fish_klog_bench_using_subcommand roll" -s n -l records -d 'Records to send to partition 0 (one a request, one request in flight)' -r
complete -c klog-bench -n "__fish_klog_bench_using_subcommand roll" -s s -l record-size -d 'Bytes per record value' -r
complete -c klog-bench -n "__fish_klog_bench_using_subcommand roll" -l acks -d 'Acknowledgements of the measured producer: 0, 1 or all' -r
complete -c klog-bench -n "__fish_klog_bench_using_subcommand roll" -l background-rate -d 'Bytes a second written to partition 1 (acks=1, 64 KiB requests)' -r
complete -c klog-bench -n "__fish_klog_bench_using_subcommand roll" -l segment-bytes -d 'Segment size of the benchmark\'s own broker (with -b, the broker\'s own --segment-bytes decides)' -r
complete -c klog-bench -n "__fish_klog_bench_using_subcommand roll" -s b -l broker -d 'The broker to measure (default: start one in a temporary directory)' -r
complete -c klog-bench -n "__fish_klog_bench_using_subcommand roll" -l brokers -d 'Start a cluster of N brokers of its own (klog-broker processes sharing a directory registry, all in a temporary directory) and measure through each partition\'s leader, once every partition has its leader and all its replicas in sync' -r
complete -c klog-bench -n "__fish_klog_bench_using_subcommand roll" -l replication-factor -d 'Replicas of each partition of the cluster\'s topics (needs --brokers; default 1)' -r
complete -c klog-bench -n "__fish_klog_bench_using_subcommand roll" -l min-insync-replicas -d 'The cluster\'s brokers refuse acks=all while a partition has fewer in-sync replicas (default: 2, or the replication factor if lower)' -r
complete -c klog-bench -n "__fish_klog_bench_using_subcommand roll" -s t -l topic -d 'Topic to use (default: a fresh one per run)' -r
complete -c klog-bench -n "__fish_klog_bench_using_subcommand roll" -l partitions -d 'Partitions of a topic the run creates (default 1; fanout 64, one producer each; roll 2)' -r
complete -c klog-bench -n "__fish_klog_bench_using_subcommand roll" -l json -d 'One JSON object on stdout instead of Kafka\'s final line'
complete -c klog-bench -n "__fish_klog_bench_using_subcommand roll" -s q -l quiet -d 'No progress on stderr'
complete -c klog-bench -n "__fish_klog_bench_using_subcommand roll" -s h -l help -d 'Print help'
complete -c klog-bench -n "__fish_klog_bench_using_subcommand fsync" -s n -l count -d 'fsyncs to time (with --rate: writes)' -r
complete -c klog-bench -n "__fish_klog_bench_using_subcommand fsync" -s s -l append-size -d 'Bytes appended before each fsync (10KiB: one batch of 50 records of 200 bytes; with --rate: by each write)' -r
complete -c klog-bench -n "__fish_klog_bench_using_subcommand fsync" -l dir -d 'Directory of the file measured (default: the temporary directory, where the benchmark\'s own brokers keep their data)' -r -F
complete -c klog-bench -n "__fish_klog_bench_using_subcommand fsync" -l rate -d 'Write N times a second instead (-n writes of --append-size; -s 208 is about one record of `latency`), a second thread fsyncing back to back as a broker\'s group commit does, and time each write from its append to the end of the first fdatasync begun after it: the floor this disk puts under `latency` at that rate' -r
complete -c klog-bench -n "__fish_klog_bench_using_subcommand fsync" -l overwrite -d 'Write over zeros written and synced first (as many bytes as the run writes) instead of appending: an fsync that changes no file size or block map, as in a segment whose blocks were written ahead'
complete -c klog-bench -n "__fish_klog_bench_using_subcommand fsync" -l json -d 'One JSON object on stdout instead of the result line'
complete -c klog-bench -n "__fish_klog_bench_using_subcommand fsync" -s h -l help -d 'Print help'
complete -c klog-bench -n "__fish_klog_bench_using_subcommand paper" -s n -l records -d 'Records per experiment (the paper: 10 million)' -r
complete -c klog-bench -n "__fish_klog_bench_using_subcommand paper" -s b -l broker -d 'The broker to measure (default: start one in a temporary directory)' -r
complete -c klog-bench -n "__fish_klog_bench_using_subcommand paper" -l brokers -d 'Start a cluster of N brokers of its own (klog-broker processes sharing a directory registry, all in a temporary directory) and measure through each partition\'s leader, once every partition has its leader and all its replicas in sync' -r
complete -c klog-bench -n "__fish_klog_bench_using_subcommand paper" -l replication-factor -d 'Replicas of each partition of the cluster\'s topics (needs --brokers; default 1)' -r
complete -c klog-bench -n "__fish_klog_bench_using_subcommand paper" -l min-insync-replicas -d 'The cluster\'s brokers refuse acks=all while a partition has fewer in-sync replicas (default: 2, or the replication factor if lower)' -r
complete -c klog-bench -n "__fish_klog_bench_using_subcommand paper" -s t -l topic -d 'Topic to use (default: a fresh one per run)' -r
complete -c klog-bench -n "__fish_klog_bench_using_subcommand paper" -l partitions -d 'Partitions of a topic the run creates (default 1; fanout 64, one producer each; roll 2)' -r
complete -c klog-bench -n "__fish_klog_bench_using_subcommand paper" -l json -d 'One JSON object on stdout instead of Kafka\'s final line'
complete -c klog-bench -n "__fish_klog_bench_using_subcommand paper" -s q -l quiet -d 'No progress on stderr'
complete -c klog-bench -n "__fish_klog_bench_using_subcommand paper" -s h -l help -d 'Print help'
complete -c klog-bench -n "__fish_klog_bench_using_subcommand help; and not __fish_seen_subcommand_from produce consume latency fanout roll fsync paper help" -f -a "produce" -d 'Producer throughput and acknowledgement latency'
complete -c klog-bench -n "__fish_klog_bench_using_subcommand help; and not __fish_seen_subcommand_from produce consume latency fanout roll fsync paper help" -f -a "consume" -d 'Consumer throughput from the start of a topic (filled first when the benchmark runs its own broker)'
complete -c klog-bench -n "__fish_klog_bench_using_subcommand help; and not __fish_seen_subcommand_from produce consume latency fanout roll fsync paper help" -f -a "latency" -d 'End-to-end latency, produce to consume, at a steady rate (acks=1)'
complete -c klog-bench -n "__fish_klog_bench_using_subcommand help; and not __fish_seen_subcommand_from produce consume latency fanout roll fsync paper help" -f -a "fanout" -d 'acks=all across many partitions, one producer pinned to each: every acknowledgement waits for an fsync of its own partition'
complete -c klog-bench -n "__fish_klog_bench_using_subcommand help; and not __fish_seen_subcommand_from produce consume latency fanout roll fsync paper help" -f -a "roll" -d 'acks=all produce latency on partition 0 while partition 1 is written in the background and rolls a segment every --segment-bytes'
complete -c klog-bench -n "__fish_klog_bench_using_subcommand help; and not __fish_seen_subcommand_from produce consume latency fanout roll fsync paper help" -f -a "fsync" -d 'This machine\'s disk: the time of one fdatasync after each append, the floor under every acks=all answer and every record a consumer sees (no broker)'
complete -c klog-bench -n "__fish_klog_bench_using_subcommand help; and not __fish_seen_subcommand_from produce consume latency fanout roll fsync paper help" -f -a "paper" -d 'The 2011 paper\'s experiments, beside its published figures'
complete -c klog-bench -n "__fish_klog_bench_using_subcommand help; and not __fish_seen_subcommand_from produce consume latency fanout roll fsync paper help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
