//! Kafka's ACL admin APIs (DescribeAcls, CreateAcls, DeleteAcls) on the
//! registry's ACLs ([`crate::coord::acl`]), the same ones `klog-broker acl`
//! manages: what confluent-kafka's `AdminClient.create_acls` adds, `klog-broker
//! acl list` shows, and the other way round.
//!
//! As in Kafka, they need an authorizer: without `--authorize` each answers
//! SECURITY_DISABLED, so that a broker that checks nothing cannot be used to
//! change the ACLs the others check. Describing needs describe on the
//! cluster, creating and deleting alter on it (CLUSTER_AUTHORIZATION_FAILED).
//!
//! klog's ACLs hold for every host (`*`), and know the resource types topic,
//! group, cluster and transactional id and the operations all, read, write,
//! create, describe, alter and cluster_action: a creation of anything else is refused with
//! INVALID_REQUEST and words that say what klog takes; a filter for it
//! matches nothing.

use super::access::Access;
use crate::coord::acl::{self, Operation, Pattern, PatternType, Permission, ResourceType, Rule};
use crate::coord::Registry;
use crate::kafka::admin::{self as msg, code};
use crate::kafka::{self, CLUSTER_AUTHORIZATION_FAILED, INVALID_REQUEST, NONE, SECURITY_DISABLED};

/// Why an admin request is not carried out: a Kafka code and words.
pub(super) type Refusal = (i16, String);

/// The refusal of the whole request, if any: no authorizer or registry,
/// or the client may not do `operation` on the cluster.
pub(super) fn refusal(access: &Access<'_>, operation: Operation) -> Option<Refusal> {
    if !access.authorizes() {
        return Some((
            SECURITY_DISABLED,
            "this broker runs without --authorize: no ACLs count here".into(),
        ));
    }
    if access.registry().is_none() {
        return Some((
            SECURITY_DISABLED,
            "this broker runs without --registry, where ACLs live".into(),
        ));
    }
    (!access.allows(operation, ResourceType::Cluster, acl::CLUSTER)).then(|| {
        (
            CLUSTER_AUTHORIZATION_FAILED,
            format!("{operation} on the cluster is not allowed"),
        )
    })
}

/// DescribeAcls: the ACLs that match the filter, by resource pattern.
pub(super) fn describe(
    access: &Access<'_>,
    filter: &msg::AclFilter<'_>,
) -> msg::DescribeAclsResponse {
    let mut response = msg::DescribeAclsResponse {
        throttle_time_ms: 0,
        error_code: NONE,
        error_message: None,
        resources: Vec::new(),
    };
    let found = refusal(access, Operation::Describe).map_or_else(|| matching(access, filter), Err);
    match found {
        Ok(found) => {
            for (pattern, rules) in found {
                response.resources.push(msg::DescribeAclsResource {
                    resource_type: resource_code(pattern.resource),
                    resource_name: pattern.name.clone(),
                    pattern_type: pattern_code(pattern.pattern),
                    acls: rules.iter().map(description).collect(),
                });
            }
        }
        Err((code, message)) => {
            response.error_code = code;
            response.error_message = Some(message);
        }
    }
    response
}

/// CreateAcls: each creation added, or refused with its reason.
pub(super) fn create(
    access: &Access<'_>,
    request: &msg::CreateAclsRequest<'_>,
) -> msg::CreateAclsResponse {
    let denied = refusal(access, Operation::Alter);
    let results = request
        .creations
        .iter()
        .map(|c| {
            let done = match (&denied, access.registry()) {
                (Some(refused), _) => Err(refused.clone()),
                (None, Some(registry)) => add(registry, c),
                (None, None) => Err((SECURITY_DISABLED, "no registry".into())),
            };
            let (error_code, error_message) = match done {
                Ok(()) => (NONE, None),
                Err((code, message)) => (code, Some(message)),
            };
            msg::AclCreationResult {
                error_code,
                error_message,
            }
        })
        .collect();
    msg::CreateAclsResponse {
        throttle_time_ms: 0,
        results,
    }
}

