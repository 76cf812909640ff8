_klog__broker() {
    local i cur prev opts cmd
    COMPREPLY=()
    if [[ "${BASH_VERSINFO[0]}" -ge 4 ]]; then
        cur="$2"
    else
        cur="${COMP_WORDS[COMP_CWORD]}"
    fi
    prev="$3"
    cmd=""
    opts=""

    for i in "${COMP_WORDS[@]:0:COMP_CWORD}"
    do
        case "${cmd},${i}" in
            ",$1")
                cmd="klog__broker"
                ;;
            klog__broker,acl)
                cmd="klog__broker__subcmd__acl"
                ;;
            klog__broker,help)
                cmd="klog__broker__subcmd__help"
                ;;
            klog__broker,user)
                cmd="klog__broker__subcmd__user"
                ;;
            klog__broker__subcmd__acl,add)
                cmd="klog__broker__subcmd__acl__subcmd__add"
                ;;
            klog__broker__subcmd__acl,clear)
                cmd="klog__broker__subcmd__acl__subcmd__clear"
                ;;
            klog__broker__subcmd__acl,help)
                cmd="klog__broker__subcmd__acl__subcmd__help"
                ;;
            klog__broker__subcmd__acl,list)
                cmd="klog__broker__subcmd__acl__subcmd__list"
                ;;
            klog__broker__subcmd__acl,remove)
                cmd="klog__broker__subcmd__acl__subcmd__remove"
                ;;
            klog__broker__subcmd__acl__subcmd__help,add)
                cmd="klog__broker__subcmd__acl__subcmd__help__subcmd__add"
                ;;
            klog__broker__subcmd__acl__subcmd__help,clear)
                cmd="klog__broker__subcmd__acl__subcmd__help__subcmd__clear"
                ;;
            klog__broker__subcmd__acl__subcmd__help,help)
                cmd="klog__broker__subcmd__acl__subcmd__help__subcmd__help"
                ;;
            klog__broker__subcmd__acl__subcmd__help,list)
                cmd="klog__broker__subcmd__acl__subcmd__help__subcmd__list"
                ;;
            klog__broker__subcmd__acl__subcmd__help,remove)
                cmd="klog__broker__subcmd__acl__subcmd__help__subcmd__remove"
                ;;
            klog__broker__subcmd__help,acl)
                cmd="klog__broker__subcmd__help__subcmd__acl"
                ;;
            klog__broker__subcmd__help,help)
                cmd="klog__broker__subcmd__help__subcmd__help"
                ;;
            klog__broker__subcmd__help,user)
                cmd="klog__broker__subcmd__help__subcmd__user"
                ;;
            klog__broker__subcmd__help__subcmd__acl,add)
                cmd="klog__broker__subcmd__help__subcmd__acl__subcmd__add"
                ;;
            klog__broker__subcmd__help__subcmd__acl,clear)
                cmd="klog__broker__subcmd__help__subcmd__acl__subcmd__clear"
                ;;
            klog__broker__subcmd__help__subcmd__acl,list)
                cmd="klog__broker__subcmd__help__subcmd__acl__subcmd__list"
                ;;
            klog__broker__subcmd__help__subcmd__acl,remove)
                cmd="klog__broker__subcmd__help__subcmd__acl__subcmd__remove"
                ;;
            klog__broker__subcmd__help__subcmd__user,add)
                cmd="klog__broker__subcmd__help__subcmd__user__subcmd__add"
                ;;
            klog__broker__subcmd__help__subcmd__user,list)
                cmd="klog__broker__subcmd__help__subcmd__user__subcmd__list"
                ;;
            klog__broker__subcmd__help__subcmd__user,remove)
                cmd="klog__broker__subcmd__help__subcmd__user__subcmd__remove"
                ;;
            klog__broker__subcmd__user,add)
                cmd="klog__broker__subcmd__user__subcmd__add"
                ;;
            klog__broker__subcmd__user,help)
                cmd="klog__broker__subcmd__user__subcmd__help"
                ;;
            klog__broker__subcmd__user,list)
                cmd="klog__broker__subcmd__user__subcmd__list"
                ;;
            klog__broker__subcmd__user,remove)
                cmd="klog__broker__subcmd__user__subcmd__remove"
                ;;
            klog__broker__subcmd__user__subcmd__help,add)
                cmd="klog__broker__subcmd__user__subcmd__help__subcmd__add"
                ;;
            klog__broker__subcmd__user__subcmd__help,help)
                cmd="klog__broker__subcmd__user__subcmd__help__subcmd__help"
                ;;
            klog__broker__subcmd__user__subcmd__help,list)
                cmd="klog__broker__subcmd__user__subcmd__help__subcmd__list"
                ;;
            klog__broker__subcmd__user__subcmd__help,remove)
                cmd="klog__broker__subcmd__user__subcmd__help__subcmd__remove"
                ;;
            *)
                ;;
        esac
    done

    case "${cmd}" in
        klog__broker)
            opts="-q -h -V --data-dir --listen --kafka-listen --kafka-advertised --metrics-listen --partitions --auto-create-topics --max-partitions --segment-bytes --preallocate --segment-age --index-interval-bytes --retention --retention-bytes --retention-check-interval --log-cleanup-policy --log-cleaner-threads --log-cleaner-memory --log-cleaner-io-bytes-per-second --log-cleaner-backoff --log-cleaner-delete-retention --log-cleaner-min-cleanable-ratio --log-cleaner-min-compaction-lag --producer-id-expiration --scrub-interval --scrub-rate --flush-messages --flush-interval --max-record-bytes --max-request-bytes --max-queued-request-bytes --max-connections --max-in-flight --request-timeout --idle-timeout --registry --replication-factor --offsets-topic-partitions --offsets-topic-replication-factor --min-insync-replicas --replica-lag-time --session-timeout --quiet --tls-cert --tls-key --tls-client-ca --tls-ca --sasl-mechanisms --sasl-username --sasl-password-file --authorize --super-users --help --version user acl help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 1 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --data-dir)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --listen)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --kafka-listen)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --kafka-advertised)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --metrics-listen)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --partitions)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --auto-create-topics)
                    COMPREPLY=($(compgen -W "true false" -- "${cur}"))
                    return 0
                    ;;
                --max-partitions)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --segment-bytes)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --segment-age)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --index-interval-bytes)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --retention)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --retention-bytes)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --retention-check-interval)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --log-cleanup-policy)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --log-cleaner-threads)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --log-cleaner-memory)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --log-cleaner-io-bytes-per-second)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --log-cleaner-backoff)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --log-cleaner-delete-retention)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --log-cleaner-min-cleanable-ratio)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --log-cleaner-min-compaction-lag)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --producer-id-expiration)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --scrub-interval)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --scrub-rate)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --flush-messages)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --flush-interval)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --max-record-bytes)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --max-request-bytes)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --max-queued-request-bytes)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --max-connections)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --max-in-flight)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --request-timeout)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --idle-timeout)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --registry)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --replication-factor)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --offsets-topic-partitions)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --offsets-topic-replication-factor)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --min-insync-replicas)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --replica-lag-time)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --session-timeout)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --tls-cert)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --tls-key)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --tls-client-ca)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --tls-ca)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --sasl-mechanisms)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --sasl-username)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --sasl-password-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --super-users)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        klog__broker__subcmd__acl)
            opts="-h --help add remove clear list help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        klog__broker__subcmd__acl__subcmd__add)
            opts="-h --allow --deny --operation --topic --group --transactional-id --cluster --prefixed --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --allow)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --deny)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --operation)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --topic)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --group)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --transactional-id)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        klog__broker__subcmd__acl__subcmd__clear)
            opts="-h --topic --group --transactional-id --cluster --prefixed --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --topic)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --group)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --transactional-id)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        klog__broker__subcmd__acl__subcmd__help)
            opts="add remove clear list help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        klog__broker__subcmd__acl__subcmd__help__subcmd__add)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        klog__broker__subcmd__acl__subcmd__help__subcmd__clear)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        klog__broker__subcmd__acl__subcmd__help__subcmd__help)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        klog__broker__subcmd__acl__subcmd__help__subcmd__list)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        klog__broker__subcmd__acl__subcmd__help__subcmd__remove)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        klog__broker__subcmd__acl__subcmd__list)
            opts="-h --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        klog__broker__subcmd__acl__subcmd__remove)
            opts="-h --allow --deny --operation --topic --group --transactional-id --cluster --prefixed --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --allow)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --deny)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --operation)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --topic)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --group)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --transactional-id)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        klog__broker__subcmd__help)
            opts="user acl help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        klog__broker__subcmd__help__subcmd__acl)
            opts="add remove clear list"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        klog__broker__subcmd__help__subcmd__acl__subcmd__add)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        klog__broker__subcmd__help__subcmd__acl__subcmd__clear)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        klog__broker__subcmd__help__subcmd__acl__subcmd__list)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        klog__broker__subcmd__help__subcmd__acl__subcmd__remove)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        klog__broker__subcmd__help__subcmd__help)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        klog__broker__subcmd__help__subcmd__user)
            opts="add remove list"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        klog__broker__subcmd__help__subcmd__user__subcmd__add)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        klog__broker__subcmd__help__subcmd__user__subcmd__list)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        klog__broker__subcmd__help__subcmd__user__subcmd__remove)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        klog__broker__subcmd__user)
            opts="-h --help add remove list help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        klog__broker__subcmd__user__subcmd__add)
            opts="-h --password-file --iterations --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --password-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --iterations)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        klog__broker__subcmd__user__subcmd__help)
            opts="add remove list help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        klog__broker__subcmd__user__subcmd__help__subcmd__add)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        klog__broker__subcmd__user__subcmd__help__subcmd__help)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        klog__broker__subcmd__user__subcmd__help__subcmd__list)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        klog__broker__subcmd__user__subcmd__help__subcmd__remove)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        klog__broker__subcmd__user__subcmd__list)
            opts="-h --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        klog__broker__subcmd__user__subcmd__remove)
            opts="-h --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
    esac
}

if [[ "${BASH_VERSINFO[0]}" -eq 4 && "${BASH_VERSINFO[1]}" -ge 4 || "${BASH_VERSINFO[0]}" -gt 4 ]]; then
    complete -F _klog__broker -o nosort -o bashdefault -o default klog-broker
else
    complete -F _klog__broker -o bashdefault -o default klog-broker
fi
