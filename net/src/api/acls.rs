//! CreateAcls, DescribeAcls, DeleteAcls (KIP-140): the ACLs of the metastore
//! (`MetaState::acls`), what `kafka-acls` manages. Each is allowed by ALTER (create, delete) or
//! DESCRIBE (describe) on the cluster (`api::authz`). A broker without an authorizer
//! (`--authorizer none`) answers each with SECURITY_DISABLED, as Kafka without one.

use std::collections::BTreeMap;
use std::rc::Rc;

use kafka_protocol::messages::create_acls_response::AclCreationResult;
use kafka_protocol::messages::delete_acls_response::{
    DeleteAclsFilterResult, DeleteAclsMatchingAcl,
};
use kafka_protocol::messages::describe_acls_response::{AclDescription, DescribeAclsResource};
use kafka_protocol::messages::{
    CreateAclsRequest, CreateAclsResponse, DeleteAclsRequest, DeleteAclsResponse,
    DescribeAclsRequest, DescribeAclsResponse,
};
use kafka_protocol::protocol::StrBytes;
use meta::{AclBinding, Command};

use super::str_bytes;
use crate::acl::{self, Filter};
use crate::core::CoreState;

/// `Some((SECURITY_DISABLED, Kafka's message))` when the broker runs without an authorizer.
fn disabled(state: &CoreState) -> Option<(i16, StrBytes)> {
    (state.ctx.config.acl.authorizer == acl::Authorizer::None).then(|| {
        (
            acl::SECURITY_DISABLED,
            str_bytes(acl::NO_AUTHORIZER_MESSAGE),
        )
    })
}

pub async fn create(state: &Rc<CoreState>, req: CreateAclsRequest) -> CreateAclsResponse {
    if let Some((code, msg)) = disabled(state) {
        let refused = AclCreationResult::default()
            .with_error_code(code)
            .with_error_message(Some(msg));
        return CreateAclsResponse::default().with_results(vec![refused; req.creations.len()]);
    }
    let checked: Vec<Result<AclBinding, (i16, String)>> = req
        .creations
        .iter()
        .map(|c| {
            acl::binding_of(
                c.resource_type,
                &c.resource_name,
                c.resource_pattern_type,
                &c.principal,
                &c.host,
                c.operation,
                c.permission_type,
            )
        })
        .collect();
    let valid: Vec<AclBinding> = checked
        .iter()
        .filter_map(|r| r.as_ref().ok().cloned())
        .collect();
    let written = if valid.is_empty() {
        Ok(())
    } else {
        super::admin::write(
            state,
            Command::CreateAcls {
                bindings: Box::new(valid),
            },
        )
        .await
    };
    let results = checked
        .into_iter()
        .map(|r| match (r, &written) {
            (Ok(b), Ok(())) => {
                tracing::info!(acl = ?b, "ACL created");
                AclCreationResult::default()
            }
            (Ok(_), Err((code, msg))) => AclCreationResult::default()
                .with_error_code(*code)
                .with_error_message(Some(str_bytes(msg.clone()))),
            (Err((code, msg)), _) => AclCreationResult::default()
                .with_error_code(code)
                .with_error_message(Some(str_bytes(msg))),
        })
        .collect();
    CreateAclsResponse::default().with_results(results)
}

fn filter(
    resource_type: i8,
    resource_name: Option<&str>,
    pattern_type: i8,
    principal: Option<&str>,
    host: Option<&str>,
    operation: i8,
    permission: i8,
) -> Filter {
    Filter {
        resource_type,
        resource_name: resource_name.map(str::to_string),
        pattern_type,
        principal: principal.map(str::to_string),
        host: host.map(str::to_string),
        operation,
        permission,
    }
}

pub fn describe(state: &CoreState, req: DescribeAclsRequest) -> DescribeAclsResponse {
    if let Some((code, msg)) = disabled(state) {
        return DescribeAclsResponse::default()
            .with_error_code(code)
            .with_error_message(Some(msg));
    }
    let f = filter(
        req.resource_type_filter,
        req.resource_name_filter.as_deref(),
        req.pattern_type_filter,
        req.principal_filter.as_deref(),
        req.host_filter.as_deref(),
        req.operation,
        req.permission_type,
    );
    let m = state.meta.borrow();
    let mut by_resource: BTreeMap<(i8, String, i8), Vec<AclDescription>> = BTreeMap::new();
    for b in m.acls.iter().filter(|b| f.matches(b)) {
        by_resource
            .entry((b.resource_type, b.resource_name.clone(), b.pattern_type))
            .or_default()
            .push(
                AclDescription::default()
                    .with_principal(str_bytes(b.principal.clone()))
                    .with_host(str_bytes(b.host.clone()))
                    .with_operation(b.operation)
                    .with_permission_type(b.permission),
            );
    }
    let resources = by_resource
        .into_iter()
        .map(|((rt, name, pt), acls)| {
            DescribeAclsResource::default()
                .with_resource_type(rt)
                .with_resource_name(str_bytes(name))
                .with_pattern_type(pt)
                .with_acls(acls)
        })
        .collect();
    DescribeAclsResponse::default().with_resources(resources)
}

pub async fn delete(state: &Rc<CoreState>, req: DeleteAclsRequest) -> DeleteAclsResponse {
    if let Some((code, msg)) = disabled(state) {
        let refused = DeleteAclsFilterResult::default()
            .with_error_code(code)
            .with_error_message(Some(msg));
        return DeleteAclsResponse::default().with_filter_results(vec![refused; req.filters.len()]);
    }
    let matched: Vec<Vec<AclBinding>> = {
        let m = state.meta.borrow();
        req.filters
            .iter()
            .map(|x| {
                let f = filter(
                    x.resource_type_filter,
                    x.resource_name_filter.as_deref(),
                    x.pattern_type_filter,
                    x.principal_filter.as_deref(),
                    x.host_filter.as_deref(),
                    x.operation,
                    x.permission_type,
                );
                m.acls.iter().filter(|b| f.matches(b)).cloned().collect()
            })
            .collect()
    };
    let mut all: Vec<AclBinding> = matched.iter().flatten().cloned().collect();
    all.sort();
    all.dedup();
    let written = if all.is_empty() {
        Ok(())
    } else {
        super::admin::write(
            state,
            Command::DeleteAcls {
                bindings: Box::new(all),
            },
        )
        .await
    };
    let results = matched
        .into_iter()
        .map(|bindings| match &written {
            Err((code, msg)) => DeleteAclsFilterResult::default()
                .with_error_code(*code)
                .with_error_message(Some(str_bytes(msg.clone()))),
            Ok(()) => DeleteAclsFilterResult::default().with_matching_acls(
                bindings
                    .into_iter()
                    .map(|b| {
                        tracing::info!(acl = ?b, "ACL deleted");
                        DeleteAclsMatchingAcl::default()
                            .with_resource_type(b.resource_type)
                            .with_resource_name(str_bytes(b.resource_name))
                            .with_pattern_type(b.pattern_type)
                            .with_principal(str_bytes(b.principal))
                            .with_host(str_bytes(b.host))
                            .with_operation(b.operation)
                            .with_permission_type(b.permission)
                    })
                    .collect(),
            ),
        })
        .collect();
    DeleteAclsResponse::default().with_filter_results(results)
}
