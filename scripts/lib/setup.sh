# Shared set-up for ferry's scripts: installs only what is missing, so a
# second run does nothing but check. Sourced, not executed.

# log MESSAGE: a step, with the seconds since the script started when
# LOG_CLOCK is set (scripts/test: where the time goes).
log() {
  if [ -n "${LOG_CLOCK:-}" ]; then
    printf '==> [%4ss] %s\n' "$SECONDS" "$*" >&2
  else
    printf '==> %s\n' "$*" >&2
  fi
}

apt_updated=0
# ensure_deb PKG...: installs the Debian packages that are not installed yet.
ensure_deb() {
  local missing=()
  for pkg in "$@"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  local sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  if [ $apt_updated -eq 0 ]; then
    log "apt-get update"
    $sudo apt-get update -qq
    apt_updated=1
  fi
  log "installing Debian packages: ${missing[*]}"
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# ensure_toolchain: Rust (with rustfmt and clippy), Maven and a JDK for the
# Kudu jar, the host libraries the Kudu binaries link against, and what the
# operations tests drive ferry with: curl + jq (the savepoint script),
# headless Chromium (the web page), and iproute2 + nftables (the fault
# tests' network namespaces and partitions).
ensure_toolchain() {
  ensure_deb ca-certificates git build-essential pkg-config unzip maven openjdk-17-jdk-headless \
    libc6 libstdc++6 libgcc-s1 libcrypt1 libcom-err2 libkeyutils1 libselinux1 \
    curl jq chromium iproute2 nftables
  if ! command -v cargo >/dev/null 2>&1; then
    export PATH="$HOME/.cargo/bin:$PATH"
    command -v cargo >/dev/null 2>&1 || {
      echo "error: no Rust toolchain (cargo) found; install Rust 1.95 with rustup first" >&2
      exit 1
    }
  fi
  if command -v rustup >/dev/null 2>&1; then
    cargo fmt --version >/dev/null 2>&1 || rustup component add rustfmt
    cargo clippy --version >/dev/null 2>&1 || rustup component add clippy
  fi
}

# ensure_kudu: the Kudu 1.17.1 and 1.18.1 binaries, fetched once into ~/.cache/ferry.
ensure_kudu() {
  cargo build -q -p ferry-testkit --bin ferry-testkit
  ./target/debug/ferry-testkit install
}

# ensure_s3: the S3-compatible test server (s3s-fs 0.14.1, with its `binary`
# feature) for the tests of state on object stores, built once into
# ~/.cache/ferry (where ferry-testkit looks for it).
S3S_FS_VERSION=0.14.1
ensure_s3() {
  local root="$HOME/.cache/ferry/s3s-fs-$S3S_FS_VERSION"
  [ -x "$root/bin/s3s-fs" ] && return 0
  log "installing s3s-fs $S3S_FS_VERSION into $root"
  cargo install -q --root "$root" s3s-fs --version "$S3S_FS_VERSION" --features binary --locked
}

# ensure_kafka: the jars of a real Apache Kafka broker (KRaft) for the Kafka
# connectors' tests, copied once by Maven into ~/.cache/ferry (where
# ferry-testkit looks for them). librdkafka itself is built by the rdkafka
# crate (its bundled configure + make, with build-essential).
KAFKA_VERSION=4.1.1
ensure_kafka() {
  local libs="$HOME/.cache/ferry/kafka-$KAFKA_VERSION/libs"
  [ -f "$libs/kafka_2.13-$KAFKA_VERSION.jar" ] && return 0
  log "fetching the Apache Kafka $KAFKA_VERSION jars into $libs"
  mkdir -p "$libs"
  mvn -q -B -f crates/ferry-testkit/kafka/pom.xml dependency:copy-dependencies \
    -Dkafka.version="$KAFKA_VERSION" -DincludeScope=runtime -DoutputDirectory="$libs"
  rm -rf crates/ferry-testkit/kafka/target
}

# ensure_zookeeper: the jars of a real Apache ZooKeeper server (standalone)
# for the ZooKeeper HA tests, copied once by Maven into ~/.cache/ferry (where
# ferry-testkit looks for them).
ZOOKEEPER_VERSION=3.9.5
ensure_zookeeper() {
  local libs="$HOME/.cache/ferry/zookeeper-$ZOOKEEPER_VERSION/libs"
  [ -f "$libs/zookeeper-$ZOOKEEPER_VERSION.jar" ] && return 0
  log "fetching the Apache ZooKeeper $ZOOKEEPER_VERSION jars into $libs"
  mkdir -p "$libs"
  mvn -q -B -f crates/ferry-testkit/zookeeper/pom.xml dependency:copy-dependencies \
    -Dzookeeper.version="$ZOOKEEPER_VERSION" -DincludeScope=runtime -DoutputDirectory="$libs"
  rm -rf crates/ferry-testkit/zookeeper/target
}

# ensure_kube: etcd and kube-apiserver for the Kubernetes HA tests, built
# once with `go build` from crates/ferry-testkit/go/kube (its go.mod pins
# k8s.io/kubernetes and every staging module, go.sum makes it reproducible;
# modules come from the Go module proxy) into ~/.cache/ferry, where
# ferry-testkit looks for them (`ferry-testkit kube install` does the same).
# curl and openssl: the kit sets up RBAC and the service-account key with them.
KUBE_VERSION=1.37.2
ensure_kube() {
  local prefix="$HOME/.cache/ferry/kube-$KUBE_VERSION"
  [ -f "$prefix/.ferry-installed" ] && return 0
  ensure_deb curl openssl
  if ! command -v go >/dev/null; then
    echo "error: Go 1.26 or newer is needed to build kube-apiserver and etcd" >&2
    return 1
  fi
  log "building kube-apiserver $KUBE_VERSION and etcd into $prefix (go build, once)"
  local staging="$prefix.partial-$$"
  rm -rf "$staging"
  mkdir -p "$staging"
  (cd crates/ferry-testkit/go/kube &&
    go build -buildvcs=false -trimpath -ldflags='-s -w' -o "$staging/" ./etcd ./kube-apiserver)
  rm -rf "$prefix"
  mkdir -p "$prefix"
  mv "$staging" "$prefix/bin"
  echo "$KUBE_VERSION" >"$prefix/.ferry-installed"
}

# ensure_kdc: MIT Kerberos for the Kerberized tests and for building ferry:
# the KDC and its tools (krb5kdc, kdb5_util, kadmin.local, kinit, klist)
# that ferry-testkit runs with a realm of its own (never /etc/krb5.conf),
# libfaketime for a KDC with a skewed clock, and libkrb5-dev + libclang-dev
# because ferry links libgssapi_krb5 through bindgen-generated bindings.
ensure_kdc() {
  ensure_deb krb5-kdc krb5-admin-server krb5-user libkrb5-dev libclang-dev faketime
}

# ensure_servers: the Kudu binaries, s3s-fs, kube-apiserver + etcd, the Kafka and ZooKeeper jars. s3s-fs is
# compiled (both cores for minutes on a fresh machine) while Maven fetches
# the jars; the two Maven runs stay one after the other (one local
# repository).
ensure_servers() {
  local s3_pid kube_pid
  ensure_s3 &
  s3_pid=$!
  ensure_kube &
  kube_pid=$!
  ensure_kafka
  ensure_zookeeper
  ensure_kudu
  wait "$s3_pid"
  wait "$kube_pid"
}

# test_runs ARTIFACTS: every test executable of a `cargo test --no-run
# --message-format json` build, one a line: its package folder, target
# name, source file (relative to the folder) and executable, tab-separated,
# package by package.
test_runs() {
  jq -r --arg root "$PWD/" '
    select(.reason == "compiler-artifact" and .profile.test and .executable != null)
    | (.manifest_path | ltrimstr($root) | rtrimstr("/Cargo.toml")) as $dir
    | [$dir, .target.name, (.target.src_path | ltrimstr($root + $dir + "/")), .executable]
    | @tsv' "$1" | sort -u
}

# run_tests RUN...: runs each test executable (a line of test_runs) from its
# package folder, as `cargo test` does; all of them, then fails if one did.
run_tests() {
  local run dir src exe failed=()
  for run in "$@"; do
    IFS=$'\t' read -r dir _ src exe <<<"$run"
    printf '     Running %s (%s)\n' "$dir/$src" "${exe#"$PWD"/}"
    (cd "$dir" && "$exe") || failed+=("$dir/$src")
  done
  if [ ${#failed[@]} -gt 0 ]; then
    printf 'error: test failed: %s\n' "${failed[@]}" >&2
    return 1
  fi
}
