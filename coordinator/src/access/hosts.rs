//! Which host an address stands for, the key of every per-address cap and rate: an
//! IPv4 address is itself, an IPv6 address counts by its /64 (one host usually holds
//! a whole /64, so keyed by the full address one machine could take every place).

use std::net::{IpAddr, Ipv6Addr};

/// The host `address` stands for: an IPv4 address (also when IPv4-mapped) itself, an
/// IPv6 address's /64.
pub fn host(address: IpAddr) -> IpAddr {
    match address.to_canonical() {
        IpAddr::V4(v4) => IpAddr::V4(v4),
        IpAddr::V6(v6) => IpAddr::V6(Ipv6Addr::from(u128::from(v6) & !u128::from(u64::MAX))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_ipv6_host_is_its_64_and_an_ipv4_one_itself() {
        let at = |text: &str| host(text.parse().unwrap());
        assert_eq!(at("2001:db8:1:2:aaaa::1"), at("2001:db8:1:2:ffff:ffff:ffff:ffff"));
        assert_eq!(at("2001:db8:1:2:aaaa::1"), "2001:db8:1:2::".parse::<IpAddr>().unwrap());
        assert_ne!(at("2001:db8:1:2::1"), at("2001:db8:1:3::1"));
        assert_eq!(at("10.0.0.1"), "10.0.0.1".parse::<IpAddr>().unwrap());
        assert_ne!(at("10.0.0.1"), at("10.0.0.2"));
        assert_eq!(at("::ffff:10.0.0.1"), at("10.0.0.1"));
    }
}
