//! Catalog rows of the Kerberos keys: Flink's `security.kerberos.login.*`
//! (one login for both clusters) and ferry's per-cluster overrides
//! (`reader.*` for the source cluster, `writer.*` for the sink cluster),
//! kept apart so `key.rs` stays readable. [`super::security`] validates
//! them.

use super::spec::{KeyDefault, KeyOrigin, KeySpec, ValueKind};

pub(super) const LOGIN_PRINCIPAL: KeySpec = KeySpec::new(
    "security.kerberos.login.principal",
    KeyDefault::Derived("none: SASL PLAIN, no Kerberos"),
    ValueKind::Text,
    KeyOrigin::Flink,
    "Kerberos principal ferry logs in as to both clusters (e.g. ferry@EXAMPLE.COM); reader.kerberosPrincipal / writer.kerberosPrincipal override it per cluster. Setting a principal turns Kerberos (SASL GSSAPI) on; docs/security.md.",
);

pub(super) const LOGIN_KEYTAB: KeySpec = KeySpec::new(
    "security.kerberos.login.keytab",
    KeyDefault::Derived("none: the ticket cache"),
    ValueKind::Text,
    KeyOrigin::Flink,
    "Keytab file of security.kerberos.login.principal; ferry logs in from it and again before tickets expire, for as long as the job runs. Without one, tickets come from the ticket cache (KRB5CCNAME), which something else must renew.",
);

pub(super) const LOGIN_USE_TICKET_CACHE: KeySpec = KeySpec::new(
    "security.kerberos.login.use-ticket-cache",
    KeyDefault::Value("true"),
    ValueKind::Bool,
    KeyOrigin::Flink,
    "Whether a principal without a keytab may use the ticket cache (KRB5CCNAME or the default cache); false makes a keytab mandatory.",
);

pub(super) const SOURCE_PRINCIPAL: KeySpec = KeySpec::new(
    "reader.kerberosPrincipal",
    KeyDefault::Derived("security.kerberos.login.principal"),
    ValueKind::Text,
    KeyOrigin::Ferry,
    "Kerberos principal for the source cluster, when it differs from the sink's (another realm, another service user).",
);

pub(super) const SOURCE_KEYTAB: KeySpec = KeySpec::new(
    "reader.kerberosKeytab",
    KeyDefault::Derived("security.kerberos.login.keytab"),
    ValueKind::Text,
    KeyOrigin::Ferry,
    "Keytab of reader.kerberosPrincipal.",
);

pub(super) const SOURCE_SERVICE_NAME: KeySpec = KeySpec::new(
    "reader.saslProtocolName",
    KeyDefault::Value("kudu"),
    ValueKind::Text,
    KeyOrigin::Ferry,
    "Service name of the source cluster's Kerberos principals (<name>/<host>@REALM), as Kudu's clients call it.",
);

pub(super) const SINK_PRINCIPAL: KeySpec = KeySpec::new(
    "writer.kerberosPrincipal",
    KeyDefault::Derived("security.kerberos.login.principal"),
    ValueKind::Text,
    KeyOrigin::Ferry,
    "Kerberos principal for the sink cluster, when it differs from the source's.",
);

pub(super) const SINK_KEYTAB: KeySpec = KeySpec::new(
    "writer.kerberosKeytab",
    KeyDefault::Derived("security.kerberos.login.keytab"),
    ValueKind::Text,
    KeyOrigin::Ferry,
    "Keytab of writer.kerberosPrincipal.",
);

pub(super) const SINK_SERVICE_NAME: KeySpec = KeySpec::new(
    "writer.saslProtocolName",
    KeyDefault::Value("kudu"),
    ValueKind::Text,
    KeyOrigin::Ferry,
    "Service name of the sink cluster's Kerberos principals.",
);
