//! Loopback addresses for clusters.
//!
//! Each cluster gets its own `127.a.b.0/24` block; every daemon gets its own
//! address in it and Kudu's well-known ports (masters 7051/8051, tablet
//! servers 7050/8050). A restarted daemon therefore comes back at the same
//! address, and no ephemeral port of another process can take its place.
//! Linux routes all of 127.0.0.0/8 to the loopback interface.

use std::net::{Ipv4Addr, SocketAddrV4, TcpListener};
use std::sync::atomic::{AtomicU32, Ordering};

/// RPC / HTTP ports of masters and tablet servers.
pub const MASTER_RPC_PORT: u16 = 7051;
pub const MASTER_HTTP_PORT: u16 = 8051;
pub const TSERVER_RPC_PORT: u16 = 7050;
pub const TSERVER_HTTP_PORT: u16 = 8050;

/// Highest daemon slot in a block (masters use 1..=3, tablet servers 11..).
const MAX_HOST: u32 = 250;

/// A `127.a.b.0/24` block owned by one cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Block {
    pub a: u8,
    pub b: u8,
}

impl Block {
    /// Address of master `i` (0-based).
    pub fn master(&self, i: usize) -> Ipv4Addr {
        self.host(1 + i as u32)
    }

    /// Address of tablet server `i` (0-based).
    pub fn tserver(&self, i: usize) -> Ipv4Addr {
        self.host(11 + i as u32)
    }

    fn host(&self, n: u32) -> Ipv4Addr {
        Ipv4Addr::new(127, self.a, self.b, n.min(MAX_HOST) as u8)
    }

    /// Picks a block whose daemon ports are all free right now.
    ///
    /// Candidates start from a hash of the pid so that concurrent processes
    /// (parallel test binaries, `ferry-testkit up`) rarely even probe the same
    /// block; a probe that finds a port in use moves on.
    pub fn allocate(masters: usize, tservers: usize) -> Option<Block> {
        static COUNTER: AtomicU32 = AtomicU32::new(0);
        if masters > 3 || tservers as u32 > MAX_HOST - 11 {
            return None;
        }
        let pid = std::process::id();
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let seed = pid.wrapping_mul(2_654_435_761) ^ nanos;
        // a in 20..=250 keeps clear of 127.0.0.1 and small well-known blocks.
        const SPAN: u32 = 231 * 256;
        for _ in 0..512 {
            let n = (seed.wrapping_add(COUNTER.fetch_add(1, Ordering::Relaxed).wrapping_mul(7919)))
                % SPAN;
            let block = Block {
                a: (20 + n / 256) as u8,
                b: (n % 256) as u8,
            };
            if block.ports_free(masters, tservers) {
                return Some(block);
            }
        }
        None
    }

    fn ports_free(&self, masters: usize, tservers: usize) -> bool {
        let masters = (0..masters).flat_map(|i| {
            [
                (self.master(i), MASTER_RPC_PORT),
                (self.master(i), MASTER_HTTP_PORT),
            ]
        });
        let tservers = (0..tservers).flat_map(|i| {
            [
                (self.tserver(i), TSERVER_RPC_PORT),
                (self.tserver(i), TSERVER_HTTP_PORT),
            ]
        });
        masters
            .chain(tservers)
            .all(|(ip, port)| port_free(ip, port))
    }
}

/// Whether `ip:port` can be bound now.
pub fn port_free(ip: Ipv4Addr, port: u16) -> bool {
    TcpListener::bind(SocketAddrV4::new(ip, port)).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_differ_and_addresses_are_distinct() {
        let a = Block::allocate(3, 3).expect("a free block");
        let b = Block::allocate(3, 3).expect("a free block");
        assert_ne!(a, b);
        assert_ne!(a.master(0), a.tserver(0));
        assert_eq!(a.master(2), Ipv4Addr::new(127, a.a, a.b, 3));
        assert_eq!(a.tserver(0), Ipv4Addr::new(127, a.a, a.b, 11));
    }

    #[test]
    fn busy_port_is_detected() {
        let block = Block::allocate(1, 0).expect("a free block");
        let _held =
            TcpListener::bind(SocketAddrV4::new(block.master(0), MASTER_RPC_PORT)).expect("bind");
        assert!(!block.ports_free(1, 0));
    }
}
