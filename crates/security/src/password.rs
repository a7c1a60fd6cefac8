//! Passwords. An Aerospike client never sends a password: it sends its *credential*, the
//! bcrypt hash of the password with cost 10 and a salt the protocol fixes, and that is what
//! the server compares. Osprey keeps of it only a verifier, a SHA-256 of a random salt and the
//! credential, so that the stored tables do not let anyone log in; a client that sends the
//! password itself (Redis's AUTH) has its credential computed here.

use base64::Engine;
use base64::alphabet::BCRYPT;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// The salt every Aerospike client hashes passwords with (`as_password.c`, `admin_command.go`).
pub const CLIENT_SALT: &str = "$2a$10$7EqJtq98hPqEX7fNZaFWoO";
/// bcrypt's cost in [`CLIENT_SALT`].
const CLIENT_COST: u32 = 10;
/// Length of a credential: a bcrypt hash in its `$2a$10$...` form.
pub const CREDENTIAL_LENGTH: usize = 60;

/// The credential of `password`, as an Aerospike client computes it. Costs tens of
/// milliseconds of CPU, as bcrypt means to.
pub fn credential_of(password: &[u8]) -> String {
    let salt = client_salt();
    match bcrypt::hash_with_salt(password, CLIENT_COST, salt) {
        Ok(parts) => parts.format_for_version(bcrypt::Version::TwoA),
        // Only a bad cost fails, and the cost is a constant.
        Err(error) => unreachable!("bcrypt with cost {CLIENT_COST}: {error}"),
    }
}

/// The 16 salt bytes [`CLIENT_SALT`] spells in bcrypt's base64.
fn client_salt() -> [u8; 16] {
    let engine = GeneralPurpose::new(
        &BCRYPT,
        GeneralPurposeConfig::new()
            .with_decode_allow_trailing_bits(true)
            .with_decode_padding_mode(DecodePaddingMode::RequireNone),
    );
    let encoded = &CLIENT_SALT[CLIENT_SALT.len() - 22..];
    let mut salt = [0u8; 16];
    match engine.decode_slice(encoded, &mut salt) {
        Ok(16) => salt,
        other => unreachable!("the protocol's salt decodes to 16 bytes, not {other:?}"),
    }
}

/// What is kept of a credential: a random salt and SHA-256(salt, credential).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Verifier {
    #[serde(with = "hex_bytes")]
    salt: [u8; 16],
    #[serde(with = "hex_bytes")]
    hash: [u8; 32],
}

impl Verifier {
    /// A verifier of `credential` with a fresh random salt.
    pub fn new(credential: &[u8]) -> Verifier {
        let salt = crate::random_bytes::<16>();
        Verifier {
            salt,
            hash: salted_hash(&salt, credential),
        }
    }

    /// Whether `credential` is the one this verifies, in time independent of where they differ.
    pub fn matches(&self, credential: &[u8]) -> bool {
        salted_hash(&self.salt, credential).ct_eq(&self.hash).into()
    }
}

fn salted_hash(salt: &[u8; 16], credential: &[u8]) -> [u8; 32] {
    let mut hasher = Sha256::new();
    hasher.update(salt);
    hasher.update(credential);
    hasher.finalize().into()
}

/// Fixed-size byte arrays as lower-case hex in the stored tables.
mod hex_bytes {
    use serde::{Deserialize, Deserializer, Serializer, de::Error};

    pub fn serialize<S: Serializer, const N: usize>(
        bytes: &[u8; N],
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        let text: String = bytes.iter().map(|byte| format!("{byte:02x}")).collect();
        serializer.serialize_str(&text)
    }

    pub fn deserialize<'de, D: Deserializer<'de>, const N: usize>(
        deserializer: D,
    ) -> Result<[u8; N], D::Error> {
        let text = String::deserialize(deserializer)?;
        let mut bytes = [0u8; N];
        if text.len() != 2 * N {
            return Err(D::Error::custom(format!("expected {} hex digits", 2 * N)));
        }
        for (index, byte) in bytes.iter_mut().enumerate() {
            *byte = u8::from_str_radix(&text[2 * index..2 * index + 2], 16)
                .map_err(|_| D::Error::custom("not hex"))?;
        }
        Ok(bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The story: the credential must be byte for byte what the clients compute, or no
    /// official client could log in. The expected values were computed with another bcrypt
    /// implementation (Python's `bcrypt.hashpw` with the protocol's salt).
    #[test]
    fn the_credential_is_the_clients_bcrypt_with_the_fixed_salt() {
        let credential = credential_of(b"admin");
        assert_eq!(credential.len(), CREDENTIAL_LENGTH);
        assert!(credential.starts_with(CLIENT_SALT), "{credential}");
        assert_eq!(
            credential,
            "$2a$10$7EqJtq98hPqEX7fNZaFWoO1mVO/4MLpGzsqojz6E9Gef6iXDjXdDa"
        );
        assert_eq!(
            credential_of(b""),
            "$2a$10$7EqJtq98hPqEX7fNZaFWoOLCkFexA7A9eoJ0Ew.mTDdk.E60D.9zS"
        );
    }

    #[test]
    fn a_verifier_matches_only_its_credential_and_its_salt_is_random() {
        let verifier = Verifier::new(b"credential-one");
        assert!(verifier.matches(b"credential-one"));
        assert!(!verifier.matches(b"credential-two"));
        assert!(!verifier.matches(b""));
        assert_ne!(verifier, Verifier::new(b"credential-one"));
    }

    #[test]
    fn a_verifier_survives_its_stored_form() {
        let verifier = Verifier::new(b"kept");
        let text = serde_json::to_string(&verifier).expect("serializes");
        assert!(!text.contains("kept"));
        let back: Verifier = serde_json::from_str(&text).expect("deserializes");
        assert!(back.matches(b"kept"));
    }
}
