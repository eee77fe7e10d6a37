//! Who this process is, as `status` shows a lock's holder: `host:pid`.

/// `host:pid`, shown by `status` as the holder and used as the default
/// identity of an election candidate.
pub fn label() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is valid for its length; gethostname NUL-terminates
    // within it or truncates.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    let host = if rc == 0 {
        let end = buf.iter().position(|b| *b == 0).unwrap_or(buf.len());
        String::from_utf8_lossy(&buf[..end]).into_owned()
    } else {
        "unknown-host".into()
    };
    format!("{host}:{}", std::process::id())
}
