//! The Kafka listener: Kafka clients' requests served over klog's logs and registry.

pub(crate) mod group;
