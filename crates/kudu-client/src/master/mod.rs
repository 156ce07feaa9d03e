//! Master leader discovery and catalog operations (list, open, create,
//! alter, delete tables; server clock).
