//! The REST API secured (docs/security.md), with real processes:
//!
//! - mutual TLS (`security.ssl.rest.*`, authentication-enabled) on a
//!   running `ferry run`: curl with the client certificate works, without
//!   one or with another CA's it is refused; the periodic-savepoint script
//!   (deploy/scripts/savepoint.sh, the CronJob loop) takes a savepoint with
//!   the certificate and is refused without it; `ferry list / savepoint /
//!   stop -m https://…` with the documented `-D` keys (and the environment)
//!   work;
//! - TLS + bearer token (`security.rest.token-file`): no token or a wrong
//!   one gets 401 in Flink's error shape without echoing anything; with it
//!   curl, the script and `ferry list / cancel` work;
//! - secrets: no token, private key body or S3 secret key in the
//!   processes' output and logs, in any REST answer collected, in the
//!   Prometheus text or in the CLI's output;
//! - start-up errors (no cluster needed): missing files, a JKS keystore, a
//!   token without TLS on a network address are usage errors (exit code 2)
//!   naming the key and the file.
//!
//! Certificates are made per test with the `openssl` command.

use ferry_fixtures::free_port;
use ferry_fixtures::http::http;
use ferry_fixtures::process::FerryProcess;
use ferry_testkit::MiniCluster;
use kudu_client::write::{FlushMode, Operation, SessionOptions};
use kudu_client::{KuduClient, TableBuilder};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

const SCRIPT: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../deploy/scripts/savepoint.sh"
);

