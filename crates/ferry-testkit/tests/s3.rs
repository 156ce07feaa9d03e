//! The S3 test server: a real s3s-fs process on loopback that can be
//! stopped and started again on the same port with the same data, and that
//! leaves nothing behind when its handle is dropped.

use ferry_testkit::process::processes_under;
use ferry_testkit::S3Server;
use std::net::TcpStream;
use std::time::Duration;

fn answers(endpoint: &str) -> bool {
    let addr = endpoint.trim_start_matches("http://");
    TcpStream::connect_timeout(
        &addr.parse().expect("socket address"),
        Duration::from_millis(300),
    )
    .is_ok()
}

#[test]
fn stop_and_restart_keep_port_and_data_and_drop_cleans_up() {
    let name = format!("s3-kit-{}", std::process::id());
    let mut s3 = S3Server::start(&name).expect("start s3s-fs");
    s3.create_bucket("bucket-a").expect("bucket");
    let endpoint = s3.endpoint();
    let root = s3.info().root.clone();
    assert!(answers(&endpoint));
    assert_eq!(s3.secret_key().len(), 32);
    let object = s3.object_path("bucket-a", "dir/obj");
    std::fs::create_dir_all(object.parent().expect("parent")).expect("mkdir");
    std::fs::write(&object, b"kept").expect("write");

    s3.stop().expect("stop");
    assert!(!s3.is_running());
    assert!(!answers(&endpoint), "stopped server still answers");
    s3.restart().expect("restart");
    assert_eq!(s3.endpoint(), endpoint, "same port");
    assert!(answers(&endpoint));
    assert_eq!(std::fs::read(&object).expect("data kept"), b"kept");

    // Found again by name, as the CLI does.
    let attached = S3Server::attach(&name).expect("attach");
    assert_eq!(attached.endpoint(), endpoint);
    assert!(attached.is_running());
    drop(attached);
    assert!(s3.is_running(), "an attached handle does not tear down");

    drop(s3);
    assert!(processes_under(&root).is_empty(), "s3s-fs left running");
    assert!(!root.exists(), "folder left behind");
    assert!(S3Server::start("bad/name").is_err());
}
