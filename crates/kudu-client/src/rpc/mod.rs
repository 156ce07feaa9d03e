//! KRPC: the connection preamble, frame codec, negotiation (SASL PLAIN and
//! TLS), call multiplexing over one connection, and a per-server pool.
