//! The msgpack of Aerospike LIST and MAP bins, as the Redis collections are shown to (and read
//! from) Aerospike clients: strings and blobs carry their particle type as the first payload
//! byte (protocol reference, section 5.4).
//!
//! The decoder only slices the input: no allocation is sized by a declared length, and a length
//! that runs past the end is an error.

use model::ParticleType;
use rmp::Marker;

/// Appends the header of an array of `count` elements.
pub fn write_array_len(out: &mut Vec<u8>, count: usize) {
    let count = u32::try_from(count).expect("a collection holds fewer than 2^32 elements");
    rmp::encode::write_array_len(out, count).expect("writing to a Vec cannot fail");
}

/// Appends the header of a map of `count` pairs.
pub fn write_map_len(out: &mut Vec<u8>, count: usize) {
    let count = u32::try_from(count).expect("a collection holds fewer than 2^32 elements");
    rmp::encode::write_map_len(out, count).expect("writing to a Vec cannot fail");
}

/// Appends Redis bytes as an Aerospike string (valid UTF-8) or blob (anything else).
pub fn write_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    let particle = if std::str::from_utf8(bytes).is_ok() {
        ParticleType::String
    } else {
        ParticleType::Blob
    };
    let len = u32::try_from(bytes.len() + 1).expect("an element is shorter than 4 GiB");
    rmp::encode::write_str_len(out, len).expect("writing to a Vec cannot fail");
    out.push(particle as u8);
    out.extend_from_slice(bytes);
}

/// Appends a double.
pub fn write_f64(out: &mut Vec<u8>, value: f64) {
    rmp::encode::write_f64(out, value).expect("writing to a Vec cannot fail");
}

/// A scalar read from a LIST or MAP bin.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Scalar<'a> {
    /// A string or blob (the particle type byte removed), or a raw msgpack string.
    Bytes(&'a [u8]),
    /// An integer.
    Integer(i64),
    /// A float or double.
    Double(f64),
}

impl Scalar<'_> {
    /// The scalar as Redis bytes: integers and doubles as their decimal text.
    pub fn to_bytes(self) -> Vec<u8> {
        match self {
            Scalar::Bytes(bytes) => bytes.to_vec(),
            Scalar::Integer(value) => value.to_string().into_bytes(),
            Scalar::Double(value) => super::format_double(value).into_bytes(),
        }
    }
}

/// Reads msgpack from a slice, refusing what a Redis collection cannot hold.
#[derive(Debug)]
pub struct Reader<'a> {
    rest: &'a [u8],
}

impl<'a> Reader<'a> {
    /// A reader over one bin's value.
    pub fn new(bytes: &'a [u8]) -> Reader<'a> {
        Reader { rest: bytes }
    }

    /// Whether every byte was read.
    pub fn is_done(&self) -> bool {
        self.rest.is_empty()
    }

    /// An array header: its element count.
    pub fn array_len(&mut self) -> Option<usize> {
        let count = rmp::decode::read_array_len(&mut self.rest).ok()?;
        self.plausible(count)
    }

    /// A map header: its pair count, less the ordered-map pseudo-entry (skipped here).
    pub fn map_len(&mut self) -> Option<usize> {
        let mut count = rmp::decode::read_map_len(&mut self.rest).ok()?;
        // An ordered map starts with the key ext8 of length 0 (0xc7 0x00 flags) and a nil.
        if count > 0 && self.rest.starts_with(&[0xc7, 0x00]) {
            let (_, after) = self.rest.split_at_checked(3)?;
            let (&nil, after) = after.split_first()?;
            if nil != 0xc0 {
                return None;
            }
            self.rest = after;
            count -= 1;
        }
        self.plausible(count)
    }

    /// One scalar element; `None` for nested containers, nil, booleans, extensions or a
    /// truncated value.
    pub fn scalar(&mut self) -> Option<Scalar<'a>> {
        let marker = Marker::from_u8(*self.rest.first()?);
        match marker {
            Marker::FixStr(_) | Marker::Str8 | Marker::Str16 | Marker::Str32 => {
                let len = rmp::decode::read_str_len(&mut self.rest).ok()?;
                self.typed_bytes(len)
            }
            Marker::Bin8 | Marker::Bin16 | Marker::Bin32 => {
                let len = rmp::decode::read_bin_len(&mut self.rest).ok()?;
                self.typed_bytes(len)
            }
            Marker::F32 => rmp::decode::read_f32(&mut self.rest)
                .ok()
                .map(|value| Scalar::Double(f64::from(value))),
            Marker::F64 => rmp::decode::read_f64(&mut self.rest)
                .ok()
                .map(Scalar::Double),
            Marker::FixPos(_)
            | Marker::FixNeg(_)
            | Marker::U8
            | Marker::U16
            | Marker::U32
            | Marker::U64
            | Marker::I8
            | Marker::I16
            | Marker::I32
            | Marker::I64 => rmp::decode::read_int(&mut self.rest)
                .ok()
                .map(Scalar::Integer),
            _ => None,
        }
    }

