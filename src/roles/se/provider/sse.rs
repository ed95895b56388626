//! Server-sent events framing: bytes in, whole events out. Lines are decoded only once they
//! are complete, so a UTF-8 character split across network reads (or events) is joined
//! exactly. A byte-order mark at the start of the stream is skipped, as the standard says;
//! a line is scanned once however many reads it arrives in, so a long one costs linear time.

/// The UTF-8 byte-order mark.
pub const BOM: &[u8] = b"\xEF\xBB\xBF";

/// One event: its `event:` name, if any, and its `data:` lines joined by `\n`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SseEvent {
    pub event: Option<String>,
    pub data: String,
}

#[derive(Default)]
pub struct SseParser {
    pending: Vec<u8>,
    event: Option<String>,
    data: Vec<u8>,
    has_data: bool,
    /// How much of `pending` is already known to hold no line end.
    scanned: usize,
    /// The start of the stream was looked at (for a byte-order mark).
    begun: bool,
}

impl SseParser {
    /// Feeds bytes; returns the events they complete.
    pub fn push(&mut self, bytes: &[u8]) -> Result<Vec<SseEvent>, String> {
        self.pending.extend_from_slice(bytes);
        if !self.begun {
            if self.pending.len() < BOM.len() && BOM.starts_with(&self.pending) {
                return Ok(Vec::new()); // maybe a mark, not whole yet
            }
            self.begun = true;
            if self.pending.starts_with(BOM) {
                self.pending.drain(..BOM.len());
            }
        }
        let mut out = Vec::new();
        let mut start = 0;
        let mut from = self.scanned;
        while let Some(nl) = self.pending[from..].iter().position(|b| *b == b'\n') {
            let end = from + nl;
            let mut line = &self.pending[start..end];
            if line.last() == Some(&b'\r') {
                line = &line[..line.len() - 1];
            }
            let line = line.to_vec();
            start = end + 1;
            from = start;
            if let Some(ev) = self.line(&line)? {
                out.push(ev);
            }
        }
        self.pending.drain(..start);
        self.scanned = self.pending.len();
        Ok(out)
    }

    /// The stream ended: an event not closed by a blank line still counts.
    pub fn finish(&mut self) -> Result<Option<SseEvent>, String> {
        if !self.pending.is_empty() {
            self.scanned = 0;
            let line = std::mem::take(&mut self.pending);
            if let Some(ev) = self.line(&line)? {
                return Ok(Some(ev));
            }
        }
        self.dispatch()
    }

    fn dispatch(&mut self) -> Result<Option<SseEvent>, String> {
        let event = self.event.take();
        if !self.has_data {
            return Ok(None);
        }
        self.has_data = false;
        let data = String::from_utf8(std::mem::take(&mut self.data))
            .map_err(|_| "the event stream is not UTF-8".to_string())?;
        Ok(Some(SseEvent { event, data }))
    }

    fn line(&mut self, line: &[u8]) -> Result<Option<SseEvent>, String> {
        if line.is_empty() {
            return self.dispatch();
        }
        if line[0] == b':' {
            return Ok(None); // a comment (keep-alive)
        }
        let (field, value) = match line.iter().position(|b| *b == b':') {
            Some(i) => {
                let v = &line[i + 1..];
                (&line[..i], v.strip_prefix(b" ").unwrap_or(v))
            }
            None => (line, &b""[..]),
        };
        match field {
            b"data" => {
                if self.has_data {
                    self.data.push(b'\n');
                }
                self.data.extend_from_slice(value);
                self.has_data = true;
            }
            b"event" => {
                self.event = Some(
                    String::from_utf8(value.to_vec())
                        .map_err(|_| "the event stream is not UTF-8".to_string())?,
                )
            }
            _ => {} // id, retry: nothing to do for one request
        }
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_character_split_across_reads_is_joined() {
        let whole = "event: delta\ndata: {\"t\":\"é€\"}\n\n".as_bytes();
        for cut in 0..whole.len() {
            let mut p = SseParser::default();
            let mut got = p.push(&whole[..cut]).expect("utf8");
            got.extend(p.push(&whole[cut..]).expect("utf8"));
            assert_eq!(
                got,
                vec![SseEvent {
                    event: Some("delta".into()),
                    data: "{\"t\":\"é€\"}".into()
                }],
                "cut at {cut}"
            );
        }
    }

    #[test]
    fn a_leading_mark_is_skipped_and_a_long_line_is_scanned_once() {
        for cut in 0..5 {
            let whole = b"\xEF\xBB\xBFdata: {}\n\n";
            let mut p = SseParser::default();
            let mut got = p.push(&whole[..cut]).expect("utf8");
            got.extend(p.push(&whole[cut..]).expect("utf8"));
            assert_eq!(got.len(), 1, "cut at {cut}");
            assert_eq!(got[0].data, "{}");
        }
        // 8 MiB in 4 KiB reads: scanning the whole line again on each read would look at
        // 8 GiB; once, at 8 MiB.
        let mut p = SseParser::default();
        let started = std::time::Instant::now();
        assert!(p.push(b"data: ").expect("utf8").is_empty());
        for _ in 0..2048 {
            assert!(p.push(&[b'x'; 4 * 1024]).expect("utf8").is_empty());
        }
        let got = p.push(b"\n\n").expect("utf8");
        assert_eq!(got[0].data.len(), 8 << 20);
        assert!(started.elapsed() < std::time::Duration::from_secs(3));
    }

    #[test]
    fn crlf_comments_multiline_data_and_an_unterminated_tail() {
        let mut p = SseParser::default();
        let got = p
            .push(b": ping\r\ndata: a\r\ndata: b\r\n\r\ndata: [DONE]")
            .expect("utf8");
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].data, "a\nb");
        assert_eq!(got[0].event, None);
        assert_eq!(
            p.finish().expect("utf8").map(|e| e.data),
            Some("[DONE]".into())
        );
    }
}
