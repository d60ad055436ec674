//! The games the product plays.

use std::str::FromStr;

/// Xiangqi or its 8x8 variant Xiongqi.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Variant {
    /// Xiangqi (Chinese chess).
    #[default]
    Xiangqi,
    /// Xiongqi, the 8x8 variant.
    Xiongqi,
}

/// The variant name was not recognised.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown variant '{0}': expected xiangqi or xiongqi")]
pub struct UnknownVariant(String);

impl FromStr for Variant {
    type Err = UnknownVariant;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "xiangqi" => Ok(Variant::Xiangqi),
            "xiongqi" => Ok(Variant::Xiongqi),
            _ => Err(UnknownVariant(s.to_owned())),
        }
    }
}

impl Variant {
    /// The variant a cluster message names, where a name left empty is Xiangqi.
    pub fn named_or_xiangqi(name: &str) -> Result<Variant, UnknownVariant> {
        if name.is_empty() { Ok(Variant::Xiangqi) } else { name.parse() }
    }

    /// The name in PGN `[Variant]` tags and in `UCI_Variant`.
    pub fn name(self) -> &'static str {
        match self {
            Variant::Xiangqi => "xiangqi",
            Variant::Xiongqi => "xiongqi",
        }
    }
}