fn add(registry: &dyn Registry, c: &msg::AclCreation<'_>) -> Result<(), Refusal> {
    let invalid = |m: String| (INVALID_REQUEST, m);
    let resource = resource_of(c.resource_type).ok_or_else(|| {
        invalid(
            "klog's ACLs are of topics, groups, the cluster and transactional ids \
             (resource types 2, 3, 4, 5)"
                .into(),
        )
    })?;
    let pattern = match c.resource_pattern_type {
        code::LITERAL => PatternType::Literal,
        code::PREFIXED => PatternType::Prefixed,
        other => {
            return Err(invalid(format!(
                "an ACL's pattern is literal or prefixed, not {other}"
            )))
        }
    };
    if c.host != "*" {
        return Err(invalid(format!(
            "klog's ACLs hold for every host: give host *, not {:?}",
            c.host
        )));
    }
    acl::check_principal(c.principal).map_err(invalid)?;
    let operation = operation_of(c.operation).ok_or_else(|| {
        invalid(format!(
            "klog does not check operation {}: ACLs are of all, read, write, create, describe, alter or cluster_action",
            c.operation
        ))
    })?;
    let permission = permission_of(c.permission_type).ok_or_else(|| {
        invalid(format!(
            "a permission is allow or deny, not {}",
            c.permission_type
        ))
    })?;
    let pattern = Pattern {
        resource,
        name: c.resource_name.to_string(),
        pattern,
    };
    let rule = Rule {
        principal: c.principal.to_string(),
        operation,
        permission,
    };
    acl::add(registry, &pattern, rule).map_err(|e| refused_by_registry(&e))
}

/// DeleteAcls: each filter's matching ACLs, removed.
pub(super) fn delete(
    access: &Access<'_>,
    request: &msg::DeleteAclsRequest<'_>,
) -> msg::DeleteAclsResponse {
    let denied = refusal(access, Operation::Alter);
    let filter_results = request
        .filters
        .iter()
        .map(|filter| {
            let found = match &denied {
                Some(refused) => Err(refused.clone()),
                None => matching(access, filter),
            };
            match found {
                Ok(found) => remove_all(access, found),
                Err((code, message)) => msg::DeleteAclsFilterResult {
                    error_code: code,
                    error_message: Some(message),
                    matching_acls: Vec::new(),
                },
            }
        })
        .collect();
    msg::DeleteAclsResponse {
        throttle_time_ms: 0,
        filter_results,
    }
}

fn remove_all(
    access: &Access<'_>,
    found: Vec<(Pattern, Vec<Rule>)>,
) -> msg::DeleteAclsFilterResult {
    let mut matching_acls = Vec::new();
    for (pattern, rules) in found {
        for rule in rules {
            let removed = match access.registry() {
                Some(registry) => acl::remove(registry, &pattern, &rule)
                    .map_err(|e| refused_by_registry(&e))
                    .map(|_| ()),
                None => Err((SECURITY_DISABLED, "no registry".into())),
            };
            let (error_code, error_message) = match removed {
                Ok(()) => (NONE, None),
                Err((code, message)) => (code, Some(message)),
            };
            let d = description(&rule);
            matching_acls.push(msg::DeleteAclsMatchingAcl {
                error_code,
                error_message,
                resource_type: resource_code(pattern.resource),
                resource_name: pattern.name.clone(),
                pattern_type: pattern_code(pattern.pattern),
                principal: d.principal,
                host: d.host,
                operation: d.operation,
                permission_type: d.permission_type,
            });
        }
    }
    msg::DeleteAclsFilterResult {
        error_code: NONE,
        error_message: None,
        matching_acls,
    }
}

/// The registry's ACLs (read now, not the cache: a describe right after a
/// create sees it) that match `filter`, each pattern with its matching
/// rules; a filter Kafka calls invalid is INVALID_REQUEST.
fn matching(
    access: &Access<'_>,
    filter: &msg::AclFilter<'_>,
) -> Result<Vec<(Pattern, Vec<Rule>)>, Refusal> {
    valid_filter(filter)?;
    let registry = access
        .registry()
        .ok_or_else(|| (SECURITY_DISABLED, "no registry".to_string()))?;
    let acls = acl::load(registry).map_err(|e| refused_by_registry(&e))?;
    Ok(acls
        .into_iter()
        .filter(|a| pattern_matches(filter, &a.pattern))
        .filter_map(|a| {
            let rules: Vec<Rule> = a
                .rules
                .into_iter()
                .filter(|r| rule_matches(filter, r))
                .collect();
            (!rules.is_empty()).then_some((a.pattern, rules))
        })
        .collect())
}

