//! The Kubernetes Lease store on a real kube-apiserver.
