//! Particle types: the type tag of every bin value and key on the wire.

/// The type of a bin value, numbered as on the Aerospike wire (`AS_PARTICLE_TYPE_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum ParticleType {
    /// No value; a write of NULL deletes the bin.
    Null = 0,
    /// 8 bytes big-endian two's complement.
    Integer = 1,
    /// 8 bytes IEEE-754 big-endian.
    Float = 2,
    /// UTF-8 bytes without length prefix.
    String = 3,
    /// Raw bytes.
    Blob = 4,
    /// Serialized Java object, kept opaque.
    JavaBlob = 7,
    /// Serialized C# object, kept opaque.
    CsharpBlob = 8,
    /// Pickled Python object, kept opaque.
    PythonBlob = 9,
    /// Serialized Ruby object, kept opaque.
    RubyBlob = 10,
    /// Serialized PHP object, kept opaque.
    PhpBlob = 11,
    /// Serialized Erlang term, kept opaque.
    ErlangBlob = 12,
    /// One byte, 0 or 1.
    Bool = 17,
    /// HyperLogLog bytes, kept opaque.
    Hll = 18,
    /// Msgpack map, kept byte-exact.
    Map = 19,
    /// Msgpack array, kept byte-exact.
    List = 20,
    /// GeoJSON with its cell header, kept opaque.
    GeoJson = 23,
}

impl ParticleType {
    /// The particle type for a wire byte, or `None` for a value no client may send.
    pub fn from_u8(byte: u8) -> Option<ParticleType> {
        Some(match byte {
            0 => ParticleType::Null,
            1 => ParticleType::Integer,
            2 => ParticleType::Float,
            3 => ParticleType::String,
            4 => ParticleType::Blob,
            7 => ParticleType::JavaBlob,
            8 => ParticleType::CsharpBlob,
            9 => ParticleType::PythonBlob,
            10 => ParticleType::RubyBlob,
            11 => ParticleType::PhpBlob,
            12 => ParticleType::ErlangBlob,
            17 => ParticleType::Bool,
            18 => ParticleType::Hll,
            19 => ParticleType::Map,
            20 => ParticleType::List,
            23 => ParticleType::GeoJson,
            _ => return None,
        })
    }

    /// The value size this type requires, if it is fixed.
    pub fn fixed_size_bytes(self) -> Option<usize> {
        match self {
            ParticleType::Integer | ParticleType::Float => Some(8),
            ParticleType::Bool => Some(1),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn from_u8_round_trips_every_known_type() {
        for byte in 0..=u8::MAX {
            if let Some(particle_type) = ParticleType::from_u8(byte) {
                assert_eq!(particle_type as u8, byte);
            }
        }
        assert_eq!(ParticleType::from_u8(5), None);
        assert_eq!(ParticleType::from_u8(21), None);
    }
}
