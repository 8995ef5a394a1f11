//! The SMDS header extension (TR-TSV-000772; IEEE 802.6 header extension): a list of
//! elements (Element Length, Element Type, Element Value) ended by HE PAD. [`HeElements`]
//! walks the 12 octets on demand; the PDU decoder keeps them raw.

use super::HE_TYPE_VERSION;
use crate::WireError;

/// One element of a header extension.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct HeElement<'a> {
    /// The Element Type ([`HE_TYPE_VERSION`](super::HE_TYPE_VERSION), [`HE_TYPE_CARRIER_SELECTION`](super::HE_TYPE_CARRIER_SELECTION), ...).
    pub element_type: u8,
    /// The Element Value.
    pub value: &'a [u8],
}

/// The elements of a header extension, in order, up to the HE PAD (a zero Element
/// Length) or the end. A malformed element ends the walk with one `Err`.
#[derive(Debug, Clone)]
pub struct HeElements<'a> {
    rest: &'a [u8],
}

impl<'a> HeElements<'a> {
    /// Walks the elements of `he` (normally the 12 header extension octets).
    pub fn new(he: &'a [u8]) -> Self {
        HeElements { rest: he }
    }
}

impl<'a> Iterator for HeElements<'a> {
    type Item = Result<HeElement<'a>, WireError>;

    fn next(&mut self) -> Option<Self::Item> {
        let len = usize::from(*self.rest.first()?);
        if len == 0 {
            // HE PAD: the rest carries no elements.
            self.rest = &[];
            return None;
        }
        let elem = match self.rest.get(..len) {
            Some(e) if len >= 2 => e,
            _ => {
                self.rest = &[];
                return Some(Err(WireError::Malformed {
                    what: "SMDS header extension",
                    reason: "element length below 2 or past the end of the extension",
                }));
            }
        };
        self.rest = &self.rest[len..];
        Some(Ok(HeElement {
            element_type: elem[1],
            value: &elem[2..],
        }))
    }
}

/// The SMDS version a header extension announces: the one-octet value of its first
/// Version element, if there is one before any malformed element.
pub fn he_version(he: &[u8]) -> Option<u8> {
    HeElements::new(he)
        .map_while(Result::ok)
        .find(|e| e.element_type == HE_TYPE_VERSION)
        .and_then(|e| match e.value {
            [v] => Some(*v),
            _ => None,
        })
}
