//! The raw-protocol decoder harness shared by the robustness tests and the cargo-fuzz
//! target `raw_frame` (`fuzz/fuzz_targets/raw_frame.rs` includes this file), so both
//! exercise the same entry points. It feeds arbitrary bytes to the decoders and must
//! never panic on them.

use atmlab_fabric::raw::{Decoded, Frame, FrameDecoder};

/// What a stream decodes to, as comparable data: each frame re-encoded (f64 NaNs make
/// the decoded values themselves unequal to themselves), each malformed frame as its id
/// and error text, and the fatal error if the stream goes out of step.
pub fn decode_stream(data: &[u8], chunk: usize) -> (Vec<Result<Vec<u8>, String>>, Option<String>) {
    let mut decoder = FrameDecoder::new();
    let mut out = Vec::new();
    for piece in data.chunks(chunk.max(1)) {
        decoder.handle_bytes(piece);
        loop {
            match decoder.poll_frame() {
                Ok(Some(Decoded::Frame(f))) => {
                    out.push(Ok(f.to_bytes().expect("a decoded frame re-encodes")))
                }
                Ok(Some(Decoded::Malformed { id, error })) => {
                    out.push(Err(format!("{id}: {error}")))
                }
                Ok(None) => break,
                Err(e) => return (out, Some(e.to_string())),
            }
        }
    }
    (out, None)
}

/// Whole-frame parsing and the streaming decoder, fed the same bytes at once and in
/// small pieces.
pub fn raw_frame(data: &[u8]) {
    if let Ok(f) = Frame::parse(data) {
        // A frame that decoded re-encodes to the same length; after that one pass (which
        // maps error codes this side does not know onto known ones) the encoding is
        // stable.
        let bytes = f.to_bytes().expect("a decoded frame re-encodes");
        assert_eq!(bytes.len(), data.len());
        let again = Frame::parse(&bytes).expect("a re-encoded frame decodes");
        assert_eq!(again.to_bytes().expect("and re-encodes"), bytes);
    }
    let whole = decode_stream(data, data.len());
    let pieces = decode_stream(data, 7);
    // Framing does not depend on how the stream was cut.
    assert_eq!(whole.0, pieces.0);
    assert_eq!(whole.1, pieces.1);
}
