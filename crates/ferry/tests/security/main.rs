//! Security with real processes: replication between Kerberized clusters
//! (a real MIT KDC) and the REST API over mutual TLS or with a bearer
//! token.

mod kerberos;
mod rest_security;
