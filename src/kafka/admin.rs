//! The admin APIs for ACLs and SCRAM users, as Kafka's `AdminClient`
//! (confluent-kafka's, kafka-acls, kafka-configs) sends them, each declared
//! once (`message!`, [`super::message`]) from its schema.
//!
//! | API | key | versions | flexible from |
//! |---|---:|---|---:|
//! | DescribeAcls | 29 | 0–3 | 2 |
//! | CreateAcls | 30 | 0–3 | 2 |
//! | DeleteAcls | 31 | 0–3 | 2 |
//! | DescribeUserScramCredentials | 50 | 0 | 0 |
//! | AlterUserScramCredentials | 51 | 0 | 0 |
//!
//! Their numbers, as Kafka's `AclOperation`, `AclPermissionType`,
//! `ResourceType`, `PatternType` and `ScramMechanism` define them, are the
//! constants of [`code`].

use super::api_key::*;
use super::message::{message, messages};

/// The enumerations' numbers on the wire.
pub mod code {
    /// Any (a filter's wildcard) of every enumeration.
    pub const ANY: i8 = 1;
    /// ResourceType TOPIC.
    pub const TOPIC: i8 = 2;
    /// ResourceType GROUP.
    pub const GROUP: i8 = 3;
    /// ResourceType CLUSTER.
    pub const CLUSTER: i8 = 4;
    /// ResourceType TRANSACTIONAL_ID.
    pub const TRANSACTIONAL_ID: i8 = 5;
    /// PatternType MATCH (a filter: literal, `*` or prefixed, that match).
    pub const MATCH: i8 = 2;
    /// PatternType LITERAL.
    pub const LITERAL: i8 = 3;
    /// PatternType PREFIXED.
    pub const PREFIXED: i8 = 4;
    /// AclOperation ALL.
    pub const ALL: i8 = 2;
    /// AclOperation READ.
    pub const READ: i8 = 3;
    /// AclOperation WRITE.
    pub const WRITE: i8 = 4;
    /// AclOperation CREATE.
    pub const CREATE: i8 = 5;
    /// AclOperation DELETE.
    pub const DELETE: i8 = 6;
    /// AclOperation ALTER.
    pub const ALTER: i8 = 7;
    /// AclOperation DESCRIBE.
    pub const DESCRIBE: i8 = 8;
    /// AclOperation CLUSTER_ACTION.
    pub const CLUSTER_ACTION: i8 = 9;
    /// AclPermissionType DENY.
    pub const DENY: i8 = 2;
    /// AclPermissionType ALLOW.
    pub const ALLOW: i8 = 3;
    /// ScramMechanism SCRAM-SHA-256.
    pub const SCRAM_SHA_256: i8 = 1;
    /// ScramMechanism SCRAM-SHA-512.
    pub const SCRAM_SHA_512: i8 = 2;
}

message! {
    /// An ACL filter (DescribeAcls' request, DeleteAcls' filters): each
    /// field matches what it names, or anything when null or ANY.
    pub struct AclFilter<'a> {
        /// The resource type.
        resource_type: i8 [0],
        /// The resource name, or null for any.
        resource_name: Option<&'a str> [0],
        /// The pattern type (MATCH, ANY, LITERAL or PREFIXED).
        pattern_type: i8 [1] = code::LITERAL,
        /// The principal, or null for any.
        principal: Option<&'a str> [0],
        /// The host, or null for any.
        host: Option<&'a str> [0],
        /// The operation.
        operation: i8 [0],
        /// The permission type.
        permission_type: i8 [0],
    }
}

message! {
    /// An ACL of a resource, as DescribeAcls answers it.
    pub struct AclDescription {
        /// The principal.
        principal: String [0],
        /// The host.
        host: String [0],
        /// The operation.
        operation: i8 [0],
        /// The permission type.
        permission_type: i8 [0],
    }
}

message! {
    /// A resource and its ACLs.
    pub struct DescribeAclsResource {
        /// The resource type.
        resource_type: i8 [0],
        /// The resource name.
        resource_name: String [0],
        /// The pattern type.
        pattern_type: i8 [1] = code::LITERAL,
        /// Its ACLs.
        acls: Vec<AclDescription> [0],
    }
}

message! {
    /// DescribeAcls' response (`DescribeAclsResponse.json`).
    pub struct DescribeAclsResponse {
        /// Throttling, always 0.
        throttle_time_ms: i32 [0],
        /// The error code, or 0.
        error_code: i16 [0],
        /// The error message, or null.
        error_message: Option<String> [0],
        /// The resources and their ACLs that match.
        resources: Vec<DescribeAclsResource> [0],
    }
}

message! {
    /// An ACL to create.
    pub struct AclCreation<'a> {
        /// The resource type.
        resource_type: i8 [0],
        /// The resource name.
        resource_name: &'a str [0],
        /// The pattern type (LITERAL or PREFIXED).
        resource_pattern_type: i8 [1] = code::LITERAL,
        /// The principal.
        principal: &'a str [0],
        /// The host.
        host: &'a str [0],
        /// The operation.
        operation: i8 [0],
        /// The permission type.
        permission_type: i8 [0],
    }
}

message! {
    /// CreateAcls' request (`CreateAclsRequest.json`).
    pub struct CreateAclsRequest<'a> {
        /// The ACLs to create.
        creations: Vec<AclCreation<'a>> [0],
    }
}

message! {
    /// One creation's result.
    pub struct AclCreationResult {
        /// The error code, or 0.
        error_code: i16 [0],
        /// The error message, or null.
        error_message: Option<String> [0],
    }
}

