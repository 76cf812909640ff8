#!/usr/bin/env bash
# A nemesis soak, with the binaries only: three brokers on a directory
# registry (--replication-factor 3 --min-insync-replicas 2, topic t of 3
# partitions), a producer fed a counter with --acks all --report, and a
# consumer printing `partition offset value` throughout, while a nemesis
# picks faults at random, one at a time, until LEADER_CHANGES leader
# changes (default 100) or DURATION seconds (default 3600).
# Each fault's victim is the leader of a random partition (any broker when
# it has none).
#
#   kill9      kill -9 a broker, start it again
#   stop       SIGSTOP a broker past the session timeout (2s), then SIGCONT
#   two        kill -9 two brokers at once, start both again
#   flip       kill -9 a broker, flip a byte in the middle of a partition's
#              active segment (damage: the broker cuts and refetches at
#              start)
#   cut        kill -9 a broker, cut 100 to 999 bytes off the tail of a
#              partition's active segment (a torn tail), start it again
#   partition  drop every packet to and from a broker's port for 4 to 6 s
#              (past --replica-lag-time); only as root with nft, inside a
#              network namespace of the soak's own (unshare -n), so no
#              other process on the machine is touched. Its own fetches
#              still go out, and the registry is a shared directory that
#              no packet rule can cut off: SIGSTOP is the full partition.
#   rot        as flip, in the middle of a rolled segment: below the
#              recovery point, where a start after kill -9 does not look;
#              the broker's scrub, which reads every log back soon after
#              it opens, finds it, cuts the replica and refetches
#
# A fault that destroys bytes (flip, cut) is dealt only when every ISR is
# full, so one broker at most holds less than what was acknowledged (the
# guarantee is for the loss of N - M = 1). A cut one is started again only
# once it left every ISR: a tail cut below what it had reported durable
# is otherwise a silent loss, which no real crash makes (kill -9 keeps the
# page cache; a power cut loses only what was never fsynced).
#
# At the end the producer and the nemesis stop, every ISR is waited for
# full and the consumer for the last acknowledged offsets, everything is
# stopped with SIGTERM, and examples/nemesis_check.rs, the independent
# checker, reads every replica's files: no acknowledged record lost, no
# offset holding two values, no value stored twice (klog-produce is
# idempotent; PRODUCE_FLAGS=--no-idempotence allows them), no consumer
# line that the replicas do not hold. Its exit status is the script's.
#
#   bash examples/nemesis.sh                       # builds the release binaries
#   LEADER_CHANGES=20 DURATION=600 bash examples/nemesis.sh
#   KLOG_BIN=target/release bash examples/nemesis.sh   # binaries already built
#   SEED=7 KEEP=1 bash examples/nemesis.sh         # the same draws (not timings); keep the files
#   FAULTS="kill9 rot" bash examples/nemesis.sh    # only these faults, equally likely
#   PRODUCE_FLAGS=--no-idempotence bash examples/nemesis.sh   # duplicates counted, allowed
#
# Needs jq. The files (brokers' logs, acks.jsonl, consumed, events) are in
# a temporary directory, removed at the end unless KEEP=1 or a check fails.
# The whole script is one block, read before it runs: a checkout or an edit
# during a long soak does not change what runs.
{
set -euo pipefail
script=$(realpath "$0")
cd "$(dirname "$script")/.."
leader_changes_max=${LEADER_CHANGES:-100}
duration=${DURATION:-3600}
seed=${SEED:-$$}
command -v jq > /dev/null || { echo "error: jq is needed" >&2; exit 1; }

if [ -z "${NEMESIS_NETNS:-}" ]; then
    if [ -z "${KLOG_BIN:-}" ]; then
        echo "% building the release binaries and the checker" >&2
        cargo build --release --locked --quiet --bins --example nemesis_check
    fi
    # Our own network namespace, where a packet rule touches nobody else.
    if [ "$(id -u)" = 0 ] && command -v nft > /dev/null && unshare -n true 2> /dev/null; then
        export NEMESIS_NETNS=1
        exec unshare -n -- bash -c 'ip link set lo up && exec bash "$0"' "$script"
    fi
    NEMESIS_NETNS=none
fi
target=${CARGO_TARGET_DIR:-$PWD/target}
bin=${KLOG_BIN:-$target/release}
check=${KLOG_CHECK:-$bin/examples/nemesis_check}
if [ -n "${FAULTS:-}" ]; then
    read -r -a faults <<< "$FAULTS"
else
    faults=(kill9 kill9 stop stop two flip rot cut)
    [ "$NEMESIS_NETNS" = 1 ] && faults+=(partition partition)
fi
for fault in "${faults[@]}"; do
    case $fault in
        kill9 | stop | two | flip | rot | cut) ;;
        partition) [ "$NEMESIS_NETNS" = 1 ] || fail "partition needs root, nft and unshare -n" ;;
        *) fail "no fault $fault (kill9 stop two flip rot cut partition)" ;;
    esac