/// Kafka refuses a filter with an UNKNOWN (0) field.
fn valid_filter(f: &msg::AclFilter<'_>) -> Result<(), Refusal> {
    let fields = [
        ("resource type", f.resource_type),
        ("pattern type", f.pattern_type),
        ("operation", f.operation),
        ("permission type", f.permission_type),
    ];
    match fields.iter().find(|(_, v)| *v <= 0) {
        Some((what, v)) => Err((INVALID_REQUEST, format!("a filter's {what} cannot be {v}"))),
        None => Ok(()),
    }
}

fn pattern_matches(f: &msg::AclFilter<'_>, p: &Pattern) -> bool {
    if f.resource_type != code::ANY && resource_of(f.resource_type) != Some(p.resource) {
        return false;
    }
    let Some(name) = f.resource_name else {
        return f.pattern_type == code::ANY
            || f.pattern_type == code::MATCH
            || f.pattern_type == pattern_code(p.pattern);
    };
    match f.pattern_type {
        code::ANY => p.name == name,
        code::MATCH => p.matches(p.resource, name),
        other => other == pattern_code(p.pattern) && p.name == name,
    }
}

fn rule_matches(f: &msg::AclFilter<'_>, r: &Rule) -> bool {
    f.principal.is_none_or(|p| p == r.principal)
        && f.host.is_none_or(|h| h == "*")
        && (f.operation == code::ANY || f.operation == operation_code(r.operation))
        && (f.permission_type == code::ANY || f.permission_type == permission_code(r.permission))
}

fn description(r: &Rule) -> msg::AclDescription {
    msg::AclDescription {
        principal: r.principal.clone(),
        host: "*".into(),
        operation: operation_code(r.operation),
        permission_type: permission_code(r.permission),
    }
}

/// A registry that cannot be read or written: Kafka's UNKNOWN_SERVER_ERROR
/// with the registry's words; a name the registry refuses, INVALID_REQUEST.
fn refused_by_registry(e: &crate::error::Error) -> Refusal {
    match e {
        crate::error::Error::Config(m) => (INVALID_REQUEST, m.clone()),
        other => (kafka::UNKNOWN_SERVER_ERROR, other.to_string()),
    }
}

const RESOURCES: [(ResourceType, i8); 4] = [
    (ResourceType::Topic, code::TOPIC),
    (ResourceType::Group, code::GROUP),
    (ResourceType::Cluster, code::CLUSTER),
    (ResourceType::TransactionalId, code::TRANSACTIONAL_ID),
];

const OPERATIONS: [(Operation, i8); 8] = [
    (Operation::All, code::ALL),
    (Operation::Read, code::READ),
    (Operation::Write, code::WRITE),
    (Operation::Create, code::CREATE),
    (Operation::Alter, code::ALTER),
    (Operation::Delete, code::DELETE),
    (Operation::Describe, code::DESCRIBE),
    (Operation::ClusterAction, code::CLUSTER_ACTION),
];

fn resource_of(c: i8) -> Option<ResourceType> {
    RESOURCES.iter().find(|(_, k)| *k == c).map(|(r, _)| *r)
}

fn resource_code(r: ResourceType) -> i8 {
    RESOURCES
        .iter()
        .find(|(k, _)| *k == r)
        .map_or(0, |(_, c)| *c)
}

fn operation_of(c: i8) -> Option<Operation> {
    OPERATIONS.iter().find(|(_, k)| *k == c).map(|(o, _)| *o)
}

fn operation_code(o: Operation) -> i8 {
    OPERATIONS
        .iter()
        .find(|(k, _)| *k == o)
        .map_or(0, |(_, c)| *c)
}

fn pattern_code(p: PatternType) -> i8 {
    match p {
        PatternType::Literal => code::LITERAL,
        PatternType::Prefixed => code::PREFIXED,
    }
}

fn permission_of(c: i8) -> Option<Permission> {
    match c {
        code::ALLOW => Some(Permission::Allow),
        code::DENY => Some(Permission::Deny),
        _ => None,
    }
}

