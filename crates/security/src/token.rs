//! Session tokens: what LOGIN gives a client so that its next connections authenticate
//! without the credential. A token carries its expiry and the user's password epoch, sealed
//! with an HMAC-SHA256 under the node's key, so the server keeps nothing per session: a
//! brute-force loop of logins costs no memory, and a password change (a new epoch) or a drop
//! of the user ends every session at once.
//!
//! Layout: version (1 byte, [`TOKEN_VERSION`]), expiry in seconds since the Unix epoch (u64
//! big-endian), epoch (u32 big-endian), HMAC-SHA256 of those bytes and the user's name.

use hmac::{KeyInit, Mac};
use sha2::Sha256;

type HmacSha256 = hmac::Hmac<Sha256>;

const TOKEN_VERSION: u8 = 1;
const SEALED_LENGTH: usize = 1 + 8 + 4;
const MAC_LENGTH: usize = 32;
/// Length of every token this module issues.
pub const TOKEN_LENGTH: usize = SEALED_LENGTH + MAC_LENGTH;

/// What a valid token says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TokenClaims {
    /// When the session ends, in seconds since the Unix epoch.
    pub expires_s: u64,
    /// The user's password epoch when the token was issued.
    pub epoch: u32,
}

/// Why a token was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TokenError {
    /// Not a token this node's key sealed for this user.
    Invalid,
    /// Sealed, but past its expiry.
    Expired,
}

/// The key that seals tokens.
#[derive(Clone)]
pub struct TokenKey([u8; 32]);

impl std::fmt::Debug for TokenKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TokenKey(..)")
    }
}

impl TokenKey {
    /// A fresh random key.
    pub fn random() -> TokenKey {
        TokenKey(crate::random_bytes::<32>())
    }

    /// The key with these bytes (as kept with the tables).
    pub fn from_bytes(bytes: [u8; 32]) -> TokenKey {
        TokenKey(bytes)
    }

    /// The key's bytes, to keep it.
    pub fn bytes(&self) -> [u8; 32] {
        self.0
    }

    /// A token for `user` with these claims.
    pub fn issue(&self, user: &str, claims: TokenClaims) -> Vec<u8> {
        let mut token = Vec::with_capacity(TOKEN_LENGTH);
        token.push(TOKEN_VERSION);
        token.extend_from_slice(&claims.expires_s.to_be_bytes());
        token.extend_from_slice(&claims.epoch.to_be_bytes());
        let mac = self.mac(&token, user).finalize().into_bytes();
        token.extend_from_slice(&mac);
        token
    }

    /// The claims of `token` for `user`, if this key sealed it and it has not expired at
    /// `now_s`.
    pub fn verify(&self, user: &str, token: &[u8], now_s: u64) -> Result<TokenClaims, TokenError> {
        if token.len() != TOKEN_LENGTH || token[0] != TOKEN_VERSION {
            return Err(TokenError::Invalid);
        }
        let (sealed, mac) = token.split_at(SEALED_LENGTH);
        self.mac(sealed, user)
            .verify_slice(mac)
            .map_err(|_| TokenError::Invalid)?;
        let claims = TokenClaims {
            expires_s: u64::from_be_bytes(
                sealed[1..9].try_into().map_err(|_| TokenError::Invalid)?,
            ),
            epoch: u32::from_be_bytes(sealed[9..13].try_into().map_err(|_| TokenError::Invalid)?),
        };
        if claims.expires_s <= now_s {
            return Err(TokenError::Expired);
        }
        Ok(claims)
    }

    fn mac(&self, sealed: &[u8], user: &str) -> HmacSha256 {
        let mut mac = match HmacSha256::new_from_slice(&self.0) {
            Ok(mac) => mac,
            // HMAC takes keys of any length.
            Err(error) => unreachable!("an HMAC key of 32 bytes: {error}"),
        };
        mac.update(sealed);
        mac.update(user.as_bytes());
        mac
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CLAIMS: TokenClaims = TokenClaims {
        expires_s: 1_000,
        epoch: 3,
    };

    #[test]
    fn a_token_verifies_for_its_user_until_it_expires() {
        let key = TokenKey::random();
        let token = key.issue("alice", CLAIMS);
        assert_eq!(token.len(), TOKEN_LENGTH);
        assert_eq!(key.verify("alice", &token, 999), Ok(CLAIMS));
        assert_eq!(key.verify("alice", &token, 1_000), Err(TokenError::Expired));
        assert_eq!(key.verify("bob", &token, 999), Err(TokenError::Invalid));
    }

    #[test]
    fn a_token_from_another_key_or_altered_is_invalid() {
        let key = TokenKey::random();
        let token = key.issue("alice", CLAIMS);
        assert_eq!(
            TokenKey::random().verify("alice", &token, 0),
            Err(TokenError::Invalid)
        );
        for index in 0..token.len() {
            let mut altered = token.clone();
            altered[index] ^= 1;
            assert_eq!(
                key.verify("alice", &altered, 0),
                Err(TokenError::Invalid),
                "byte {index}"
            );
        }
        assert_eq!(
            key.verify("alice", &token[..20], 0),
            Err(TokenError::Invalid)
        );
        assert_eq!(key.verify("alice", b"", 0), Err(TokenError::Invalid));
    }

    #[test]
    fn a_kept_key_verifies_what_it_sealed() {
        let key = TokenKey::random();
        let token = key.issue("alice", CLAIMS);
        let kept = TokenKey::from_bytes(key.bytes());
        assert_eq!(kept.verify("alice", &token, 0), Ok(CLAIMS));
    }
}