    /// `len` payload bytes whose first is a particle type (STRING, BLOB or GEOJSON).
    fn typed_bytes(&mut self, len: u32) -> Option<Scalar<'a>> {
        let len = usize::try_from(len).ok()?;
        let (payload, rest) = self.rest.split_at_checked(len)?;
        self.rest = rest;
        match payload.split_first() {
            None => Some(Scalar::Bytes(payload)),
            Some((3 | 4 | 23, bytes)) => Some(Scalar::Bytes(bytes)),
            Some(_) => None,
        }
    }

    /// A count no larger than the bytes left (each element takes at least one byte), so a
    /// caller may reserve room for it.
    fn plausible(&self, count: u32) -> Option<usize> {
        let count = usize::try_from(count).ok()?;
        (count <= self.rest.len()).then_some(count)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn elements_round_trip_with_their_particle_type() {
        let mut out = Vec::new();
        write_array_len(&mut out, 3);
        write_bytes(&mut out, b"text");
        write_bytes(&mut out, &[0xff, 0x00]);
        write_f64(&mut out, 1.5);
        assert_eq!(&out[1..7], &[0xa5, 3, b't', b'e', b'x', b't']);
        assert_eq!(&out[7..10], &[0xa3, 4, 0xff]);
        let mut reader = Reader::new(&out);
        assert_eq!(reader.array_len(), Some(3));
        assert_eq!(reader.scalar(), Some(Scalar::Bytes(b"text")));
        assert_eq!(reader.scalar(), Some(Scalar::Bytes(&[0xff, 0x00])));
        assert_eq!(reader.scalar(), Some(Scalar::Double(1.5)));
        assert!(reader.is_done());
    }

    #[test]
    fn an_ordered_map_skips_its_flags_entry() {
        let bytes = [0x82, 0xc7, 0x00, 0x01, 0xc0, 0xa2, 3, b'k', 0x07];
        let mut reader = Reader::new(&bytes);
        assert_eq!(reader.map_len(), Some(1));
        assert_eq!(reader.scalar(), Some(Scalar::Bytes(b"k")));
        assert_eq!(reader.scalar(), Some(Scalar::Integer(7)));
        assert!(reader.is_done());
    }

    #[test]
    fn declared_lengths_beyond_the_input_are_refused() {
        assert_eq!(
            Reader::new(&[0xdd, 0xff, 0xff, 0xff, 0xff]).array_len(),
            None
        );
        assert_eq!(
            Reader::new(&[0xdb, 0xff, 0xff, 0xff, 0xff, 3]).scalar(),
            None
        );
        assert_eq!(
            Reader::new(&[0x91]).array_len(),
            None,
            "one element, no bytes"
        );
        assert_eq!(Reader::new(&[0x90]).array_len(), Some(0));
        assert_eq!(
            Reader::new(&[0xc3]).scalar(),
            None,
            "booleans are not Redis values"
        );
    }
}
