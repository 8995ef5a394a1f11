//! Client channels to a control interface, with or without mutual TLS.
//!
//! Addresses come from the name service (`ObjectRef.address`, e.g.
//! `"https://127.0.0.1:50051"`) or from the command line (`"127.0.0.1:50051"`); both
//! forms are accepted, and the scheme must agree with whether TLS is on, so that a typo
//! cannot silently turn authentication off.

use std::time::Duration;

use tonic::transport::{Channel, Endpoint};

use crate::error::{RpcError, chain};
use crate::tls::{Expect, TlsIdentity};

/// How long a channel waits for the TCP connection (not the RPCs).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// An endpoint for `addr`, with TLS from `tls` (client certificate, lab CA, and the
/// server the identity expects, [`TlsIdentity::expecting`]) or plain HTTP/2 when `tls` is
/// `None`.
///
/// `addr` is `host:port`, or a URI whose scheme matches: `https://` with TLS, `http://`
/// without. `TCP_NODELAY` is on: control messages are small and latency-bound.
///
/// Use it for [`Endpoint::connect_lazy`] or to adjust settings; [`client_channel`]
/// connects at once.
pub fn endpoint(addr: &str, tls: Option<&TlsIdentity>) -> Result<Endpoint, RpcError> {
    let invalid = |reason: &str| RpcError::InvalidAddress {
        addr: addr.to_owned(),
        reason: reason.to_owned(),
    };
    let uri = match (addr.split_once("://"), tls) {
        (None, Some(_)) => format!("https://{addr}"),
        (None, None) => format!("http://{addr}"),
        (Some(("https", _)), Some(_)) | (Some(("http", _)), None) => addr.to_owned(),
        (Some(("http", _)), Some(_)) => {
            return Err(invalid("an http:// address with TLS on; use https://"));
        }
        (Some(("https", _)), None) => {
            return Err(invalid(
                "an https:// address needs a TLS identity (certificate, key and CA)",
            ));
        }
        (Some((scheme, _)), _) => {
            return Err(invalid(&format!(
                "unknown scheme {scheme:?} (use http:// or https://)"
            )));
        }
    };
    let endpoint = Endpoint::from_shared(uri)
        .map_err(|e| invalid(&chain(&e)))?
        .tcp_nodelay(true)
        .connect_timeout(CONNECT_TIMEOUT)
        // The same windows as our servers (`server.rs`): h2 closes a connection whose
        // unread small DATA frames (replies on a stream we read late) outgrow half the
        // connection window.
        .initial_stream_window_size(crate::server::STREAM_WINDOW)
        .initial_connection_window_size(crate::server::CONNECTION_WINDOW);
    match tls {
        Some(identity) => endpoint
            .tls_config(identity.tonic_client_config()?)
            .map_err(|e| invalid(&chain(&e))),
        None => Ok(endpoint),
    }
}

/// A connected channel to `addr` (see [`endpoint`] for the address forms and TLS).
///
/// With TLS 1.3 a server that refuses this client's certificate may let the connection
/// succeed and fail the first RPC instead (the client learns of the refusal only then).
pub async fn client_channel(addr: &str, tls: Option<&TlsIdentity>) -> Result<Channel, RpcError> {
    endpoint(addr, tls)?
        .connect()
        .await
        .map_err(|e| RpcError::Channel {
            addr: addr.to_owned(),
            reason: chain(&e),
        })
}

/// [`client_channel`] to a server that must prove to be `expect` (one object, or any of
/// a role) when `tls` is given; plain text ignores it.
pub async fn channel_to(
    addr: &str,
    tls: Option<&TlsIdentity>,
    expect: Expect,
) -> Result<Channel, RpcError> {
    let tls = tls.map(|t| t.expecting(expect));
    client_channel(addr, tls.as_ref()).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scheme_follows_tls() {
        let ep = endpoint("127.0.0.1:1", None).unwrap();
        assert_eq!(ep.uri().scheme_str(), Some("http"));
        assert!(ep.get_tcp_nodelay());
        assert!(endpoint("http://127.0.0.1:1", None).is_ok());
        let e = endpoint("https://127.0.0.1:1", None).unwrap_err();
        assert!(e.to_string().contains("needs a TLS identity"), "{e}");
        let e = endpoint("ftp://127.0.0.1:1", None).unwrap_err();
        assert!(e.to_string().contains("unknown scheme"), "{e}");
    }
}
