#compdef klog-recover

autoload -U is-at-least

_klog-recover() {
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
'--full[Scan every segment, not just those from the recovery point on]' \
'--dry-run[Change nothing; report what would be done]' \
'--json[One JSON object per segment]' \
'-q[Only print errors]' \
'--quiet[Only print errors]' \
'-h[Print help]' \
'--help[Print help]' \
'-V[Print version]' \
'--version[Print version]' \
'*::paths -- Partition directories or data directories:_files' \
&& ret=0
}

(( $+functions[_klog-recover_commands] )) ||
_klog-recover_commands() {
    local commands; commands=()
    _describe -t commands 'klog-recover commands' commands "$@"
}

if [ "$funcstack[1]" = "_klog-recover" ]; then
    _klog-recover "$@"
else
    compdef _klog-recover klog-recover
fi
