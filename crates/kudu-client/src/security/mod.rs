//! Who the client is to the servers: Kerberos (SASL GSSAPI, feature
//! `kerberos`), the authentication tokens the masters hand out after a
//! Kerberos login, and the TLS channel bindings that tie a Kerberos
//! authentication to the TLS connection it ran on. SASL PLAIN, the default,
//! needs none of this (see `rpc::negotiate`).

#[cfg(feature = "kerberos")]
pub(crate) mod channel_binding;
#[cfg(feature = "kerberos")]
pub mod kerberos;
pub(crate) mod token;
