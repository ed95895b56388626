//! DSSE, the Dead Simple Signing Envelope (v1): a payload, its type, and signatures over the
//! pre-authentication encoding of the two, so a signature can never be read as one over
//! another type of payload. The envelope is JSON with the payload and each signature in
//! base64; one envelope is one line of a note.

use base64::engine::general_purpose::{STANDARD, URL_SAFE};
use base64::Engine as _;
use serde::{Deserialize, Serialize};

/// The payload type of an in-toto statement.
pub const IN_TOTO_PAYLOAD_TYPE: &str = "application/vnd.in-toto+json";

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Envelope {
    /// The payload's bytes, base64.
    pub payload: String,
    #[serde(rename = "payloadType")]
    pub payload_type: String,
    pub signatures: Vec<Signature>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Signature {
    /// A hint naming the key (an SSH key's SHA256 fingerprint, an OpenPGP fingerprint); never
    /// trusted: the verifier finds the key from the signature and its own trust.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub keyid: String,
    /// The signature's bytes, base64.
    pub sig: String,
}

/// DSSE's pre-authentication encoding: `DSSEv1 SP len(type) SP type SP len(body) SP body`,
/// lengths in ASCII decimal. This, not the payload alone, is what is signed.
pub fn pae(payload_type: &str, payload: &[u8]) -> Vec<u8> {
    let mut out = format!(
        "DSSEv1 {} {} {} ",
        payload_type.len(),
        payload_type,
        payload.len()
    )
    .into_bytes();
    out.extend_from_slice(payload);
    out
}

pub fn encode(bytes: &[u8]) -> String {
    STANDARD.encode(bytes)
}

/// Base64 as DSSE allows it: the standard or the URL-safe alphabet.
pub fn decode(text: &str) -> Result<Vec<u8>, String> {
    STANDARD
        .decode(text)
        .or_else(|_| URL_SAFE.decode(text))
        .map_err(|e| format!("not base64: {e}"))
}

impl Envelope {
    /// An envelope around `payload` with one signature.
    pub fn new(payload_type: &str, payload: &[u8], keyid: &str, sig: &[u8]) -> Self {
        Envelope {
            payload: encode(payload),
            payload_type: payload_type.to_string(),
            signatures: vec![Signature {
                keyid: keyid.to_string(),
                sig: encode(sig),
            }],
        }
    }

    /// The envelope as one line (compact JSON escapes every newline).
    pub fn to_line(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    pub fn from_line(line: &str) -> Result<Self, String> {
        serde_json::from_str(line).map_err(|e| format!("not a DSSE envelope: {e}"))
    }

    pub fn payload_bytes(&self) -> Result<Vec<u8>, String> {
        decode(&self.payload).map_err(|e| format!("payload {e}"))
    }

    /// What each signature covers.
    pub fn signed_bytes(&self) -> Result<Vec<u8>, String> {
        Ok(pae(&self.payload_type, &self.payload_bytes()?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pae_is_the_specifications_encoding() {
        // The example of the DSSE protocol description.
        assert_eq!(
            pae("http://example.com/HelloWorld", b"hello world"),
            b"DSSEv1 29 http://example.com/HelloWorld 11 hello world".to_vec()
        );
        assert_eq!(pae("", b""), b"DSSEv1 0  0 ".to_vec());
    }

    #[test]
    fn envelopes_round_trip_as_one_line() {
        let env = Envelope::new(
            IN_TOTO_PAYLOAD_TYPE,
            b"{\"a\":\n1}",
            "SHA256:x",
            b"\x00\xff",
        );
        let line = env.to_line();
        assert!(!line.contains('\n'));
        let back = Envelope::from_line(&line).expect("parses");
        assert_eq!(back, env);
        assert_eq!(back.payload_bytes().expect("payload"), b"{\"a\":\n1}");
        assert_eq!(decode(&back.signatures[0].sig).expect("sig"), b"\x00\xff");
        assert!(Envelope::from_line("PASS 1234").is_err());
        // The URL-safe alphabet is DSSE's too.
        assert_eq!(decode("_-8=").expect("url-safe"), b"\xff\xef");
    }
}
