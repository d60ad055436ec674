//! Who sent a client's request, as its token says.

use crate::access::tokens::Role;

/// A user who made a request: the role and id of their token.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Caller {
    pub role: Role,
    pub token_id: String,
}
