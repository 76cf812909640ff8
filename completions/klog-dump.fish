complete -c klog-dump -l registry -d 'Show a registry instead: brokers, groups, members, partition owners, committed offsets and lag. A directory or a ZooKeeper ensemble, zk://HOST:PORT[,HOST:PORT...]/CHROOT; only read: nothing is created or changed' -r -F
complete -c klog-dump -l records -d 'One line per record instead of per batch'
complete -c klog-dump -l print-data -d 'Print keys, values and headers too (implies --records)'
complete -c klog-dump -l verify -d 'Check the indexes and the leader epoch file against the log, and every CRC; print only problems and the summary'
complete -c klog-dump -l json -d 'One JSON object per line'
complete -c klog-dump -s q -l quiet -d 'Only print errors'
complete -c klog-dump -s h -l help -d 'Print help'
complete -c klog-dump -s V -l version -d 'Print version'