fn permission_code(p: Permission) -> i8 {
    match p {
        Permission::Allow => code::ALLOW,
        Permission::Deny => code::DENY,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn filter(
        resource_type: i8,
        resource_name: Option<&str>,
        pattern_type: i8,
    ) -> msg::AclFilter<'_> {
        msg::AclFilter {
            resource_type,
            resource_name,
            pattern_type,
            principal: None,
            host: None,
            operation: code::ANY,
            permission_type: code::ANY,
        }
    }

    fn pattern(resource: ResourceType, name: &str, pattern: PatternType) -> Pattern {
        Pattern {
            resource,
            name: name.into(),
            pattern,
        }
    }

    #[test]
    fn filters_match_as_kafkas_do() {
        use PatternType::{Literal, Prefixed};
        use ResourceType::{Group, Topic};
        let orders = pattern(Topic, "orders", Literal);
        let every = pattern(Topic, "*", Literal);
        let ord = pattern(Topic, "ord", Prefixed);
        let group = pattern(Group, "orders", Literal);
        let all = [&orders, &every, &ord, &group];
        let hits = |f: &msg::AclFilter<'_>| -> Vec<String> {
            all.iter()
                .filter(|p| pattern_matches(f, p))
                .map(|p| p.to_string())
                .collect()
        };
        // MATCH: what would count for topic orders.
        let f = filter(code::TOPIC, Some("orders"), code::MATCH);
        assert_eq!(
            hits(&f),
            ["topic orders", "topic *", "topic ord (prefixed)"]
        );
        // ANY with a name: that name, either pattern type.
        let f = filter(code::ANY, Some("orders"), code::ANY);
        assert_eq!(hits(&f), ["topic orders", "group orders"]);
        // A pattern type and a name: exactly that pattern.
        let f = filter(code::TOPIC, Some("ord"), code::PREFIXED);
        assert_eq!(hits(&f), ["topic ord (prefixed)"]);
        let f = filter(code::TOPIC, Some("ord"), code::LITERAL);
        assert!(hits(&f).is_empty());
        // No name: every pattern of that type.
        let f = filter(code::TOPIC, None, code::LITERAL);
        assert_eq!(hits(&f), ["topic orders", "topic *"]);
        // A resource type klog has no ACLs of matches nothing.
        let f = filter(5, None, code::ANY);
        assert!(hits(&f).is_empty());
    }

    #[test]
    fn rules_match_by_principal_host_operation_and_permission() {
        let rule = Rule {
            principal: "User:alice".into(),
            operation: Operation::Write,
            permission: Permission::Allow,
        };
        let any = filter(code::ANY, None, code::ANY);
        assert!(rule_matches(&any, &rule));
        for (f, hit) in [
            (
                msg::AclFilter {
                    principal: Some("User:bob"),
                    ..any.clone()
                },
                false,
            ),
            (
                msg::AclFilter {
                    principal: Some("User:alice"),
                    ..any.clone()
                },
                true,
            ),
            (
                msg::AclFilter {
                    host: Some("10.0.0.1"),
                    ..any.clone()
                },
                false,
            ),
            (
                msg::AclFilter {
                    host: Some("*"),
                    ..any.clone()
                },
                true,
            ),
            (
                msg::AclFilter {
                    operation: code::READ,
                    ..any.clone()
                },
                false,
            ),
            (
                msg::AclFilter {
                    operation: code::WRITE,
                    ..any.clone()
                },
                true,
            ),
            (
                msg::AclFilter {
                    permission_type: code::DENY,
                    ..any.clone()
                },
                false,
            ),
            (
                msg::AclFilter {
                    permission_type: code::ALLOW,
                    ..any.clone()
                },
                true,
            ),
        ] {
            assert_eq!(rule_matches(&f, &rule), hit, "{f:?}");
        }
        assert!(valid_filter(&any).is_ok());
        for bad in [
            msg::AclFilter {
                resource_type: 0,
                ..any.clone()
            },
            msg::AclFilter {
                operation: 0,
                ..any.clone()
            },
            msg::AclFilter {
                permission_type: -3,
                ..any.clone()
            },
        ] {
            assert_eq!(valid_filter(&bad).unwrap_err().0, INVALID_REQUEST);
        }
    }

    #[test]
    fn every_operation_and_resource_has_its_kafka_number_both_ways() {
        for (o, c) in OPERATIONS {
            assert_eq!((operation_of(c), operation_code(o)), (Some(o), c));
        }
        for (r, c) in RESOURCES {
            assert_eq!((resource_of(c), resource_code(r)), (Some(r), c));
        }
        assert_eq!(operation_of(1), None, "ANY names no operation");
        assert_eq!(permission_of(code::DENY), Some(Permission::Deny));
        assert_eq!(permission_code(Permission::Allow), code::ALLOW);
    }
}