done
RANDOM=$seed

work=$(mktemp -d)
reg=$work/reg
pids=()
ports=()
ids=()
producer=
feeder=
consumer=
cleanup() {
    local status=$?
    for pid in "${pids[@]}" $producer $feeder $consumer; do
        kill -CONT "$pid" 2> /dev/null || true
        kill -9 "$pid" 2> /dev/null || true
    done
    if [ "$status" = 0 ] && [ -z "${KEEP:-}" ]; then
        rm -rf "$work"
    else
        echo "% the soak's files are in $work" >&2
    fi
}
trap cleanup EXIT

say() { echo "% $(date +%T) $*" >&2; }
fail() { echo "error: $*" >&2; exit 1; }

# start_broker N: starts broker N on its data directory, waits until it
# listens, notes its port and id.
start_broker() {
    local n=$1
    local from
    touch "$work/broker$n.log"
    from=$(wc -l < "$work/broker$n.log")
    "$bin/klog-broker" --data-dir "$work/data$n" --listen 127.0.0.1:0 --registry "$reg" \
        --replication-factor 3 --min-insync-replicas 2 --partitions 3 --session-timeout 2s \
        --replica-lag-time 3s --segment-bytes 1MiB 2>> "$work/broker$n.log" &
    pids[n]=$!
    for _ in $(seq 300); do
        local addr
        addr=$(tail -n +$((from + 1)) "$work/broker$n.log" | sed -n 's/^% Listening on //p')
        if [ -n "$addr" ]; then
            ports[n]=${addr##*:}
            ids[n]=$(cat "$work/data$n/broker-id")
            return 0
        fi
        sleep 0.1
    done
    tail -n 20 "$work/broker$n.log" >&2
    fail "broker $n did not start"
}

kill9() {
    kill -9 "${pids[$1]}"
    wait "${pids[$1]}" 2> /dev/null || true
}

# states: one line per partition, "P LEADER EPOCH ISR-SIZE ISR,...", read
# from the registry's files (klog-dump --registry asks each leader for its
# high watermark, up to 3 s on a frozen one). A state file renamed while
# read (a change) is read at the next look.
states() {
    local p dir version
    for p in 0 1 2; do
        dir=$reg/states/t-$p
        version=$(ls "$dir" 2> /dev/null | grep -E '^[0-9]+$' | sort -n | tail -n 1) || true
        [ -n "$version" ] || continue
        jq -r --arg p "$p" '"\($p) \(.leader) \(.leader_epoch) \(.isr | length) \(.isr | join(","))"' \
            "$dir/$version" 2> /dev/null || true
    done
}

# observe: notes, in events, every partition's leader in an epoch past the
# last one noted (a leader change), and in $seen the latest states.
declare -A epoch_seen
leader_changes=0
seen=
observe() {
    local p leader epoch size isr
    seen=$(states)
    while read -r p leader epoch size isr; do
        [ -n "$p" ] && [ "$leader" != null ] || continue
        if [ -z "${epoch_seen[$p]:-}" ]; then
            epoch_seen[$p]=$epoch
        elif [ "$epoch" -gt "${epoch_seen[$p]}" ]; then
            epoch_seen[$p]=$epoch
            leader_changes=$((leader_changes + 1))
            echo "leader t-$p epoch $epoch $leader" >> "$work/events"
        fi
    done <<< "$seen"
}

slot_of() {
    local n
    for n in 0 1 2; do if [ "${ids[n]}" = "$1" ]; then echo "$n"; fi; done
}

# wait_until BOUND COMMAND...: observes and runs COMMAND every 0.2 s
# until it succeeds (status 0), BOUND seconds at most (status 1).
wait_until() {
    local deadline=$((SECONDS + $1))
    shift
    while [ "$SECONDS" -lt "$deadline" ]; do
        observe
        "$@" && return 0
        sleep 0.2
    done
    return 1
}

# wait_for WHAT BOUND COMMAND...: wait_until, or the soak fails.
wait_for() {
    local what=$1
    shift
    wait_until "$@" && return 0
    echo "$seen" >&2
    fail "$what did not happen within ${1}s"
}

# Every partition has a leader, and it runs.
all_led() {
    local p leader n count=0
    while read -r p leader _; do
        [ -n "$p" ] && [ "$leader" != null ] || return 1
        n=$(slot_of "$leader")
        [ -n "$n" ] && kill -0 "${pids[n]}" 2> /dev/null || return 1
        count=$((count + 1))
    done <<< "$seen"
    [ "$count" = 3 ]
}
full_isrs() {
    all_led || return 1
    local size
    for size in $(awk '{print $4}' <<< "$seen"); do [ "$size" = 3 ] || return 1; done
}
in_isrs() { awk -v id="$1" '{ n = split($5, isr, ","); for (i = 1; i <= n; i++) if (isr[i] == id) found = 1 }
                         END { exit !found }' <<< "$seen"; }
out_of_isrs() { ! in_isrs "$1"; }
leading() { awk -v id="$1" '$2 == id { found = 1 } END { exit !found }' <<< "$seen"; }
not_leading() { ! leading "$1"; }
# victim: sets v to the leader of a random partition, or to any broker when
# that one has none (a variable, not an echo: $RANDOM in a subshell would
# not move the parent's sequence).
victim() {
    local leader
    leader=$(awk -v p=$((RANDOM % 3)) '$1 == p {print $2}' <<< "$seen")
    v=$((RANDOM % 3))
    if [ -n "$leader" ] && [ "$leader" != null ]; then v=$(slot_of "$leader"); fi
}
pause() { sleep "$(($1 + RANDOM % ($2 - $1 + 1))).$((RANDOM % 10))"; }
event() { echo "$*" >> "$work/events"; say "$*"; }

# segments N P: the segments of t-P on broker N, oldest first.
segments() {
    find "$work/data$1/t-$2" -maxdepth 1 -name "$(printf '?%.0s' $(seq 20)).log" -size +0 2> /dev/null | sort
}

# flip_byte N KIND: XORs one byte in the middle of an active segment (KIND
# flip) or of a rolled one (rot) of broker N; status 1 when it has none.
flip_byte() {
    local files=() all p file size at old
    for p in 0 1 2; do
        mapfile -t all < <(segments "$1" "$p")
        [ "${#all[@]}" -gt 0 ] || continue
        if [ "$2" = flip ]; then
            files+=("${all[-1]}")
        else
            files+=("${all[@]:0:${#all[@]}-1}")
        fi
    done
    [ "${#files[@]}" -gt 0 ] || return 1
    file=${files[RANDOM % ${#files[@]}]}
    size=$(stat -c %s "$file")
    at=$((size / 2))
    old=$(od -An -tu1 -j "$at" -N1 "$file" | tr -d ' ')
    printf "\\x$(printf %02x $((old ^ 0xff)))" | dd of="$file" bs=1 seek="$at" conv=notrunc status=none
    event "$2 broker$1 ${file#"$work"/} at $at of $size"
}

# cut_tail N: cuts 100 to 999 bytes off the active segment of a partition
# of broker N; status 1 when it has none.
cut_tail() {
    local file size cut
    file=$(segments "$1" $((RANDOM % 3)) | tail -n 1)
    [ -n "$file" ] || return 1
    size=$(stat -c %s "$file")
    cut=$((100 + RANDOM % 900))
    [ "$cut" -le "$size" ] || cut=$size
    truncate -s "$((size - cut))" "$file"
    event "cut broker$1 ${file#"$work"/} $cut bytes of $size"
}

partition_rule() {
    nft add rule inet nemesis out tcp dport "$1" drop
    nft add rule inet nemesis out tcp sport "$1" drop
}

# nemesis FAULT: deals one fault and waits for its end (the brokers it
# stopped running again, every partition led).
nemesis() {
    local fault=$1 v w
    victim
    case $fault in
        kill9)
            event "kill9 broker$v"
            kill9 "$v"
            pause 0 1
            start_broker "$v"
            ;;
        stop)
            event "stop broker$v"
            kill -STOP "${pids[v]}"
            # Past the session timeout: until the others elected past it
            # (10 s at most: with no other in sync, nobody can).
            sleep 2
            wait_until 10 not_leading "${ids[v]}" || true
            pause 0 2
            kill -CONT "${pids[v]}"
            ;;
        two)
            w=$(((v + 1 + RANDOM % 2) % 3))
            event "two broker$v broker$w"
            kill -9 "${pids[v]}" "${pids[w]}"
            wait "${pids[v]}" "${pids[w]}" 2> /dev/null || true
            pause 0 2
            start_broker "$v"
            start_broker "$w"
            ;;
        flip | rot | cut)
            wait_for "full ISRs before $fault" 120 full_isrs
            kill9 "$v"
            if [ "$fault" != cut ]; then
                flip_byte "$v" "$fault" || event "kill9 broker$v (no segment to $fault)"
            else
                wait_for "broker$v out of every ISR" 30 out_of_isrs "${ids[v]}"
                cut_tail "$v" || event "kill9 broker$v (no segment to cut)"
            fi
            start_broker "$v"
            ;;
        partition)
            event "partition broker$v port ${ports[v]}"
            partition_rule "${ports[v]}"
            pause 4 6
            nft flush chain inet nemesis out
            ;;
    esac
    wait_for "a running leader for every partition" 120 all_led
}

