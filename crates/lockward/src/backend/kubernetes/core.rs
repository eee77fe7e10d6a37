//! The connection to the API server: the client from a kubeconfig or the
//! pod's service account, the namespace, and how API errors map to
//! lockward's.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client, Config};

use super::observed::Observed;
use super::url::KubernetesUrl;
use crate::backend::Capabilities;
use crate::error::{Cause, Error, Result};

/// How long a connection attempt may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long one request may wait for its answer. Watches end on the
/// server's side before this (see `watch.rs`).
const READ_TIMEOUT: Duration = Duration::from_secs(15);

/// A `k8s://` store: Leases for locks, ConfigMaps for records, in one
/// namespace.
pub struct KubernetesBackend {
    pub(super) client: Client,
    pub(super) leases: Api<Lease>,
    pub(super) config_maps: Api<ConfigMap>,
    pub(super) namespace: String,
    pub(super) prefix: String,
    pub(super) address: String,
    /// What each Lease held by someone else looked like when this process
    /// last saw it change, and when: expiry is timed from that moment on
    /// the local clock, as client-go times it.
    pub(super) observed: Arc<Observed>,
}

impl KubernetesBackend {
    /// Builds the client from the URL's kubeconfig and context (or, with
    /// neither, from a pod's service account, `$KUBECONFIG` or
    /// `~/.kube/config`) and checks that the API server answers.
    ///
    /// Dropping the future cancels the connection attempt.
    ///
    /// Cancellation: dropping the future drops the connection attempt.
    pub async fn connect(url: &KubernetesUrl) -> Result<Self> {
        let address = url.to_string();
        let mut config = load_config(url, &address).await?;
        config.connect_timeout = Some(CONNECT_TIMEOUT);
        config.read_timeout = Some(READ_TIMEOUT);
        let namespace = url
            .namespace
            .clone()
            .unwrap_or_else(|| config.default_namespace.clone());
        // kube's TLS is rustls; a build whose dependencies enable a second
        // crypto provider has no default, so name ring, as the other stores do.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = Client::try_from(config).map_err(|e| Error::Unavailable {
            address: address.clone(),
            message: format!("cannot build a client: {e}"),
            cause: None,
        })?;
        let backend = KubernetesBackend {
            leases: Api::namespaced(client.clone(), &namespace),
            config_maps: Api::namespaced(client.clone(), &namespace),
            client,
            namespace,
            prefix: url.prefix.clone(),
            address,
            observed: Arc::default(),
        };
        backend
            .client
            .apiserver_version()
            .await
            .map_err(|e| backend.fail(e))?;
        Ok(backend)
    }

    /// The namespace every object lives in.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// lockward's error for a failed API call. Credentials never appear:
    /// kube's errors carry the server's message, not the request's headers.
    pub(super) fn fail(&self, e: kube::Error) -> Error {
        api_error(&self.address, e)
    }
}

/// lockward's error for a failed API call on the store at `address`.
pub(crate) fn api_error(address: &str, e: kube::Error) -> Error {
    let address = address.to_string();
    let cause = Some(Cause::of(&e));
    match e {
        kube::Error::Api(status) => match status.code {
            401 => Error::Denied {
                address,
                message: format!(
                    "the API server did not accept lockward's credentials (wrong, expired or revoked): {}",
                    status.message
                ),
                cause,
            },
            403 => Error::Denied {
                address,
                message: match refused_action(&status.message) {
                    Some(action) => format!(
                        "lockward's identity may not {action} (grant the Role in lockward's Kubernetes guide, docs/stores/kubernetes.md); the API server said: {}",
                        status.message
                    ),
                    None => format!(
                        "the API server refused: {} (grant the Role in lockward's Kubernetes guide, docs/stores/kubernetes.md)",
                        status.message
                    ),
                },
                cause,
            },
            429 | 500.. => Error::Unavailable {
                address,
                message: format!("the API server answered {}: {}", status.code, status.message),
                cause,
            },
            code => Error::Protocol {
                address,
                message: format!("the API server answered {code} {}: {}", status.reason, status.message),
                cause,
            },
        },
        kube::Error::SerdeError(e) => Error::Protocol {
            address,
            message: format!("cannot read the API server's answer: {e}"),
            cause,
        },
        other => Error::Unavailable {
            address,
            message: other.to_string(),
            cause,
        },
    }
}

/// What a 403 refused, as `update leases in namespace payments`, read from
/// the API server's message (`… cannot update resource "leases" in API
/// group "coordination.k8s.io" in the namespace "payments"`).
fn refused_action(message: &str) -> Option<String> {
    let after = &message[message.find("cannot ")? + "cannot ".len()..];
    let (verb, rest) = after.split_once(' ')?;
    let resource = quoted_after(rest, "resource ")?;
    Some(match quoted_after(rest, "namespace ") {
        Some(namespace) => format!("{verb} {resource} in namespace {namespace}"),
        None => format!("{verb} {resource}"),
    })
}

/// The quoted word that follows `label` in `text`.
fn quoted_after<'a>(text: &'a str, label: &str) -> Option<&'a str> {
    let rest = text[text.find(label)? + label.len()..].strip_prefix('"')?;
    rest.split_once('"').map(|(word, _)| word)
}

/// The client configuration the URL names.
async fn load_config(url: &KubernetesUrl, address: &str) -> Result<Config> {
    let unavailable = |what: String| Error::Unavailable {
        address: address.to_string(),
        message: what,
        cause: None,
    };
    let options = KubeConfigOptions {
        context: url.context.clone(),
        ..KubeConfigOptions::default()
    };
    match (&url.kubeconfig, &url.context) {
        (Some(path), _) => {
            let file = Kubeconfig::read_from(path).map_err(|e| {
                unavailable(format!("cannot read kubeconfig {}: {e}", path.display()))
            })?;
            Config::from_custom_kubeconfig(file, &options)
                .await
                .map_err(|e| unavailable(format!("kubeconfig {}: {e}", path.display())))
        }
        (None, Some(_)) => Config::from_kubeconfig(&options)
            .await
            .map_err(|e| unavailable(format!("kubeconfig: {e}"))),
        (None, None) => Config::infer().await.map_err(|e| {
            unavailable(format!(
                "no service account (not in a pod) and no kubeconfig ($KUBECONFIG, ~/.kube/config or ?kubeconfig=): {e}"
            ))
        }),
    }
}

/// What a `k8s://` store guarantees: expiry by each observer's own clock
/// (no server clock), waiters woken by a watch but not in order, Leases and
/// records kept in etcd.
pub const CAPABILITIES: Capabilities = Capabilities {
    fifo: false,
    pushed_wakeups: true,
    server_detects_loss: false,
    server_clock: false,
    expires: true,
    durable: true,
    cross_process: true,
    cross_host: true,
    permanent_records: true,
    native_rw_lock: false,
    native_semaphore: false,
};

#[cfg(test)]
mod tests {
    use super::refused_action;

    #[test]
    fn a_refusal_names_the_verb_the_resource_and_the_namespace() {
        let said = r#"leases.coordination.k8s.io "lw-x" is forbidden: User "system:serviceaccount:payments:api" cannot update resource "leases" in API group "coordination.k8s.io" in the namespace "payments""#;
        assert_eq!(
            refused_action(said).as_deref(),
            Some("update leases in namespace payments")
        );
        let cluster = r#"nodes is forbidden: User "nobody" cannot list resource "nodes" in API group "" at the cluster scope"#;
        assert_eq!(refused_action(cluster).as_deref(), Some("list nodes"));
        assert_eq!(refused_action("forbidden"), None);
    }
}
