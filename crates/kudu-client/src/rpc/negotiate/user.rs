//! The user name SASL PLAIN sends by default: the OS user the process runs
//! as, found the way Kudu's own C++ client finds it (the password database
//! entry of the effective uid), so a process without `$USER` (a container,
//! a service manager) still says who it is.

/// Sent when the OS cannot name the user.
const UNKNOWN_USER: &str = "unknown";

/// The OS user of this process: its effective uid's name, else `$USER` /
/// `$LOGNAME` / `$USERNAME`, else `unknown`.
pub(crate) fn os_user() -> String {
    passwd_name()
        .or_else(|| {
            ["USER", "LOGNAME", "USERNAME"]
                .iter()
                .filter_map(|v| std::env::var(v).ok())
                .find(|u| !u.is_empty())
        })
        .unwrap_or_else(|| UNKNOWN_USER.to_owned())
}

/// The name of the effective uid in the password database.
#[cfg(unix)]
fn passwd_name() -> Option<String> {
    use std::ffi::CStr;

    let mut buf = vec![0u8; 1024];
    loop {
        // SAFETY: a zeroed `passwd` is a valid value (null pointers and
        // zero ids); getpwuid_r only writes into it and into `buf`, whose
        // length it is told.
        let mut pwd: libc::passwd = unsafe { std::mem::zeroed() };
        let mut result: *mut libc::passwd = std::ptr::null_mut();
        // SAFETY: every pointer refers to live memory owned by this frame,
        // and `buf.len()` is the size of `buf`.
        let rc = unsafe {
            libc::getpwuid_r(
                libc::geteuid(),
                &mut pwd,
                buf.as_mut_ptr().cast(),
                buf.len(),
                &mut result,
            )
        };
        if rc == libc::ERANGE && buf.len() < 1 << 20 {
            buf.resize(buf.len() * 4, 0);
            continue;
        }
        if rc != 0 || result.is_null() || pwd.pw_name.is_null() {
            return None;
        }
        // SAFETY: on success `pw_name` points to a NUL-terminated string
        // inside `buf`, which is still alive.
        let name = unsafe { CStr::from_ptr(pwd.pw_name) };
        return Some(name.to_string_lossy().into_owned()).filter(|n| !n.is_empty());
    }
}

#[cfg(not(unix))]
fn passwd_name() -> Option<String> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(unix)]
    #[test]
    fn the_os_user_is_the_effective_uids_name() {
        let out = std::process::Command::new("id")
            .arg("-un")
            .output()
            .expect("id runs");
        let expected = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        assert!(!expected.is_empty());
        assert_eq!(passwd_name().as_deref(), Some(expected.as_str()));
        assert_eq!(os_user(), expected);
    }
}