[ "$NEMESIS_NETNS" = 1 ] && nft add table inet nemesis &&
    nft add chain inet nemesis out '{ type filter hook output priority 0; }'
say "work in $work, seed $seed, until $leader_changes_max leader changes or ${duration}s"
for n in 0 1 2; do start_broker "$n"; done

# A counter, 20 lines every 20 ms, into a producer that reports each ack.
mkfifo "$work/input"
read -r -a produce_flags <<< "${PRODUCE_FLAGS:-}"
"$bin/klog-produce" --registry "$reg" -t t --acks all --linger 10ms --message-timeout 120s \
    --report "$work/acks.jsonl" "${produce_flags[@]}" < "$work/input" 2> "$work/producer.log" &
producer=$!
(i=0; while :; do seq $((i + 1)) $((i + 20)); i=$((i + 20)); sleep 0.02; done) > "$work/input" &
feeder=$!
wait_for "a running leader for every partition" 60 all_led
"$bin/klog-consume" --registry "$reg" -t t -u -f '%p %o %s\n' > "$work/consumed" 2> "$work/consumer.log" &
consumer=$!
wait_for "full ISRs" 60 full_isrs
# Leader changes count from here (the first elections are not changes).
epoch_seen=()
leader_changes=0
: > "$work/events"
observe