message! {
    /// CreateAcls' response (`CreateAclsResponse.json`).
    pub struct CreateAclsResponse {
        /// Throttling, always 0.
        throttle_time_ms: i32 [0],
        /// A result for each creation, in order.
        results: Vec<AclCreationResult> [0],
    }
}

message! {
    /// DeleteAcls' request (`DeleteAclsRequest.json`).
    pub struct DeleteAclsRequest<'a> {
        /// The filters; each deletes the ACLs it matches.
        filters: Vec<AclFilter<'a>> [0],
    }
}

message! {
    /// An ACL a filter matched, and whether it was deleted.
    pub struct DeleteAclsMatchingAcl {
        /// The error code, or 0.
        error_code: i16 [0],
        /// The error message, or null.
        error_message: Option<String> [0],
        /// The resource type.
        resource_type: i8 [0],
        /// The resource name.
        resource_name: String [0],
        /// The pattern type.
        pattern_type: i8 [1] = code::LITERAL,
        /// The principal.
        principal: String [0],
        /// The host.
        host: String [0],
        /// The operation.
        operation: i8 [0],
        /// The permission type.
        permission_type: i8 [0],
    }
}

message! {
    /// One filter's result.
    pub struct DeleteAclsFilterResult {
        /// The error code, or 0.
        error_code: i16 [0],
        /// The error message, or null.
        error_message: Option<String> [0],
        /// The ACLs it matched.
        matching_acls: Vec<DeleteAclsMatchingAcl> [0],
    }
}

message! {
    /// DeleteAcls' response (`DeleteAclsResponse.json`).
    pub struct DeleteAclsResponse {
        /// Throttling, always 0.
        throttle_time_ms: i32 [0],
        /// A result for each filter, in order.
        filter_results: Vec<DeleteAclsFilterResult> [0],
    }
}

message! {
    /// A user named in DescribeUserScramCredentials' request.
    pub struct UserName<'a> {
        /// The user's name.
        name: &'a str [0],
    }
}

message! {
    /// DescribeUserScramCredentials' request.
    pub struct DescribeUserScramCredentialsRequest<'a> {
        /// The users, or null for every user.
        users: Option<Vec<UserName<'a>>> [0],
    }
}

message! {
    /// A mechanism a user has a credential for.
    pub struct CredentialInfo {
        /// The mechanism ([`code::SCRAM_SHA_256`] or [`code::SCRAM_SHA_512`]).
        mechanism: i8 [0],
        /// Its iteration count.
        iterations: i32 [0],
    }
}

message! {
    /// A user's credentials.
    pub struct DescribeUserScramCredentialsResult {
        /// The user's name.
        user: String [0],
        /// The error code (RESOURCE_NOT_FOUND for no such user), or 0.
        error_code: i16 [0],
        /// The error message, or null.
        error_message: Option<String> [0],
        /// The user's mechanisms.
        credential_infos: Vec<CredentialInfo> [0],
    }
}

message! {
    /// DescribeUserScramCredentials' response.
    pub struct DescribeUserScramCredentialsResponse {
        /// Throttling, always 0.
        throttle_time_ms: i32 [0],
        /// The error for the whole request, or 0.
        error_code: i16 [0],
        /// The error message, or null.
        error_message: Option<String> [0],
        /// One result per user.
        results: Vec<DescribeUserScramCredentialsResult> [0],
    }
}

message! {
    /// A credential to delete.
    pub struct ScramCredentialDeletion<'a> {
        /// The user's name.
        name: &'a str [0],
        /// The mechanism.
        mechanism: i8 [0],
    }
}

message! {
    /// A credential to set: the client salted the password itself.
    pub struct ScramCredentialUpsertion<'a> {
        /// The user's name.
        name: &'a str [0],
        /// The mechanism.
        mechanism: i8 [0],
        /// PBKDF2's iteration count.
        iterations: i32 [0],
        /// The salt.
        salt: &'a [u8] [0],
        /// SaltedPassword: PBKDF2 of the password with the salt.
        salted_password: &'a [u8] [0],
    }
}

message! {
    /// AlterUserScramCredentials' request.
    pub struct AlterUserScramCredentialsRequest<'a> {
        /// The credentials to delete.
        deletions: Vec<ScramCredentialDeletion<'a>> [0],
        /// The credentials to set.
        upsertions: Vec<ScramCredentialUpsertion<'a>> [0],
    }
}

message! {
    /// A user's result.
    pub struct AlterUserScramCredentialsResult {
        /// The user's name.
        user: String [0],
        /// The error code, or 0.
        error_code: i16 [0],
        /// The error message, or null.
        error_message: Option<String> [0],
    }
}

message! {
    /// AlterUserScramCredentials' response.
    pub struct AlterUserScramCredentialsResponse {
        /// Throttling, always 0.
        throttle_time_ms: i32 [0],
        /// One result per user.
        results: Vec<AlterUserScramCredentialsResult> [0],
    }
}

messages! {
    AclFilter<'a> = DESCRIBE_ACLS, 2;
    DescribeAclsResponse = DESCRIBE_ACLS, 2;
    CreateAclsRequest<'a> = CREATE_ACLS, 2;
    CreateAclsResponse = CREATE_ACLS, 2;
    DeleteAclsRequest<'a> = DELETE_ACLS, 2;
    DeleteAclsResponse = DELETE_ACLS, 2;
    DescribeUserScramCredentialsRequest<'a> = DESCRIBE_USER_SCRAM_CREDENTIALS, 0;
    DescribeUserScramCredentialsResponse = DESCRIBE_USER_SCRAM_CREDENTIALS, 0;
    AlterUserScramCredentialsRequest<'a> = ALTER_USER_SCRAM_CREDENTIALS, 0;
    AlterUserScramCredentialsResponse = ALTER_USER_SCRAM_CREDENTIALS, 0;
}
