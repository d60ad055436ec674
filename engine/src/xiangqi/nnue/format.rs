//! The net file format, version 1. Every number is little-endian.
//!
//! | Field | Type | Count |
//! |---|---|---|
//! | magic `XQNN` | bytes | 4 |
//! | format version (1) | `u32` | 1 |
//! | architecture hash: 32-bit FNV-1a of [`super::ARCHITECTURE`] | `u32` | 1 |
//! | description length in bytes, at most [`MAX_DESCRIPTION`] | `u32` | 1 |
//! | description, UTF-8 | bytes | length |
//! | feature transformer biases | `i16` | L1 |
//! | feature transformer weights, feature-major (row `f` = feature `f`) | `i16` | 7,560 x L1 |
//! | first hidden layer biases | `i32` | L2 |
//! | first hidden layer weights, output-major (the side to move's half first) | `i8` | L2 x 2 L1 |
//! | second hidden layer biases | `i32` | L3 |
//! | second hidden layer weights, output-major | `i8` | L3 x L2 |
//! | output bias | `i32` | 1 |
//! | output weights | `i8` | L3 |
//! | CRC-32 (IEEE) of every byte before it | `u32` | 1 |
//!
//! A reader refuses a file whose magic, version, architecture hash, length or
//! checksum is wrong, naming what was wrong; a trainer writes exactly this layout.

use super::features::FEATURES;
use super::{ARCHITECTURE, L1, L2, L3, Layer, Network};

/// The file's first four bytes.
pub const MAGIC: [u8; 4] = *b"XQNN";
/// The format version this reader reads and the writer writes.
pub const VERSION: u32 = 1;
/// The longest description accepted.
pub const MAX_DESCRIPTION: usize = 1 << 16;
const HEADER: usize = 16;

/// Why a net file could not be read.
#[derive(Debug, thiserror::Error)]
pub enum NetError {
    /// The file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// The file does not start with `XQNN`.
    #[error("not an xq-engine net: the file starts with {0:02x?}, not 'XQNN'")]
    Magic(Vec<u8>),
    /// A format version this reader does not know.
    #[error("net format version {0}; this engine reads version {VERSION}")]
    Version(u32),
    /// A net of another architecture.
    #[error("the net's architecture hash is {found:#010x}; this engine's ({ARCHITECTURE}) is {expected:#010x}")]
    Architecture {
        /// This engine's.
        expected: u32,
        /// The file's.
        found: u32,
    },
    /// The description is too long or not UTF-8.
    #[error("the net's description is {0}")]
    Description(&'static str),
    /// The file is not as long as its header says.
    #[error("the net file is {found} bytes; its header implies {expected}")]
    Length {
        /// Implied by the header.
        expected: usize,
        /// The file's.
        found: usize,
    },
    /// The checksum does not match: the file is damaged.
    #[error("the net file is damaged: CRC-32 {computed:#010x}, stored {stored:#010x}")]
    Checksum {
        /// Of the bytes read.
        computed: u32,
        /// In the file.
        stored: u32,
    },
}

/// The architecture hash: 32-bit FNV-1a of [`ARCHITECTURE`].
pub fn architecture_hash() -> u32 {
    fnv1a(ARCHITECTURE.as_bytes())
}

/// The 32-bit FNV-1a hash.
fn fnv1a(bytes: &[u8]) -> u32 {
    bytes.iter().fold(0x811c_9dc5, |hash: u32, &byte| (hash ^ u32::from(byte)).wrapping_mul(0x0100_0193))
}

fn body_length() -> usize {
    let layer = |inputs: usize, outputs: usize| 4 * outputs + inputs * outputs;
    2 * L1 + 2 * FEATURES * L1 + layer(2 * L1, L2) + layer(L2, L3) + layer(L3, 1)
}

impl Network {
    /// The net in the file format.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(HEADER + self.description.len() + body_length() + 4);
        out.extend_from_slice(&MAGIC);
        out.extend_from_slice(&VERSION.to_le_bytes());
        out.extend_from_slice(&architecture_hash().to_le_bytes());
        out.extend_from_slice(&(self.description.len() as u32).to_le_bytes());
        out.extend_from_slice(self.description.as_bytes());
        for value in self.transformer_biases.iter().chain(&self.transformer_weights) {
            out.extend_from_slice(&value.to_le_bytes());
        }
        for layer in [&self.hidden1, &self.hidden2, &self.output] {
            for bias in &layer.biases {
                out.extend_from_slice(&bias.to_le_bytes());
            }
            out.extend(layer.weights.iter().map(|&w| w as u8));
        }
        let crc = crc32fast::hash(&out);
        out.extend_from_slice(&crc.to_le_bytes());
        out
    }