started=$SECONDS
while [ "$leader_changes" -lt "$leader_changes_max" ] && [ $((SECONDS - started)) -lt "$duration" ]; do
    pause 1 3
    observe
    nemesis "${faults[RANDOM % ${#faults[@]}]}"
    kill -0 "$producer" 2> /dev/null || { tail -n 20 "$work/producer.log" >&2; fail "the producer died"; }
    kill -0 "$consumer" 2> /dev/null || { tail -n 20 "$work/consumer.log" >&2; fail "the consumer died"; }
    say "$leader_changes leader changes, $(wc -l < "$work/acks.jsonl") records acknowledged"
done
elapsed=$((SECONDS - started))

say "healing: the producer drains, every ISR fills, the consumer catches up"
kill "$feeder"
wait "$feeder" 2> /dev/null || true
feeder=
wait "$producer" || say "the producer exited $? (records not acknowledged are not checked)"
producer=
wait_for "full ISRs at the end" 120 full_isrs
caught_up() {
    awk 'FILENAME ~ /consumed$/ { if ($2 > seen[$1]) seen[$1] = $2; next }
         { match($0, /"partition":[0-9]+/); p = substr($0, RSTART + 12, RLENGTH - 12)
           match($0, /"offset":[0-9]+/); o = substr($0, RSTART + 9, RLENGTH - 9)
           if (o + 0 > acked[p]) acked[p] = o + 0 }
         END { for (p in acked) if (seen[p] < acked[p]) exit 1 }' "$work/consumed" "$work/acks.jsonl"
}
wait_for "the consumer at the last acknowledged offsets" 120 caught_up
kill "$consumer"
wait "$consumer" || fail "the consumer exited $?"
consumer=
for n in 0 1 2; do
    kill "${pids[n]}"
    wait "${pids[n]}" || fail "broker $n exited $? at SIGTERM"
done
pids=()

say "$leader_changes leader changes in ${elapsed}s (seed $seed); $(grep -vc '^leader' "$work/events") faults"
check_flags=()
# Idempotent by default: a value stored twice is a violation.
[[ " ${PRODUCE_FLAGS:-} " == *" --no-idempotence "* ]] && check_flags+=(--duplicates-allowed)
"$check" "${check_flags[@]}" "$work" t
exit
}
