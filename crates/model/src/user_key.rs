//! The key a client names a record by, before it is hashed into a digest.

use crate::ParticleType;

/// A user key as the client sent it: Aerospike allows only integers, strings and blobs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UserKey<'a> {
    /// Any integer width; hashed and sent as 8 bytes big-endian.
    Integer(i64),
    /// UTF-8 bytes (not checked: Aerospike stores whatever bytes the client sends).
    String(&'a [u8]),
    /// Raw bytes.
    Blob(&'a [u8]),
}

impl<'a> UserKey<'a> {
    /// The particle type byte that goes into the digest and the KEY field.
    pub fn particle_type(&self) -> ParticleType {
        match self {
            UserKey::Integer(_) => ParticleType::Integer,
            UserKey::String(_) => ParticleType::String,
            UserKey::Blob(_) => ParticleType::Blob,
        }
    }

    /// Decodes the KEY field payload after its particle type byte. Returns `None` for a type
    /// that cannot be a key or an integer that is not exactly 8 bytes.
    pub fn from_particle(particle_type: u8, bytes: &'a [u8]) -> Option<UserKey<'a>> {
        match ParticleType::from_u8(particle_type)? {
            ParticleType::Integer => {
                let array: [u8; 8] = bytes.try_into().ok()?;
                Some(UserKey::Integer(i64::from_be_bytes(array)))
            }
            ParticleType::String => Some(UserKey::String(bytes)),
            ParticleType::Blob => Some(UserKey::Blob(bytes)),
            _ => None,
        }
    }
}
