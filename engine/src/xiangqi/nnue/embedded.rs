//! The net shipped inside the engine: `engine/nets/default.xqnn.zst`, a net trained by
//! `xq-trainer` on the cluster's self-play (its provenance and match results are in
//! `engine/nets/README.md`), compressed with zstd. It is the default evaluation; the
//! UCI options `EvalFile` (another net) and `UseNNUE` (false: the handcrafted
//! evaluation) change it.

use std::sync::{Arc, OnceLock};

use super::Network;

/// The compressed net file.
const COMPRESSED: &[u8] = include_bytes!("../../../nets/default.xqnn.zst");

/// The embedded net, decompressed and checked at its first use.
pub fn embedded() -> Arc<Network> {
    static NET: OnceLock<Arc<Network>> = OnceLock::new();
    NET.get_or_init(|| {
        // Both steps are checked by the tests below on the very bytes the binary holds.
        let bytes = zstd::stream::decode_all(COMPRESSED).expect("the embedded net decompresses");
        Arc::new(Network::from_bytes(&bytes).expect("the embedded net is a net of this architecture"))
    })
    .clone()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_embedded_net_loads_and_is_trained() {
        let net = embedded();
        assert!(net.description().contains("epochs"), "a trained net, described: {}", net.description());
    }
}
