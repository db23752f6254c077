//! References: gathered into spans of chunks the peer holds one after the
//! other (`span.rs`), else sent one by one.

use crate::fingerprint::Fingerprint;
use crate::frame::DataRepr;

use super::state::Core;

impl Core {
    /// Refer to a chunk the decoder holds (at `position` in its store, when
    /// known): gathered into the pending span when it is right after the
    /// span's last chunk, else (after sending the span) a span of its own
    /// or a `Reference`.
    pub(super) fn reference(
        &mut self,
        fingerprint: Fingerprint,
        len: usize,
        position: Option<u64>,
        out: &mut Vec<u8>,
    ) {
        if !self.spans.extends(position, len) {
            self.flush_span(out);
        }
        match position {
            Some(position) => self.spans.push(fingerprint, len, position),
            None => DataRepr::Reference {
                fingerprint,
                raw_len: len as u32,
            }
            .emit(out),
        }
    }

    /// Send the pending span: a `Span` frame, or a `Reference` for one
    /// chunk. Remembered for a `NeedSpan`.
    pub(super) fn flush_span(&mut self, out: &mut Vec<u8>) {
        if self.spans.flush(out) {
            self.stats.spans += 1;
        }
    }

    /// Send whatever is gathered (a span or a run: never both).
    pub(super) fn flush_pending(&mut self, out: &mut Vec<u8>) {
        self.flush_span(out);
        self.flush_run(out);
    }
}

#[cfg(test)]
mod tests {
    use crate::control::ControlRepr;
    use crate::encoder::tests::{ack_in_order, frames, literals, noise, peers, Seen};
    use crate::frame::span_check;
    use crate::{Compression, Encoder, EncoderConfig, PeerControlError};

    #[test]
    fn chunks_the_peer_stored_one_after_the_other_go_as_one_span_and_its_list_on_need() {
        let peers = peers();
        let config = EncoderConfig {
            compression: Compression::Off,
            store_sent: false,
            ..EncoderConfig::default()
        };
        let data = noise(256 << 10, 8);
        let mut first = Encoder::new(peers.local.clone(), config).unwrap();
        let mut wire = Vec::new();
        first.push(&data, &mut wire);
        first.finish(&mut wire);
        let names: Vec<_> = literals(&frames(&wire))
            .map(|(_, name)| name.unwrap())
            .collect();
        first
            .handle_peer(
                &ack_in_order(config.chunker, &data, &names),
                &mut Vec::new(),
            )
            .unwrap();

        let mut warm = Encoder::new(peers.local.clone(), config).unwrap();
        let mut wire = Vec::new();
        warm.push(&data, &mut wire);
        warm.finish(&mut wire);
        let spans: Vec<_> = frames(&wire)
            .into_iter()
            .filter(|seen| !matches!(seen, Seen::Other(_)))
            .collect();
        let check = span_check(&names);
        assert_eq!(spans, [Seen::Span(names.len() as u16, check)]);

        // The peer could not follow it: the list, chunk by chunk.
        let mut answer = Vec::new();
        warm.handle_peer(&ControlRepr::NeedSpan { check }, &mut answer)
            .unwrap();
        assert_eq!(frames(&answer), [Seen::SpanList(check)]);
        let unknown = crate::Fingerprint::of(b"never sent");
        assert_eq!(
            warm.handle_peer(&ControlRepr::NeedSpan { check: unknown }, &mut answer),
            Err(PeerControlError::SpanUnavailable(unknown))
        );
    }
}