fn has(cmd: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {cmd}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// CI sets `CI=true`: a missing tool is then a failure, not a skip.
fn require_tools(cmds: &[&str]) -> bool {
    for cmd in cmds {
        if !has(cmd) {
            assert!(
                std::env::var("CI").is_err(),
                "{cmd} is not installed (scripts/lib/setup.sh installs it)"
            );
            eprintln!("SKIPPED: {cmd} is not installed");
            return false;
        }
    }
    true
}

fn sh(cmd: &str, dir: &Path) {
    let out = Command::new("sh")
        .args(["-c", cmd])
        .current_dir(dir)
        .output()
        .expect("sh");
    assert!(
        out.status.success(),
        "{cmd}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Throw-away PKI: a CA, a server certificate for 127.0.0.1, a client
/// certificate of that CA (RSA, key in its own file) and one of another CA.
struct Pki {
    dir: tempfile::TempDir,
}

impl Pki {
    fn new() -> Pki {
        let dir = tempfile::tempdir().expect("tmp");
        let d = dir.path();
        std::fs::write(
            d.join("ca.ext"),
            "basicConstraints=critical,CA:TRUE\nkeyUsage=critical,keyCertSign,cRLSign\nsubjectKeyIdentifier=hash\n",
        )
        .unwrap();
        std::fs::write(
            d.join("server.ext"),
            "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\nsubjectAltName=IP:127.0.0.1,DNS:localhost\n",
        )
        .unwrap();
        std::fs::write(
            d.join("client.ext"),
            "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=clientAuth\n",
        )
        .unwrap();
        let ec = "-newkey ec -pkeyopt ec_paramgen_curve:P-256";
        for ca in ["ca", "other-ca"] {
            sh(
                &format!(
                    "openssl req -new {ec} -nodes -keyout {ca}.key -out {ca}.csr -subj /CN={ca}"
                ),
                d,
            );
            sh(&format!("openssl x509 -req -in {ca}.csr -signkey {ca}.key -out {ca}.pem -days 2 -extfile ca.ext"), d);
        }
        let sign = |name: &str, ca: &str, key: &str, cn: &str, ext: &str| {
            sh(&format!("openssl req -new {key} -nodes -keyout {name}.key -out {name}.csr -subj /CN={cn}"), d);
            sh(&format!("openssl x509 -req -in {name}.csr -CA {ca}.pem -CAkey {ca}.key -CAcreateserial -out {name}.pem -days 2 -extfile {ext}"), d);
        };
        sign("server", "ca", ec, "127.0.0.1", "server.ext");
        sign(
            "client",
            "ca",
            "-newkey rsa:2048",
            "savepoint-cronjob",
            "client.ext",
        );
        sign("intruder", "other-ca", ec, "intruder", "client.ext");
        // The server's keystore: chain and key in one PEM file.
        let keystore = [
            std::fs::read_to_string(d.join("server.pem")).unwrap(),
            std::fs::read_to_string(d.join("server.key")).unwrap(),
        ]
        .concat();
        std::fs::write(d.join("server-keystore.pem"), keystore).unwrap();
        Pki { dir }
    }

    fn path(&self, name: &str) -> String {
        self.dir.path().join(name).to_string_lossy().into_owned()
    }

    /// The base64 lines of a private key: none may show up anywhere.
    fn key_body(&self, name: &str) -> Vec<String> {
        std::fs::read_to_string(self.dir.path().join(name))
            .unwrap()
            .lines()
            .filter(|l| !l.starts_with("-----") && l.len() >= 40)
            .map(str::to_string)
            .collect()
    }
}

/// Everything a test saw, searched for secrets at the end.
#[derive(Default)]
struct Seen(Vec<(String, String)>);

impl Seen {
    fn add(&mut self, what: impl Into<String>, text: impl Into<String>) {
        self.0.push((what.into(), text.into()));
    }

    fn assert_free_of(&self, secrets: &[(&str, String)]) {
        assert!(self.0.len() > 10, "too little collected to mean anything");
        for (what, text) in &self.0 {
            for (name, secret) in secrets {
                assert!(!secret.is_empty());
                assert!(!text.contains(secret.as_str()), "{name} appears in {what}");
            }
        }
    }
}

/// `curl -sS <args> URL`: (curl's exit code, HTTP status, body).
fn curl(args: &[&str], url: &str) -> (i32, u16, String) {
    let out = Command::new("curl")
        .args(["-sS", "-o", "-", "-w", "\n%{http_code}"])
        .args(args)
        .arg(url)
        .output()
        .expect("curl");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, code) = text.rsplit_once('\n').unwrap_or(("", &text));
    (
        out.status.code().unwrap_or(-1),
        code.trim().parse().unwrap_or(0),
        body.to_string(),
    )
}

fn ferry(args: &[&str], env: &[(&str, &str)]) -> Output {
    crate::ferry()
        .args(args)
        .envs(env)
        .env_remove("FERRY_JOBMANAGER")
        .output()
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// A `ferry run` of `table` into `<table><suffix>` with its stderr (logs
/// at debug level) in `<dir>/ferry<suffix>.log`.
fn start_job(masters: &str, table: &str, suffix: &str, dir: &Path, extra: &[&str]) -> FerryProcess {
    crate::ferry()
        .args(["run", "--job.sourceMasterAddresses", masters])
        .args(["--job.sinkMasterAddresses", masters])
        .args(["--job.tableName", table, "--job.tableSuffix", suffix])
        .args(["--job.createTable", "true"])
        .args([
            "--job.checkpointsDirectory",
            &dir.join("chk").to_string_lossy(),
        ])
        .args(["--job.discoveryIntervalSeconds", "1"])
        .args(["--job.checkpointingIntervalMillis", "300"])
        .args(["--metrics.kudu.pollIntervalMillis", "500", "-p", "1"])
        .args(extra)
        .free_ports()
        // Everything ferry logs, the REST and TLS layers included.
        .log_level("debug,h2=info,tower=info")
        .stderr_file(&dir.join(format!("ferry{suffix}.log")))
        .start()
}

/// The job's REST API over TLS.
fn https(job: &FerryProcess) -> String {
    format!("https://127.0.0.1:{}", job.rest())
}

/// Polls `GET /ferry/jobs/:id/live` with `auth` until a window completed.
fn wait_replicating(job: &FerryProcess, auth: &[&str], seen: &mut Seen) {
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let url = format!("{}/ferry/jobs/{}/live", https(job), job.job_id());
        let (rc, status, body) = curl(auth, &url);
        assert_eq!((rc, status), (0, 200), "{body}");
        let v: serde_json::Value = serde_json::from_str(&body).expect("live JSON");
        seen.add("GET /ferry/jobs/:id/live", body);
        if v["last_end_timestamp"].as_u64().unwrap_or(0) > 0 {
            return;
        }
        assert!(Instant::now() < deadline, "no window completed: {v}");
        std::thread::sleep(Duration::from_millis(300));
    }
}

/// The GET answers of a job worth keeping for the secrets check.
fn collect_answers(job: &FerryProcess, auth: &[&str], seen: &mut Seen) {
    for path in [
        "/jobs".to_string(),
        "/jobs/overview".to_string(),
        "/overview".to_string(),
        "/config".to_string(),
        "/ferry/overview".to_string(),
        "/".to_string(),
        format!("/jobs/{}", job.job_id()),
        format!("/jobs/{}/config", job.job_id()),
        format!("/jobs/{}/exceptions", job.job_id()),
        format!("/jobs/{}/checkpoints", job.job_id()),
        format!("/jobs/{}/checkpoints/config", job.job_id()),
        format!("/jobs/{}/metrics", job.job_id()),
    ] {
        let (rc, status, body) = curl(auth, &format!("{}{path}", https(job)));
        assert_eq!((rc, status), (0, 200), "GET {path}: {body}");
        seen.add(format!("GET {path}"), body);
    }
    let (status, metrics) = http("GET", job.metrics(), "/metrics", None);
    assert_eq!(status, 200);
    assert!(metrics.contains("flink_jobmanager_job_uptime"), "{metrics}");
    seen.add("/metrics", metrics);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rest_over_mutual_tls_and_with_a_bearer_token() {
    if !require_tools(&["openssl", "curl", "jq", "bash"]) {
        return;
    }
    let pki = Pki::new();
    let cluster = MiniCluster::builder().tservers(1).start().expect("cluster");
    let masters = cluster.master_addrs_joined();
    let client = KuduClient::new(&cluster.master_addrs()).expect("client");
    let b = TableBuilder::new("sec", ferry_fixtures::small_schema())
        .add_hash_partitions(&["id"], 2, 0)
        .num_replicas(1);
    client.create_table(&b).await.expect("create");
    let table = client.open_table("sec").await.expect("open");
    let mut s = client
        .new_session_with(SessionOptions::default().flush_mode(FlushMode::AutoFlushBackground))
        .expect("session");
    for id in 0..200 {
        let mut r = table.new_row();
        r.set_i64("id", id).unwrap();
        r.set_str("v", &format!("value {id}")).unwrap();
        s.apply(Operation::upsert(&table, r)).await.unwrap();
    }
    s.flush().await.unwrap();

    let dir = tempfile::tempdir().expect("tmp");
    let s3_secret = format!("s3-secret-{}", rand::random::<u64>());
    let token = format!("tok-{:032x}", rand::random::<u128>());
    let wrong = format!("wrong-{:032x}", rand::random::<u128>());
    let token_file = dir.path().join("rest-token");
    std::fs::write(&token_file, format!("{token}\n")).unwrap();
    let token_file = token_file.to_string_lossy().into_owned();
    let mut seen = Seen::default();

    // --- (a) mutual TLS ---------------------------------------------------
    let (ca, cert, key) = (
        pki.path("ca.pem"),
        pki.path("client.pem"),
        pki.path("client.key"),
    );
    let keystore_flag = format!(
        "-Dsecurity.ssl.rest.keystore={}",
        pki.path("server-keystore.pem")
    );
    let mut job = start_job(
        &masters,
        "sec",
        "_mtls",
        dir.path(),
        &[
            "-Dsecurity.ssl.rest.enabled=true",
            &keystore_flag,
            "--security.ssl.rest.truststore",
            &ca,
            "--security.ssl.rest.authentication-enabled=true",
            // Never used (state is on disk), but configured: must not leak.
            "-Ds3.endpoint=http://127.0.0.1:9",
            "-Ds3.access-key=ferry-test",
            &format!("-Ds3.secret-key={s3_secret}"),
            "--savepointPath",
            &dir.path().join("sp").to_string_lossy(),
        ],
    );
    let mtls: Vec<&str> = vec!["--cacert", &ca, "--cert", &cert, "--key", &key];
    wait_replicating(&job, &mtls, &mut seen);

    let (rc, status, body) = curl(&mtls, &format!("{}/jobs", https(&job)));
    assert_eq!((rc, status), (0, 200), "{body}");
    assert!(body.contains(&job.job_id()), "{body}");
    // No client certificate: the handshake is refused, nothing answers.
    let (rc, status, body) = curl(&["--cacert", &ca], &format!("{}/jobs", https(&job)));
    assert!(
        rc != 0 && status != 200,
        "without a certificate: {rc} {status} {body}"
    );
    // A certificate of another CA: refused too.
    let intruder = [
        "--cacert",
        &ca,
        "--cert",
        &pki.path("intruder.pem"),
        "--key",
        &pki.path("intruder.key"),
    ];
    let (rc, status, body) = curl(&intruder, &format!("{}/jobs", https(&job)));
    assert!(rc != 0 && status != 200, "other CA: {rc} {status} {body}");
    // Plain HTTP on the TLS port: a plain answer saying so.
    let (status, body) = http("GET", job.rest(), "/jobs", None);
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("use https://"), "{body}");

    // The periodic-savepoint script, as a CronJob runs it: with the client
    // certificate from the environment `ferry list` reads too ...
    let sp_target = format!("file://{}", dir.path().join("cron").display());
    let tls_env = [
        ("FERRY_SECURITY_SSL_REST_TRUSTSTORE", ca.as_str()),
        ("FERRY_SECURITY_SSL_REST_KEYSTORE", cert.as_str()),
        ("FERRY_SECURITY_SSL_REST_PRIVATE_KEY", key.as_str()),
    ];
    let out = Command::new("bash")
        .args([SCRIPT, &https(&job), &sp_target])
        .envs(tls_env)
        .output()
        .expect("script");
    let script_out = text(&out);
    assert!(out.status.success(), "script failed: {script_out}");
    let location = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert!(location.starts_with(&sp_target), "{location}");
    let sp_dir = PathBuf::from(location.trim_start_matches("file://"));
    assert!(sp_dir.join("_metadata").is_file(), "{location}");
    seen.add("savepoint.sh (mTLS)", script_out);
    // The hand-written loop of docs/operations.md, verbatim but for the
    // address, the files and the target.
    let doc = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../docs/operations.md"
    ))
    .expect("docs/operations.md");
    let after = doc
        .split_once("Against a REST API with TLS and client certificates")
        .expect("the TLS loop in docs/operations.md")
        .1;
    let block = after
        .split_once("```sh\n")
        .and_then(|(_, rest)| rest.split_once("```"))
        .expect("a sh block")
        .0
        .replace("https://ferry.example:8081", &https(&job))
        .replace("/etc/ferry/tls/ca.pem", &ca)
        .replace("/etc/ferry/tls/client.pem", &cert)
        .replace("/etc/ferry/tls/client.key", &key)
        .replace(
            "s3://backups/sp",
            &format!("file://{}", dir.path().join("doc-loop").display()),
        );
    let out = Command::new("timeout")
        .args(["60", "bash", "-euo", "pipefail", "-c", &block])
        .output()
        .expect("bash");
    assert!(out.status.success(), "{block}\n{}", text(&out));
    let taken = std::fs::read_dir(dir.path().join("doc-loop"))
        .expect("the loop's savepoint directory")
        .count();
    assert_eq!(taken, 1, "one savepoint from the documented loop");
    seen.add("the documented TLS loop", text(&out));
    // ... and refused without the certificate.
    let out = Command::new("bash")
        .args([SCRIPT, &https(&job), &sp_target])
        .env("FERRY_SECURITY_SSL_REST_TRUSTSTORE", &ca)
        .output()
        .expect("script");
    assert!(
        !out.status.success(),
        "script without a certificate: {}",
        text(&out)
    );
    seen.add("savepoint.sh (no certificate)", text(&out));

    // ferry list with the documented -D keys, then with the environment.
    let jm = https(&job);
    let d_ca = format!("security.ssl.rest.truststore={ca}");
    let d_cert = format!("security.ssl.rest.keystore={cert}");
    let d_key = format!("security.ssl.rest.private-key={key}");
    let out = ferry(
        &["list", "-m", &jm, "-D", &d_ca, "-D", &d_cert, "-D", &d_key],
        &[],
    );
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains(&job.job_id()), "{}", text(&out));
    seen.add("ferry list (-D)", text(&out));
    let out = ferry(&["list", "-m", &jm], &tls_env);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains(&job.job_id()), "{}", text(&out));
    // Without the client certificate: refused, and the error says why.
    let out = ferry(&["list", "-m", &jm, "-D", &d_ca], &[]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains("security.ssl.rest.keystore"),
        "{}",
        text(&out)
    );
    seen.add("ferry list (no certificate)", text(&out));
    // A bad -D is a usage error naming the key and the file.
    let out = ferry(
        &[
            "list",
            "-m",
            &jm,
            "-D",
            "security.ssl.rest.truststore=/nonexistent/ca.pem",
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("/nonexistent/ca.pem"), "{}", text(&out));

    // ferry savepoint over TLS.
    let sp2 = format!("file://{}", dir.path().join("cli-sp").display());
    let out = ferry(&["savepoint", "-m", &jm, &job.job_id(), &sp2], &tls_env);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains(&format!("Savepoint completed. Path: {sp2}")),
        "{}",
        text(&out)
    );
    seen.add("ferry savepoint", text(&out));
    collect_answers(&job, &mtls, &mut seen);

    // ferry stop over TLS: the job ends FINISHED with a savepoint.
    let out = ferry(
        &[
            "stop",
            "-m",
            &jm,
            "-D",
            &d_ca,
            "-D",
            &d_cert,
            "-D",
            &d_key,
            &job.job_id(),
        ],
        &[],
    );
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("Savepoint completed. Path: "),
        "{}",
        text(&out)
    );
    seen.add("ferry stop", text(&out));
    let status = job.wait_exit(Duration::from_secs(60));
    let (stdout, log) = (job.stdout_text(), job.stderr_text());
    assert!(status.success(), "{stdout}{log}");
    assert!(log.contains("REST API and web page listening"), "{log}");
    assert!(log.contains("https://127.0.0.1"), "{log}");
    seen.add("ferry run (mTLS) stdout", stdout);
    seen.add("ferry run (mTLS) log", log);

    // --- (b) TLS + bearer token --------------------------------------------
    let server_cert_flag = format!("--security.ssl.rest.keystore={}", pki.path("server.pem"));
    let server_key_flag = format!("--security.ssl.rest.private-key={}", pki.path("server.key"));
    let mut job = start_job(
        &masters,
        "sec",
        "_token",
        dir.path(),
        &[
            "--security.ssl.rest.enabled",
            "true",
            &server_cert_flag,
            &server_key_flag,
            "-D",
            &format!("security.rest.token-file={token_file}"),
        ],
    );
    // The token reaches curl through a config file, not its command line.
    let curl_conf = dir.path().join("curl-token.conf");
    std::fs::write(
        &curl_conf,
        format!("header = \"Authorization: Bearer {token}\"\n"),
    )
    .unwrap();
    let curl_conf = curl_conf.to_string_lossy().into_owned();
    let with_token: Vec<&str> = vec!["--cacert", &ca, "-K", &curl_conf];
    wait_replicating(&job, &with_token, &mut seen);
    let jobs_url = format!("{}/jobs", https(&job));
    let (rc, status, body) = curl(&["--cacert", &ca], &jobs_url);
    assert_eq!((rc, status), (0, 401), "{body}");
    let v: serde_json::Value = serde_json::from_str(&body).expect("Flink error shape");
    assert!(
        v["errors"][0].as_str().unwrap().contains("Bearer"),
        "{body}"
    );
    seen.add("401 without a token", body);
    let wrong_header = format!("Authorization: Bearer {wrong}");
    for url in [
        jobs_url.clone(),
        format!("{}/", https(&job)),
        format!("{}/no/such/route", https(&job)),
        format!("{}/jobs/{}/savepoints", https(&job), job.job_id()),
    ] {
        let (rc, status, body) = curl(&["--cacert", &ca, "-H", &wrong_header], &url);
        assert_eq!((rc, status), (0, 401), "{url}: {body}");
        assert!(body.contains("not valid"), "{body}");
        seen.add(format!("401 with a wrong token: {url}"), body);
    }
    let (rc, status, body) = curl(
        &["--cacert", &ca, "-H", "Authorization: Basic Zm9vOmJhcg=="],
        &jobs_url,
    );
    assert_eq!((rc, status), (0, 401), "{body}");
    let (rc, status, body) = curl(&with_token, &jobs_url);
    assert_eq!((rc, status), (0, 200), "{body}");
    assert!(body.contains(&job.job_id()), "{body}");

    let token_env = [
        ("FERRY_SECURITY_SSL_REST_TRUSTSTORE", ca.as_str()),
        ("FERRY_SECURITY_REST_TOKEN_FILE", token_file.as_str()),
    ];
    let out = Command::new("bash")
        .args([SCRIPT, &https(&job), &sp_target])
        .envs(token_env)
        .output()
        .expect("script");
    assert!(
        out.status.success(),
        "script with the token: {}",
        text(&out)
    );
    seen.add("savepoint.sh (token)", text(&out));
    let d_token = format!("security.rest.token-file={token_file}");
    let out = ferry(
        &["list", "-m", &https(&job), "-D", &d_ca, "-D", &d_token],
        &[],
    );
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains(&job.job_id()), "{}", text(&out));
    seen.add("ferry list (token)", text(&out));
    let out = ferry(&["list", "-m", &https(&job), "-D", &d_ca], &[]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("401"), "{}", text(&out));
    seen.add("ferry list (no token)", text(&out));
    collect_answers(&job, &with_token, &mut seen);
    let out = ferry(&["cancel", "-m", &https(&job), &job.job_id()], &token_env);
    assert!(out.status.success(), "{}", text(&out));
    seen.add("ferry cancel", text(&out));
    let status = job.wait_exit(Duration::from_secs(60));
    let (stdout, log) = (job.stdout_text(), job.stderr_text());
    assert!(status.success(), "{stdout}{log}");
    assert!(log.contains("REST request refused"), "{log}");
    seen.add("ferry run (token) stdout", stdout);
    seen.add("ferry run (token) log", log);

    // --- (c) no secret anywhere ---------------------------------------------
    let mut secrets = vec![
        ("the bearer token", token.clone()),
        ("the wrong token presented", wrong.clone()),
        ("the S3 secret key", s3_secret.clone()),
    ];
    for key in ["server.key", "client.key"] {
        for line in pki.key_body(key) {
            secrets.push(("a private key's PEM body", line));
        }
    }
    seen.assert_free_of(&secrets);
}