    /// Reads a net in the file format.
    pub fn from_bytes(bytes: &[u8]) -> Result<Network, NetError> {
        if bytes.len() < HEADER || bytes[..4] != MAGIC {
            return Err(NetError::Magic(bytes[..bytes.len().min(4)].to_vec()));
        }
        let word = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().expect("four bytes"));
        if word(4) != VERSION {
            return Err(NetError::Version(word(4)));
        }
        if word(8) != architecture_hash() {
            return Err(NetError::Architecture { expected: architecture_hash(), found: word(8) });
        }
        let description_length = word(12) as usize;
        if description_length > MAX_DESCRIPTION {
            return Err(NetError::Description("longer than 65,536 bytes"));
        }
        let expected = HEADER + description_length + body_length() + 4;
        if bytes.len() != expected {
            return Err(NetError::Length { expected, found: bytes.len() });
        }
        let (content, stored) = bytes.split_at(expected - 4);
        let stored = u32::from_le_bytes(stored.try_into().expect("four bytes"));
        let computed = crc32fast::hash(content);
        if computed != stored {
            return Err(NetError::Checksum { computed, stored });
        }
        let description = std::str::from_utf8(&content[HEADER..HEADER + description_length])
            .map_err(|_| NetError::Description("not UTF-8"))?;
        let mut reader = Reader { bytes: &content[HEADER + description_length..] };
        let mut network = Network::zeroed(description.to_owned());
        reader.i16s(&mut network.transformer_biases);
        reader.i16s(&mut network.transformer_weights);
        for layer in [&mut network.hidden1, &mut network.hidden2, &mut network.output] {
            reader.layer(layer);
        }
        debug_assert!(reader.bytes.is_empty());
        Ok(network)
    }

    /// Reads the net file at `path`.
    pub fn load(path: &std::path::Path) -> Result<Network, NetError> {
        let bytes = std::fs::read(path).map_err(|source| NetError::Io { path: path.display().to_string(), source })?;
        Network::from_bytes(&bytes)
    }

    /// Writes the net to `path`.
    pub fn save(&self, path: &std::path::Path) -> Result<(), NetError> {
        std::fs::write(path, self.to_bytes())
            .map_err(|source| NetError::Io { path: path.display().to_string(), source })
    }
}

/// Takes values off the front of a body whose length has been checked.
struct Reader<'a> {
    bytes: &'a [u8],
}

impl Reader<'_> {
    fn take(&mut self, n: usize) -> &[u8] {
        let (head, rest) = self.bytes.split_at(n);
        self.bytes = rest;
        head
    }

    fn i16s(&mut self, values: &mut [i16]) {
        let bytes = self.take(2 * values.len());
        for (value, pair) in values.iter_mut().zip(bytes.chunks_exact(2)) {
            *value = i16::from_le_bytes([pair[0], pair[1]]);
        }
    }

    fn layer(&mut self, layer: &mut Layer) {
        let biases = self.take(4 * layer.outputs());
        for (bias, word) in layer.biases.iter_mut().zip(biases.chunks_exact(4)) {
            *bias = i32::from_le_bytes(word.try_into().expect("four bytes"));
        }
        let inputs = layer.inputs;
        for (weight, &byte) in layer.weights.iter_mut().zip(self.take(inputs * layer.biases.len())) {
            *weight = byte as i8;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_net_survives_writing_and_reading() {
        let network = Network::random(5);
        let bytes = network.to_bytes();
        assert_eq!(bytes.len(), HEADER + network.description().len() + body_length() + 4);
        assert_eq!(Network::from_bytes(&bytes).unwrap(), network);
    }

    #[test]
    fn damaged_files_are_refused_with_the_reason() {
        let bytes = Network::random(5).to_bytes();
        let refusal = |bytes: &[u8]| Network::from_bytes(bytes).unwrap_err().to_string();
        assert!(refusal(b"").contains("not an xq-engine net"));
        assert!(refusal(b"PK\x03\x04 a zip file").contains("not an xq-engine net"));
        let mut version = bytes.clone();
        version[4] = 2;
        assert_eq!(refusal(&version), "net format version 2; this engine reads version 1");
        let mut architecture = bytes.clone();
        architecture[8] ^= 1;
        assert!(refusal(&architecture).contains("architecture hash"));
        assert!(refusal(&bytes[..bytes.len() - 1]).contains("implies"));
        let mut long = bytes.clone();
        long[12..16].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(refusal(&long).contains("longer than"));
        let mut flipped = bytes.clone();
        flipped[HEADER + 100] ^= 0x40;
        assert!(refusal(&flipped).contains("damaged"));
    }

    #[test]
    fn fnv1a_gives_the_published_test_vectors() {
        assert_eq!(fnv1a(b""), 0x811c_9dc5);
        assert_eq!(fnv1a(b"a"), 0xe40c_292c);
        assert_eq!(fnv1a(b"foobar"), 0xbf9c_f968);
    }
}
