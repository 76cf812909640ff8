#compdef klog-dump

autoload -U is-at-least

_klog-dump() {
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
'(--records --print-data --verify)--registry=[Show a registry instead\: brokers, each replicated partition'\''s replicas, leader, epoch, ISR and high watermark (asked of its leader), groups, members, partition owners, committed offsets and lag. A directory or a ZooKeeper ensemble, zk\://HOST\:PORT\[,HOST\:PORT...\]/CHROOT; only read\: nothing is created or changed. Each broker gets 1s in all to answer (all asked at once)\: a silent one'\''s figures are ? and a % line on stderr names it]:REGISTRY:_files' \
'--high-watermark=[With --compare\: the offset below which the replicas must be identical (klog-dump --registry shows each partition'\''s); default\: the lowest end of the replicas]:OFFSET:_default' \
'*-X+[With --registry\: how to reach the brokers, by kcat'\''s security properties (security.protocol, ssl.ca.location, ssl.certificate.location, ssl.key.location, sasl.mechanisms, sasl.username, sasl.password)]:NAME=VALUE:_default' \
'(--registry --records --print-data --verify)--compare[Compare the replicas of one partition\: each PATH is its directory on another broker (d1/t-0 d2/t-0 d3/t-0). Prints each replica'\''s start, end, tail and leader epochs, and the first offset where they differ (a batch'\''s bytes, or a replica ending early); exit 3 when that is below the high watermark, or a replica is damaged. Above it a difference is an uncommitted tail\: a note]' \
'--records[One line per record instead of per batch]' \
'--print-data[Print keys, values and headers too (implies --records)]' \
'--verify[Check the indexes and the leader epoch file against the log, and every CRC; print only problems and the summary]' \
'--json[One JSON object per line]' \
'-q[Only print errors]' \
'--quiet[Only print errors]' \
'-h[Print help]' \
'--help[Print help]' \
'-V[Print version]' \
'--version[Print version]' \
'*::paths -- `.log`, `.index` or `.timeindex` files, partition directories or data directories; with --compare, the partition directories of one partition'\''s replicas:_files' \
&& ret=0
}

(( $+functions[_klog-dump_commands] )) ||
_klog-dump_commands() {
    local commands; commands=()
    _describe -t commands 'klog-dump commands' commands "$@"
}

if [ "$funcstack[1]" = "_klog-dump" ]; then
    _klog-dump "$@"
else
    compdef _klog-dump klog-dump
fi