#[test]
fn bad_security_settings_are_usage_errors_naming_key_and_file() {
    let dir = tempfile::tempdir().expect("tmp");
    let d = dir.path();
    let port = free_port().to_string();
    let server = |args: &[&str]| {
        let out = crate::ferry()
            .args(["server", "--rest.port", &port, "--metrics.port", "0"])
            .args(args)
            .output();
        (out.status.code(), text(&out))
    };
    let missing = d.join("missing.pem").to_string_lossy().into_owned();
    let (code, out) = server(&[
        "-Dsecurity.ssl.rest.enabled=true",
        &format!("-Dsecurity.ssl.rest.keystore={missing}"),
    ]);
    assert_eq!(code, Some(2), "{out}");
    assert!(
        out.contains("security.ssl.rest.keystore") && out.contains(&missing),
        "{out}"
    );

    let jks = d.join("keystore.jks");
    std::fs::write(&jks, [0xFE, 0xED, 0xFE, 0xED, 0, 0, 0, 2, 0, 0, 0, 1]).unwrap();
    let (code, out) = server(&[
        "-Dsecurity.ssl.rest.enabled=true",
        &format!("-Dsecurity.ssl.rest.keystore={}", jks.display()),
    ]);
    assert_eq!(code, Some(2), "{out}");
    assert!(
        out.contains("Java KeyStore") && out.contains("PEM"),
        "{out}"
    );

    let (code, out) = server(&["-Dsecurity.ssl.rest.enabled=true"]);
    assert_eq!(code, Some(2), "{out}");
    assert!(out.contains("security.ssl.rest.keystore"), "{out}");

    let secret = "pa55-word-never-shown";
    let (code, out) = server(&[&format!("-Dsecurity.ssl.rest.keystore-password={secret}")]);
    assert_eq!(code, Some(2), "{out}");
    assert!(!out.contains(secret), "{out}");

    let token = d.join("token");
    let value = format!("{:032x}", rand::random::<u128>());
    std::fs::write(&token, &value).unwrap();
    let (code, out) = server(&[
        "--rest.address",
        "0.0.0.0",
        &format!("-Dsecurity.rest.token-file={}", token.display()),
    ]);
    assert_eq!(code, Some(2), "{out}");
    assert!(
        out.contains("security.rest.token-file") && out.contains("clear text"),
        "{out}"
    );
    assert!(!out.contains(&value), "{out}");

    // The same for ferry run (before it touches any cluster).
    let out = ferry(
        &[
            "run",
            "--job.sourceMasterAddresses=127.0.0.1:1",
            "--job.sinkMasterAddresses=127.0.0.1:1",
            "--job.tableName=t",
            "--job.checkpointsDirectory",
            &d.join("chk").to_string_lossy(),
            "--security.ssl.rest.authentication-enabled=true",
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        text(&out).contains("security.ssl.rest.authentication-enabled"),
        "{}",
        text(&out)
    );
}

/// A token on loopback without TLS (allowed): the plain-HTTP path, with the
/// fixtures' raw client; `ferry list` sends the token.
#[test]
fn bearer_token_on_loopback_plain_http() {
    let dir = tempfile::tempdir().expect("tmp");
    let token = format!("{:040x}", rand::random::<u128>());
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, format!("{token}\r\n")).unwrap();
    let mut child = crate::ferry()
        .arg("server")
        .free_ports()
        .arg(format!(
            "-Dsecurity.rest.token-file={}",
            token_file.display()
        ))
        .log_level("info")
        .start_server();
    let (rest, metrics) = (child.rest(), child.metrics());
    let (status, body) = http("GET", rest, "/jobs", None);
    assert_eq!(status, 401, "{body}");
    assert!(body.starts_with("{\"errors\":["), "{body}");
    let (status, body) = http("GET", rest, "/", None);
    assert_eq!(status, 401, "the web page needs the token too: {body}");
    let jm = format!("127.0.0.1:{rest}");
    let d_token = format!("security.rest.token-file={}", token_file.display());
    let out = ferry(&["list", "-m", &jm, "-D", &d_token], &[]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("No running jobs."), "{}", text(&out));
    let out = ferry(&["list", "-m", &jm], &[]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(!text(&out).contains(&token));
    // The metrics endpoint is not covered by the token (docs/security.md).
    let (status, _) = http("GET", metrics, "/metrics", None);
    assert_eq!(status, 200);
    child.kill9();
    let out = child.output_text();
    assert!(!out.contains(&token), "{out}");
}
