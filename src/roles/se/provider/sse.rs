//! Server-sent events framing: bytes in, whole events out. Lines are decoded only once they
//! are complete, so a UTF-8 character split across network reads (or events) is joined
//! exactly.

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
}

impl SseParser {
    /// Feeds bytes; returns the events they complete.
    pub fn push(&mut self, bytes: &[u8]) -> Result<Vec<SseEvent>, String> {
        self.pending.extend_from_slice(bytes);
        let mut out = Vec::new();
        let mut start = 0;
        while let Some(nl) = self.pending[start..].iter().position(|b| *b == b'\n') {
            let end = start + nl;
            let mut line = &self.pending[start..end];
            if line.last() == Some(&b'\r') {
                line = &line[..line.len() - 1];
            }
            let line = line.to_vec();
            start = end + 1;
            if let Some(ev) = self.line(&line)? {
                out.push(ev);
            }
        }
        self.pending.drain(..start);
        Ok(out)
    }

    /// The stream ended: an event not closed by a blank line still counts.
    pub fn finish(&mut self) -> Result<Option<SseEvent>, String> {
        if !self.pending.is_empty() {
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
