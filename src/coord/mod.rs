//! Coordination: the registry through which brokers and consumer-group
//! members find each other (the paper's broker, consumer, ownership and
//! offset registries), and Algorithm 1's partition assignment.

pub mod registry;
