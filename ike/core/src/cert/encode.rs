//! The little DER writing `cert` does itself — a TLV with its definite length (X.690
//! §8.1.3) — to build a DN from its text form and to wrap a SEC1 or PKCS#1 private key in
//! PKCS#8. Everything read is parsed by the `der` and `x509-cert` crates.

/// Appends the TLV `tag`, length, `content` to `out`.
pub(crate) fn tlv(out: &mut Vec<u8>, tag: u8, content: &[u8]) {
    out.push(tag);
    let len = content.len();
    if len < 0x80 {
        out.push(len as u8);
    } else {
        let bytes = len.to_be_bytes();
        let skip = bytes.iter().take_while(|&&b| b == 0).count();
        out.push(0x80 | (bytes.len() - skip) as u8);
        out.extend_from_slice(&bytes[skip..]);
    }
    out.extend_from_slice(content);
}

/// The length of the TLV [`tlv`] writes for `content_len` bytes of content.
pub(crate) fn tlv_len(content_len: usize) -> usize {
    let len_len = if content_len < 0x80 {
        1
    } else {
        1 + (usize::BITS as usize / 8 - content_len.leading_zeros() as usize / 8)
    };
    1 + len_len + content_len
}

#[cfg(test)]
mod tests {
    use super::*;

    // X.690 §8.1.3.4 and §8.1.3.5: short form below 128, else the fewest length octets.
    #[test]
    fn lengths_are_definite_and_minimal() {
        for (n, header) in [
            (0usize, vec![0x04, 0x00]),
            (127, vec![0x04, 0x7f]),
            (128, vec![0x04, 0x81, 0x80]),
            (256, vec![0x04, 0x82, 0x01, 0x00]),
            (70000, vec![0x04, 0x83, 0x01, 0x11, 0x70]),
        ] {
            let mut out = Vec::new();
            tlv(&mut out, 0x04, &vec![0u8; n]);
            assert_eq!(&out[..header.len()], &header[..], "{n}");
            assert_eq!(out.len(), header.len() + n);
            assert_eq!(tlv_len(n), out.len());
        }
    }
}
