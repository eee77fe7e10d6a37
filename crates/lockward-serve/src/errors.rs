//! lockward's errors as gRPC statuses: a code a gRPC client understands,
//! the message, and lockward's own kind of error, both in a metadata entry
//! and as an `ErrorInfo` detail of the standard rich status.

use prost::Message;
use tonic::{Code, Status};

use crate::pb::ErrorInfo;

/// The metadata key that carries the error's kind (`Busy`, `TimedOut`, …)
/// on every error status.
pub const ERROR_KIND_KEY: &str = "lockward-error-kind";

/// `google.rpc.Status`, the encoding gRPC clients expect in a status's
/// details.
#[derive(Clone, PartialEq, Message)]
struct RichStatus {
    #[prost(int32, tag = "1")]
    code: i32,
    #[prost(string, tag = "2")]
    message: String,
    #[prost(message, repeated, tag = "3")]
    details: Vec<Any>,
}

/// `google.protobuf.Any`.
#[derive(Clone, PartialEq, Message)]
struct Any {
    #[prost(string, tag = "1")]
    type_url: String,
    #[prost(bytes = "vec", tag = "2")]
    value: Vec<u8>,
}

/// The gRPC code for each kind of lockward's error.
fn code_of(error: &lockward::Error) -> Code {
    use lockward::Error as E;
    match error {
        E::Busy { .. } | E::NoPermits { .. } | E::Contended { .. } => Code::Aborted,
        E::TimedOut { .. } => Code::DeadlineExceeded,
        E::Lost { .. } | E::NotOwner { .. } | E::Stale { .. } => Code::FailedPrecondition,
        E::InvalidArgument { .. } => Code::InvalidArgument,
        E::Unavailable { .. } => Code::Unavailable,
        E::Denied { .. } => Code::PermissionDenied,
        E::NotSupported { .. } | E::NotBuilt { .. } => Code::Unimplemented,
        _ => Code::Internal,
    }
}

/// `error` as the status a client receives.
pub fn status_of(error: &lockward::Error) -> Status {
    status(code_of(error), error.to_string(), error.kind())
}

/// A status of `code` whose lockward kind is `kind`.
pub(crate) fn status(code: Code, message: String, kind: &str) -> Status {
    let info = ErrorInfo {
        kind: kind.to_string(),
    };
    let rich = RichStatus {
        code: code as i32,
        message: message.clone(),
        details: vec![Any {
            type_url: "type.googleapis.com/lockward.v1.ErrorInfo".to_string(),
            value: info.encode_to_vec(),
        }],
    };
    let mut status = Status::with_details(code, message, rich.encode_to_vec().into());
    if let Ok(value) = kind.parse() {
        status.metadata_mut().insert(ERROR_KIND_KEY, value);
    }
    status
}

/// A request that does not say what lockward needs.
pub(crate) fn invalid(message: impl Into<String>) -> Status {
    status(Code::InvalidArgument, message.into(), "InvalidArgument")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_error_names_its_kind_and_a_fitting_code() {
        let busy = status_of(&lockward::Error::Busy { name: "a".into() });
        assert_eq!(busy.code(), Code::Aborted);
        assert_eq!(busy.metadata().get(ERROR_KIND_KEY).unwrap(), "Busy");
        let rich = RichStatus::decode(busy.details()).unwrap();
        assert_eq!(rich.code, Code::Aborted as i32);
        let info = ErrorInfo::decode(rich.details[0].value.as_slice()).unwrap();
        assert_eq!(info.kind, "Busy");
        let denied = status_of(&lockward::Error::Denied {
            address: "k8s://payments".into(),
            message: "lockward's identity may not update leases".into(),
            cause: None,
        });
        assert_eq!(denied.code(), Code::PermissionDenied);
        assert_eq!(denied.metadata().get(ERROR_KIND_KEY).unwrap(), "Denied");
        let bad = invalid("ttl: too long");
        assert_eq!(bad.code(), Code::InvalidArgument);
        assert_eq!(
            bad.metadata().get(ERROR_KIND_KEY).unwrap(),
            "InvalidArgument"
        );
    }
}
