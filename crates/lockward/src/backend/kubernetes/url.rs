//! The `k8s://` URL form (alias `kubernetes://`): the namespace, the
//! kubeconfig and context to use, and the prefix of every object's name.

use std::fmt;
use std::path::PathBuf;

use super::names;
use crate::error::Result;
use crate::url_parts::{url_error, Parts};

/// Prefix of every Lease and ConfigMap name lockward writes unless
/// `prefix=` says otherwise: lock `orders/42` is the Lease
/// `lockward-orders--2f42`.
pub const DEFAULT_PREFIX: &str = "lockward-";

/// The parts of a `k8s://` URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KubernetesUrl {
    /// The namespace of every object; `None`: the kubeconfig context's
    /// namespace, the pod's own namespace in a cluster, else `default`.
    pub namespace: Option<String>,
    /// The kubeconfig file (`kubeconfig=`); `None`: in a pod, its service
    /// account, else `$KUBECONFIG` or `~/.kube/config`.
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context (`context=`); `None`: its current context.
    pub context: Option<String>,
    /// Prefix of every object name, [`DEFAULT_PREFIX`] by default; empty to
    /// use lock names as Lease names (for Leases other programs name).
    pub prefix: String,
}

impl KubernetesUrl {
    /// Takes a `k8s` or `kubernetes` URL apart.
    pub(crate) fn parse(parts: &Parts) -> Result<Self> {
        parts.expect_nothing_but(&["kubeconfig", "context", "prefix"])?;
        if parts.user.is_some() || parts.password.is_some() {
            return Err(url_error(
                "k8s:// takes no credentials in the URL; they come from the kubeconfig or the pod's service account",
            ));
        }
        let namespace = parts.raw_rest.trim_end_matches('/');
        if namespace.contains('/') {
            return Err(url_error(
                "k8s:// takes one namespace after the scheme (k8s://NAMESPACE) and no path",
            ));
        }
        let namespace = match namespace {
            "" => None,
            ns if names::is_dns_label(ns) => Some(ns.to_string()),
            _ => {
                return Err(url_error(
                    "a namespace is 1 to 63 lowercase letters, digits and '-', starting and ending with a letter or digit",
                ))
            }
        };
        let prefix = parts.param("prefix").unwrap_or(DEFAULT_PREFIX).to_string();
        names::check_prefix(&prefix)?;
        Ok(KubernetesUrl {
            namespace,
            kubeconfig: parts.param("kubeconfig").map(PathBuf::from),
            context: parts.param("context").map(str::to_string),
            prefix,
        })
    }
}

/// Prints the URL; it holds no secret (credentials stay in the kubeconfig).
impl fmt::Display for KubernetesUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "k8s://{}", self.namespace.as_deref().unwrap_or(""))?;
        let mut params = Vec::new();
        if let Some(path) = &self.kubeconfig {
            params.push(format!("kubeconfig={}", path.display()));
        }
        if let Some(context) = &self.context {
            params.push(format!("context={context}"));
        }
        if self.prefix != DEFAULT_PREFIX {
            params.push(format!("prefix={}", self.prefix));
        }
        if !params.is_empty() {
            write!(f, "?{}", params.join("&"))?;
        }
        Ok(())
    }
}
