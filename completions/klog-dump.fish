complete -c klog-dump -l registry -d 'Show a registry instead: brokers, each replicated partition\'s replicas, leader, epoch, ISR and high watermark (asked of its leader), groups, members, partition owners, committed offsets and lag. A directory or a ZooKeeper ensemble, zk://HOST:PORT[,HOST:PORT...]/CHROOT; only read: nothing is created or changed. Each broker gets 1s in all to answer (all asked at once): a silent one\'s figures are ? and a % line on stderr names it' -r -F
complete -c klog-dump -l high-watermark -d 'With --compare: the offset below which the replicas must be identical (klog-dump --registry shows each partition\'s); default: the lowest end of the replicas' -r
complete -c klog-dump -s X -d 'With --registry: how to reach the brokers, by kcat\'s security properties (security.protocol, ssl.ca.location, ssl.certificate.location, ssl.key.location, sasl.mechanisms, sasl.username, sasl.password)' -r
complete -c klog-dump -l compare -d 'Compare the replicas of one partition: each PATH is its directory on another broker (d1/t-0 d2/t-0 d3/t-0). Prints each replica\'s start, end, tail and leader epochs, and the first offset where they differ (a batch\'s bytes, or a replica ending early); exit 3 when that is below the high watermark, or a replica is damaged. Above it a difference is an uncommitted tail: a note'
complete -c klog-dump -l records -d 'One line per record instead of per batch'
complete -c klog-dump -l print-data -d 'Print keys, values and headers too (implies --records)'
complete -c klog-dump -l verify -d 'Check the indexes and the leader epoch file against the log, and every CRC; print only problems and the summary'
complete -c klog-dump -l json -d 'One JSON object per line'
complete -c klog-dump -s q -l quiet -d 'Only print errors'
complete -c klog-dump -s h -l help -d 'Print help'
complete -c klog-dump -s V -l version -d 'Print version'
