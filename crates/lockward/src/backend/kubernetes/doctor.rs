//! Kubernetes: the API server's version, whether lockward's identity may
//! use Leases and ConfigMaps (a `SelfSubjectAccessReview` per verb), and
//! the clock offset from the server's `Date` header.

use std::time::Instant;

use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec,
};
use kube::api::PostParams;
use kube::Api;

use super::url::KubernetesUrl;
use super::KubernetesBackend;
use crate::finding::{local_ms, Finding, Level};

/// What lockward does on each resource: taking, renewing and releasing
/// Leases (get, create, update), waiting (watch), `status` (list); the
/// same on ConfigMaps for records, which expire by deletion.
pub const NEEDED: &[(&str, &str, &[&str])] = &[
    (
        "coordination.k8s.io",
        "leases",
        &["get", "list", "watch", "create", "update"],
    ),
    (
        "",
        "configmaps",
        &["get", "list", "create", "update", "delete"],
    ),
];

pub(crate) async fn check(url: &KubernetesUrl) -> Vec<Finding> {
    let backend = match KubernetesBackend::connect(url).await {
        Ok(b) => b,
        Err(e) => return vec![Finding::new(Level::Error, "API server", e.to_string())],
    };
    let mut out = vec![version(&backend).await];
    out.push(access(&backend).await);
    out.push(clock(&backend).await);
    out
}

async fn version(backend: &KubernetesBackend) -> Finding {
    match backend.client.apiserver_version().await {
        Ok(info) => Finding::new(
            Level::Ok,
            "version",
            format!(
                "Kubernetes {} ({}), namespace {}",
                info.git_version, info.platform, backend.namespace
            ),
        ),
        Err(e) => Finding::new(Level::Error, "version", backend.fail(e).to_string()),
    }
}

/// One review per verb; every verb missing is named.
async fn access(backend: &KubernetesBackend) -> Finding {
    let reviews: Api<SelfSubjectAccessReview> = Api::all(backend.client.clone());
    let mut missing = Vec::new();
    for (group, resource, verbs) in NEEDED {
        for verb in *verbs {
            let review = SelfSubjectAccessReview {
                spec: SelfSubjectAccessReviewSpec {
                    resource_attributes: Some(ResourceAttributes {
                        group: Some(group.to_string()),
                        resource: Some(resource.to_string()),
                        verb: Some(verb.to_string()),
                        namespace: Some(backend.namespace.clone()),
                        ..Default::default()
                    }),
                    ..Default::default()
                },
                ..Default::default()
            };
            match reviews.create(&PostParams::default(), &review).await {
                Ok(done) if done.status.as_ref().is_some_and(|s| s.allowed) => {}
                Ok(_) => missing.push(format!("{verb} {resource}")),
                Err(e) => {
                    return Finding::new(Level::Warning, "access", backend.fail(e).to_string())
                        .advise("lockward could not ask what it may do; the first lock will tell")
                }
            }
        }
    }
    if missing.is_empty() {
        Finding::new(
            Level::Ok,
            "access",
            format!(
                "may use leases and configmaps in namespace {}",
                backend.namespace
            ),
        )
    } else {
        Finding::new(
            Level::Error,
            "access",
            format!(
                "not allowed in namespace {}: {}",
                backend.namespace,
                missing.join(", ")
            ),
        )
        .advise("grant the Role in lockward's Kubernetes guide (docs/stores/kubernetes.md) to this identity")
    }
}

/// The offset from the `Date` header of one `/version` request, which has
/// whole seconds: the error is half a second plus half the round trip.
async fn clock(backend: &KubernetesBackend) -> Finding {
    let request = match http::Request::get("/version").body(Vec::new()) {
        Ok(r) => r,
        Err(e) => return Finding::new(Level::Warning, "clock offset", e.to_string()),
    };
    let began = Instant::now();
    let sent_ms = local_ms();
    let response = match backend
        .client
        .send(request.map(kube::client::Body::from))
        .await
    {
        Ok(r) => r,
        Err(e) => return Finding::new(Level::Warning, "clock offset", backend.fail(e).to_string()),
    };
    let rtt_ms = began.elapsed().as_millis() as i64;
    let server_ms = response
        .headers()
        .get(http::header::DATE)
        .and_then(|d| d.to_str().ok())
        .and_then(http_date_ms);
    let Some(server_ms) = server_ms else {
        return Finding::new(
            Level::Warning,
            "clock offset",
            "the API server sent no readable Date header",
        );
    };
    // The header's second began at server_ms: compare with the middle of it.
    let offset = server_ms + 500 - (sent_ms + rtt_ms / 2);
    let detail = format!("{offset:+} ms (± {} ms)", 500 + rtt_ms / 2);
    if offset.abs() > 2_000 {
        Finding::new(Level::Warning, "clock offset", detail).advise(
            "Lease expiry is timed on each host's own clock, so locks stay safe; but fix NTP: \
             cron fire times, record expiry and logs compare clocks",
        )
    } else {
        Finding::new(Level::Ok, "clock offset", detail)
    }
}

/// An HTTP date (`Fri, 04 Dec 2026 18:21:51 GMT`) in ms since the epoch.
fn http_date_ms(text: &str) -> Option<i64> {
    let when = jiff::civil::DateTime::strptime("%a, %d %b %Y %H:%M:%S GMT", text).ok()?;
    let zoned = when.to_zoned(jiff::tz::TimeZone::UTC).ok()?;
    Some(zoned.timestamp().as_millisecond())
}

#[cfg(test)]
mod tests {
    #[test]
    fn http_dates() {
        assert_eq!(
            super::http_date_ms("Thu, 01 Jan 1970 00:00:01 GMT"),
            Some(1_000)
        );
        assert_eq!(
            super::http_date_ms("Fri, 04 Dec 2026 18:21:51 GMT"),
            Some(1_796_408_511_000)
        );
        assert_eq!(super::http_date_ms("yesterday"), None);
    }
}
