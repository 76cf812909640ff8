#!/usr/bin/env bash
# The one-command quickstart: build the tools, append lines to a local log
# (embedded mode, no broker), read them back, then dump and verify the log.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --locked --quiet
bin=target/release
data=$(mktemp -d)
trap 'rm -rf "$data"' EXIT

seq 1 100000 | "$bin/klog-produce" --data-dir "$data" -t quickstart
"$bin/klog-consume" --data-dir "$data" -t quickstart -e -q | tail -n 3
"$bin/klog-consume" --data-dir "$data" -t quickstart -o -2 -e -q -f 'offset %o: %s\n'
"$bin/klog-dump" --verify "$data"
echo "% verified: the log in $data holds 100000 records"
