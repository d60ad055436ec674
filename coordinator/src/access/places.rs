//! Places of long-held calls, capped in all and per holder: a live stream's followers
//! by client host, open downloads by token. A place is given back when the call's
//! stream is dropped, however it ends.

use std::collections::HashMap;
use std::fmt::Display;
use std::hash::Hash;
use std::sync::{Arc, Mutex, MutexGuard};

/// The caps: in all, and per holder.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Caps {
    pub total: usize,
    pub per_holder: usize,
}

/// Why a place was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Full {
    #[error("the coordinator already serves {total} {what}, its most; try again later")]
    Total { what: &'static str, total: usize },
    #[error("{holder} already has {cap} {what} open, the most one {kind} may; close one first")]
    Holder { holder: String, kind: &'static str, what: &'static str, cap: usize },
}

/// The places of one kind of call.
#[derive(Debug)]
pub struct Places<K> {
    caps: Caps,
    /// What the calls are, in messages ("live streams").
    what: &'static str,
    /// What a holder is, in messages ("address").
    kind: &'static str,
    counts: Mutex<(usize, HashMap<K, usize>)>,
}

/// A place, given back when dropped.
#[derive(Debug)]
pub struct Place<K: Eq + Hash> {
    places: Arc<Places<K>>,
    holder: Option<K>,
}

impl<K: Eq + Hash + Clone + Display> Places<K> {
    pub fn new(caps: Caps, what: &'static str, kind: &'static str) -> Arc<Self> {
        Arc::new(Places { caps, what, kind, counts: Mutex::new((0, HashMap::new())) })
    }

    fn counts(&self) -> MutexGuard<'_, (usize, HashMap<K, usize>)> {
        self.counts.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// A place for `holder` (unknown: counted in the total only).
    pub fn take(self: &Arc<Self>, holder: Option<K>) -> Result<Place<K>, Full> {
        let mut counts = self.counts();
        if counts.0 >= self.caps.total {
            return Err(Full::Total { what: self.what, total: self.caps.total });
        }
        if let Some(holder) = &holder {
            let open = counts.1.entry(holder.clone()).or_default();
            if *open >= self.caps.per_holder {
                return Err(Full::Holder {
                    holder: holder.to_string(),
                    kind: self.kind,
                    what: self.what,
                    cap: self.caps.per_holder,
                });
            }
            *open += 1;
        }
        counts.0 += 1;
        Ok(Place { places: self.clone(), holder })
    }

    /// Places taken now.
    pub fn count(&self) -> usize {
        self.counts().0
    }
}

impl<K: Eq + Hash> Drop for Place<K> {
    fn drop(&mut self) {
        let mut counts = self.places.counts.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        counts.0 -= 1;
        if let Some(holder) = &self.holder
            && let Some(open) = counts.1.get_mut(holder)
        {
            *open -= 1;
            if *open == 0 {
                counts.1.remove(holder);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn places_are_capped_in_all_and_per_holder_and_given_back() {
        let places = Places::new(Caps { total: 3, per_holder: 2 }, "downloads", "token");
        let first = places.take(Some("a")).unwrap();
        let _second = places.take(Some("a")).unwrap();
        let refused = places.take(Some("a")).unwrap_err();
        assert_eq!(refused.to_string(), "a already has 2 downloads open, the most one token may; close one first");
        let _third = places.take(Some("b")).unwrap();
        assert_eq!(places.take(None).unwrap_err(), Full::Total { what: "downloads", total: 3 });
        drop(first);
        assert_eq!(places.count(), 2);
        assert!(places.take(Some("a")).is_ok());
    }
}
